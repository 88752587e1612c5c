"""Fixtures shared by the whole suite: the live dev Slurm cluster, and a new SQLite repository.

Tests marked ``@pytest.mark.slurm`` run against the real cluster that
``contrib/dev-cluster/up.sh`` starts (once per session; a no-op when it is already up).
``SLURMSCHED_DEV_STATE`` and ``SLURMSCHED_DEV_PORT`` pick the instance, exactly as for
up.sh, so each developer can run a private one. A test that requests ``slurm_cluster``
(directly or through ``slurm_jobs``) is marked ``slurm`` automatically, and a test marked
``slurm`` gets the cluster started even if it does not request it.

``postgres_server`` is a PostgreSQL server private to the test session, for the tests that
run on both databases (store, daemon): ``contrib/dev-db/postgres.sh`` (which installs
Debian's ``postgresql`` if missing) runs initdb into a temporary directory and starts the
server on a Unix socket only; it is stopped and removed when the session ends.

Fixtures of one area (store, daemon, compose, ...) belong in that directory's conftest.py.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import pytest
from sqlalchemy import create_engine, text

from slurmsched.store.repository import SqlJobRepository

REPO = Path(__file__).resolve().parents[1]
UP_SH = REPO / "contrib" / "dev-cluster" / "up.sh"
POSTGRES_SH = REPO / "contrib" / "dev-db" / "postgres.sh"
_EXPORT = re.compile(r"^export ([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


@dataclass(frozen=True)
class SlurmCluster:
    """A running dev cluster.

    Attributes:
        state_dir: The instance's state directory (logs under ``state_dir/log``).
        conf: Path of its slurm.conf.
        env: Environment for Slurm clients: ``os.environ`` plus ``SLURM_CONF`` and the
            ``SLURMSCHED_DEV_*`` variables. Pass it as ``env=`` to subprocess or a gateway.
    """

    state_dir: Path
    conf: Path
    env: dict[str, str] = field(repr=False)

    def run(self, *argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run one Slurm client command (argument list, no shell) against this cluster.

        Raises:
            subprocess.CalledProcessError: with ``check`` and a non-zero exit.
        """
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True,
                              check=check, timeout=timeout)


def start_dev_cluster() -> SlurmCluster:
    """Run up.sh (honouring ``SLURMSCHED_DEV_*``) and describe the cluster it reports.

    Raises:
        RuntimeError: up.sh failed; the message carries the end of its output.
    """
    proc = subprocess.run(["bash", str(UP_SH)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=900)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
        raise RuntimeError(f"contrib/dev-cluster/up.sh failed (exit {proc.returncode}):\n{tail}")
    exported = {m[1]: m[2] for line in proc.stdout.splitlines() if (m := _EXPORT.match(line.strip()))}
    env = {**os.environ, **exported}
    return SlurmCluster(state_dir=Path(exported["SLURMSCHED_DEV_STATE"]),
                        conf=Path(exported["SLURM_CONF"]), env=env)


@pytest.fixture(scope="session")
def slurm_cluster() -> SlurmCluster:
    """The live dev cluster, started once per session and left running afterwards."""
    try:
        return start_dev_cluster()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"cannot start the dev Slurm cluster: {exc}", pytrace=False)


class SlurmJobs:
    """Submits jobs under a unique name prefix and cancels them all at teardown.

    Job names are ``<prefix><name>`` with a prefix unique to the test, so tests never
    touch each other's (or another helper's) jobs. Output goes to /dev/null unless the
    caller passes ``--output``/``-o``.
    """

    def __init__(self, cluster: SlurmCluster, test_name: str) -> None:
        slug = re.sub(r"[^A-Za-z0-9]+", "-", test_name)[:24].strip("-")
        self.cluster = cluster
        self.prefix = f"sst-{slug}-{uuid.uuid4().hex[:6]}-"
        self.ids: list[int] = []

    def submit(self, *sbatch_args: str, name: str = "job", wrap: str | None = "sleep 60") -> int:
        """``sbatch --parsable`` one job and return its id.

        Args:
            *sbatch_args: Extra sbatch options, e.g. ``"--gres=gpu:a100:2"``.
            name: Suffix of the job name (the prefix is added).
            wrap: Command for ``--wrap``; None when ``sbatch_args`` name a script.
        """
        argv = ["sbatch", "--parsable", f"--job-name={self.prefix}{name}"]
        if not any(a == "-o" or a.startswith("--output") for a in sbatch_args):
            argv.append("--output=/dev/null")
        argv += list(sbatch_args)
        if wrap is not None:
            argv.append(f"--wrap={wrap}")
        out = self.cluster.run(*argv).stdout.strip()
        job_id = int(out.split(";")[0])
        self.ids.append(job_id)
        return job_id

    def state(self, job_id: int) -> str:
        """The job's state from squeue (``PENDING``, ``RUNNING``, ``COMPLETED`` ...), or ''."""
        return self.cluster.run("squeue", "-h", "--states=all", "-j", str(job_id), "-o", "%T",
                                check=False).stdout.strip()

    def wait_state(self, job_id: int, states: set[str] | frozenset[str], timeout: float = 30) -> str:
        """Poll squeue until the job is in one of ``states``; return that state.

        Raises:
            AssertionError: the job did not get there within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            state = self.state(job_id)
            if state in states:
                return state
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id} is {state or 'gone'} after {timeout}s, wanted {sorted(states)}")
            time.sleep(0.2)

    def cancel_all(self) -> None:
        """scancel every job this helper submitted."""
        if self.ids:
            self.cluster.run("scancel", *map(str, self.ids), check=False)


@pytest.fixture
def slurm_jobs(slurm_cluster: SlurmCluster, request: pytest.FixtureRequest):
    """A :class:`SlurmJobs` for this test; its jobs are cancelled when the test ends."""
    jobs = SlurmJobs(slurm_cluster, request.node.name)
    yield jobs
    jobs.cancel_all()


@pytest.fixture
def repository(tmp_path: Path):
    """A new SQLite repository at the current schema (closed after the test)."""
    repo = SqlJobRepository.from_url(f"sqlite:///{tmp_path / 'slurmsched.db'}", create=True)
    repo.upgrade()
    yield repo
    repo.close()


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


@pytest.fixture(autouse=True)
def _start_cluster_for_slurm_marker(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("slurm") is not None:
        request.getfixturevalue("slurm_cluster")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses the cluster ``slurm`` so ``-m 'not slurm'`` skips them."""
    for item in items:
        if "slurm_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slurm)
