"""Which commands may create the SQLite database, and where.

Only ``db upgrade`` and ``history import`` create a missing SQLite file; every other
command (the daemon included) refuses it and creates nothing, so a command run as root
never leaves a database the daemon's user cannot open. A new file's directory must exist,
except the configured state directory, which is made.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slurmsched.errors import StoreError
from slurmsched.store.repository import SqlJobRepository


def _config(tmp_path: Path) -> tuple[Path, Path]:
    """A config file whose state directory does not exist (and an unreachable Slurm); (file, state dir)."""
    state = tmp_path / "fresh"
    config = tmp_path / "slurmsched.toml"
    config.write_text(f'[slurm]\nbin_dir = "{tmp_path / "no-slurm"}"\n'  # no scontrol there: Slurm is unreachable
                      f'[daemon]\nstate_dir = "{state}"\n')
    return config, state


READERS = [
    pytest.param(["status"], id="status"),
    pytest.param(["explain", "7"], id="explain"),
    pytest.param(["pause"], id="pause"),
    pytest.param(["resume"], id="resume"),
    pytest.param(["revert"], id="revert"),
    pytest.param(["run", "--once"], id="run"),
    pytest.param(["history", "stats"], id="history-stats"),
    pytest.param(["db", "current"], id="db-current"),
    pytest.param(["simulate", "--from-db", "--no-progress"], id="simulate"),
    pytest.param(["predict", "evaluate", "--from-db"], id="predict-evaluate"),
]


@pytest.mark.parametrize("args", READERS)
def test_commands_that_do_not_create_refuse_a_missing_database(tmp_path: Path, cli, args: list[str]) -> None:
    config, state = _config(tmp_path)
    result = cli("--config", str(config), *args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip() == (f"error: no database at {state / 'slurmsched.db'}: "
                                     "run 'slurmsched db upgrade' (as the daemon's user)")
    assert not state.exists()


def test_config_check_reports_a_missing_database_without_creating_it(tmp_path: Path, cli) -> None:
    config, state = _config(tmp_path)
    result = cli("--config", str(config), "config", "check")
    assert result.returncode == 1
    assert f"FAIL database: no database at {state / 'slurmsched.db'}: run 'slurmsched db upgrade'" in result.stdout
    assert not state.exists()


def test_config_check_fails_a_submit_cache_that_is_a_directory(tmp_path: Path, cli) -> None:
    config, _ = _config(tmp_path)
    result = cli("--config", str(config), "config", "check", env={"SLURMSCHED_DAEMON_SUBMIT_CACHE": str(tmp_path)})
    assert result.returncode == 1
    assert f"FAIL submit cache {tmp_path}: is a directory (daemon.submit_cache names the file)" in result.stdout


def test_config_check_fails_a_submit_cache_directory_that_is_a_file(tmp_path: Path, cli) -> None:
    config, _ = _config(tmp_path)
    (tmp_path / "file").write_text("")
    result = cli("--config", str(config), "config", "check",
                 env={"SLURMSCHED_DAEMON_STATE_DIR": str(tmp_path / "file")})
    cache = tmp_path / "file" / "slurmsched-submit.cache"
    assert f"FAIL submit cache {cache}: {tmp_path / 'file'} is not a directory" in result.stdout


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write any directory")
def test_config_check_fails_a_submit_cache_directory_not_writable(tmp_path: Path, cli) -> None:
    config, _ = _config(tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    result = cli("--config", str(config), "config", "check", env={"SLURMSCHED_DAEMON_STATE_DIR": str(locked)})
    assert f"FAIL submit cache {locked / 'slurmsched-submit.cache'}: directory {locked} NOT writable" in result.stdout


def test_config_check_tells_a_missing_cache_directory_that_db_upgrade_makes(tmp_path: Path, cli) -> None:
    """The state directory holding the SQLite database is made by ``db upgrade``; any other
    missing directory is made by nothing, and the daemon's cycles would fail writing the cache."""
    config, state = _config(tmp_path)
    result = cli("--config", str(config), "config", "check")
    assert (f"warn submit cache {state / 'slurmsched-submit.cache'}: directory {state} does not exist "
            "('slurmsched db upgrade' makes it)") in result.stdout
    elsewhere = tmp_path / "none" / "x.cache"
    result = cli("--config", str(config), "config", "check", env={"SLURMSCHED_DAEMON_SUBMIT_CACHE": str(elsewhere)})
    assert (f"FAIL submit cache {elsewhere}: directory {elsewhere.parent} does not exist: the daemon does not "
            "create it (make it, writable by the daemon's user)") in result.stdout
    result = cli("--config", str(config), "config", "check", env={"SLURMSCHED_DB_URL": f"sqlite:///{tmp_path}/x.db"})
    assert f"FAIL submit cache {state / 'slurmsched-submit.cache'}: directory {state} does not exist" in result.stdout
    result = cli("--config", str(config), "config", "check", env={"SLURMSCHED_DAEMON_SUBMIT_CACHE_ENTRIES": "0"})
    assert (f"ok   submit cache {state / 'slurmsched-submit.cache'}: not written (daemon.submit_cache_entries = 0)"
            in result.stdout)
    assert not state.exists()


def test_simulate_from_a_mistyped_database_url_creates_nothing(tmp_path: Path, cli) -> None:
    config, _ = _config(tmp_path)
    missing = tmp_path / "none.db"
    result = cli("--config", str(config), "simulate", "--from-db", "--db", f"sqlite:///{missing}", "--no-progress")
    assert result.returncode == 2 and f"error: no database at {missing}" in result.stderr
    assert not missing.exists()


def test_db_upgrade_creates_the_state_directory_and_a_private_file(tmp_path: Path, cli) -> None:
    config, state = _config(tmp_path)
    result = cli("--config", str(config), "db", "upgrade")
    assert result.returncode == 0, result.stderr
    assert "upgraded from empty to" in result.stdout
    assert (state.stat().st_mode & 0o777, (state / "slurmsched.db").stat().st_mode & 0o777) == (0o700, 0o600)
    status = cli("--config", str(config), "status")
    assert status.returncode == 0, status.stderr


@pytest.mark.parametrize("command", [["db", "upgrade"], ["history", "import", "--format", "swf", "--trace"]])
def test_a_new_file_outside_the_state_directory_needs_its_directory(tmp_path: Path, cli, command: list[str]) -> None:
    config, state = _config(tmp_path)
    trace = tmp_path / "t.swf"
    trace.write_text("1 0 0 10 1 -1 -1 -1 60 -1 1 1 1 -1 1 1 -1 -1\n")
    if command[0] == "history":
        command = [*command, str(trace)]
    typo = tmp_path / "nonexist" / "dir" / "x.db"
    result = cli("--config", str(config), *command, "--db", f"sqlite:///{typo}")
    assert result.returncode == 2
    assert result.stderr.strip() == (f"error: cannot create database file {typo}: "
                                     f"directory {typo.parent} does not exist")
    assert not (tmp_path / "nonexist").exists() and not state.exists()


def test_from_url_creates_only_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "x.db"
    with pytest.raises(StoreError, match=f"^no database at {path}: run 'slurmsched db upgrade'"):
        SqlJobRepository.from_url(f"sqlite:///{path}")
    assert not path.exists()
    with pytest.raises(StoreError, match=f"directory {tmp_path / 'a'} does not exist"):
        SqlJobRepository.from_url(f"sqlite:///{tmp_path / 'a' / 'b.db'}", create=True, state_dir=tmp_path / "b")
    SqlJobRepository.from_url(f"sqlite:///{path}", create=True).close()
    assert path.is_file()
    SqlJobRepository.from_url(f"sqlite:///{path}").close()  # an existing file needs no create

