"""Options have SLURMSCHED_* environment twins."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

@pytest.mark.slurm
def test_run_and_status_options_from_the_environment(daemon_env):
    env = {**os.environ, "SLURMSCHED_RUN_ONCE": "1", "SLURMSCHED_DAEMON_DRY_RUN": "true",
           "SLURMSCHED_POLICY_NAME": "fifo", "SLURMSCHED_CONFIG": str(daemon_env.path)}
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-m", "slurmsched", "run"], env=env, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
    with daemon_env.repo() as repo:
        cycles = repo.recent_cycles()
    assert len(cycles) == 2 and all(c.kind == "dry-run" for c in cycles)
    status = subprocess.run([sys.executable, "-m", "slurmsched", "status"], capture_output=True, text=True,
                            env={**env, "SLURMSCHED_STATUS_CYCLES": "1"}, timeout=60)
    assert status.returncode == 0, status.stderr
    assert "policy fifo" in status.stdout
    assert len(re.findall(r"^ +\d+ \d{4}-", status.stdout, re.M)) == 1
    assert "dry-run" in status.stdout


def test_help_names_the_twins():
    out = subprocess.run([sys.executable, "-m", "slurmsched", "run", "--help"], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "COLUMNS": "200"}).stdout
    for twin in ("SLURMSCHED_DAEMON_INTERVAL_S", "SLURMSCHED_RUN_ONCE", "SLURMSCHED_DAEMON_DRY_RUN",
                 "SLURMSCHED_POLICY_NAME", "SLURMSCHED_DAEMON_PREDICTOR"):
        assert twin in out
