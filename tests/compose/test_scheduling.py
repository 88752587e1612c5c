"""The daemon container steering the Slurm 24.11 compose cluster: SiteFactor, start order, explain, revert, status,
heterogeneous jobs.

The workload waits behind a blocker on gpu01 (every job ``--exclusive -w gpu01``, so they
start one at a time, in priority order, once the blocker goes). Without slurmsched they
would start in submission order; it is submitted largest expected service first.
"""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.compose

# (name, GPUs, time limit in minutes). Expected service = predicted duration x GPUs: from the
# user's recent runs or the limit, tiny's is far below big's. Submitted largest first. The
# compose daemon's SiteFactor levels start at 0.36 GPU-seconds (docker-compose.yml), so
# these short jobs fall in different levels.
WORKLOAD = (("big", 8, 59), ("mid", 4, 29), ("small", 2, 14), ("tiny", 1, 4))   # limits no other test uses


def _blocked_workload(compose, jobs) -> tuple[int, dict[str, int]]:
    blocker = jobs.submit("-w", "gpu01", "--exclusive", "--gres=gpu:a100:8", "-t", "10", name="blocker",
                          wrap="sleep 600")
    compose.wait("the blocker to run", lambda: jobs.states().get(blocker) == "RUNNING", timeout=60)
    ids = {name: jobs.submit("-w", "gpu01", "--exclusive", f"--gres=gpu:a100:{gpus}", "-t", str(minutes),
                             name=name, wrap="sleep 2")
           for name, gpus, minutes in WORKLOAD}
    return blocker, ids


def _wait_decided(compose, ids: dict[str, int]) -> dict[int, int]:
    """Wait until the daemon has a record (explain answers) for every job; then sprio's SiteFactors."""
    def decided():
        return all(compose.slurmsched("explain", str(i), check=False).returncode == 0 for i in ids.values())

    compose.wait("the daemon to rank the workload", decided, timeout=3 * compose.interval_s + 60)
    # the cycle that recorded the decisions applied them before recording: sprio shows them now
    factors = compose.site_factors()
    missing = set(ids.values()) - set(factors)
    assert not missing, (missing, compose.slurm("squeue", "-h", "-o", "%A|%i|%T|%R").stdout)
    return factors


def test_site_factors_order_start_and_explain(compose, compose_jobs):
    blocker, ids = _blocked_workload(compose, compose_jobs)
    factors = _wait_decided(compose, ids)
    by_name = {name: factors[job] for name, job in ids.items()}
    # QSSF: the smaller the expected service, the larger the SiteFactor
    assert by_name["tiny"] > by_name["big"], by_name
    # sprio's SITE column is part of each job's priority
    sprio = compose.slurm("sprio", "-h", "-o", "%i|%S|%Y").stdout
    rows = {int(i): (int(s), int(p)) for i, s, p in (l.split("|") for l in sprio.split())}
    assert all(rows[j][0] == by_name[n] for n, j in ids.items())

    explained = compose.slurmsched("explain", str(ids["tiny"])).stdout
    assert f"job {ids['tiny']}" in explained and "prediction:" in explained
    assert "SetSiteFactor" in explained and str(by_name["tiny"]) in explained
    # and the daemon's own scores (its records) order the SiteFactors: less service, more factor
    recorded = compose.records(0, tuple(ids.values()))["scores"]
    scores = {name: recorded[str(job)] for name, job in ids.items()}
    for a in ids:
        for b in ids:
            if scores[a] < scores[b]:
                assert by_name[a] >= by_name[b], (scores, by_name)

    # release the node: the jobs start one at a time, in the order of their SiteFactors
    expected = [job for _, job in sorted(ids.items(), key=lambda kv: (-by_name[kv[0]], kv[1]))]
    compose.slurm("scancel", str(blocker))
    compose.wait("the workload to finish",
                 lambda: all(compose_jobs.states().get(j) == "COMPLETED" for j in ids.values()), timeout=120)
    out = compose.slurm("squeue", "-h", "--states=all", "-j", ",".join(map(str, ids.values())),
                        "-o", "%A|%S").stdout
    starts = {int(i): s for i, s in (line.split("|") for line in out.split())}
    started = sorted(ids.values(), key=lambda j: (starts[j], j))
    assert started == expected, {"started": started, "by SiteFactor": expected, "factors": by_name}
    assert started.index(ids["tiny"]) < started.index(ids["big"])   # not submission order


def test_revert_restores_site_factors_and_pauses(compose, compose_jobs):
    _, ids = _blocked_workload(compose, compose_jobs)
    before = _wait_decided(compose, ids)
    assert any(before[j] != 0 for j in ids.values())
    out = compose.slurmsched("revert").stdout
    assert re.search(r"reverted \d+ changes? on \d+ jobs?", out), out
    after = compose.site_factors()
    assert {j: after.get(j) for j in ids.values()} == {j: 0 for j in ids.values()}
    assert "PAUSED" in compose.slurmsched("status").stdout
    # paused: a further cycle leaves the jobs alone
    cycles = compose.records(0)["cycles"]
    compose.wait("a cycle while paused", lambda: compose.records(0)["cycles"][0][0] > cycles[0][0],
                 timeout=2 * compose.interval_s + 30)
    assert {j: compose.site_factors().get(j) for j in ids.values()} == {j: 0 for j in ids.values()}
    compose.slurmsched("resume")
    compose.wait("SiteFactors back after resume",
                 lambda: any(compose.site_factors().get(j) for j in ids.values()),
                 timeout=2 * compose.interval_s + 30)


def test_status_reports_cycles_and_actions(compose, compose_jobs):
    _, ids = _blocked_workload(compose, compose_jobs)
    _wait_decided(compose, ids)
    out = compose.slurmsched("status").stdout
    assert "state: active" in out and re.search(r"^last cycle \d+ at ", out, re.M), out
    table = re.findall(r"^\s*(\d+) \S+ \S+\s+[\d.]+s\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(live|dry-run)$", out, re.M)
    assert table, out
    assert sum(int(row[3]) for row in table) >= 1, out      # actions taken in recent cycles
    changes = re.search(r"^changes in force: (.*) on (\d+) jobs$", out, re.M)
    assert changes and "SetSiteFactor" in changes.group(1) and int(changes.group(2)) >= 1, out


def test_a_heterogeneous_jobs_components_share_one_site_factor(compose, compose_jobs):
    """24.11's ``squeue --json`` wraps ``het_job_id``/``het_job_offset``; the daemon scores the job as one."""
    # components take nodes of their own: the blocker holds every node
    blocker = compose_jobs.submit("-N", "4", "--exclusive", "-t", "10", name="blocker", wrap="sleep 600")
    compose.wait("the blocker to run", lambda: compose_jobs.states().get(blocker) == "RUNNING", timeout=60)
    leader = compose_jobs.submit("--gres=gpu:1", "-t", "6", ":", "--gres=gpu:2", "-t", "6", name="het", wrap="sleep 2")
    rows = compose.slurm("squeue", "-h", "-j", str(leader), "-o", "%i|%A").stdout.split()
    ids = {shown: int(job) for shown, job in (row.split("|") for row in rows)}
    assert set(ids) == {f"{leader}+0", f"{leader}+1"}, rows
    factors = _wait_decided(compose, ids)
    assert factors[ids[f"{leader}+0"]] == factors[ids[f"{leader}+1"]] > 0, factors
    explained = compose.slurmsched("explain", str(ids[f"{leader}+1"])).stdout
    assert f"heterogeneous job {leader} (2 components, scored as one)" in explained, explained
