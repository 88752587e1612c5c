"""Database owner: the control row names the cluster whose daemon keeps its state here.

The daemon's state (the pause flag, the accounting cursor, the changes ``revert``
restores, cycles and decisions) is kept per database, not per cluster. Two clusters'
daemons pointed at one database would share a pause flag and a cursor, and each would
drop the other's changes as jobs that left its queue, or restore them on its own jobs
of the same ids. ``control.cluster`` holds the name of the first cluster whose daemon
cycled here (Slurm's ``ClusterName``); the daemon and ``revert`` of another cluster
refuse the database, as slurmctld refuses a state directory written under another
``ClusterName``. ``slurmsched db release`` clears it (after a rename).

Existing databases start with none: their daemon's next cycle claims them.

The downgrade drops the column with ``ALTER TABLE ... DROP COLUMN`` (on SQLite: 3.35
or newer).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("control", sa.Column("cluster", sa.String(64), nullable=True))


def downgrade() -> None:
    op.drop_column("control", "cluster")
