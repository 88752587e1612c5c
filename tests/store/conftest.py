"""Fixtures of the store tests: every repository test runs on SQLite and on a real PostgreSQL.

Each test gets an empty database: a new SQLite file, or the session's PostgreSQL
database (``postgres_url``, tests/conftest.py) with its schema dropped and re-created.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
from click.testing import CliRunner

from slurmsched.cli import main
from slurmsched.store.repository import SqlJobRepository

REPO = Path(__file__).resolve().parents[2]

DIALECTS = [pytest.param("sqlite", id="sqlite"),
            pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres)]


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
