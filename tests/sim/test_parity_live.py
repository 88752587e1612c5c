"""Sim/live parity on the dev cluster: one recorded snapshot, the live engine and the simulated one.

A blocker job on every node keeps the test's GPU jobs pending. The live engine runs one
cycle through a :class:`RecordingGateway` around the real ``CliGateway``; the simulated
engine runs the same cycle on :meth:`SimulatedSlurm.from_snapshot` of the recorded
snapshot and accounting. Both plan the same actions; applied, they leave the same
SiteFactor values in ``sprio`` and in the simulated queue.
"""

from __future__ import annotations

import time

import pytest

from slurmsched.config import Config
from slurmsched.engine import Engine
from slurmsched.gateway.cli_backend import CliGateway
from slurmsched.planner import Planner
from slurmsched.policy import make_policy
from slurmsched.predict.registry import make_predictor
from slurmsched.sim.clock import SimClock
from slurmsched.sim.recording import RecordingGateway
from slurmsched.sim.slurm import SimulatedSlurm
from slurmsched.store.memory import MemoryJobRepository

pytestmark = pytest.mark.slurm


def engine(gateway) -> Engine:
    return Engine(gateway, MemoryJobRepository(), make_predictor("helios"), make_policy("qssf"), Planner(Config()))


def sprio(cluster, ids: list[int]) -> dict[int, int | None]:
    out = cluster.run("sprio", "-h", "-o", "%i|%S").stdout
    factors = {int(a): int(b) for a, b in (line.strip().split("|") for line in out.splitlines() if "|" in line)}
    return {i: factors.get(i) for i in ids}


def test_live_and_simulated_engines_plan_and_apply_the_same_actions(slurm_cluster, slurm_jobs) -> None:
    done = slurm_jobs.submit("-t", "5", "--gres=gpu:1", name="done", wrap="true")
    slurm_jobs.wait_state(done, {"COMPLETED"})
    blocker = slurm_jobs.submit("-N", "4", "--exclusive", "-t", "30", name="blocker", wrap="sleep 600")
    slurm_jobs.wait_state(blocker, {"RUNNING"})
    mine = [slurm_jobs.submit("-t", limit, f"--gres=gpu:{gres}", name=name)
            for name, limit, gres in (("short", "10", "1"), ("mid", "60", "2"), ("typed", "120", "a100:4"),
                                      ("long", "600", "a100:8"))]
    for job_id in mine:
        slurm_jobs.wait_state(job_id, {"PENDING"})
    deadline = time.monotonic() + 30
    recording = RecordingGateway(CliGateway(slurm_conf=str(slurm_cluster.conf), env=slurm_cluster.env))
    while not any(j.job_id == done for j in recording.finished_since(time.time() - 3600)):
        assert time.monotonic() < deadline, "the finished job never reached accounting"
        time.sleep(0.5)

    now = time.time()
    live = engine(recording).run_cycle(now)
    snapshot = recording.snapshots[-1]
    simulated = SimulatedSlurm.from_snapshot(snapshot, SimClock(snapshot.taken_at), finished=recording.history())
    sim = engine(simulated).run_cycle(now)

    known = {j.job_id for j in simulated.snapshot().jobs}
    assert {a.job_id for a in live.plan.actions if a.job_id in mine} == set(mine)
    assert [a for a in live.plan.actions if a.job_id in known] == list(sim.plan.actions)
    assert all(o.ok for o in live.outcomes if o.action.job_id in mine)
    assert all(o.ok for o in sim.outcomes)
    simulated_factors = {j.job_id: j.site_factor for j in simulated.snapshot().pending if j.job_id in mine}
    assert sprio(slurm_cluster, mine) == simulated_factors
