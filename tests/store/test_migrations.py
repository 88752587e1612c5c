"""Alembic migrations from empty (or an older revision) to head on SQLite and PostgreSQL, and the schema check."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import JSON, Boolean, Float, Integer, column, inspect, make_url, select, table, text

from slurmsched.config import Config, DbSection
from slurmsched.errors import SchemaOutOfDate, StoreError
from slurmsched.model import Decision, Prediction
from slurmsched.store import migrate
from slurmsched.store.protocol import CycleKind
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


def test_upgrade_of_a_current_sqlite_database_does_not_wait_for_a_writer(tmp_path: Path) -> None:
    """``db upgrade`` beside a daemon in the middle of a write: nothing to do, so no wait and no lock error."""
    url = f"sqlite:///{tmp_path / 'x.db'}"
    repo = SqlJobRepository.from_url(url, create=True, busy_timeout_s=0.2)
    writer = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    try:
        repo.upgrade()
        writer.execute("BEGIN IMMEDIATE")
        assert repo.upgrade() == []
    finally:
        writer.close()
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
        with pytest.raises(SchemaOutOfDate, match="database schema is at f00d, newer than this slurmsched"):
            repo.upgrade()  # a downgrade is not an upgrade: nothing changes
        assert repo.schema_revision() == "f00d"
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



#: The cycles table as revision 0001 made it (before ``kind``).
CYCLES_0001 = table("cycles", column("id", Integer()), column("started_at", Float()), column("duration_s", Float()),
                    column("dry_run", Boolean()), column("pending", Integer()), column("running", Integer()),
                    column("actions", Integer()), column("failed", Integer()), column("timings", JSON()))


def test_upgrade_from_0001_keeps_every_cycle_and_takes_its_kind_from_dry_run(db_url: str) -> None:
    repo = SqlJobRepository.from_url(db_url, create=True)
    try:
        migrate.upgrade(repo.engine, "0001")
        with repo.engine.begin() as conn:
            conn.execute(CYCLES_0001.insert(), [
                {"started_at": at, "duration_s": 0.5, "dry_run": dry, "pending": 3, "running": 1, "actions": 2,
                 "failed": 0, "timings": {"total": 0.5}} for at, dry in [(100.0, True), (160.0, False)]])
            old = conn.execute(select(CYCLES_0001.c.id).order_by(CYCLES_0001.c.id)).scalars().all()
        for cycle_id in old:
            repo.record_predictions(cycle_id, [Prediction(cycle_id, 60.0, 30.0, 90.0, "rules")])
            repo.record_decisions(cycle_id, [Decision(cycle_id, "rank", "ranked", "short", score=1.0, rank=1)])
        with pytest.raises(SchemaOutOfDate, match=f"at 0001, this slurmsched needs {migrate.head_revision()}: run"):
            repo.check_schema()
        repo.upgrade()
        repo.check_schema()
        assert [(c.cycle_id, c.started_at, c.kind, c.actions, c.timings) for c in repo.recent_cycles()] == [
            (old[1], 160.0, CycleKind.LIVE, 2, {"total": 0.5}), (old[0], 100.0, CycleKind.DRY_RUN, 2, {"total": 0.5})]
        assert [at for cycle_id in old for at, _ in repo.decisions_for(cycle_id)] == [100.0, 160.0]
        assert all(repo.latest_prediction(cycle_id) is not None for cycle_id in old)
        paused = repo.start_cycle(200.0, CycleKind.PAUSED)
        repo.finish_cycle(paused, pending=3, running=1, actions=0, failed=0, timings={})
        assert [c.kind for c in repo.recent_cycles(1)] == [CycleKind.PAUSED]
    finally:
        repo.close()


def _job_lookup_plan(conn) -> str:
    """The query plan of ``stored_attempts``' lookup by cluster and job id, as one string."""
    query = "SELECT job_id, submit_time FROM jobs WHERE cluster = 'c' AND job_id IN (1, 2, 3)"
    if conn.dialect.name == "sqlite":
        return " ".join(row[-1] for row in conn.execute(text(f"EXPLAIN QUERY PLAN {query}")))
    conn.execute(text("SET LOCAL enable_seqscan = off"))  # an empty table: say which index serves it
    return " ".join(row[0] for row in conn.execute(text(f"EXPLAIN {query}")))


def test_upgrade_from_0002_drops_the_index_the_unique_constraint_makes_redundant(db_url: str) -> None:
    repo = SqlJobRepository.from_url(db_url, create=True)
    try:
        migrate.upgrade(repo.engine, "0002")
        with repo.engine.begin() as conn:
            assert "ix_jobs_cluster_job" in {ix["name"] for ix in inspect(conn).get_indexes("jobs")}
        repo.upgrade()
        with repo.engine.begin() as conn:
            assert "ix_jobs_cluster_job" not in {ix["name"] for ix in inspect(conn).get_indexes("jobs")}
            plan = _job_lookup_plan(conn)
        # Still an index search: SQLite's automatic index of uq_jobs_attempt (covering: it holds submit_time
        # too), PostgreSQL's uq_jobs_attempt.
        assert re.search(r"SEARCH jobs USING (COVERING )?INDEX sqlite_autoindex_jobs_1 \(cluster=\? AND job_id=\?\)"
                         r"|Index (Only )?Scan using uq_jobs_attempt on jobs|Bitmap Index Scan on uq_jobs_attempt",
                         plan), plan
    finally:
        repo.close()


def test_db_commands_on_a_newer_schema_say_to_upgrade_slurmsched(db_url: str, cli) -> None:
    assert cli("db", "upgrade", "--db", db_url).returncode == 0
    repo = SqlJobRepository.from_url(db_url)
    try:
        with repo.engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = 'f00d'"))
    finally:
        repo.close()
    current = cli("db", "current", "--db", db_url)
    assert current.returncode == 1
    assert current.stdout.strip() == (f"f00d (newer than this slurmsched knows, which needs {migrate.head_revision()}:"
                                      " upgrade slurmsched)")
    upgrade = cli("db", "upgrade", "--db", db_url)
    assert upgrade.returncode == 2
    assert "database schema is at f00d, newer than this slurmsched knows" in upgrade.stderr
    assert "internal error" not in upgrade.stderr



@pytest.mark.slow
def test_concurrent_upgrades_of_an_empty_database_take_turns(db_url: str) -> None:
    SqlJobRepository.from_url(db_url, create=True).close()  # the SQLite file, made once
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURMSCHED_")}
    procs = [subprocess.Popen([sys.executable, "-m", "slurmsched", "--config", os.devnull, "db", "upgrade",
                               "--db", db_url], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              stdin=subprocess.DEVNULL, text=True) for _ in range(8)]
    try:
        outputs = [proc.communicate(timeout=60) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    assert [proc.returncode for proc in procs] == [0] * 8, [err for _, err in outputs]
    repo = SqlJobRepository.from_url(db_url)
    assert repo.schema_revision() == migrate.head_revision()
    repo.close()
    # Only the upgrade that made the steps says so; the others found them done.
    said = sorted(out.strip().split(": ", 1)[1] for out, _ in outputs)
    head = migrate.head_revision()
    assert said == [f"already at {head}"] * 7 + [f"upgraded from empty to {head}"]


def test_an_upgrade_step_that_fails_leaves_sqlite_where_it_was(db_url: str) -> None:
    """SQLite runs every step in one transaction, so 0002's column goes with 0003's failure; PostgreSQL
    commits each step, and keeps 0002."""
    repo = SqlJobRepository.from_url(db_url, create=True)
    try:
        migrate.upgrade(repo.engine, "0001")
        with repo.engine.begin() as conn:
            conn.execute(text("DROP INDEX ix_jobs_cluster_job"))  # what 0003 drops
        with pytest.raises(StoreError, match="ix_jobs_cluster_job"):
            repo.upgrade()
        sqlite = db_url.startswith("sqlite")
        assert repo.schema_revision() == ("0001" if sqlite else "0002")
        with repo.engine.connect() as conn:
            assert ("kind" in {c["name"] for c in inspect(conn).get_columns("cycles")}) is not sqlite
    finally:
        repo.close()
