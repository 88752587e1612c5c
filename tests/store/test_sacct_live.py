"""Ingest from the live cluster's accounting: one row per job attempt, compared with ``sacct -D``."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections import Counter
from typing import Iterator

import pytest
from polling import wait_until

from slurmsched.gateway.cli_backend import CliGateway
from slurmsched.store.ingest import ACCOUNTING_LAG_S, SACCT_CURSOR, import_accounting, read_accounting
from slurmsched.store.repository import SqlJobRepository

pytestmark = pytest.mark.slurm


def _wait(what: str, predicate, timeout: float = 90.0):
    return wait_until(what, predicate, timeout, interval=0.5)


def sacct_attempts(cluster, job_ids: list[int]) -> list[tuple[int, float, str]]:
    """``sacct -D -X``: every attempt of the jobs as (job id, submit time, state)."""
    proc = subprocess.run(["sacct", "-D", "-X", "-n", "-P", "-a", "-o", "JobID,Submit,State",
                           "-S", "now-1days", "-j", ",".join(map(str, job_ids))],
                          env={**cluster.env, "SLURM_TIME_FORMAT": "%s"}, capture_output=True, text=True,
                          check=True, timeout=60)
    rows = [line.split("|") for line in proc.stdout.splitlines() if line.strip()]
    return sorted((int(r[0]), float(r[1]), r[2].split()[0]) for r in rows)


@pytest.fixture(scope="module")
def finished_jobs(slurm_cluster) -> Iterator[tuple[float, list[int]]]:
    """Two finished jobs, one of them requeued once while running; (since, job ids)."""
    since = time.time() - 2
    prefix = f"sst-store-{uuid.uuid4().hex[:6]}-"

    def submit(name: str, wrap: str, *extra: str) -> int:
        out = slurm_cluster.run("sbatch", "--parsable", f"--job-name={prefix}{name}", "--output=/dev/null",
                                "--partition=short", *extra, f"--wrap={wrap}").stdout
        return int(out.strip().split(";")[0])

    def state(job_id: int) -> str:
        return slurm_cluster.run("squeue", "-h", "--states=all", "-j", str(job_id), "-o", "%T",
                                 check=False).stdout.strip()

    # Runs until requeued (however slow the test is to get there), then finishes at once.
    requeued = submit("requeued", 'if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then sleep 1; else sleep 120; fi',
                      "--requeue")
    plain = submit("plain", "sleep 1")
    try:
        _wait("the job to run", lambda: state(requeued) == "RUNNING")
        slurm_cluster.run("scontrol", "requeue", str(requeued))
        _wait("the requeue", lambda: state(requeued) == "PENDING")
        # slurmd refuses a launch whose credential was made in the same second as the
        # requeue revoked the last one ("Job credential revoked": the job fails at once;
        # seen in CI when the requeue came 0.1 s after the start): let that second pass.
        time.sleep(2)
        # A requeued job waits out a begin-time delay; let it start again now.
        slurm_cluster.run("scontrol", "update", f"JobId={requeued}", "StartTime=now")
        _wait("both jobs to finish", lambda: state(requeued) == "COMPLETED" and state(plain) == "COMPLETED")
        # slurmdbd records a finished job a few seconds late, and sacct's state-and-time-window
        # query (what finished_since runs) shows it a few seconds after 'sacct -j' does.
        _wait("accounting to show both attempts",
              lambda: [s for j, _, s in sacct_attempts(slurm_cluster, [requeued, plain])] ==
              ["REQUEUED", "COMPLETED", "COMPLETED"] or None)
        gateway = CliGateway(slurm_conf=str(slurm_cluster.conf), env=slurm_cluster.env)
        _wait("finished_since to list all three attempts",
              lambda: sum(r.job_id in (requeued, plain) for r in gateway.finished_since(since)) == 3)
        yield since, [requeued, plain]
    finally:
        slurm_cluster.run("scancel", str(requeued), str(plain), check=False)


def test_repeated_window_and_requeue_leave_one_row_per_attempt(slurm_cluster, finished_jobs, repo) -> None:
    since, ids = finished_jobs
    gateway = CliGateway(slurm_conf=str(slurm_cluster.conf), env=slurm_cluster.env)
    expected = sacct_attempts(slurm_cluster, ids)
    assert Counter(j for j, _, _ in expected) == {ids[0]: 2, ids[1]: 1}

    for _ in range(2):  # the same window twice
        repo.ingest_finished(gateway.finished_since(since))
    report = import_accounting(repo, read_accounting(gateway, since), window_s=3600)  # and once more as a backfill
    assert report.rows >= 3

    stored = sorted((j.job_id, j.submit_time, j.state.value) for j in repo.history() if j.job_id in ids)
    assert stored == expected
    # The cursor stays a little behind the read, for records slurmdbd writes late.
    assert time.time() - ACCOUNTING_LAG_S - 120 < repo.get_cursor(SACCT_CURSOR) <= time.time() - ACCOUNTING_LAG_S


def test_backfill_from_the_command_line(slurm_cluster, finished_jobs, db_url, cli) -> None:
    since, ids = finished_jobs
    env = {"SLURM_CONF": str(slurm_cluster.conf), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for _ in range(2):
        proc = cli("history", "import", "--from-sacct", "--since", "1h", "--db", db_url, "--json", env=env)
        assert proc.returncode == 0, proc.stderr
    repo = SqlJobRepository.from_url(db_url)
    try:
        stored = sorted((j.job_id, j.submit_time, j.state.value) for j in repo.history() if j.job_id in ids)
        assert stored == sacct_attempts(slurm_cluster, ids)
        assert repo.get_cursor(SACCT_CURSOR) is not None
    finally:
        repo.close()
