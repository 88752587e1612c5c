"""The queue tracker keeps what does not change between cycles: scorers and capacity."""

from __future__ import annotations

import dataclasses
from typing import Sequence

from slurmsched.engine.tracker import QueueTracker
from slurmsched.model import GresRequest, JobRecord, NodeRecord, Prediction
from slurmsched.policy import make_policy
from slurmsched.policy.base import Scorer

HOUR = 3600.0
NOW = 1_800_000_000.0


class FixedPredictor:
    """Predicts every job to run ``job_id`` hours."""

    name = "fixed"
    version = "v1"

    def fit(self, history: Sequence[JobRecord]) -> None:
        """Nothing to fit."""

    def update(self, finished: Sequence[JobRecord]) -> None:
        """Nothing to learn."""

    def predict(self, jobs: Sequence[JobRecord], *, remember: bool = True) -> list[Prediction]:
        return [Prediction(j.job_id, j.job_id * HOUR, j.job_id * HOUR, j.job_id * HOUR, "fixed") for j in jobs]


class CountingQssf:
    """``qssf`` with one-hour aging ticks, counting the scorers and capacities it makes."""

    def __init__(self) -> None:
        self.inner = make_policy("qssf", {"aging_step_h": 1})
        self.name, self.reorders, self.guard_s = self.inner.name, self.inner.reorders, self.inner.guard_s
        self.scorers: list[int] = []
        self.capacities = 0

    def __getattr__(self, attribute: str) -> object:
        return getattr(self.inner, attribute)

    def scorer(self, job: JobRecord, prediction: Prediction | None, backlog_s: float = 0.0) -> Scorer:
        self.scorers.append(job.job_id)
        return self.inner.scorer(job, prediction, backlog_s)

    def capacity(self, nodes: Sequence[NodeRecord]) -> float:
        self.capacities += 1
        return self.inner.capacity(nodes)


def node(name: str, gpus: int, used: int = 0) -> NodeRecord:
    return NodeRecord(name, ("MIXED",), cpus=64, gres=(GresRequest("gpu", "a100", gpus),),
                      gres_used=(GresRequest("gpu", "a100", used),))


def pending(job_id: int, **fields: object) -> JobRecord:
    return JobRecord(**{"job_id": job_id, "user": "u", "submit_time": NOW - HOUR, "gpus": 2, "time_limit_s": 86400,
                        **fields})


def test_an_aging_tick_rescores_with_the_kept_scorer_until_the_record_changes() -> None:
    policy = CountingQssf()
    tracker = QueueTracker(policy, FixedPredictor())  # type: ignore[arg-type]
    jobs = [pending(1), pending(2)]
    tracker.update(NOW, pending=jobs)
    assert sorted(policy.scorers) == [1, 2]
    first = {i: t.score for i, t in tracker.jobs.items()}
    changes = tracker.update(NOW + HOUR, pending=jobs)  # an aging tick: both rescored, no scorer made
    assert sorted(t.job.job_id for t in changes.replan) == [1, 2]
    assert sorted(policy.scorers) == [1, 2]
    assert all(tracker.jobs[i].score < first[i] for i in first)
    assert {i: t.score for i, t in tracker.jobs.items()} == {
        j.job_id: policy.inner.score(j, FixedPredictor().predict([j])[0], NOW + HOUR) for j in jobs}
    # A new record of job 2 (its SiteFactor moved) gets a new scorer at its next rescore.
    edited = [jobs[0], pending(2, site_factor=5)]
    tracker.update(NOW + HOUR, pending=edited)
    tracker.update(NOW + 2 * HOUR, pending=edited)
    assert sorted(policy.scorers) == [1, 2, 2]
    assert tracker.jobs[2].score == policy.inner.score(edited[1], FixedPredictor().predict(edited[1:])[0],
                                                       NOW + 2 * HOUR)


def test_capacity_is_computed_again_only_when_the_configured_resources_change() -> None:
    policy = CountingQssf()
    tracker = QueueTracker(policy, FixedPredictor())  # type: ignore[arg-type]
    nodes = [node("a", 8), node("b", 8)]
    jobs = [pending(1)]
    tracker.update(NOW, pending=jobs, nodes=nodes)
    jobs = jobs + [pending(2)]
    tracker.update(NOW, pending=jobs, nodes=[node("a", 8, used=2), node("b", 8, used=8)])  # allocations only
    assert policy.capacities == 1
    assert tracker.jobs[2].backlog_s == 2 * HOUR / 16  # job 1's 1 h x 2 GPUs over 16 GPUs
    tracker.update(NOW, pending=jobs + [pending(3)], nodes=[node("a", 8), node("b", 4)])
    assert policy.capacities == 2
    assert tracker.jobs[3].backlog_s == (2 * HOUR + 4 * HOUR) / 12


def test_new_records_are_taken_in_job_id_order_whatever_their_memory_order() -> None:
    tracker = QueueTracker(make_policy("qssf"), FixedPredictor())
    first = [pending(i) for i in range(60, 0, -1)]  # made, and so laid out, in descending job id
    changes = tracker.update(NOW, pending=first)
    assert [t.job.job_id for t in changes.fresh] == list(range(1, 61))
    edited = [pending(i, name="edited") if i % 7 == 0 else job
              for i, job in zip(range(60, 0, -1), first)]  # new records for every 7th job
    changes = tracker.update(NOW, pending=edited)  # re-predicted first, then the unsettled rest
    assert [t.job.job_id for t in changes.replan][:8] == list(range(7, 61, 7))


def test_a_released_hold_is_scored_again_at_once() -> None:
    """Slurm clears a held job's eligible time and sets it at the release: aging starts over
    then, in that cycle, not at some later tick (a guard already reached has none)."""
    policy = CountingQssf()
    tracker = QueueTracker(policy, FixedPredictor())  # type: ignore[arg-type]
    held = dataclasses.replace(pending(1, priority=0), submit_time=NOW - 200 * HOUR)  # held long past the guard
    tracker.update(NOW, pending=[held])
    assert tracker.jobs[1].score == 0.0 and tracker.jobs[1].due == float("inf")
    released = dataclasses.replace(held, eligible_time=NOW + 60, priority=100)
    changes = tracker.update(NOW + 60, pending=[released])
    assert [t.job.job_id for t in changes.replan] == [1]
    assert tracker.jobs[1].score == policy.inner.score(released, FixedPredictor().predict([released])[0], NOW + 60) > 0


def test_heterogeneous_components_share_one_scorer_of_the_whole_job_until_one_leaves() -> None:
    policy = CountingQssf()
    tracker = QueueTracker(policy, FixedPredictor())  # type: ignore[arg-type]
    lead, member = pending(1, het_job_id=1, het_job_offset=0), pending(2, het_job_id=1, het_job_offset=1, gpus=6)
    tracker.update(NOW, pending=[member, lead])
    assert policy.scorers == [1]  # one scorer, of the whole job (the leader's id)
    first = tracker.jobs[1]
    as_whole = policy.inner.scorer(dataclasses.replace(lead, gpus=8), first.prediction, first.backlog_s)(NOW)[0]
    assert tracker.jobs[1].score == tracker.jobs[2].score == as_whole
    assert tracker.rank(tracker.jobs[2]) == tracker.rank(tracker.jobs[1]) + 1
    reason = tracker.explain(tracker.jobs[2], NOW)
    assert reason.startswith("heterogeneous job 1 (2 components, scored as one): ") and "8 GPUs" in reason
    changes = tracker.update(NOW, pending=[lead])  # the other component left (cancelled)
    assert changes.departed == (2,) and [t.job.job_id for t in changes.replan] == [1]
    alone = tracker.jobs[1]
    assert alone.score == policy.inner.scorer(lead, alone.prediction, alone.backlog_s)(NOW)[0] != as_whole
    assert not tracker.explain(alone, NOW).startswith("heterogeneous")
    assert policy.scorers == [1, 1]
