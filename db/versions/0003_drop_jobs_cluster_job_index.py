"""Drop ``ix_jobs_cluster_job``: the unique constraint already indexes its columns.

``uq_jobs_attempt`` is unique on ``(cluster, job_id, submit_time)``; SQLite and
PostgreSQL keep a B-tree for it whose leading columns serve every lookup by
``(cluster, job_id)``, so the separate index on those two columns only cost each
recorded job a second index write and the disk to hold it.

The downgrade creates the index again.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_jobs_cluster_job", table_name="jobs")


def downgrade() -> None:
    op.create_index("ix_jobs_cluster_job", "jobs", ["cluster", "job_id"])
