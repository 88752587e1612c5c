"""Alembic migrations of the history database (installed as ``slurmsched.migrations``).

Run them with ``slurmsched db upgrade``; ``slurmsched db current`` shows where a
database stands. No ``alembic.ini`` is needed: ``slurmsched.store.migrate`` builds the
Alembic configuration in code and hands ``env.py`` an open connection.
"""
