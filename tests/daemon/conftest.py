"""Fixtures of the daemon tests: the live cluster, a fresh database and a config file.

``daemon_env`` writes a TOML config (state in the test's tmp dir, the live cluster's
slurm.conf, 1 s interval, the ``helios`` history predictor so that expectations are
exact) and creates the database, as ``slurmsched db upgrade`` would.
"""

from __future__ import annotations

import re
import socket
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from slurmsched.cli import main
from slurmsched.config import Config, load_config
from slurmsched.daemon import Daemon, build_daemon
from slurmsched.model import JobRecord, JobState
from slurmsched.store.repository import SqlJobRepository, open_repository
from slurmsched.submit_cache import CACHE_FILE_NAME


@dataclass
class DaemonEnv:
    """A daemon configuration against the live cluster, plus helpers to inspect Slurm."""

    path: Path
    cluster: object
    jobs: object
    user: str
    db: dict[str, object] = field(default_factory=dict)  # ``[db]`` keys (default: SQLite in the state dir)

    @property
    def config(self) -> Config:
        """The configuration as the CLI would load it."""
        return load_config(self.path, environ={})

    def write(self, **daemon: object) -> None:
        """(Re)write the config file with ``[daemon]`` keys overridden."""
        values = {"state_dir": str(self.path.parent / "state"), "interval_s": 1, "predictor": "helios",
                  "submit_cache_max_age_s": 60, **daemon}
        lines = ["[slurm]", f'conf = "{self.cluster.conf}"', "[daemon]"]
        lines += [f"{k} = {_toml(v)}" for k, v in values.items()]
        if self.db:
            lines += ["[db]", *(f"{k} = {_toml(v)}" for k, v in self.db.items())]
        self.path.write_text("\n".join(lines) + "\n")

    def point_at_closed_slurm(self, *, controller: bool = True) -> None:
        """Rewrite the config file for a Slurm that does not answer (``timeout_s = 2``).

        ``slurm.conf`` must exist (the gateway refuses a missing one), so this writes a
        copy of the cluster's with slurmctld's and slurmdbd's ports on a closed port; with
        ``controller=False`` slurmdbd's alone (slurmctld answers, accounting does not).
        """
        closed = self.path.parent / "closed-slurm.conf"
        port = _free_port()
        keys = "SlurmctldPort|AccountingStoragePort" if controller else "AccountingStoragePort"
        closed.write_text(re.sub(rf"^({keys})=\d+", rf"\1={port}",
                                 self.cluster.conf.read_text(), flags=re.MULTILINE))
        self.path.write_text(self.path.read_text().replace(f'conf = "{self.cluster.conf}"',
                                                           f'conf = "{closed}"\ntimeout_s = 2'))

    def repo(self) -> closing[SqlJobRepository]:
        """The database (close it with ``with``)."""
        return closing(open_repository(self.config))

    def daemon(self) -> Daemon:
        """A daemon wired from the config file, as ``slurmsched run`` builds it."""
        return build_daemon(self.config)

    def cli(self, *args: str) -> Result:
        """Run ``slurmsched --config <file> ARGS`` in-process."""
        return CliRunner().invoke(main, ["--config", str(self.path), *args],
                                                  env={k: None for k in ("SLURMSCHED_CONFIG",)})

    def seed_history(self, name: str, runtimes: list[float], *, gpus: int = 1, limit_s: int = 7200) -> None:
        """Finished jobs of this test's user under the job name ``<prefix><name>``, one after another."""
        at = time.time() - sum(run + 60 for run in runtimes) - 60
        jobs = []
        for i, run in enumerate(runtimes):
            jobs.append(JobRecord(job_id=10_000_000 + abs(hash((name, i))) % 10_000_000, user=self.user,
                                  name=self.jobs.prefix + name, submit_time=at, start_time=at + 5,
                                  end_time=at + 5 + run, state=JobState.COMPLETED, time_limit_s=limit_s,
                                  gpus=gpus, cluster="slurmsched"))
            at += run + 60
        with self.repo() as repo:
            repo.ingest_finished(jobs)

    def site_factors(self, ids: list[int]) -> dict[int, int | None]:
        """SiteFactor of each job from ``sprio`` (``None``: not pending)."""
        out = self.cluster.run("sprio", "-h", "-o", "%i|%S").stdout
        factors = {int(a): int(b) for a, b in (line.strip().split("|") for line in out.splitlines() if line.strip())}
        return {i: factors.get(i) for i in ids}

    def time_limits(self, ids: list[int]) -> dict[int, str]:
        """Each job's time limit as ``squeue`` shows it."""
        out = self.cluster.run("squeue", "-h", "-o", "%i|%l").stdout
        limits = dict(line.strip().split("|") for line in out.splitlines() if line.strip())
        return {i: limits.get(str(i), "") for i in ids}


def _free_port() -> int:
    with closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return f'"{value}"'


@pytest.fixture
def daemon_env(tmp_path, slurm_cluster, slurm_jobs) -> DaemonEnv:
    """A config file and a fresh, current database for a daemon on the live cluster."""
    user = slurm_cluster.run("id", "-un").stdout.strip()
    env = DaemonEnv(tmp_path / "slurmsched.toml", slurm_cluster, slurm_jobs, user)
    env.write()
    open_repository(env.config, create=True).close()
    return env


@pytest.fixture(params=[pytest.param("sqlite", id="sqlite"),
                        pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres)])
def any_db_env(request: pytest.FixtureRequest, daemon_env: DaemonEnv) -> DaemonEnv:
    """``daemon_env`` on SQLite (a 1 s busy timeout) and on the session's PostgreSQL (emptied, then upgraded)."""
    postgres = request.param == "postgresql"
    daemon_env.db = {"url": request.getfixturevalue("postgres_url")} if postgres else {"busy_timeout_s": 1}
    daemon_env.write()
    if postgres:
        open_repository(daemon_env.config, create=True).close()
    return daemon_env


@pytest.fixture
def busy(slurm_jobs):
    """Occupy every node so that the jobs a test submits stay pending (and show in sprio)."""
    blocker = slurm_jobs.submit("-N", "4", "--exclusive", name="blocker", wrap="sleep 300")
    slurm_jobs.wait_state(blocker, {"RUNNING"}, timeout=90)
    slurm_jobs.blocker = blocker
    return slurm_jobs


@pytest.fixture
def lua_cache(slurm_cluster):
    """The cache path job_submit.lua reads on the live cluster (removed before and after)."""
    conf_dir = slurm_cluster.conf.parent
    assert (conf_dir / "job_submit.lua").is_file(), "up.sh did not install job_submit.lua"
    path = conf_dir / CACHE_FILE_NAME
    path.unlink(missing_ok=True)
    yield path
    path.unlink(missing_ok=True)
