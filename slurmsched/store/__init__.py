"""Job history in SQL (SQLAlchemy 2: SQLite by default, PostgreSQL by URL)."""
