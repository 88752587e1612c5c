"""A SQLite database this user may not read or write is named with the path at fault.

Root ignores file modes through its ``CAP_DAC_OVERRIDE`` and ``CAP_DAC_READ_SEARCH``
capabilities; run as root (as in CI), each command here runs with those two dropped from
the effective set (:func:`file_modes_apply`), so that the modes stop it as they stop any
other user, and they are raised again afterwards.
"""

from __future__ import annotations

import ctypes
import os
import pwd
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import pytest

from slurmsched.store.repository import SqlJobRepository

#: Bits of ``CAP_DAC_OVERRIDE`` (1) and ``CAP_DAC_READ_SEARCH`` (2) in a capability set.
DAC_CAPS = (1 << 1) | (1 << 2)
#: ``_LINUX_CAPABILITY_VERSION_3`` of capget(2)/capset(2).
CAP_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


@contextmanager
def file_modes_apply() -> Iterator[None]:
    """Inside, file modes stop this process: nothing to do for a user other than root;
    root's effective set loses :data:`DAC_CAPS` (skip the test where that cannot be done)."""
    if os.geteuid() != 0:
        yield
        return
    libc = ctypes.CDLL(None, use_errno=True)
    header, data = _CapHeader(CAP_VERSION_3, 0), (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        pytest.skip(f"capget: {os.strerror(ctypes.get_errno())}: cannot make file modes apply to root")
    saved = data[0].effective
    data[0].effective = saved & ~DAC_CAPS
    if libc.capset(ctypes.byref(header), data) != 0:
        pytest.skip(f"capset: {os.strerror(ctypes.get_errno())}: cannot make file modes apply to root")
    try:
        yield
    finally:
        data[0].effective = saved
        assert libc.capset(ctypes.byref(header), data) == 0, os.strerror(ctypes.get_errno())


def _database(tmp_path: Path) -> tuple[Path, Path]:
    """A migrated SQLite database in ``tmp_path/state`` and a config naming it (kept
    outside that directory): (database file, config file)."""
    db = tmp_path / "state" / "slurmsched.db"
    repo = SqlJobRepository.from_url(f"sqlite:///{db}", create=True, state_dir=db.parent)
    try:
        repo.upgrade()
    finally:
        repo.close()
    config = tmp_path / "slurmsched.toml"
    config.write_text(f'[daemon]\nstate_dir = "{db.parent}"\n[db]\nurl = "sqlite:///{db}"\n')
    return db, config


def _one_error_line(result) -> str:  # noqa: ANN001 - conftest's CliResult
    assert result.returncode == 2, result
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    return result.stderr.removeprefix("error: ").rstrip("\n")


ME = pwd.getpwuid(os.geteuid()).pw_name


@pytest.mark.parametrize(("command", "mode_of", "expected"), [
    pytest.param("pause", lambda db: {db: 0o400},
                 "database file {db}: attempt to write a readonly database: {db} is not writable by user {me}: "
                 "change the permissions", id="read-only file"),
    pytest.param("status", lambda db: {db: 0o000},
                 "database file {db}: unable to open database file: {db} is not readable by user {me}: "
                 "change the permissions", id="unreadable file"),
    pytest.param("status", lambda db: {db.parent: 0o555},
                 "database file {db}: attempt to write a readonly database: directory {dir} is not writable by "
                 "user {me} (to create slurmsched.db-wal, slurmsched.db-shm there): change the permissions",
                 id="read-only directory"),
    pytest.param("status", lambda db: {db.parent: 0o000},
                 "cannot open database file {db}: directory {dir} is not searchable by user {me}",
                 id="unsearchable directory"),
])
def test_a_database_this_user_may_not_use_names_the_path(tmp_path: Path, cli, command: str,
                                                         mode_of: Callable[[Path], dict[Path, int]],
                                                         expected: str) -> None:
    db, config = _database(tmp_path)
    modes = mode_of(db)
    before = {path: path.stat().st_mode for path in modes}
    for path, mode in modes.items():
        path.chmod(mode)
    try:
        with file_modes_apply():
            result = cli("--config", str(config), command)
    finally:
        for path, mode in before.items():
            path.chmod(mode)
    assert _one_error_line(result) == expected.format(db=db, dir=db.parent, me=ME)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give the database to another user")
def test_another_users_database_names_its_owner(tmp_path: Path, cli) -> None:
    db, config = _database(tmp_path)
    nobody = pwd.getpwnam("nobody")
    os.chown(db, nobody.pw_uid, nobody.pw_gid)  # mode 0600 as the store made it: the daemon's user's own
    with file_modes_apply():
        result = cli("--config", str(config), "status")
    assert _one_error_line(result) == (
        f"database file {db}: unable to open database file: {db} is not readable by user root: "
        f"run it as user nobody (the owner of {db}) or change the permissions")


def _status_of(tmp_path: Path, db: Path, cli) -> str:  # noqa: ANN001 - conftest's run_cli
    """``slurmsched status`` with ``db`` as the database: its one error line."""
    config = tmp_path / "slurmsched.toml"
    config.write_text(f'[daemon]\nstate_dir = "{tmp_path}"\n[db]\nurl = "sqlite:///{db}"\n')
    return _one_error_line(cli("--config", str(config), "status"))


def test_a_database_path_through_a_file_names_the_file(tmp_path: Path, cli) -> None:
    """Fails for root too: no permission lets a path go through a regular file."""
    blocker = tmp_path / "state"
    blocker.write_text("")
    db = blocker / "slurmsched.db"
    assert _status_of(tmp_path, db, cli) == f"cannot open database file {db}: {blocker} is not a directory"


def test_a_directory_named_as_the_database_is_refused_as_such(tmp_path: Path, cli) -> None:
    db = tmp_path / "state"
    db.mkdir()
    assert _status_of(tmp_path, db, cli) == (f"database file {db}: unable to open database file: "
                                             f"{db} is a directory, not a database file")
