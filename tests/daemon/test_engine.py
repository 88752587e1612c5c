"""Engine.run_cycle over the simulator's Slurm (SimulatedSlurm) and the in-memory repository.

The incremental engine (only changed jobs are predicted, scored and planned) must plan
exactly what the planner plans for the whole queue; unchanged queues must cost nothing;
aging ticks and the guard must move SiteFactor values in few batched calls.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from slurmsched.config import Config, PlannerSection
from slurmsched.daemon import revert_all
from slurmsched.engine import Engine
from slurmsched.errors import SlurmError
from slurmsched.model import ActionOutcome, ClusterSnapshot, JobRecord, JobState, SchedulerConfig, SetSiteFactor
from slurmsched.planner import Planner
from slurmsched.planner.plan import submit_stamp
from slurmsched.planner.scale import GUARD_LEVEL
from slurmsched.policy import PolicyContext, make_policy
from slurmsched.policy.base import backlog_waits
from slurmsched.predict.baselines import UserLimitPredictor
from slurmsched.sim.clock import SimClock
from slurmsched.sim.cluster import ClusterSpec
from slurmsched.sim.job import SimJob
from slurmsched.sim.slurm import SimulatedSlurm
from slurmsched.store.memory import MemoryJobRepository
from slurmsched.store.protocol import CycleKind

HOUR = 3600.0
START = 1_800_000_000.0  # a whole number of hours
WEIGHTS = SchedulerConfig(weight_age=1000, priority_max_age_s=7 * 86400)
#: Every planned action sent in the cycle that plans it (none deferred), so a plan compares whole.
UNBATCHED = dataclasses.replace(Config(), planner=PlannerSection(max_rpcs_per_cycle=10_000))
POLICY_ARGS = {"max_wait_h": 12, "halflife_h": 2, "aging_step_h": 1,  # hourly ticks; a fixed 12 h guard,
               "slowdown_factor": 0}  # whatever the run time


class World:
    """A simulated 16-GPU cluster held busy by one blocker job, plus the engine under test."""

    def __init__(self, config: Config = Config(), policy: str = "qssf", weights: SchedulerConfig = WEIGHTS) -> None:
        self.spec = ClusterSpec.uniform(2, 8)
        self.clock = SimClock(START)
        self.slurm = SimulatedSlurm(self.spec, weights, self.clock)
        self.repository = MemoryJobRepository(cluster="sim")
        self.predictor = UserLimitPredictor()
        self.predictor.fit([])
        self.policy = make_policy(policy, POLICY_ARGS)
        self.planner = Planner(config)
        self.engine = Engine(self.slurm, self.repository, self.predictor, self.policy, self.planner)
        self.next_id = 1
        self.blocker = self.submit(16, limit_h=100, user="blocker")
        assert [j.job_id for j in self.slurm.schedule()] == [self.blocker.job_id]

    def submit(self, gpus: int, *, limit_h: float, user: str = "alice", name: str = "train",
               het: tuple[int, int] | None = None) -> SimJob:
        """Queue a job; ``het``: ``(het_job_id, offset)`` of a heterogeneous job's component."""
        job_id, self.next_id = self.next_id, self.next_id + 1
        record = JobRecord(job_id=job_id, user=user, name=name, submit_time=self.clock.now(), partition="batch",
                           gpus=gpus, nodes=-(-gpus // 8), time_limit_s=int(limit_h * HOUR), site_factor=0,
                           het_job_id=het[0] if het else None, het_job_offset=het[1] if het else None)
        job = SimJob(trace=record, job_id=job_id, submit=record.submit_time, duration=limit_h * HOUR / 2,
                     units=gpus, bf_limit=limit_h * HOUR, final_state=JobState.COMPLETED,
                     partition=self.spec.partition("batch"), nodes=record.nodes)
        self.slurm.submit(job)
        return job

    def cycle(self, at_h: float):
        self.clock.advance_to(START + at_h * HOUR)
        return self.engine.run_cycle(self.clock.now())

    def cycle_as_reference(self, at_h: float):
        """A cycle at ``at_h``, whose actions must be the reference plan's; returns both."""
        self.clock.advance_to(START + at_h * HOUR)
        expected = self.reference_plan()
        report = self.engine.run_cycle(self.clock.now())
        assert actions_of(report.plan) == actions_of(expected), f"at {at_h:.2f} h"
        return report, expected

    def reference_plan(self):
        """What the planner plans for the whole queue as it stands (before the next cycle),
        given the backlog waits the engine fixed when it first saw each job (a job new
        to this cycle gets the backlog :func:`backlog_waits` gives it)."""
        snapshot = self.slurm.snapshot()
        pending = snapshot.pending
        predictions = {p.job_id: p for p in self.predictor.predict(pending)}
        tracked = self.engine._tracker.jobs  # the backlog waits are the engine's memory, not the queue's
        queued = sum(self.policy.work(t.job, predictions[i]) for i, t in tracked.items() if i in predictions)
        arrivals = [(j, self.policy.work(j, predictions[j.job_id])) for j in pending if j.job_id not in tracked]
        backlogs = {i: t.backlog_s for i, t in tracked.items()}
        backlogs.update(backlog_waits(arrivals, self.policy.capacity(snapshot.nodes), queued))
        ranking = self.policy.rank(PolicyContext(self.clock.now(), pending, predictions, backlogs))
        applied = {(c.job_id, c.kind): c for c in self.repository.applied_changes()}
        return self.planner.plan(ranking, snapshot, applied)


def site_factors(world: World) -> dict[int, int]:
    return {j.job_id: j.site_factor for j in world.slurm.snapshot().pending}


def actions_of(plan) -> set[tuple]:
    return {(type(a).__name__, a.job_id, getattr(a, "value", None)) for a in plan.actions}


def test_incremental_engine_plans_what_the_planner_plans_for_the_whole_queue() -> None:
    world = World(UNBATCHED)
    rng = random.Random(5)
    at = 0.0
    for step in range(40):
        for _ in range(rng.randrange(0, 6)):
            world.submit(rng.choice([1, 2, 4, 8, 16]), limit_h=rng.choice([0.25, 1, 4, 12, 48]),
                         user=rng.choice(["ann", "bob", "cy"]))
        at += rng.choice([0.01, 0.3, 1.0, 2.5])
        report, expected = world.cycle_as_reference(at)
        assert {a.job_id for a in report.plan.adopted} == {a.job_id for a in expected.adopted}
    assert world.slurm.pending_count > 50
    stretched = [t for t in world.engine._tracker.jobs.values() if t.backlog_s > POLICY_ARGS["max_wait_h"] * HOUR]
    assert stretched  # the queue grew long enough to stretch guards: the backlog waits were compared too


def submit_het(world: World, sizes: list[int], *, limit_h: float, user: str = "alice") -> list[SimJob]:
    """A heterogeneous job: one component per size, with consecutive ids from the leader's."""
    leader = world.next_id
    return [world.submit(gpus, limit_h=limit_h, user=user, het=(leader, offset)) for offset, gpus in enumerate(sizes)]


def test_heterogeneous_components_get_the_site_factor_of_the_whole_job() -> None:
    world = World()
    small = world.submit(1, limit_h=4)
    components = submit_het(world, [1, 8], limit_h=4)
    whole = world.submit(9, limit_h=4)
    report = world.cycle(0.1)
    factors = site_factors(world)
    ids = [c.job_id for c in components]
    assert factors[ids[0]] == factors[ids[1]] == factors[whole.job_id] < factors[small.job_id]
    ranks = {d.job_id: d.rank for d in report.decisions if d.kind == "rank"}
    assert ranks[ids[1]] == ranks[ids[0]] + 1  # side by side, the leader first
    reason = world.engine.ranking(world.clock.now()).scores[ranks[ids[1]] - 1].reason
    assert reason.startswith(f"heterogeneous job {ids[0]} (2 components, scored as one): ")
    assert "9 GPUs" in reason


def test_heterogeneous_jobs_are_planned_as_the_planner_plans_the_whole_queue() -> None:
    world = World(UNBATCHED)
    rng = random.Random(11)
    at = 0.0
    for step in range(30):
        for _ in range(rng.randrange(0, 4)):
            sizes = [rng.choice([1, 2, 4, 8]) for _ in range(rng.choice([1, 2, 3]))]
            limit_h, user = rng.choice([0.25, 1, 4, 12, 48]), rng.choice(["ann", "bob"])
            if len(sizes) == 1:
                world.submit(sizes[0], limit_h=limit_h, user=user)
            else:
                submit_het(world, sizes, limit_h=limit_h, user=user)
        if step == 20:  # the simulated Slurm starts components one by one: some leave their siblings behind
            world.slurm.finish(world.blocker)
            started = {j.trace.het_job_id for j in world.slurm.schedule()}
            left = {j.het_job_id for j in world.slurm.snapshot().pending}
            assert started & left - {None}
        at += rng.choice([0.01, 0.3, 1.0, 2.5])
        world.cycle_as_reference(at)
    pending = world.slurm.snapshot().pending
    factors = {}
    for job in pending:
        if job.het_job_id is not None:
            factors.setdefault(job.het_job_id, set()).add(job.site_factor)
    assert len(factors) > 5 and all(len(values) == 1 for values in factors.values())


def test_unchanged_queue_costs_no_prediction_record_or_action() -> None:
    world = World()
    for gpus, limit in [(1, 1), (2, 4), (8, 12), (16, 48)]:
        world.submit(gpus, limit_h=limit)
    first = world.cycle(0.1)
    assert len(first.plan.actions) == 4 and len(first.predictions) == 4
    assert all(o.ok for o in first.outcomes)
    second = world.cycle(0.2)
    assert second.plan.actions == () and second.predictions == () and second.decisions == ()
    assert second.plan.rpcs == 0
    factors = site_factors(world)
    assert factors[2] > factors[3] > factors[4] > factors[5] > 0  # smaller service, higher SiteFactor


def test_aging_ticks_and_the_guard_move_values_in_batched_calls() -> None:
    world = World()
    jobs = [world.submit(gpus, limit_h=limit) for gpus, limit in [(1, 0.5), (2, 4), (4, 12), (16, 48)]]
    world.cycle(0.5)
    before = site_factors(world)
    assert world.cycle(1.5).plan.actions == ()        # same 2-hour tick: nothing moves
    tick = world.cycle(2.0)                            # first halving tick: one level up...
    assert tick.plan.actions and all(a.value > before[a.job_id] for a in tick.plan.actions)
    assert tick.plan.rpcs == len({a.value for a in tick.plan.actions})  # one batched call per value
    assert len(tick.plan.actions) + tick.plan.held == len(jobs)  # ...unless within the hysteresis
    world.cycle(4.0)                                   # by the second tick every job has moved up
    after = site_factors(world)
    assert all(after[j.job_id] > before[j.job_id] for j in jobs)
    guard = world.cycle(12.0)                          # 12 h guard: every job waited 12 h
    scale = world.planner.scale(WEIGHTS)
    assert set(site_factors(world).values()) == {scale.value(GUARD_LEVEL)}
    assert all(isinstance(a, SetSiteFactor) for a in guard.plan.actions)
    assert any("12 h guard reached" in d.reason for d in guard.decisions)


def test_finished_runs_reach_history_and_refresh_predictions_of_that_user() -> None:
    world = World()
    waiting = world.submit(4, limit_h=10, user="ann")
    other = world.submit(4, limit_h=10, user="bob")
    world.cycle(0.1)
    world.slurm.finish(world.blocker)
    report = world.cycle(0.2)
    assert report.finished == 1
    assert [j.job_id for j in world.repository.history()] == [world.blocker.job_id]
    refreshed = {p.job_id for p in world.cycle(0.3).predictions}
    # The finished job was "blocker"'s: nobody else's prediction inputs changed.
    assert refreshed <= {waiting.job_id, other.job_id}


def test_a_cycle_goes_on_without_accounting_and_the_next_one_catches_up(caplog) -> None:
    """slurmdbd down: sacct fails, squeue and sprio still answer (slurmctld's)."""
    world = World()
    waiting = world.submit(4, limit_h=10)
    world.slurm.finish(world.blocker)
    read = world.slurm.finished_since

    def unreachable(since):
        raise SlurmError("sacct: Connection refused (slurmdbd)")

    world.slurm.finished_since = unreachable
    report = world.cycle(0.1)
    assert report.finished == 0 and [a.job_id for a in report.plan.actions] == [waiting.job_id]
    assert "accounting not read (sacct: Connection refused (slurmdbd))" in caplog.text
    world.slurm.finished_since = read
    assert world.cycle(0.2).finished == 1
    assert [j.job_id for j in world.repository.history()] == [world.blocker.job_id]


def test_fifo_engine_only_restores_what_qssf_set() -> None:
    world = World()
    for gpus, limit in [(1, 1), (2, 4)]:
        world.submit(gpus, limit_h=limit)
    world.cycle(0.1)
    assert any(site_factors(world).values())
    fifo = Engine(world.slurm, world.repository, world.predictor, make_policy("fifo"), world.planner)
    report = fifo.run_cycle(START + 0.2 * HOUR)
    assert {a.value for a in report.plan.actions} == {0}
    assert set(site_factors(world).values()) == {0}
    assert world.repository.applied_changes() == []
    assert fifo.run_cycle(START + 0.3 * HOUR).plan.actions == ()


def test_a_value_set_by_hand_stands_through_aging_ticks_and_revert() -> None:
    world = World()
    mine, other = world.submit(1, limit_h=1), world.submit(2, limit_h=4)
    world.cycle(0.5)
    by_hand = site_factors(world)[mine.job_id] + 1  # not one of slurmsched's levels
    world.slurm.apply([SetSiteFactor(mine.job_id, by_hand)])  # an admin's scontrol update
    tick = world.cycle(4.0)  # two halving ticks: the other job moves up
    assert [a.job_id for a in tick.plan.actions] == [other.job_id]
    assert site_factors(world)[mine.job_id] == by_hand
    world.repository.set_paused(True)
    revert = revert_all(world.slurm, world.repository)
    assert revert.reverted == 1 and len(revert.left) == 1
    assert site_factors(world) == {mine.job_id: by_hand, other.job_id: 0}


def test_protecting_a_partition_gives_its_jobs_back_their_original_values() -> None:
    world = World()
    for gpus, limit in [(1, 1), (2, 4)]:
        world.submit(gpus, limit_h=limit)
    world.cycle(0.1)
    assert all(site_factors(world).values())
    protected = Planner(dataclasses.replace(Config(), planner=PlannerSection(protected_partitions=("batch",))))
    engine = Engine(world.slurm, world.repository, world.predictor, world.policy, protected)
    report = engine.run_cycle(START + 0.2 * HOUR)
    assert {(a.value, a.reason) for a in report.plan.actions} == {
        (0, "protected partition or QOS: undo slurmsched's SiteFactor")}
    assert set(site_factors(world).values()) == {0} and world.repository.applied_changes() == []
    assert engine.run_cycle(START + 4 * HOUR).plan.actions == ()


@pytest.mark.parametrize("dry_run", [True, False])
def test_dry_run_and_pause_leave_slurm_alone(dry_run: bool) -> None:
    world = World()
    world.submit(2, limit_h=1)
    if dry_run:
        world.engine.dry_run = True
    else:
        world.repository.set_paused(True)
    report = world.cycle(0.1)
    assert report.plan.actions and report.outcomes == () and world.slurm.rpcs == 0
    assert set(site_factors(world).values()) == {0}
    assert [d.outcome for d in report.decisions if d.kind == "SetSiteFactor"] == [
        "dry-run" if dry_run else "skipped: paused"]
    assert not [d for d in world.cycle(0.2).decisions if d.kind == "SetSiteFactor"]  # recorded once


def test_each_cycle_is_recorded_with_its_kind() -> None:
    world = World()
    world.submit(2, limit_h=1)
    world.cycle(0.1)
    world.repository.set_paused(True)
    world.cycle(0.2)
    world.engine.dry_run = True
    world.cycle(0.3)                                   # dry-run and paused: recorded as dry-run
    report = revert_all(world.slurm, world.repository)
    assert report.reverted == 1 and world.slurm.rpcs == 2
    world.repository.set_paused(False)
    world.engine.dry_run = False
    world.cycle(0.4)
    assert [c.kind for c in reversed(world.repository.recent_cycles())] == [
        CycleKind.LIVE, CycleKind.PAUSED, CycleKind.DRY_RUN, CycleKind.REVERT, CycleKind.LIVE]


def test_a_job_keeps_the_backlog_wait_of_the_queue_it_arrived_in() -> None:
    world = World()
    first = [world.submit(8, limit_h=4) for _ in range(3)]  # same submit time: taken in job id order
    world.cycle(0.1)
    tracked = world.engine._tracker.jobs
    works = [tracked[j.job_id].work for j in first]
    assert all(w > 0 for w in works)
    assert [tracked[j.job_id].backlog_s for j in first] == pytest.approx([0.0, works[0] / 16, sum(works[:2]) / 16])
    late = world.submit(1, limit_h=1)
    world.cycle(0.2)
    assert tracked[late.job_id].backlog_s == pytest.approx(sum(works) / 16)  # the 16-GPU cluster's queue ahead
    world.submit(16, limit_h=48)
    world.cycle(1.5)  # more work queued behind it and an aging tick: its backlog wait stays as it was
    assert tracked[late.job_id].backlog_s == pytest.approx(sum(works) / 16)


def test_a_failed_update_is_recorded_so_revert_restores_it_if_made() -> None:
    """scontrol may time out (or slurmctld answer oddly) after making an update: slurmsched
    keeps its record all the same; revert restores the update Slurm made and drops the
    record of the one it never made."""
    world = World()
    made, refused = world.submit(1, limit_h=1), world.submit(2, limit_h=4)
    apply = world.slurm.apply

    def unconfirmed(actions):
        outcomes = apply([a for a in actions if a.job_id == made.job_id])  # the other one is never made
        return [dataclasses.replace(o, ok=False, message="scontrol did not answer within 20 s") for o in outcomes] + [
            ActionOutcome(a, False, "Unexpected message received") for a in actions if a.job_id != made.job_id]

    world.slurm.apply = unconfirmed
    report = world.cycle(0.1)
    assert {o.action.job_id for o in report.outcomes if not o.ok} == {made.job_id, refused.job_id}
    assert site_factors(world)[made.job_id] > 0 and site_factors(world)[refused.job_id] == 0
    assert {c.job_id for c in world.repository.applied_changes()} == {made.job_id, refused.job_id}
    world.slurm.apply = apply
    world.repository.set_paused(True)
    revert = revert_all(world.slurm, world.repository)
    assert (revert.reverted, revert.left) == (1, ()) and world.repository.applied_changes() == []
    assert set(site_factors(world).values()) == {0}


def test_a_restoring_update_slurm_refused_keeps_its_record_so_revert_restores_it() -> None:
    """A record is forgotten once Slurm confirms the original is back, not before: an update
    that failed leaves slurmsched's value in force, which revert must still know."""
    world = World()
    job = world.submit(1, limit_h=1)
    world.cycle(0.1)
    value = site_factors(world)[job.job_id]
    assert value > 0
    apply = world.slurm.apply
    world.slurm.apply = lambda actions: [ActionOutcome(a, False, "Unexpected message received") for a in actions]
    fifo = Engine(world.slurm, world.repository, world.predictor, make_policy("fifo"), world.planner)
    report = fifo.run_cycle(START + 0.2 * HOUR)
    assert [(a.value, o.ok) for a, o in zip(report.plan.actions, report.outcomes)] == [(0, False)]
    assert [(c.job_id, c.current) for c in world.repository.applied_changes()] == [(job.job_id, str(value))]
    world.slurm.apply = apply
    assert [a.value for a in fifo.run_cycle(START + 0.3 * HOUR).plan.actions] == [0]  # tried again
    assert site_factors(world) == {job.job_id: 0} and world.repository.applied_changes() == []


def test_the_cycle_after_a_pause_rereads_what_revert_restored() -> None:
    """A switch request is set once (the queue may not show it): after revert and resume
    the engine must know the record is gone, or it never sets the request again."""
    world = World(weights=dataclasses.replace(WEIGHTS, topology_plugin="topology/tree"))
    job = world.submit(16, limit_h=1)                  # two nodes
    first = world.cycle(0.1)
    assert {type(a).__name__ for a in first.plan.actions} == {"SetSiteFactor", "SetSwitches"}
    world.repository.set_paused(True)
    assert revert_all(world.slurm, world.repository).reverted == 2
    world.cycle(0.2)                                   # paused
    world.repository.set_paused(False)
    again = world.cycle(0.3)                           # not a full pass by the clock (refresh_s is 1 h)
    assert {(type(a).__name__, a.job_id) for a in again.plan.actions} == {("SetSiteFactor", job.job_id),
                                                                          ("SetSwitches", job.job_id)}


def test_a_refit_learns_from_the_newest_finished_jobs() -> None:
    """``daemon.fit_history_jobs``: a database that grows for years is not read whole at every refit."""
    fitted: list[list[int]] = []

    class Recording(UserLimitPredictor):
        def fit(self, history):  # noqa: ANN001, ANN202 - the predictor protocol's
            fitted.append([j.job_id for j in history])
            super().fit(history)

    repository = MemoryJobRepository(cluster="sim")
    day = 24 * HOUR
    repository.ingest_finished([
        JobRecord(job_id=i, user="ann", submit_time=START - ago - HOUR, start_time=START - ago - HOUR,
                  end_time=START - ago, state=JobState.COMPLETED, time_limit_s=7200)
        for i, ago in ((1, 400 * day), (2, 364 * day), (3, day))])
    for limit, learned in ((2, [2, 3]), (None, [1, 2, 3])):
        world = World()
        engine = Engine(world.slurm, repository, Recording(), world.policy, world.planner, fit_limit=limit)
        engine.refit(START)
        assert fitted[-1] == learned


def test_revert_takes_a_job_valued_by_job_submit_lua_back_to_slurms_default() -> None:
    """A job the script gave a level that the daemon's cycle then moves: the value it
    replaced is job_submit.lua's, i.e. slurmsched's own, so revert restores Slurm's 0."""
    world = World()
    by_script = world.planner.scale(WEIGHTS).value(0)  # the script thought it tiny
    stamped = JobRecord(job_id=world.next_id, user="alice", name="train", submit_time=world.clock.now(),
                        partition="batch", gpus=16, nodes=2, time_limit_s=int(48 * HOUR), site_factor=by_script,
                        admin_comment=submit_stamp(by_script))
    world.slurm.submit(SimJob(trace=stamped, job_id=stamped.job_id, submit=stamped.submit_time, duration=HOUR,
                              units=16, bf_limit=48 * HOUR, final_state=JobState.COMPLETED,
                              partition=world.spec.partition("batch"), nodes=2, site_factor=by_script))
    assert site_factors(world)[stamped.job_id] == by_script
    report = world.cycle(0.1)
    moved = [a for a in report.plan.actions if a.job_id == stamped.job_id]
    assert moved and moved[0].value != by_script
    world.repository.set_paused(True)
    revert_all(world.slurm, world.repository)
    assert set(site_factors(world).values()) == {0}


class Requeuing:
    """Slurm as a requeue leaves a job (seen on 22.05): it starts, comes back pending, and
    keeps the SiteFactor it was given before it started."""

    def __init__(self) -> None:
        self.job = JobRecord(job_id=7, user="alice", name="train", submit_time=START, partition="batch", gpus=4,
                             time_limit_s=int(4 * HOUR))
        self.site_factor, self.running = 0, False

    def snapshot(self) -> ClusterSnapshot:
        job = dataclasses.replace(self.job, state=JobState.RUNNING if self.running else JobState.PENDING,
                                  site_factor=None if self.running else self.site_factor)
        return ClusterSnapshot(START, "test", (job,), (), WEIGHTS)

    def finished_since(self, since: float) -> list[JobRecord]:
        return []

    def apply(self, actions):
        self.site_factor = actions[-1].value
        return [ActionOutcome(a, True) for a in actions]


def test_a_requeued_job_comes_back_with_its_record_so_revert_restores_it() -> None:
    slurm, repository = Requeuing(), MemoryJobRepository(cluster="test")
    predictor = UserLimitPredictor()
    predictor.fit([])
    engine = Engine(slurm, repository, predictor, make_policy("qssf", POLICY_ARGS), Planner(Config()))
    engine.run_cycle(START + 60)
    given = slurm.site_factor
    assert given > 0
    slurm.running = True                               # it starts: slurmsched's value stays on the job
    engine.run_cycle(START + 120)
    slurm.running = False                              # preempted and requeued, or its node failed
    engine.run_cycle(START + 180)
    assert slurm.site_factor == given
    assert [(c.job_id, c.original, c.current) for c in repository.applied_changes()] == [(7, "0", str(given))]
    repository.set_paused(True)
    assert revert_all(slurm, repository).reverted == 1 and slurm.site_factor == 0


def test_revert_restores_a_running_job_so_a_requeue_brings_back_no_value_of_slurmscheds() -> None:
    """revert dropped the records of running jobs and restored nothing on them: a job
    requeued after it came back pending with slurmsched's SiteFactor and no record."""
    slurm, repository = Requeuing(), MemoryJobRepository(cluster="test")
    predictor = UserLimitPredictor()
    predictor.fit([])
    engine = Engine(slurm, repository, predictor, make_policy("qssf", POLICY_ARGS), Planner(Config()))
    engine.run_cycle(START + 60)
    assert slurm.site_factor > 0
    slurm.running = True
    repository.set_paused(True)
    report = revert_all(slurm, repository)
    assert (report.reverted, report.jobs, report.forgotten, report.kept) == (1, 1, 0, ())
    assert slurm.site_factor == 0 and repository.applied_changes() == []
    slurm.running = False                              # requeued while slurmsched is paused
    assert slurm.snapshot().jobs[0].site_factor == 0


class SplitArray:
    """Slurm 22.05 as a job array leaves a task split off it (seen live): the task gets a
    job id of its own, its ``ArrayJobId`` is the array's, and it holds the SiteFactor the
    array held; an update of the array's id changes every task, one of the task's id the
    task alone."""

    def __init__(self) -> None:
        self.array = JobRecord(job_id=2, user="alice", name="sweep", submit_time=START, partition="batch", gpus=4,
                               time_limit_s=int(4 * HOUR), array_job_id=2)
        self.site_factors = {2: 0}

    def split(self, job_id: int, task: int) -> None:
        self.site_factors[job_id] = self.site_factors[2]

    def snapshot(self) -> ClusterSnapshot:
        jobs = tuple(dataclasses.replace(self.array, job_id=i, array_task_id=None if i == 2 else 5, site_factor=v)
                     for i, v in sorted(self.site_factors.items()))
        return ClusterSnapshot(START, "test", jobs, (), WEIGHTS)

    def finished_since(self, since: float) -> list[JobRecord]:
        return []

    def apply(self, actions):
        for action in actions:
            for job_id in self.site_factors:
                if job_id == action.job_id or (action.job_id == 2 and job_id != 2):
                    self.site_factors[job_id] = action.value
        return [ActionOutcome(a, True) for a in actions]


def test_a_task_split_off_an_array_has_its_arrays_record_so_revert_restores_it() -> None:
    """The task held slurmsched's value with no record of its own: a later change of it
    recorded that value as the original, and revert put it back on the task (after the
    array's restore had cleared it)."""
    slurm, repository = SplitArray(), MemoryJobRepository(cluster="test")
    predictor = UserLimitPredictor()
    predictor.fit([])
    engine = Engine(slurm, repository, predictor, make_policy("qssf", POLICY_ARGS), Planner(Config()))
    engine.run_cycle(START + 60)
    given = slurm.site_factors[2]
    assert given > 0
    slurm.split(7, 5)                                  # a user held and released task 5, say
    report = engine.run_cycle(START + 3 * HOUR)        # aging ticks: both move
    assert {a.job_id for a in report.plan.actions} == {2, 7} and slurm.site_factors[7] != given
    assert [(c.job_id, c.original) for c in repository.applied_changes()] == [(2, "0"), (7, "0")]
    repository.set_paused(True)
    revert_all(slurm, repository)
    assert slurm.site_factors == {2: 0, 7: 0} and repository.applied_changes() == []


def test_an_arrays_record_stays_while_a_task_split_off_it_is_queued() -> None:
    """The array's own job left the queue (its last task ran): the engine dropped its
    record, and the task that still held slurmsched's value lost its only record."""
    slurm, repository = SplitArray(), MemoryJobRepository(cluster="test")
    predictor = UserLimitPredictor()
    predictor.fit([])
    engine = Engine(slurm, repository, predictor, make_policy("qssf", POLICY_ARGS), Planner(Config()),
                    refresh_s=60.0)
    engine.run_cycle(START + 60)
    given = slurm.site_factors[2]
    slurm.split(7, 5)
    del slurm.site_factors[2]                          # the array's own job ran and ended
    engine.run_cycle(START + 300)                      # a full pass: records of jobs not queued go
    assert [(c.job_id, c.current) for c in repository.applied_changes()] == [(2, str(given))]
    repository.set_paused(True)
    report = revert_all(slurm, repository)
    assert (report.reverted, report.forgotten) == (1, 1)
    assert slurm.site_factors == {7: 0} and repository.applied_changes() == []
