"""Job history in SQL (SQLAlchemy 2: SQLite by default, PostgreSQL by URL)."""

#: Trace rows written per transaction by ``slurmsched history import`` (kept here, in the
#: light package module, so the CLI can show it without loading SQLAlchemy).
DEFAULT_BATCH = 5000
