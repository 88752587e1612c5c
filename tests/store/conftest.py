"""Fixtures of the store tests: every repository test runs on SQLite and on a real PostgreSQL.

The PostgreSQL server is private to the test session: ``contrib/dev-db/postgres.sh``
(which installs Debian's ``postgresql`` if missing) runs initdb into a temporary
directory and starts the server on a Unix socket only; it is stopped and removed when
the session ends. Each test gets an empty database (a new SQLite file, or the PostgreSQL
database with its schema dropped and re-created).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, text

from slurmsched.cli import main
from slurmsched.store.repository import SqlJobRepository

REPO = Path(__file__).resolve().parents[2]
POSTGRES_SH = REPO / "contrib" / "dev-db" / "postgres.sh"

DIALECTS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres)]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """URL of the ``slurmsched`` database on a private PostgreSQL server for this session."""
    workdir = tempfile.mkdtemp(prefix="slurmsched-pg-")
    proc = subprocess.run(["bash", str(POSTGRES_SH), "start", workdir, str(_free_port())],
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "SLURMSCHED_PG_FAST": "1"})
    if proc.returncode != 0:
        shutil.rmtree(workdir, ignore_errors=True)
        pytest.fail(f"cannot start PostgreSQL: {proc.stderr.strip()[-2000:]}", pytrace=False)
    try:
        yield proc.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run(["bash", str(POSTGRES_SH), "stop", workdir], capture_output=True, timeout=120)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """The session's PostgreSQL database, emptied for this test (its schema dropped and re-made)."""
    engine = create_engine(postgres_server)
    try:
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
    finally:
        engine.dispose()
    yield postgres_server


@pytest.fixture(params=DIALECTS)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty database: a SQLite file not created yet (its directory exists), or a new PostgreSQL database."""
    if request.param == "sqlite":
        (tmp_path / "state").mkdir()
        return f"sqlite:///{tmp_path / 'state' / 'slurmsched.db'}"
    return request.getfixturevalue("postgres_url")


@dataclass(frozen=True)
class CliResult:
    """What one ``slurmsched`` command printed and its exit status."""

    returncode: int
    stdout: str
    stderr: str


def _clean_env(env: dict[str, str] | None) -> dict[str, str | None]:
    """The caller's variables, with every other ``SLURMSCHED_*`` unset (config from ``env`` only)."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("SLURMSCHED_")}
    return {**unset, **(env or {})}


def run_cli(*args: str, env: dict[str, str] | None = None) -> CliResult:
    """Run the ``slurmsched`` command line in this process (click's runner; the real commands)."""
    result = CliRunner().invoke(main, list(args), env=_clean_env(env), catch_exceptions=False)
    return CliResult(result.exit_code, result.stdout, result.stderr)


def run_cli_process(*args: str, env: dict[str, str] | None = None) -> CliResult:
    """Run ``python -m slurmsched ARGS`` as its own process (no shell), from the repository root."""
    full = {k: v for k, v in {**os.environ, **_clean_env(env)}.items() if v is not None}
    proc = subprocess.run([sys.executable, "-m", "slurmsched", *args], capture_output=True, text=True,
                          timeout=300, cwd=REPO, env=full, stdin=subprocess.DEVNULL)
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def cli():
    """:func:`run_cli`: the command line, in process."""
    return run_cli


@pytest.fixture
def cli_process():
    """:func:`run_cli_process`: the command line as a separate process."""
    return run_cli_process


@pytest.fixture
def repo(db_url: str) -> Iterator[SqlJobRepository]:
    """A repository on an empty database migrated to the current schema."""
    repository = SqlJobRepository.from_url(db_url, create=True)
    repository.upgrade()
    yield repository
    repository.close()
