"""Opening databases: SQLite file mode and WAL, lock and connection failures as one-line errors."""

from __future__ import annotations

import logging
import re
import socket
import sqlite3
import stat
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from slurmsched.errors import StoreError
from slurmsched.model import JobRecord, JobState
from slurmsched.store.connect import PG_CONNECT_TIMEOUT_S
from slurmsched.store.repository import SqlJobRepository


def test_sqlite_file_is_private_and_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "state" / "nested" / "slurmsched.db"
    repo = SqlJobRepository.from_url(f"sqlite:///{path}", create=True, state_dir=path.parent)
    try:
        repo.upgrade()
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        with repo.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        repo.ingest_finished([JobRecord(job_id=1, user="u", submit_time=1.0)])
        for side in path.parent.glob("slurmsched.db-*"):  # -wal and -shm follow the file's mode
            assert stat.S_IMODE(side.stat().st_mode) == 0o600
    finally:
        repo.close()


def test_locked_sqlite_gives_a_clean_error(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    url = f"sqlite:///{path}"
    setup = SqlJobRepository.from_url(url, create=True)
    setup.upgrade()
    setup.close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    repo = SqlJobRepository.from_url(url, busy_timeout_s=0.3)
    try:
        started = time.monotonic()
        with pytest.raises(StoreError) as err:
            repo.ingest_finished([JobRecord(job_id=1, user="u", submit_time=1.0)])
        assert time.monotonic() - started < 10
        assert str(err.value) == f"database {url} is locked by another process (gave up waiting for it)"
        holder.execute("ROLLBACK")
        assert repo.ingest_finished([JobRecord(job_id=1, user="u", submit_time=1.0)]) == 1
    finally:
        holder.close()
        repo.close()


def test_a_read_then_write_transaction_survives_a_concurrent_writer(tmp_path: Path) -> None:
    """The cycle's pattern (read the cursor, later write) while another process writes."""
    url = f"sqlite:///{tmp_path / 'busy.db'}"
    daemon, admin = SqlJobRepository.from_url(url, create=True), SqlJobRepository.from_url(url, busy_timeout_s=10)
    daemon.upgrade()
    paused = threading.Event()
    try:
        with daemon.transaction():
            assert daemon.get_cursor("sacct") is None
            other = threading.Thread(target=lambda: (admin.set_paused(True), paused.set()))
            other.start()
            time.sleep(0.5)  # the other writer waits for this transaction instead of slipping in
            assert not paused.is_set()
            daemon.set_cursor("sacct", 42.0)
        other.join(timeout=10)
        assert paused.is_set()
        assert daemon.get_cursor("sacct") == 42.0 and daemon.is_paused() is True
    finally:
        daemon.close()
        admin.close()


def test_unreachable_postgres_gives_a_clean_error(tmp_path: Path) -> None:
    url = f"postgresql+psycopg://postgres@/slurmsched?host={tmp_path}&port=1"
    repo = SqlJobRepository.from_url(url)
    with pytest.raises(StoreError) as err:
        repo.check_schema()
    message = str(err.value)
    assert message.startswith("cannot reach database postgresql+psycopg://postgres@/slurmsched")
    assert "\n" not in message


def test_a_postgres_server_that_never_answers_times_out() -> None:
    """A host that takes the connection but never answers (a hung server, a firewall that
    drops packets) fails the command after libpq's connect_timeout instead of hanging it."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()  # the kernel completes the handshake; nothing ever answers
        port = listener.getsockname()[1]
        repo = SqlJobRepository.from_url(f"postgresql+psycopg://postgres@127.0.0.1:{port}/slurmsched")
        errors: list[BaseException] = []

        def check() -> None:
            try:
                repo.check_schema()
            except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
                errors.append(exc)

        waiting = threading.Thread(target=check, daemon=True)  # without a timeout it would hang: left behind
        waiting.start()
        waiting.join(3 * PG_CONNECT_TIMEOUT_S)
    assert not waiting.is_alive(), "still connecting: no connect timeout"
    assert len(errors) == 1 and isinstance(errors[0], StoreError), errors
    assert re.match(r"cannot reach database .*: connection timeout expired$", str(errors[0])), errors


def test_missing_tables_name_the_command(tmp_path: Path) -> None:
    repo = SqlJobRepository.from_url(f"sqlite:///{tmp_path / 'x.db'}", create=True)
    with pytest.raises(StoreError, match="has no slurmsched tables .*run 'slurmsched db upgrade'"):
        repo.count_jobs()


@pytest.mark.parametrize("url, problem", [
    ("mysql://x/y", "unsupported database 'mysql'"),
    ("sqlite://", "SQLite needs a file"),
    ("sqlite:////tmp/x.db?mode=ro", "SQLite URL options are not supported (mode in sqlite:////tmp/x.db?mode=ro)"),
    ("sqlite:////tmp/x.db?uri=true&mode=ro", "SQLite URL options are not supported (mode, uri in"),
    ("not a url", "not a database URL"),
    ("postgresql://u:secret@host:notaport/db", "not a database URL: 'postgresql://u:***@host:notaport/db'"),
    ("postgresql+psycopg//u:secret@host/db", "not a database URL: 'postgresql+psycopg//u:***@host/db'"),
])
def test_bad_urls(url: str, problem: str) -> None:
    """A malformed URL is one line, its password masked (a bad port was an internal error)."""
    with pytest.raises(StoreError) as err:
        SqlJobRepository.from_url(url)
    assert problem in str(err.value) and "secret" not in str(err.value)


@pytest.mark.postgres
def test_a_server_that_refuses_says_why_not_that_it_is_unreachable(postgres_url: str) -> None:
    """The server answered: a missing database or a wrong password is not 'cannot reach'."""
    missing = make_url(postgres_url).set(database="nosuch")
    with pytest.raises(StoreError) as err:
        SqlJobRepository.from_url(missing.render_as_string(hide_password=False)).check_schema()
    assert re.match(r'database postgresql\+psycopg://\S+/nosuch\S* refused the connection: '
                    r'database "nosuch" does not exist$', str(err.value)), str(err.value)


def test_unwritable_state_dir(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StoreError, match="cannot create database file"):
        SqlJobRepository.from_url(f"sqlite:///{blocker / 'slurmsched.db'}", create=True)


@pytest.mark.postgres
def test_a_batch_postgresql_refuses_is_reported_in_one_line(postgres_url: str,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    repo = SqlJobRepository.from_url(postgres_url)
    repo.upgrade()
    # A row PostgreSQL refuses early in a large batch: the pipeline's end fails too.
    jobs = [JobRecord(job_id=i, user="u", submit_time=1e9 + i, cpus=2**40 if i == 2 else 1, cluster="c",
                      state=JobState.COMPLETED, end_time=1e9 + i + 60) for i in range(1, 1001)]
    try:
        for _ in range(3):
            with caplog.at_level(logging.WARNING), pytest.raises(StoreError, match="integer out of range"):
                repo.ingest_finished(jobs)
    finally:
        repo.close()
    assert caplog.records == []


@pytest.mark.postgres
def test_postgres_plans_each_statement_when_it_runs(postgres_url: str) -> None:
    """No prepared statements: psycopg prepares a statement run five times and keeps its
    generic plan, and ``stored_attempts``'s plan, made while a first import's table was
    still empty, scanned the whole table on every later lookup (HPC2N's 202,871 jobs into
    a table not yet analysed: see the commit that set this)."""
    repo = SqlJobRepository.from_url(postgres_url)
    try:
        with repo.engine.connect() as conn:
            assert conn.connection.driver_connection.prepare_threshold is None
    finally:
        repo.close()


def test_config_check_masks_the_database_password(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from slurmsched.cli import main

    config = tmp_path / "slurmsched.toml"
    config.write_text(f'[db]\nurl = "postgresql://pwuser:secret@/slurmsched?host={tmp_path}&port=1"\n')
    result = CliRunner().invoke(main, ["config", "check"], env={"SLURMSCHED_CONFIG": str(config)})
    assert "     [db] url='postgresql://pwuser:***@/slurmsched?" in result.output
    assert "secret" not in result.output and "Traceback" not in result.output
