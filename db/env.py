"""Alembic environment: migrate over the connection ``slurmsched.store.migrate`` passes in."""

from alembic import context

from slurmsched.store.schema import Base

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations with 'slurmsched db upgrade', not the alembic command")

context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    transaction_per_migration=True,
)
with context.begin_transaction():
    context.run_migrations()
