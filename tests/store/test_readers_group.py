"""``db.readers_group``: a non-root member of the group reads the SQLite store (``explain``,
``status``, ``history stats``, ``predict evaluate --from-db``, ``simulate --from-db``).

The reader is real: a forked child gives up root for ``nobody`` in group ``nogroup`` and
runs the command line in-process (:func:`_as_nobody`). Skipped unless run as root on a
host with both.
"""

from __future__ import annotations

import grp
import json
import logging
import os
import pwd
import shutil
import stat
import tempfile
import time
import traceback
from pathlib import Path
from typing import Iterator

import pytest
from click.testing import CliRunner

from slurmsched.cli import main
from slurmsched.config import load_config
from slurmsched.errors import ConfigError
from slurmsched.model import Decision, JobRecord, JobState, Prediction
from slurmsched.store import migrate
from slurmsched.store.protocol import CycleKind
from slurmsched.store.repository import SqlJobRepository

GROUP = "nogroup"


def _reader_ids() -> tuple[int, int]:
    """(uid of ``nobody``, gid of :data:`GROUP`); skips the test where they cannot be used."""
    if os.geteuid() != 0:
        pytest.skip("needs root to become another user")
    try:
        return pwd.getpwnam("nobody").pw_uid, grp.getgrnam(GROUP).gr_gid
    except KeyError:
        pytest.skip(f"no user nobody or group {GROUP} on this host")


@pytest.fixture
def site() -> Iterator[Path]:
    """A directory every user may search (pytest's tmp_path parents may be 0700)."""
    path = Path(tempfile.mkdtemp(prefix="slurmsched-readers-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


def _config(site: Path, readers_group: str) -> Path:
    """A config file in ``site`` (readable by all): state under ``site/state``, Slurm not read."""
    path = site / "slurmsched.toml"
    path.write_text(f'[slurm]\nconf = "{site / "none.conf"}"\n[daemon]\nstate_dir = "{site / "state"}"\n'
                    f'[db]\nreaders_group = "{readers_group}"\n')
    path.chmod(0o644)
    return path


def _writer(config: Path) -> SqlJobRepository:
    """The daemon's side: the configured database, created and migrated, holding one cycle
    with a prediction and a decision of job 7; left open."""
    repo = SqlJobRepository.from_config(load_config(config, environ={}), create=True)
    repo.upgrade()
    cycle = repo.start_cycle(time.time(), CycleKind.LIVE)
    repo.record_predictions(cycle, [Prediction(7, 300.0, 300.0, 300.0, "user mean of 3 runs")])
    repo.record_decisions(cycle, [Decision(7, "rank", "ranked", "shortest first", score=300.0, rank=1)])
    repo.finish_cycle(cycle, pending=1, running=0, actions=0, failed=0, timings={"total": 0.1})
    return repo


def _finished_runs(repo: SqlJobRepository, count: int) -> None:
    """``count`` finished jobs of two users on cluster ``dev``, one every 10 minutes."""
    t0 = time.time() - 86400
    repo.ingest_finished([JobRecord(job_id=100 + i, user=f"u{i % 2}", name="train", submit_time=t0 + 600 * i,
                                    cluster="dev", state=JobState.COMPLETED, start_time=t0 + 600 * i + 5,
                                    end_time=t0 + 600 * i + 305 + 60 * (i % 5), time_limit_s=3600, gpus=2,
                                    cpus=4, node_list="gpu01") for i in range(count)])


def _as_nobody(config: Path, *args: str, stdout_only: bool = False) -> tuple[int, str]:
    """``slurmsched --config CONFIG ARGS`` run by ``nobody`` in :data:`GROUP` only, in a
    forked child: (exit code, output; with ``stdout_only`` without what went to stderr,
    such as progress bars). A failure of the child itself fails the test."""
    uid, gid = _reader_ids()
    # The migration scripts are read here, as root: a checkout (CI's clone, a mktemp
    # directory) may be private to root, where an installed package is world-readable.
    migrate.head_revision()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.close(read_end)
            os.setgroups([gid])
            os.setgid(gid)
            os.setuid(uid)
            result = CliRunner().invoke(main, ["--config", str(config), *args],
                                        env={k: None for k in os.environ if k.startswith("SLURMSCHED_")})
            payload = json.dumps([result.exit_code, result.stdout if stdout_only else result.output])
        except BaseException:  # noqa: BLE001 - reported to the parent
            payload = json.dumps([None, traceback.format_exc()])
        with os.fdopen(write_end, "w") as out:
            out.write(payload)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as received:
        code, output = json.loads(received.read() or "[null, \"child sent nothing\"]")
    os.waitpid(pid, 0)
    assert code is not None, output
    return code, output


def _story(output: str) -> None:
    assert "prediction: 5 min, from user mean of 3 runs" in output, output
    assert "rank #1" in output and "shortest first" in output, output


def test_a_group_member_reads_while_the_writer_is_open_and_after(site):
    _reader_ids()
    config = _config(site, GROUP)
    db = site / "state" / "slurmsched.db"
    writer = _writer(config)
    try:
        assert Path(f"{db}-wal").exists(), "the writer holds the WAL files"
        code, output = _as_nobody(config, "explain", "7")
        assert code == 0, output
        _story(output)
    finally:
        writer.close()
    assert not Path(f"{db}-wal").exists()
    before = (db.read_bytes(), db.stat().st_mtime_ns)
    code, output = _as_nobody(config, "explain", "7")
    assert code == 0, output
    _story(output)
    code, output = _as_nobody(config, "status")
    assert code == 0 and "last cycle 1 at" in output, output
    assert (db.read_bytes(), db.stat().st_mtime_ns) == before
    assert sorted(p.name for p in db.parent.iterdir()) == ["slurmsched.db"], "the reader created nothing"
    gid = grp.getgrnam(GROUP).gr_gid
    for path, mode in ((db, 0o640), (db.parent, 0o750)):
        info = path.stat()
        assert (stat.S_IMODE(info.st_mode), info.st_gid) == (mode, gid), path


def test_a_group_member_runs_the_history_commands_read_only(site):
    _reader_ids()
    config = _config(site, GROUP)
    writer = _writer(config)
    try:
        _finished_runs(writer, 30)
    finally:
        writer.close()
    commands = (("history", "stats", "--json"), ("predict", "evaluate", "--from-db", "--json"),
                ("simulate", "--from-db", "--policy", "fifo", "--gpus", "4", "--json"))
    # the owner's answers first (this also imports, as root, what the commands load late)
    owner = [CliRunner().invoke(main, ["--config", str(config), *args]) for args in commands]
    db = site / "state" / "slurmsched.db"
    before = (db.read_bytes(), db.stat().st_mtime_ns)
    for args, expected in zip(commands, owner):
        assert expected.exit_code == 0, expected.output
        assert json.loads(expected.stdout)["jobs"] == 30
        code, output = _as_nobody(config, *args, stdout_only=True)
        assert (code, output) == (0, expected.stdout), args
    code, output = _as_nobody(config, "db", "current", stdout_only=True)  # an inspection: read-only too
    assert (code, output) == (0, f"{migrate.head_revision()} (head)\n"), output
    assert (db.read_bytes(), db.stat().st_mtime_ns) == before
    assert sorted(p.name for p in db.parent.iterdir()) == ["slurmsched.db"], "the readers created nothing"


def test_without_a_readers_group_another_user_is_told_what_stops_it(site):
    _reader_ids()
    config = _config(site, "")
    _writer(config).close()
    code, output = _as_nobody(config, "explain", "7")
    assert code != 0 and "Traceback" not in output, output
    assert f"directory {site / 'state'} is not searchable by user nobody" in output, output


def test_a_writer_shares_an_existing_private_database_and_says_so(site, caplog):
    _reader_ids()
    _writer(_config(site, "")).close()
    db = site / "state" / "slurmsched.db"
    assert stat.S_IMODE(db.stat().st_mode) == 0o600 and stat.S_IMODE(db.parent.stat().st_mode) == 0o700
    caplog.set_level(logging.INFO, logger="slurmsched.store.connect")
    repo = SqlJobRepository.from_config(load_config(_config(site, GROUP), environ={}))
    try:
        repo.check_schema()
        gid = grp.getgrnam(GROUP).gr_gid
        for path, mode in ((db, 0o640), (Path(f"{db}-wal"), 0o640), (Path(f"{db}-shm"), 0o640),
                           (db.parent, 0o750)):
            info = path.stat()
            assert (stat.S_IMODE(info.st_mode), info.st_gid) == (mode, gid), path
        assert f"{db} mode 0600 -> 0640" in caplog.text and f"{db.parent} now of group {GROUP}" in caplog.text
    finally:
        repo.close()


def test_a_reader_of_an_older_schema_is_told_so_in_one_line_and_nothing_is_migrated(site):
    _reader_ids()
    config = _config(site, GROUP)
    repo = SqlJobRepository.from_config(load_config(config, environ={}), create=True)
    try:
        migrate.upgrade(repo.engine, "0001")
    finally:
        repo.close()
    code, output = _as_nobody(config, "explain", "7")
    assert code != 0 and output.strip().count("\n") == 0, output
    assert "database schema is at 0001" in output and "run 'slurmsched db upgrade'" in output, output
    check = SqlJobRepository.from_config(load_config(config, environ={}))
    try:
        assert check.schema_revision() == "0001"
    finally:
        check.close()


def test_the_readers_group_must_exist_and_is_named_in_the_error():
    with pytest.raises(ConfigError, match=r"^db\.readers_group: no group 'no-such-group-here' on this host$"):
        load_config(None, environ={"SLURMSCHED_CONFIG": os.devnull,
                                   "SLURMSCHED_DB_READERS_GROUP": "no-such-group-here"})
