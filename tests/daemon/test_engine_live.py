"""Engine.run_cycle against the live dev cluster: real CliGateway, SqlJobRepository on SQLite.

A blocker job holds every node, so the test's GPU jobs stay pending (and visible to
``sprio``) while the engine ranks them, sets their SiteFactor and switch requests,
records what it did, plans nothing on an unchanged queue, honours dry-run and pause,
and undoes everything again.
"""

from __future__ import annotations

import time

import pytest
from live_engine import engine_for

from slurmsched.gateway.cli_backend import CliGateway
from slurmsched.model import SetSiteFactor, SetSwitches
from slurmsched.planner import revert_actions

pytestmark = pytest.mark.slurm


@pytest.fixture
def gateway(slurm_cluster) -> CliGateway:
    return CliGateway(slurm_conf=str(slurm_cluster.conf), env=slurm_cluster.env)



def site_factors(cluster, ids) -> dict[int, int]:
    out = cluster.run("sprio", "-h", "-o", "%i|%S").stdout
    factors = {int(i): int(s) for i, s in (line.strip().split("|") for line in out.splitlines() if "|" in line)}
    return {i: factors.get(i) for i in ids}


def job_field(cluster, job_id: int, key: str) -> str:
    text = cluster.run("scontrol", "show", "job", str(job_id)).stdout
    for token in text.split():
        if token.startswith(key + "="):
            return token.split("=", 1)[1]
    return ""


@pytest.fixture
def queue(slurm_cluster, slurm_jobs, gateway):
    """A finished job in accounting, a blocker on every node and five pending jobs (by service)."""
    done = slurm_jobs.submit("-t", "5", name="done", wrap="true")
    slurm_jobs.wait_state(done, {"COMPLETED"})
    deadline = time.monotonic() + 30
    # sacct --json with a state filter lists a job a few seconds after plain sacct does.
    while done not in {j.job_id for j in gateway.finished_since(time.time() - 3600)}:
        assert time.monotonic() < deadline, "finished job never reached accounting"
        time.sleep(0.5)
    blocker = slurm_jobs.submit("-N", "4", "--exclusive", "-t", "30", name="blocker", wrap="sleep 600")
    slurm_jobs.wait_state(blocker, {"RUNNING"})
    jobs = {
        "tiny": slurm_jobs.submit("-t", "10", "--gres=gpu:1", name="tiny"),            # 0.17 GPU-h
        "mid": slurm_jobs.submit("-t", "60", "--gres=gpu:2", name="mid"),              # 2 GPU-h
        "wide": slurm_jobs.submit("-N", "2", "-t", "30", "--gres=gpu:4", name="wide"),  # 4 GPU-h, 2 nodes
        "big": slurm_jobs.submit("-t", "120", "--gres=gpu:a100:4", name="big"),        # 8 GPU-h
        "huge": slurm_jobs.submit("-t", "600", "--gres=gpu:a100:8", name="huge"),      # 80 GPU-h
    }
    for job_id in jobs.values():
        slurm_jobs.wait_state(job_id, {"PENDING"})
    return {"done": done, **jobs}


def revert(gateway, repository) -> None:
    outcomes = gateway.apply(revert_actions(repository.applied_changes()))
    assert all(o.ok for o in outcomes), [o.message for o in outcomes if not o.ok]
    for outcome in outcomes:
        repository.forget_applied(outcome.action.job_id, type(outcome.action).__name__)


def test_engine_sets_site_factor_by_predicted_service_and_then_plans_nothing(
        slurm_cluster, gateway, repository, queue) -> None:
    engine = engine_for(gateway, repository)
    ours = [queue[k] for k in ("tiny", "mid", "wide", "big", "huge")]
    limits = {j: job_field(slurm_cluster, j, "TimeLimit") for j in ours}
    try:
        first = engine.run_cycle(time.time())
        assert first.finished >= 1 and queue["done"] in {j.job_id for j in repository.history()}
        assert all(o.ok for o in first.outcomes), [o.message for o in first.outcomes if not o.ok]
        planned = {a.job_id: a.value for a in first.plan.actions if isinstance(a, SetSiteFactor)}
        planned |= {a.job_id: a.value for a in first.plan.adopted}
        factors = site_factors(slurm_cluster, ours)
        assert factors == {j: planned[j] for j in ours}
        values = [factors[j] for j in ours]
        assert values == sorted(values, reverse=True) and values[0] > values[-1]
        # The multi-node GPU job got a leaf-switch request; nothing touched time limits.
        assert [a.job_id for a in first.plan.actions if isinstance(a, SetSwitches)] == [queue["wide"]]
        assert job_field(slurm_cluster, queue["wide"], "Switches") == "1@00:10:00"
        assert {j: job_field(slurm_cluster, j, "TimeLimit") for j in ours} == limits
        # explain's raw material: prediction, rank decision and the action, all recorded.
        kinds = [(d.kind, d.outcome) for _, d in repository.decisions_for(queue["tiny"])]
        assert ("rank", "ranked") in kinds and ("SetSiteFactor", "ok") in kinds
        assert repository.latest_prediction(queue["tiny"]).estimate_s == 600
        # Nothing changed: no action, no RPC.
        second = engine.run_cycle(time.time())
        assert second.plan.actions == () and second.plan.rpcs == 0 and second.outcomes == ()
        assert {c.job_id for c in repository.applied_changes()} >= set(ours)
    finally:
        revert(gateway, repository)
    assert site_factors(slurm_cluster, ours) == {j: 0 for j in ours}
    assert job_field(slurm_cluster, queue["wide"], "Switches") in ("", "0")  # shown only when set


def test_dry_run_and_pause_send_nothing(slurm_cluster, gateway, repository, queue) -> None:
    ours = [queue[k] for k in ("tiny", "mid", "big", "huge")]
    before = site_factors(slurm_cluster, ours)
    dry = engine_for(gateway, repository, dry_run=True)
    report = dry.run_cycle(time.time())
    assert report.plan.actions and report.outcomes == () and report.dry_run
    assert site_factors(slurm_cluster, ours) == before
    assert ("SetSiteFactor", "dry-run") in [(d.kind, d.outcome) for d in report.decisions]
    assert not [d for d in dry.run_cycle(time.time()).decisions if d.outcome == "dry-run"]  # recorded once
    repository.set_paused(True)
    try:
        paused = engine_for(gateway, repository).run_cycle(time.time())
        assert paused.paused and paused.plan.actions and paused.outcomes == ()
        assert site_factors(slurm_cluster, ours) == before
    finally:
        repository.set_paused(False)


def test_fifo_after_qssf_restores_original_values(slurm_cluster, gateway, repository, queue) -> None:
    ours = [queue[k] for k in ("tiny", "mid", "big", "huge")]
    try:
        engine_for(gateway, repository).run_cycle(time.time())
        assert any(v for v in site_factors(slurm_cluster, ours).values())
        fifo = engine_for(gateway, repository, policy="fifo")
        report = fifo.run_cycle(time.time())
        assert all(isinstance(a, SetSiteFactor) and a.value == 0 for a in report.plan.actions)
        assert site_factors(slurm_cluster, ours) == {j: 0 for j in ours}
        assert [c for c in repository.applied_changes() if c.kind == "SetSiteFactor"] == []
        assert fifo.run_cycle(time.time()).plan.actions == ()
    finally:
        revert(gateway, repository)
