"""Fixtures of the compose tests: the Slurm 24.11 compose cluster with the daemon in its own container.

``compose`` runs ``contrib/compose/up.sh`` once per session (idempotent: builds what is
missing, starts what is stopped, returns once every health check passes), so
``pytest -m compose`` works on its own. Everything is driven from outside through
``<engine> exec``: Slurm commands in the controller container, ``slurmsched`` in the
daemon container. The test modules mark themselves ``compose``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from polling import wait_until

REPO = Path(__file__).resolve().parents[2]
UP_SH = REPO / "contrib" / "compose" / "up.sh"
CONTROLLER = "slurmsched-slurmctld"
DAEMON = "slurmsched-daemon"

#: Python run inside the daemon container: the daemon's own records through its repository API.
_RECORDS = """
import json, sys
from slurmsched.config import load_config
from slurmsched.store.repository import open_repository
repo = open_repository(load_config())
since = float(sys.argv[1])
ranks = {job: [d.score for _, d in repo.decisions_for(job) if d.kind == "rank"] for job in map(int, sys.argv[2:])}
print(json.dumps({
    "cycles": [[c.cycle_id, c.started_at, c.duration_s, c.actions, c.failed] for c in repo.recent_cycles(50)],
    "history": [[j.job_id, j.submit_time, j.name, j.state.value] for j in repo.history(since=since)],
    "scores": {job: scores[-1] if scores else None for job, scores in ranks.items()},
}))
"""


def _engine() -> str:
    """docker where a Docker engine answers, else podman (the same choice as up.sh)."""
    forced = os.environ.get("SLURMSCHED_ENGINE")
    if forced:
        return forced
    if shutil.which("docker") and subprocess.run(["docker", "info"], capture_output=True).returncode == 0:
        return "docker"
    return "podman"


@dataclass
class ComposeCluster:
    """The running compose cluster, reached through ``<engine> exec``.

    Attributes:
        engine: ``docker`` or ``podman``.
        interval_s: the daemon's cycle interval inside its container.
        env: environment for the engine (podman: ``CONTAINERS_CONF`` of contrib/compose).
        controller, daemon: names of the slurmctld and slurmsched containers.
    """

    engine: str
    interval_s: float
    env: dict[str, str] = field(repr=False)
    controller: str = CONTROLLER
    daemon: str = DAEMON

    def exec(self, container: str, *argv: str, check: bool = True,
             timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` (no shell) inside ``container``.

        Raises:
            subprocess.CalledProcessError: with ``check`` and a non-zero exit.
        """
        return subprocess.run([self.engine, "exec", container, *argv], env=self.env, capture_output=True,
                              text=True, check=check, timeout=timeout)

    def slurm(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """A Slurm command in the controller container."""
        return self.exec(CONTROLLER, *argv, check=check)

    def slurmsched(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``slurmsched ARGV`` in the daemon container (its config comes from the container's env)."""
        return self.exec(DAEMON, "slurmsched", *argv, check=check)

    def engine_cmd(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """``<engine> ARGV`` on this machine (stop/start/inspect containers)."""
        return subprocess.run([self.engine, *argv], env=self.env, capture_output=True, text=True, check=True,
                              timeout=180)

    def site_factors(self) -> dict[int, int]:
        """Job id -> SiteFactor of every pending job, from ``sprio`` in the controller."""
        out = self.slurm("sprio", "-h", "-o", "%i|%S").stdout
        return {int(a): int(b) for a, b in (line.strip().split("|") for line in out.splitlines() if line.strip())}

    def records(self, since: float, jobs: tuple[int, ...] = ()) -> dict:
        """The daemon's own records, read through its repository inside its container.

        Returns:
            ``cycles``: [id, started_at, duration_s, actions, failed], newest first;
            ``history``: [job id, submit time, name, state] of attempts ended since ``since``;
            ``scores``: job id (as text) -> the policy score of its latest ranking, for ``jobs``.
        """
        return json.loads(self.exec(DAEMON, "python3", "-c", _RECORDS, str(since), *map(str, jobs)).stdout)

    def wait(self, what: str, predicate, timeout: float):
        """Poll ``predicate()`` every second until it returns something truthy; return that.

        Raises:
            AssertionError: naming ``what`` after ``timeout`` seconds, with the cluster's
                state (:meth:`diagnostics`).
        """
        try:
            return wait_until(what, predicate, timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.diagnostics()}") from None

    def diagnostics(self) -> str:
        """What a person debugging a stuck test looks at first: the nodes' states and
        reasons (``sinfo``), the queue with reasons (``squeue``), and the end of the
        slurmctld and slurmd logs (without the noise: reverse lookups of client addresses,
        one line per recovered job)."""
        parts = [("sinfo", CONTROLLER, ["sinfo", "-N", "-o", "%N %T %E"]),
                 ("squeue", CONTROLLER, ["squeue", "--states=all", "-o", "%i %j %T %r %N"])]
        parts += [(f"{name} log", container, ["tail", "-n", "400", log]) for name, container, log in (
            ("slurmctld", CONTROLLER, "/var/log/slurm/slurmctld.log"),
            ("gpu01 slurmd", "slurmsched-gpu01", "/var/log/slurm/slurmd.log"))]
        out = []
        for title, container, argv in parts:
            try:
                proc = self.exec(container, *argv, check=False, timeout=30)
                lines = [line for line in (proc.stdout + proc.stderr).splitlines()
                         if "auth_p_get_host" not in line and "Recovered JobId" not in line]
            except (OSError, subprocess.SubprocessError) as exc:
                lines = [f"cannot run {argv[0]}: {exc}"]
            out.append(f"--- {title} ---\n" + "\n".join(lines[-40:]))
        return "\n".join(out)


def _bring_up() -> ComposeCluster:
    engine = _engine()
    env = dict(os.environ)
    if engine == "podman":
        env["CONTAINERS_CONF"] = str(REPO / "contrib" / "compose" / "containers.conf")
    proc = subprocess.run(["bash", str(UP_SH)], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=1800, env=env)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-30:])
        raise RuntimeError(f"contrib/compose/up.sh failed (exit {proc.returncode}):\n{tail}")
    inspect = subprocess.run([engine, "container", "inspect", "-f", "{{json .Config.Env}}", DAEMON], env=env,
                             capture_output=True, text=True, check=True)
    daemon_env = dict(item.split("=", 1) for item in json.loads(inspect.stdout))
    return ComposeCluster(engine=engine, interval_s=float(daemon_env.get("SLURMSCHED_DAEMON_INTERVAL_S", 60)),
                          env=env)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``restarts_controller`` run last: whatever a controller restart leaves
    behind (on one CI machine, gpu01 ran no job afterwards) then shows in that test, not as
    failures of the tests after it."""
    items.sort(key=lambda item: item.get_closest_marker("restarts_controller") is not None)


@pytest.fixture(scope="session")
def compose() -> ComposeCluster:
    """The compose cluster, brought up (or found up) once per session and left running."""
    try:
        return _bring_up()
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        pytest.fail(f"cannot bring up the compose cluster: {exc}", pytrace=False)


class ComposeJobs:
    """Submits jobs in the controller under a name prefix unique to the test; cancels them at teardown."""

    def __init__(self, cluster: ComposeCluster, test_name: str) -> None:
        slug = re.sub(r"[^A-Za-z0-9]+", "-", test_name)[:20].strip("-")
        self.cluster = cluster
        self.prefix = f"cmp-{slug}-{uuid.uuid4().hex[:6]}-"
        self.ids: list[int] = []

    def submit(self, *sbatch_args: str, name: str = "job", wrap: str = "sleep 60") -> int:
        """``sbatch --parsable`` one job (output to /dev/null) and return its id."""
        out = self.cluster.slurm("sbatch", "--parsable", f"--job-name={self.prefix}{name}", "--output=/dev/null",
                                 *sbatch_args, f"--wrap={wrap}").stdout.strip()
        job_id = int(out.split(";")[0])
        self.ids.append(job_id)
        return job_id

    def states(self) -> dict[int, str]:
        """Job id -> state (squeue ``%T``) of this test's jobs still known to the controller."""
        if not self.ids:
            return {}
        out = self.cluster.slurm("squeue", "-h", "--states=all", "-j", ",".join(map(str, self.ids)),
                                 "-o", "%A|%T", check=False).stdout
        rows = (line.split("|") for line in out.splitlines() if line.strip())
        return {int(i): s for i, s in rows}

    def cancel_all(self) -> None:
        """scancel every job this helper submitted."""
        if self.ids:
            self.cluster.slurm("scancel", *map(str, self.ids), check=False)


@pytest.fixture
def compose_jobs(compose: ComposeCluster, request: pytest.FixtureRequest):
    """A :class:`ComposeJobs` for this test; the daemon is active (resumed) before and after it."""
    compose.slurmsched("resume")
    jobs = ComposeJobs(compose, request.node.name)
    yield jobs
    jobs.cancel_all()
    compose.slurmsched("resume", check=False)

