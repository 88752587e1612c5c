"""SimulatedSlurm: EASY backfill, the gateway side (snapshot, accounting, apply)."""

from __future__ import annotations

import pytest

from slurmsched.model import JobRecord, JobState, SchedulerConfig, SetFeatures, SetSiteFactor, SetSwitches
from slurmsched.sim.clock import SimClock
from slurmsched.sim.cluster import ClusterSpec, NodeSpec, PartitionSpec
from slurmsched.sim.job import SimJob
from slurmsched.sim.slurm import SimulatedSlurm

CONFIG = SchedulerConfig(weight_age=1000, priority_max_age_s=86400)


def make(spec: ClusterSpec | None = None) -> tuple[SimulatedSlurm, SimClock]:
    clock = SimClock(1000.0)
    return SimulatedSlurm(spec or ClusterSpec.uniform(2, 4), CONFIG, clock), clock


def job(slurm: SimulatedSlurm, job_id: int, units: int, run: float, *, limit: float | None = None,
        submit: float = 1000.0, gpu_type: str | None = None, partition: str = "") -> SimJob:
    record = JobRecord(job_id=job_id, user="u", name=f"j{job_id}", submit_time=submit, gpus=units,
                       gpu_type=gpu_type, partition=partition, state=JobState.COMPLETED,
                       time_limit_s=int(limit) if limit else None)
    part = slurm.spec.partition(partition)
    types = frozenset({gpu_type}) if gpu_type else None
    return SimJob(trace=record, job_id=job_id, submit=submit, duration=run, units=units,
                  bf_limit=limit or run, final_state=JobState.COMPLETED, partition=part, gpu_types=types,
                  nodes=slurm.nodes_for(units, part, types))


def started(slurm: SimulatedSlurm) -> list[int]:
    return sorted(j.job_id for j in slurm.schedule())


def test_easy_backfill_starts_short_jobs_but_never_delays_the_head() -> None:
    slurm, clock = make()
    running = job(slurm, 1, 6, 100.0)
    slurm.submit(running)
    assert started(slurm) == [1]                      # n1 full, 2 GPUs left on n2
    head = job(slurm, 2, 8, 50.0)                     # needs both nodes whole: reserved for t=1100
    short = job(slurm, 3, 1, 90.0)                    # ends before the reservation: may go first
    long_ = job(slurm, 4, 1, 500.0)                   # would hold n2 past it: must wait
    for j in (head, short, long_):
        slurm.submit(j)
    assert started(slurm) == [3]
    clock.advance_to(1090.0)
    slurm.finish(short)
    assert started(slurm) == []                       # still not: the head's reservation stands
    clock.advance_to(1100.0)
    slurm.finish(running)
    assert started(slurm) == [2]
    assert [j.job_id for j in slurm.snapshot().pending] == [4]


def test_a_reservation_counts_every_job_that_ends_at_its_time() -> None:
    for first, second in ((1, 2), (2, 1)):            # the verdict must not hang on job ids
        slurm, clock = make(ClusterSpec.uniform(2, 2))
        slurm.submit(job(slurm, first, 2, 100.0))     # a whole node
        slurm.submit(job(slurm, second, 1, 100.0))    # half the other, ending at the same time
        assert started(slurm) == sorted((first, second))
        clock.advance_to(1001.0)
        slurm.submit(job(slurm, 3, 3, 10.0, submit=1001.0))   # head: 3 of the 4 GPUs at t=1100
        slurm.submit(job(slurm, 4, 1, 1000.0, submit=1001.0))  # the fourth GPU is free then too
        assert started(slurm) == [4]


def test_a_job_fitting_beside_the_reservation_backfills_even_if_long() -> None:
    slurm, _ = make(ClusterSpec.uniform(3, 4))
    slurm.submit(job(slurm, 1, 8, 100.0))             # two whole nodes
    assert started(slurm) == [1]
    slurm.submit(job(slurm, 2, 8, 50.0))              # head: needs two whole nodes at t+100
    slurm.submit(job(slurm, 3, 4, 10_000.0))          # fits on n3 now; the head can still use n1+n2
    assert started(slurm) == [3]


def test_a_long_job_backfills_on_a_node_the_reservation_does_not_need() -> None:
    # n1 keeps 4 GPUs busy for long; n2 frees at t=1100 for the head (a whole node). The
    # 2-GPU job would best fit on n2 (2 free) and block the head there, but n1 has room:
    # Slurm's backfill leaves the reserved node out and starts it on n1.
    slurm, _ = make(ClusterSpec.uniform(2, 8))
    slurm.submit(job(slurm, 1, 4, 10_000.0))
    slurm.submit(job(slurm, 2, 6, 100.0))
    assert started(slurm) == [1, 2]
    slurm.submit(job(slurm, 3, 8, 50.0))              # head: reserved on n2 at t=1100
    long_ = job(slurm, 4, 2, 5000.0)
    slurm.submit(long_)
    assert started(slurm) == [4]
    assert long_.alloc == ((0, 2),)


def test_unknown_partitions_share_the_default_pool_and_pools_are_separate() -> None:
    spec = ClusterSpec.pools({"vc1": (1, 4), "vc2": (1, 4)})
    slurm, _ = make(spec)
    assert slurm.nodes_for(5, spec.partition("vc1")) is None
    slurm.submit(job(slurm, 1, 4, 100.0, partition="vc1"))
    slurm.submit(job(slurm, 2, 4, 100.0, partition="vc1"))
    slurm.submit(job(slurm, 3, 4, 100.0, partition="vc2"))
    assert started(slurm) == [1, 3]
    assert spec.partition("other").pool == "vc1"


def test_jobs_share_a_group_id_exactly_when_they_compete_for_the_same_nodes_alike() -> None:
    spec = ClusterSpec(name="c", nodes=(NodeSpec("a1", 8, "a100", "main"), NodeSpec("a2", 8, "a100", "main"),
                                        NodeSpec("x1", 8, None, "other")),
                       partitions=(PartitionSpec("gpu", "main"), PartitionSpec("x", "other")))
    slurm, _ = make(spec)
    jobs = [job(slurm, 1, 2, 60.0, partition="gpu"), job(slurm, 2, 4, 60.0, partition="vc"),  # vc: over gpu's nodes
            job(slurm, 3, 12, 60.0, partition="gpu"),                                         # two nodes
            job(slurm, 4, 2, 60.0, partition="gpu", gpu_type="a100"),                          # typed
            job(slurm, 5, 2, 60.0, partition="x")]                                             # another pool
    for j in jobs:
        slurm.submit(j)
    assert jobs[0].group == jobs[1].group
    assert len({j.group for j in jobs[1:]}) == 4
    assert slurm.apply([SetFeatures(1, "a100")])[0].ok
    assert jobs[0].group == jobs[3].group         # re-queued with the typed job's constraint


def test_a_job_its_gpu_type_cannot_hold_may_run_on_any_type() -> None:
    # e.g. an exclusive job over every node, recorded with the type of most of its GPUs
    slurm, _ = make(ClusterSpec(name="c", nodes=(NodeSpec("a1", 8, "a100", "main"), NodeSpec("a2", 8, "a100", "main"),
                                                 NodeSpec("v1", 4, "v100", "main")),
                                partitions=(PartitionSpec("gpu", "main"),)))
    part = slurm.spec.partition("")
    spread = JobRecord(job_id=1, user="u", name="all", submit_time=0.0, gpus=20, gpu_type="a100")
    typed = JobRecord(job_id=2, user="u", name="a", submit_time=0.0, gpus=16, gpu_type="a100")
    assert slurm.placement(spread, part, 20) == (None, 3)
    assert slurm.placement(typed, part, 16) == (frozenset({"a100"}), 2)
    assert slurm.placement(spread, part, 21) is None


def test_snapshot_accounting_and_apply_behave_like_slurm() -> None:
    slurm, clock = make(ClusterSpec(name="c", nodes=(NodeSpec("a1", 8, "a100", "main"), NodeSpec("v1", 4, "v100", "main")),
                                    partitions=(PartitionSpec("gpu", "main"), PartitionSpec("short", "main", 2))))
    first = job(slurm, 1, 8, 100.0, gpu_type="a100")
    second = job(slurm, 2, 4, 100.0, gpu_type="a100")
    third = job(slurm, 3, 2, 30.0)
    for j in (first, second, third):
        slurm.submit(j)
    assert started(slurm) == [1, 3]
    snap = slurm.snapshot()
    assert [(j.job_id, j.state) for j in snap.pending] == [(2, JobState.PENDING)]
    assert snap.pending[0].site_factor == 0 and snap.pending[0].gpus == 4
    assert {j.job_id: j.node_list for j in snap.running} == {1: "a1", 3: "v1"}
    assert [(n.name, n.state, n.gpus_used()) for n in snap.nodes] == [("a1", ("ALLOCATED",), 8), ("v1", ("MIXED",), 2)]
    assert slurm.snapshot().jobs[0] is snap.jobs[0]   # unchanged records are the same objects
    outcomes = slurm.apply([SetSiteFactor(2, 500, 0), SetSiteFactor(1, 5, 0), SetSiteFactor(99, 5, 0),
                            SetFeatures(2, "v100"), SetFeatures(2, "a100&v100"), SetSwitches(2, 1, 600)])
    assert [o.ok for o in outcomes] == [True, False, False, False, False, True]
    assert "no longer pending" in outcomes[1].message and "Invalid job id" in outcomes[2].message
    pending = slurm.snapshot().pending[0]
    assert (pending.site_factor, pending.switches) == (500, 1)
    assert slurm.take_reordered() and slurm.rpcs == 6
    clock.advance_to(1030.0)
    slurm.finish(third)
    done = slurm.finished_since(1030.0)
    assert [(j.job_id, j.state, j.start_time, j.end_time) for j in done] == [(3, JobState.COMPLETED, 1000.0, 1030.0)]
    assert slurm.finished_since(1030.5) == [] and slurm.finished_since(0.0) == done


@pytest.mark.parametrize("limits", [True, False])
def test_incremental_passes_match_full_passes(limits: bool) -> None:
    """Reusing a pass's verdicts and kept reservations starts exactly the jobs a full pass would."""
    import random

    class FullPasses(SimulatedSlurm):
        def schedule(self):
            self._last_pass = None
            self._kept.clear()
            return super().schedule()

    def run(cls) -> list[tuple[int, float]]:
        rng = random.Random(7)
        clock = SimClock(0.0)
        slurm = cls(ClusterSpec.uniform(4, 8), SchedulerConfig(weight_age=1000, weight_job_size=2000,
                                                               priority_max_age_s=3600), clock)
        events: list[tuple[float, int, SimJob | None]] = []
        t = 0.0
        for i in range(1, 400):
            t += rng.expovariate(1 / 40)
            run_s = rng.lognormvariate(5.5, 1.2)
            events.append((t, i, job(slurm, i, rng.choice([1, 1, 2, 4, 8, 12, 16]), run_s,
                                     limit=run_s * rng.uniform(1, 4) if limits else None, submit=t)))
        starts = []
        import heapq
        heapq.heapify(events)
        while events:
            at, _, item = heapq.heappop(events)
            clock.advance_to(at)
            if item.start is None:
                slurm.submit(item)
            else:
                slurm.finish(item)
            for s in slurm.schedule():
                starts.append((s.job_id, s.start))
                heapq.heappush(events, (s.start + s.duration, -s.job_id, s))
        return sorted(starts)

    assert run(SimulatedSlurm) == run(FullPasses)


def test_a_job_whose_priority_passes_a_capped_one_between_passes_is_ordered_first() -> None:
    # Job 2's age factor is capped (1,000 + its size, 1,500); job 3's, larger, passes it
    # at t=1170 with no event. When job 4 arrives at t=1200, job 3 is the head: job 4
    # would hold the GPU job 3 needs at t=2000, so it must not start (it could beside job 2).
    clock = SimClock(1000.0)
    slurm = SimulatedSlurm(ClusterSpec.uniform(1, 4),
                           SchedulerConfig(weight_age=1000, weight_job_size=2000, priority_max_age_s=100), clock)
    slurm.submit(job(slurm, 1, 3, 1000.0, limit=1000.0))
    assert started(slurm) == [1]
    slurm.submit(job(slurm, 2, 2, 10.0))
    assert started(slurm) == []
    clock.advance_to(1120.0)
    slurm.submit(job(slurm, 3, 4, 10.0, submit=1120.0))
    assert started(slurm) == []
    clock.advance_to(1200.0)
    slurm.submit(job(slurm, 4, 1, 2000.0, limit=2000.0, submit=1200.0))
    assert started(slurm) == []


def test_accounting_builds_each_finished_record_once_and_returns_the_same_objects() -> None:
    slurm, clock = make(ClusterSpec.uniform(1, 4))
    jobs = [job(slurm, i, 1, 10.0 * i) for i in range(1, 5)]
    for j in jobs:
        slurm.submit(j)
    assert started(slurm) == [1, 2, 3, 4]
    clock.advance_to(1010.0)
    slurm.finish(jobs[0])
    clock.advance_to(1020.0)
    slurm.finish(jobs[1])
    early = slurm.finished_since(1015.0)             # job 1 ended before: left out, yet built
    assert [(j.job_id, j.end_time) for j in early] == [(2, 1020.0)]
    clock.advance_to(1030.0)
    slurm.finish(jobs[2])
    again = slurm.finished_since(0.0)
    assert [(j.job_id, j.state, j.end_time) for j in again] == [
        (1, JobState.COMPLETED, 1010.0), (2, JobState.COMPLETED, 1020.0), (3, JobState.COMPLETED, 1030.0)]
    assert again[1] is early[0]                       # the very record, not an equal copy
    assert slurm.finished_since(1030.0) == [again[2]] and slurm.finished_since(1030.0)[0] is again[2]
