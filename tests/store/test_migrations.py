"""Alembic migrations from empty to head on SQLite and PostgreSQL, and the schema check."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, make_url, text

from slurmsched.config import Config, DbSection
from slurmsched.errors import SchemaOutOfDate, StoreError
from slurmsched.store import migrate
from slurmsched.store.repository import SqlJobRepository, open_repository
from slurmsched.store.schema import Base


def test_empty_to_head_matches_the_orm_tables(db_url: str) -> None:
    repo = SqlJobRepository.from_url(db_url, create=True)
    try:
        assert repo.schema_revision() is None
        repo.upgrade()
        assert repo.schema_revision() == migrate.head_revision()
        with repo.engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
            assert set(Base.metadata.tables) <= set(inspect(conn).get_table_names())
        repo.upgrade()  # idempotent
        repo.check_schema()
    finally:
        repo.close()


def test_empty_database_is_refused_with_the_command_to_run(db_url: str) -> None:
    repo = SqlJobRepository.from_url(db_url, create=True)
    try:
        with pytest.raises(SchemaOutOfDate) as err:
            repo.check_schema()
    finally:
        repo.close()
    assert str(err.value) == (f"database schema is at empty, this slurmsched needs {migrate.head_revision()}: "
                              "run 'slurmsched db upgrade'")


def test_unknown_newer_revision_is_refused(db_url: str) -> None:
    repo = SqlJobRepository.from_url(db_url, create=True)
    try:
        repo.upgrade()
        with repo.engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = 'f00d'"))
        with pytest.raises(SchemaOutOfDate, match="database schema is at f00d, newer than this slurmsched"):
            repo.check_schema()
    finally:
        repo.close()


def test_open_repository_creates_only_when_asked(db_url: str) -> None:
    config = Config(db=DbSection(url=db_url))
    if db_url.startswith("sqlite"):
        path = Path(make_url(db_url).database or "")
        with pytest.raises(StoreError, match=f"no database at {path}: run 'slurmsched db upgrade'"):
            open_repository(config)
        assert not path.exists()
    else:
        with pytest.raises(SchemaOutOfDate):
            open_repository(config)
    repo = open_repository(config, create=True)
    try:
        assert repo.schema_revision() == migrate.head_revision()
    finally:
        repo.close()
    open_repository(config).close()


def test_db_commands(db_url: str, cli) -> None:
    before = cli("db", "current", "--db", db_url)
    if db_url.startswith("sqlite"):  # a missing file is not created by looking at it
        assert before.returncode == 2 and "error: no database at" in before.stderr
        assert not Path(make_url(db_url).database or "").exists()
    else:
        assert before.returncode == 1
        assert "empty" in before.stdout and "slurmsched db upgrade" in before.stdout
    up = cli("db", "upgrade", "--db", db_url)
    assert up.returncode == 0, up.stderr
    assert f"upgraded from empty to {migrate.head_revision()}" in up.stdout
    assert "already at" in cli("db", "upgrade", "--db", db_url).stdout
    after = cli("db", "current", "--db", db_url)
    assert after.returncode == 0 and after.stdout.strip() == f"{migrate.head_revision()} (head)"


def test_db_url_from_environment(tmp_path, cli_process) -> None:
    url = f"sqlite:///{tmp_path / 'env.db'}"
    proc = cli_process("db", "upgrade", env={"SLURMSCHED_DB_URL": url})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "env.db").exists()


def test_alembic_logs_only_at_debug(tmp_path: Path, cli_process) -> None:
    env = {"SLURMSCHED_DAEMON_STATE_DIR": str(tmp_path / "state")}
    assert cli_process("db", "upgrade", env=env).returncode == 0
    verbose = cli_process("-v", "status", env=env)
    assert verbose.returncode == 0, verbose.stderr
    assert "alembic" not in verbose.stderr
    debug = cli_process("-vv", "status", env=env)
    assert debug.returncode == 0, debug.stderr
    assert "INFO alembic.runtime.migration: Context impl SQLiteImpl." in debug.stderr
