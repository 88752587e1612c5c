"""The dev Slurm cluster for the benchmarks that need one: started with the project's own
``contrib/dev-cluster/up.sh`` and stopped again afterwards, unless it was already up.

A helper, not a benchmark: imported by ``bench/gateway.py`` and ``bench/live_replay.py``
(as ``bench.support.dev_cluster``: each puts the repository on ``sys.path``).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

DEV_CLUSTER = Path(__file__).resolve().parents[2] / "contrib" / "dev-cluster"
_EXPORT = re.compile(r"^export ([A-Za-z_][A-Za-z0-9_]*)=(.*)$")


def cluster_state(env: dict[str, str]) -> str:
    """``up``, ``down`` or ``absent``: the dev cluster instance ``env`` names (lib.sh's own checks)."""
    check = ('source "$1"; pid_of "$STATE/run/slurmctld.pid" slurmctld >/dev/null && echo up && exit; '
             '[[ -d $STATE ]] && echo down || echo absent')
    return subprocess.run(["bash", "-c", check, "-", str(DEV_CLUSTER / "lib.sh")], env=env, capture_output=True,
                          text=True, check=True).stdout.strip()


def start_cluster(env: dict[str, str]) -> tuple[dict[str, str], str]:
    """Run up.sh for the instance ``env`` names (``SLURMSCHED_DEV_STATE``/``_PORT``).

    Returns:
        ``env`` with the client variables up.sh prints, and the instance's state before
        (:func:`cluster_state`), for :func:`stop_cluster`.

    Raises:
        SystemExit: up.sh failed (its last 2,000 characters of stderr).
    """
    before = cluster_state(env)
    proc = subprocess.run(["bash", str(DEV_CLUSTER / "up.sh")], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=900, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"contrib/dev-cluster/up.sh failed:\n{proc.stderr[-2000:]}")
    exported = {m[1]: m[2] for line in proc.stdout.splitlines() if (m := _EXPORT.match(line.strip()))}
    return {**env, **exported}, before


def stop_cluster(env: dict[str, str], before: str) -> None:
    """Stop the cluster if this run started it (``--purge`` if this run also made its state)."""
    if before == "up":
        return
    purge = ["--purge"] if before == "absent" else []
    print(f"stopping the dev cluster this run started (contrib/dev-cluster/down.sh {' '.join(purge)})".rstrip(),
          flush=True)
    subprocess.run(["bash", str(DEV_CLUSTER / "down.sh"), *purge], env=env, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False, timeout=300)
