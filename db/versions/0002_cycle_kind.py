"""Cycle kind: each cycle row says whether it was live, dry-run, paused or a revert pass.

``slurmsched status`` showed every cycle that was not dry-run as ``live``, also those
run while paused (nothing sent) and ``slurmsched revert``'s passes. The new
``cycles.kind`` column holds ``live``, ``dry-run``, ``paused`` or ``revert``.

Existing rows are filled from ``dry_run``: ``dry-run`` or ``live``. Which of the older
cycles ran while paused, or were revert passes, was never recorded, so those stay
``live``. ``dry_run`` is kept (and still written): dropping it on SQLite would take
either SQLite 3.35 or a copy of the table, and dropping the old table, with foreign
keys on, deletes the predictions and decisions of every cycle.

The downgrade drops ``kind`` with ``ALTER TABLE ... DROP COLUMN`` (on SQLite: 3.35 or
newer).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("cycles", sa.Column("kind", sa.String(16), nullable=False, server_default="live"))
    cycles = sa.table("cycles", sa.column("dry_run", sa.Boolean()), sa.column("kind", sa.String(16)))
    op.execute(cycles.update().where(cycles.c.dry_run).values(kind="dry-run"))


def downgrade() -> None:
    op.drop_column("cycles", "kind")
