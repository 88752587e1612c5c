"""Consolidating placement, EASY's shadow view, and Slurm's multifactor order."""

from __future__ import annotations

import random

from slurmsched.model import JobRecord, SchedulerConfig
from slurmsched.sim.cluster import PartitionSpec
from slurmsched.sim.job import SimJob
from slurmsched.sim.placement import Pool, ShadowState
from slurmsched.sim.priority import PriorityQueue


def pool(*sizes: int, types: tuple[str | None, ...] | None = None) -> Pool:
    types = types or (None,) * len(sizes)
    return Pool("p", [(i, g, t, None) for i, (g, t) in enumerate(zip(sizes, types))])


def test_one_node_jobs_go_to_the_fullest_node_that_fits() -> None:
    p = pool(8, 8, 8)
    p.take(((0, 6),))
    p.take(((1, 3),))
    assert p.place(2) == ((0, 2),)          # node 0 has 2 free: best fit
    assert p.place(3) == ((1, 3),)          # node 1 has 5 free, node 2 has 8
    assert p.place(6) == ((2, 6),)
    assert p.place(9) == ((2, 8), (1, 1))   # 2 nodes: the emptiest ones


def test_big_jobs_take_the_fewest_nodes_or_wait() -> None:
    p = pool(8, 8, 8)
    p.take(((0, 4),))
    p.take(((1, 4),))
    p.take(((2, 4),))
    assert p.free_total == 12
    assert p.place(12) is None              # would need 3 nodes; ceil(12/8) = 2 allowed
    assert p.place(8) is None               # fits no single node
    p.release(((2, 4),))
    assert p.place(12) == ((2, 8), (1, 4))


def test_typed_jobs_use_only_their_nodes() -> None:
    p = pool(8, 4, types=("a100", "v100"))
    assert p.place(4, "", frozenset({"v100"})) == ((1, 4),)
    assert p.place(5, "", frozenset({"v100"})) is None
    assert p.place(5) == ((0, 5),)
    assert p.eligible("", frozenset({"a100"}))[1:] == (8, [8])


def test_a_big_job_on_mixed_nodes_takes_as_many_as_the_largest_need() -> None:
    p = pool(8, 8, 4, 4)  # 24 GPUs: 16 fit on two nodes, 20 need three, 24 all four
    assert [p.nodes_needed(units, "", None) for units in (8, 9, 16, 17, 20, 21, 24, 25)] == [1, 2, 2, 3, 3, 4, 4, None]
    assert p.place(24) == ((1, 8), (0, 8), (3, 4), (2, 4))
    p.take(((0, 1),))
    assert p.place(24) is None and p.place(23) is not None
    shadow = p.shadow("", None, 24)
    assert not shadow.head_fits
    shadow.release(((0, 1),))
    assert shadow.head_fits


def test_partitions_limit_jobs_to_their_nodes() -> None:
    p = Pool("p", [(0, 8, "a100", frozenset({"gpu", "a100"})), (1, 4, "v100", frozenset({"gpu"}))])
    assert p.place(2, "a100") == ((0, 2),)
    assert p.place(2, "gpu") == ((1, 2),)
    assert p.place(12, "gpu") == ((0, 8), (1, 4))
    assert p.place(12, "a100") is None
    assert p.eligible("a100", None)[1:] == (8, [8]) and p.eligible("other", None)[2] == []


def test_shadow_state_folds_releases_and_refuses_takes_that_block_the_head() -> None:
    p = pool(8, 8)
    p.take(((0, 8),))
    p.take(((1, 6),))
    shadow = p.shadow("", None, 8)
    assert not shadow.head_fits
    shadow.release(((1, 6),))
    assert shadow.head_fits
    assert shadow.try_take(((0, 8),)) is True    # node 0 was not the head's
    assert shadow.try_take(((1, 1),)) is False   # node 1 must stay whole
    assert shadow.head_fits
    multi = ShadowState({0: 8, 1: 4, 2: 4}, 2, 12)
    assert multi.head_fits
    assert not multi.try_take(((0, 1),))
    assert multi.try_take(((2, 4),))             # 8 + 4 still on two nodes


def test_place_beside_keeps_the_reserved_job_fitting() -> None:
    p = pool(8, 8, 8)
    p.take(((0, 6),))                            # node 0: 2 free now, 8 at the head's start
    p.take(((1, 4),))
    p.take(((2, 8),))
    shadow = p.shadow("", None, 8)
    shadow.release(((0, 6),))
    assert p.place(2) == ((0, 2),) and not shadow.try_take(((0, 2),))
    assert p.place_beside(2, "", None, shadow) == ((1, 2),)
    assert p.place_beside(5, "", None, shadow) is None     # node 1 has 2 left; node 0 is the head's
    wide = pool(8, 8, 8, 8)                      # free now 6, 4, 6, 0; the head needs node 0 whole
    for alloc in (((0, 2),), ((1, 4),), ((2, 2),), ((3, 8),)):
        wide.take(alloc)
    big = wide.shadow("", None, 8)
    big.release(((0, 2),))
    assert wide.place(10) == ((2, 6), (0, 4))    # the two emptiest, node 0 among them
    wide.take(wide.place_beside(10, "", None, big) or ())
    assert wide.free == {0: 6, 1: 0, 2: 0, 3: 0}
    assert big.head_fits and big.free == {0: 8, 1: 0, 2: 0, 3: 0}
    assert wide.place_beside(4, "", None, big) is None and big.free == {0: 8, 1: 0, 2: 0, 3: 0}


def sim_job(job_id: int, submit: float, *, units: int = 1, tier: int = 1, factor: float = 1.0) -> SimJob:
    record = JobRecord(job_id=job_id, user="u", submit_time=submit)
    return SimJob(trace=record, job_id=job_id, submit=submit, duration=60.0, units=units, bf_limit=60.0,
                  final_state=record.state, partition=PartitionSpec("p", "main", tier, priority_factor=factor))


def order(queue: PriorityQueue, now: float) -> list[int]:
    return [j.job_id for j in queue.ordered(now)]


def test_age_order_site_factor_and_tiers() -> None:
    queue = PriorityQueue(SchedulerConfig(weight_age=1000, priority_max_age_s=1000), 10, 10)
    jobs = [sim_job(1, 0.0), sim_job(2, 10.0), sim_job(3, 20.0), sim_job(4, 30.0, tier=2)]
    for job in jobs:
        queue.add(job, 30.0)
    assert order(queue, 40.0) == [4, 1, 2, 3]   # higher tier first, then oldest
    queue.set_site_factor(jobs[2], 15)          # 15 points = 15 s of age: passes job 2, not job 1
    assert order(queue, 40.0) == [4, 1, 3, 2]
    assert queue.rank(jobs[2], 40.0) == 2
    queue.remove(jobs[0])
    assert order(queue, 40.0) == [4, 3, 2]


def test_the_partition_factor_counts_with_its_weight() -> None:
    queue = PriorityQueue(SchedulerConfig(weight_age=1000, weight_partition=40, priority_max_age_s=1000), 10, 10)
    jobs = [sim_job(1, 0.0, factor=0.25), sim_job(2, 20.0), sim_job(3, 35.0)]
    for job in jobs:
        queue.add(job, 40.0)
    # job 2: 40 points of partition factor against job 1's 10 + 20 s more age: ahead; job 3: 5 s short of job 1
    assert order(queue, 40.0) == [2, 1, 3]


def test_capped_age_lets_a_younger_job_with_a_bigger_static_part_pass() -> None:
    queue = PriorityQueue(SchedulerConfig(weight_age=100, priority_max_age_s=100), 10, 10)
    old, young = sim_job(1, 0.0), sim_job(2, 50.0)
    queue.add(old, 50.0)
    queue.add(young, 50.0)
    queue.set_site_factor(young, 30)
    assert order(queue, 60.0) == [1, 2]         # 60 > 30 + 10
    assert queue.age(60.0) is False
    assert queue.age(100.0) is True             # the old job's age factor is capped now
    assert order(queue, 100.0) == [1, 2]        # 100 > 30 + 50
    assert queue.priority(old, 140.0) == 100.0
    assert order(queue, 140.0) == [2, 1]        # 30 + 90 > 100: uncapped it would be 140
    assert queue.rank(old, 140.0) == 1


def test_order_kept_until_remembers_settled_jobs_until_a_capped_job_is_added() -> None:
    queue = PriorityQueue(SchedulerConfig(weight_age=100, priority_max_age_s=100), 10, 10)
    capped, low, high = sim_job(1, 0.0), sim_job(2, 50.0), sim_job(3, 60.0)
    for job in (capped, low, high):
        queue.add(job, 100.0)
    queue.age(100.0)
    queue.set_site_factor(low, 30)              # 30 + 50 s of age by 100: reaches 100 at 120, before its cap
    queue.set_site_factor(high, 200)            # above the capped job already: never passes it
    assert queue.order_kept_until(100.0) == 120.0
    queue.set_site_factor(low, 0)               # would reach the capped job's 100 only at its own cap
    assert queue.order_kept_until(110.0) == float("inf")
    assert queue.order_kept_until(110.0, [low, high]) == float("inf")
    queue.set_site_factor(capped, 170)          # a capped job added at 270: ``high`` (250 at 110) passes it at 130
    assert queue.order_kept_until(110.0) == 130.0
    assert queue.order_kept_until(100.0, [high]) == 130.0   # an earlier time: nothing remembered holds


def test_ordered_merges_capped_and_young_jobs_as_sorting_by_priority_would() -> None:
    rng = random.Random(7)
    for _ in range(200):
        # Integer priorities (1 point a second of age), so the reference sort is exact.
        queue = PriorityQueue(SchedulerConfig(weight_age=100, priority_max_age_s=100), 10, 10)
        jobs = [sim_job(i, float(rng.randrange(150)), tier=rng.choice((1, 1, 2))) for i in range(rng.randrange(1, 12))]
        for j in jobs:
            queue.add(j, 150.0)                 # a third of them capped
        for j in rng.sample(jobs, rng.randrange(len(jobs) + 1)):
            queue.set_site_factor(j, rng.randrange(-60, 60))
        now = 150.0 + rng.randrange(100)
        expected = sorted(jobs, key=lambda j: queue.sort_key(j, now))
        assert order(queue, now) == [j.job_id for j in expected]
