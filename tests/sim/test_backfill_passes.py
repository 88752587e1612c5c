"""The simulated scheduler's passes on tiny hand-made traces: a pass that reuses the
last one's verdicts starts exactly the jobs a full pass would."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from slurmsched.config import Config
from slurmsched.model import JobRecord, JobState
from slurmsched.sim.cluster import ClusterSpec
from slurmsched.sim.policies import SIM_POLICIES, scheduler_config
from slurmsched.sim.runner import SimSettings, simulate
from slurmsched.sim.sizing import SizeRequest, size_cluster
from slurmsched.sim.slurm import SimulatedSlurm
from slurmsched.sim.workload import Workload, load_trace, workload_from_records

T0 = 1577836800.0


def starts(workload: Workload, spec: ClusterSpec, policy: str, *, full: bool, depth: int = 500,
           monkeypatch: pytest.MonkeyPatch) -> dict[int, float]:
    """Each job's start, from the first submit, with every pass full or as the simulator runs them."""
    schedule = SimulatedSlurm.schedule

    def full_pass(self: SimulatedSlurm) -> list:
        self._last_pass = None
        self._kept.clear()
        return schedule(self)

    with monkeypatch.context() as patch:
        if full:
            patch.setattr(SimulatedSlurm, "schedule", full_pass)
        result = simulate(workload.jobs, spec, scheduler_config(SIM_POLICIES[policy], Config()), None,
                          SimSettings(bf_max_job_test=depth))
    first = min(j.record.submit_time for j in workload.jobs)
    return {o.job_id: o.start - first for o in result.outcomes}


def from_file(path: Path, fmt: str) -> tuple[Workload, ClusterSpec]:
    workload = load_trace(path, fmt)
    spec, _ = size_cluster(workload, SizeRequest(target_load=0.83, default_gpus_per_node=8), path=path, fmt=fmt)
    return workload, spec


def test_a_new_job_ahead_of_its_own_pools_head_is_tested_as_a_full_pass_would(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Job 7 arrives ahead of pool B's head (job 6: larger jobs come first under
    # multifactor) but behind pool A's; it fits now, so it starts, and job 6 after it.
    trace = tmp_path / "g.csv"
    trace.write_text("# per-VC pool sizes (nodes, 8 GPU/node): A=3, B=4\n"
                     "job_id,user,tenant,submit_time,num_chips,num_nodes,duration_s,final_status\n"
                     "1,u1,A,0,24,3,10000,COMPLETED\n2,u2,B,0,3,1,100,COMPLETED\n"
                     "3,u3,B,1000000,11,2,10000,COMPLETED\n4,u4,B,2000000,8,1,10000,COMPLETED\n"
                     "5,u5,A,3000000,24,3,100,COMPLETED\n6,u6,B,4000000,8,1,100,COMPLETED\n"
                     "7,u7,B,5000000,10,2,1000,COMPLETED\n")
    workload, spec = from_file(trace, "helios")
    reused = starts(workload, spec, "multifactor", full=False, monkeypatch=monkeypatch)
    assert (reused[7], reused[6]) == (5.0, 1005.0)
    assert reused == starts(workload, spec, "multifactor", full=True, monkeypatch=monkeypatch)


def test_the_depth_limit_counts_only_jobs_of_pools_with_free_gpus(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 600 jobs wait for pool A's one node; pool B's node is free when job 603 arrives:
    # a full pass skips pool A's jobs without counting them and tests job 603.
    trace = tmp_path / "o.csv"
    rows = ["1,u,A,0,8,1,10000,COMPLETED", "2,u,B,0,8,1,1000,COMPLETED"]
    rows += [f"{i},u,A,{(i - 2) * 1000000},8,1,10,COMPLETED" for i in range(3, 603)]
    trace.write_text("# per-VC pool sizes (nodes, 8 GPU/node): A=1, B=1\n"
                     "job_id,user,tenant,submit_time,num_chips,num_nodes,duration_s,final_status\n"
                     + "\n".join(rows + ["603,u,B,2000000000,8,1,10,COMPLETED"]) + "\n")
    workload, spec = from_file(trace, "helios")
    reused = starts(workload, spec, "fifo", full=False, monkeypatch=monkeypatch)
    assert reused[603] == 2000.0
    assert reused == starts(workload, spec, "fifo", full=True, monkeypatch=monkeypatch)


def test_a_reservation_whose_time_passed_is_made_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Job 1 runs past its 100 s limit; job 2 (the whole machine) was reserved for t=100.
    # At t=300 job 3 fits beside job 1 and ends at once: it must not wait for job 2.
    trace = tmp_path / "p.swf"
    trace.write_text("; MaxProcs: 6\n; MaxNodes: 3\n"
                     "1 0 -1 1000 2 -1 -1 2 100 -1 1 1 1 1 -1 -1 -1 -1\n"
                     "2 200 -1 10 6 -1 -1 6 10 -1 1 2 1 2 -1 -1 -1 -1\n"
                     "3 300 -1 0 4 -1 -1 4 -1 -1 1 3 1 3 -1 -1 -1 -1\n")
    workload, spec = from_file(trace, "swf")
    reused = starts(workload, spec, "fifo", full=False, monkeypatch=monkeypatch)
    assert reused == {1: 0.0, 2: 1000.0, 3: 300.0}
    assert reused == starts(workload, spec, "fifo", full=True, monkeypatch=monkeypatch)


def _random_workload(rng: random.Random, pools: dict[str, tuple[int, int]]) -> Workload:
    records, t = [], T0
    for i in range(1, rng.randint(5, 40) + 1):
        t += rng.choice([0, 0, 1, 5, 30, 100, 1000])
        part = rng.choice(list(pools))
        run = rng.choice([1, 10, 50, 100, 500, 3000, 100000])
        records.append(JobRecord(job_id=i, user="u", submit_time=t, partition=part, state=JobState.COMPLETED,
                                 start_time=t, end_time=t + run, nodes=1,
                                 gpus=rng.randint(1, pools[part][0] * pools[part][1]),
                                 time_limit_s=rng.choice([None, run, run * 2, max(1, run // 2), 1000])))
    return workload_from_records(records, "random")


@pytest.mark.parametrize("policy", ["fifo", "multifactor"])
def test_reused_passes_match_full_passes_with_pools_and_a_short_depth(
        policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Several pools and ``bf_max_job_test`` 3: a job beyond the depth limit moves up as
    new jobs start, and the depth counts only the jobs of pools with free GPUs."""
    for seed in range(25):
        rng = random.Random(seed)
        pools = {f"P{k}": (rng.randint(1, 3), rng.choice([1, 2, 4, 8])) for k in range(rng.randint(1, 3))}
        spec = ClusterSpec.pools(pools)
        workload = _random_workload(rng, pools)
        reused = starts(workload, spec, policy, full=False, depth=3, monkeypatch=monkeypatch)
        assert reused == starts(workload, spec, policy, full=True, depth=3, monkeypatch=monkeypatch), seed
