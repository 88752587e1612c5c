"""Alembic environment: migrate over the connection ``slurmsched.store.migrate`` passes in."""

from typing import Any, Collection, Mapping

from alembic import context
from alembic.runtime.migration import MigrationContext, MigrationInfo

from slurmsched.store.schema import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations with 'slurmsched db upgrade', not the alembic command")

applied = context.config.attributes.get("applied")


def _applied(ctx: MigrationContext, step: MigrationInfo, heads: Collection[Any], run_args: Mapping[str, Any]) -> None:
    """Note each step this run applies (``migrate.upgrade`` reports them); alembic's
    ``on_version_apply`` hook, called after each step."""
    if applied is not None and step.is_upgrade:
        applied.append((step.down_revision_ids[0] if step.down_revision_ids else None, step.up_revision_id))


context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    # Where slurmsched.store.migrate began a transaction (every SQLite migration, every
    # downgrade) all steps run in it; otherwise (upgrades on PostgreSQL) each step commits.
    transaction_per_migration=True,
    on_version_apply=_applied,
)
with context.begin_transaction():
    context.run_migrations()
