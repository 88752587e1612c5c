"""The daemon when its own database fails mid-cycle, on SQLite and on PostgreSQL.

The outages are real: another process holds SQLite's write lock (``BEGIN EXCLUSIVE``)
beyond the daemon's busy timeout, or PostgreSQL stops accepting connections to the
database and ends the daemon's (``ALLOW_CONNECTIONS false``, ``pg_terminate_backend``).
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from sqlalchemy import create_engine, make_url, text

from slurmsched.config import Config
from slurmsched.errors import StoreError

pytestmark = pytest.mark.slurm

#: Holds the SQLite file's write lock until its stdin closes; prints "locked" once it has it.
_LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], timeout=2, isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.read()
conn.execute("ROLLBACK")
"""


class Outage:
    """Takes the configured database away from the daemon (:meth:`start`) and gives it back (:meth:`end`)."""

    def __init__(self, config: Config) -> None:
        self.url = make_url(config.db_url)
        self.locker: subprocess.Popen[str] | None = None

    def start(self) -> None:
        """SQLite: another process takes the write lock. PostgreSQL: the database refuses new
        connections and its open ones (the daemon's) are ended.

        Raises:
            AssertionError: the SQLite lock could not be taken within 2 s (a writer holds it).
        """
        if self.url.get_backend_name() == "sqlite":
            self.locker = subprocess.Popen([sys.executable, "-c", _LOCKER, str(self.url.database)], text=True,
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            line = self.locker.stdout.readline()
            assert line == "locked\n", f"the database stayed locked by the daemon: {self.locker.stderr.read()}"
            return
        self._admin("ALTER DATABASE {db} ALLOW_CONNECTIONS false",
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}'")

    def end(self) -> None:
        """Give the database back."""
        if self.locker is not None:
            self.locker.communicate("", timeout=30)
            self.locker = None
        elif self.url.get_backend_name() == "postgresql":
            self._admin("ALTER DATABASE {db} ALLOW_CONNECTIONS true")

    def _admin(self, *statements: str) -> None:
        engine = create_engine(self.url.set(database="postgres"), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                for statement in statements:
                    conn.execute(text(statement.format(db=self.url.database)))
        finally:
            engine.dispose()


def test_updates_sent_before_the_database_failed_stay_recorded_for_revert(any_db_env, busy):
    """The change each update makes is committed before it is sent: a database that fails
    while scontrol runs cannot leave a SiteFactor in Slurm that revert does not know."""
    env = any_db_env
    env.seed_history("short", [60, 70, 50])
    job = busy.submit("--gres=gpu:1", "-t", "120", name="short")
    busy.wait_state(job, {"PENDING"})
    daemon = env.daemon()
    outage = Outage(env.config)
    apply = daemon.engine.gateway.apply

    def apply_then_fail(actions):
        outcomes = apply(actions)
        outage.start()
        return outcomes

    daemon.engine.gateway.apply = apply_then_fail
    try:
        with pytest.raises(StoreError) as err:
            daemon.cycle(time.time())
    finally:
        outage.end()
    assert "\n" not in str(err.value) and "database" in str(err.value)    # one line, for the journal
    value = env.site_factors([job])[job]
    assert value > 0                               # Slurm made the update
    with env.repo() as repo:
        assert [(c.job_id, c.original, c.current) for c in repo.applied_changes()] == [(job, "0", str(value))]
    daemon.engine.gateway.apply = apply
    assert daemon.cycle(time.time()).plan.actions == ()   # the database is back: the next cycle runs
    result = env.cli("revert")
    assert result.exit_code == 0 and "reverted 1 change on 1 job" in result.output, result.output
    assert env.site_factors([job])[job] == 0


def test_a_model_whose_save_failed_is_saved_by_the_next_cycle(any_db_env):
    """A refit counts as done when it is fitted, so a save that failed would otherwise wait
    for the next refit (hours): the next cycle saves the model as it was fitted."""
    env = any_db_env
    env.write(predictor="slurmsched")
    for k in range(8):
        env.seed_history(f"proj{k}", [30.0 * (k + 1) + i for i in range(30)])
    daemon = env.daemon()
    with env.repo() as repo:
        started = repo.load_model("slurmsched")[2]["fitted_at"]
    later = time.time() + 60
    outage = Outage(env.config)
    save = daemon.repository.save_model

    def fail_then_save(*args):
        outage.start()  # once the model is fitted: the database goes away as it is saved
        return save(*args)

    daemon.repository.save_model = fail_then_save
    try:
        with pytest.raises(StoreError):
            daemon.refit(later)
    finally:
        outage.end()
        daemon.repository.save_model = save
    with env.repo() as repo:
        assert repo.load_model("slurmsched")[2]["fitted_at"] == started
    fitted = daemon.engine.predictor.version
    saved = []

    def record(name, version, blob, meta):
        saved.append((version, meta["fitted_at"], meta["jobs"]))
        return save(name, version, blob, meta)

    daemon.repository.save_model = record
    daemon.cycle(later + 1)  # (the cluster's own accounting may make a refit due too, saved after it)
    assert saved[0] == (fitted, later, 240)
    with env.repo() as repo:
        assert repo.load_model("slurmsched")[0] == saved[-1][0]
