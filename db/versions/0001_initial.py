"""Initial schema: job attempts, live states and transitions, cycles, predictions,
decisions, applied changes, model registry, control row and cursors.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("cluster", sa.String(64), nullable=False),
        sa.Column("job_id", sa.BigInteger(), nullable=False),
        sa.Column("restart_count", sa.Integer(), nullable=False),
        sa.Column("array_job_id", sa.BigInteger(), nullable=True),
        sa.Column("array_task_id", sa.Integer(), nullable=True),
        sa.Column("user_name", sa.String(128), nullable=False),
        sa.Column("account", sa.String(128), nullable=False),
        sa.Column("partition", sa.String(128), nullable=False),
        sa.Column("qos", sa.String(128), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("submit_time", sa.Float(), nullable=False),
        sa.Column("eligible_time", sa.Float(), nullable=True),
        sa.Column("start_time", sa.Float(), nullable=True),
        sa.Column("end_time", sa.Float(), nullable=True),
        sa.Column("time_limit_s", sa.BigInteger(), nullable=True),
        sa.Column("nodes", sa.Integer(), nullable=False),
        sa.Column("cpus", sa.Integer(), nullable=False),
        sa.Column("memory_mb", sa.BigInteger(), nullable=True),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("gpu_type", sa.String(64), nullable=True),
        sa.Column("gres_per_node", sa.JSON(), nullable=True),
        sa.Column("features", sa.Text(), nullable=False),
        sa.Column("node_list", sa.Text(), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.UniqueConstraint("cluster", "job_id", "submit_time", name="uq_jobs_attempt"),
    )
    op.create_index("ix_jobs_user_name", "jobs", ["user_name", "name"])
    op.create_index("ix_jobs_end_time", "jobs", ["end_time"])
    op.create_index("ix_jobs_cluster_job", "jobs", ["cluster", "job_id"])

    op.create_table(
        "live_jobs",
        sa.Column("cluster", sa.String(64), primary_key=True),
        sa.Column("job_id", sa.BigInteger(), primary_key=True),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("restart_count", sa.Integer(), nullable=False),
        sa.Column("since", sa.Float(), nullable=False),
    )

    op.create_table(
        "job_transitions",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("cluster", sa.String(64), nullable=False),
        sa.Column("job_id", sa.BigInteger(), nullable=False),
        sa.Column("restart_count", sa.Integer(), nullable=False),
        sa.Column("from_state", sa.String(32), nullable=True),
        sa.Column("to_state", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
    )
    op.create_index("ix_transitions_job", "job_transitions", ["cluster", "job_id", "at"])

    op.create_table(
        "cycles",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=True),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("pending", sa.Integer(), nullable=False),
        sa.Column("running", sa.Integer(), nullable=False),
        sa.Column("actions", sa.Integer(), nullable=False),
        sa.Column("failed", sa.Integer(), nullable=False),
        sa.Column("timings", sa.JSON(), nullable=False),
    )
    op.create_index("ix_cycles_started_at", "cycles", ["started_at"])

    op.create_table(
        "predictions",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("cycle_id", Id, sa.ForeignKey("cycles.id", ondelete="CASCADE"), nullable=False),
        sa.Column("job_id", sa.BigInteger(), nullable=False),
        sa.Column("estimate_s", sa.Float(), nullable=False),
        sa.Column("low_s", sa.Float(), nullable=False),
        sa.Column("high_s", sa.Float(), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("model_version", sa.String(128), nullable=False),
    )
    op.create_index("ix_predictions_job", "predictions", ["job_id", "id"])
    op.create_index("ix_predictions_cycle_id", "predictions", ["cycle_id"])

    op.create_table(
        "decisions",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("cycle_id", Id, sa.ForeignKey("cycles.id", ondelete="CASCADE"), nullable=False),
        sa.Column("job_id", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("previous", sa.Text(), nullable=True),
        sa.Column("new", sa.Text(), nullable=True),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("rank", sa.Integer(), nullable=True),
    )
    op.create_index("ix_decisions_job", "decisions", ["job_id", "cycle_id"])
    op.create_index("ix_decisions_cycle_id", "decisions", ["cycle_id"])

    op.create_table(
        "applied_changes",
        sa.Column("job_id", sa.BigInteger(), primary_key=True),
        sa.Column("kind", sa.String(64), primary_key=True),
        sa.Column("original", sa.Text(), nullable=True),
        sa.Column("current", sa.Text(), nullable=False),
    )

    op.create_table(
        "models",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("version", sa.String(128), nullable=False),
        sa.Column("blob", sa.LargeBinary(), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.Column("saved_at", sa.Float(), nullable=False),
        sa.UniqueConstraint("name", "version", name="uq_models_name_version"),
    )

    op.create_table(
        "control",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )

    op.create_table(
        "cursors",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    for table in ("cursors", "control", "models", "applied_changes", "decisions",
                  "predictions", "cycles", "job_transitions", "live_jobs", "jobs"):
        op.drop_table(table)
