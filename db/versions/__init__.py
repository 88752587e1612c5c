"""One module per schema revision (Alembic ignores this file)."""
