"""What every queue-ordering policy sees and returns.

A policy is pure: each job's score is a function of that job, its prediction, the time
and its *backlog wait*, a number fixed when the job is first seen (:func:`backlog_waits`),
never of the other jobs' current state; so a job's score can be computed once and kept
while nothing about it changes. :meth:`Policy.changes_at` says when time itself will
change a job's score (an aging tick); until then an unchanged job keeps its score.
:meth:`Policy.scorer` gives both as a function of the time alone, for an engine that
scores the same job again at each tick.
The order is ascending ``(score, submit time, job id)``: deterministic tie-breaks.

The backlog wait estimates how long first come, first served would keep the job
waiting: the expected work (:meth:`Policy.work`) of the jobs queued before it, over the
cluster's capacity (:meth:`Policy.capacity`), when it was first seen. Policies whose
patience scales with the queue (``qssf``'s guard) use it; the others ignore it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Protocol, Sequence

from slurmsched.model import JobRecord, NodeRecord, Prediction
from slurmsched.policy.hetjob import as_one, het_groups, whole


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """Inputs of one ranking.

    Attributes:
        now: POSIX seconds of the cycle.
        pending: pending jobs in the order Slurm listed them.
        predictions: duration prediction per job id (a job may be missing: the policy
            then falls back to the job's time limit).
        backlogs: each job's backlog wait in seconds, fixed when the engine first saw
            it (:func:`backlog_waits`); a missing job's is 0.
    """

    now: float
    pending: tuple[JobRecord, ...]
    predictions: Mapping[int, Prediction]
    backlogs: Mapping[int, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JobScore:
    """A policy's verdict on one pending job.

    Attributes:
        job_id: the job.
        score: the job's own score; lower runs earlier. For ``qssf`` it is the
            predicted service in GPU-seconds, shrunk by the aging guard while the job
            waits, and exactly 0 once the guard has expired.
        rank: 1-based position in the policy's order.
        reason: why, for humans (``slurmsched explain``).
    """

    job_id: int
    score: float
    rank: int
    reason: str


@dataclass(frozen=True, slots=True)
class Ranking:
    """A policy's order of the pending queue.

    Attributes:
        policy: name of the policy that made it.
        reorders: False when the policy leaves Slurm's own order alone (``fifo``): the
            planner then only undoes what slurmsched set earlier.
        scores: one entry per pending job, sorted by rank.
        guard_s: the aging guard's bound in seconds (``None`` without a guard).
    """

    policy: str
    reorders: bool
    scores: tuple[JobScore, ...]
    guard_s: float | None = None


#: A job's ``(score, changes_at)`` at a given time (:meth:`Policy.scorer`).
Scorer = Callable[[float], tuple[float, float]]


def sort_key(job: JobRecord, score: float) -> tuple[float, float, int]:
    """The total order of every policy: score, then submit time, then job id."""
    return (score, job.submit_time, job.job_id)


def backlog_waits(arrivals: Iterable[tuple[JobRecord, float]], capacity: float,
                  queued: float = 0.0) -> dict[int, float]:
    """Each arriving job's backlog wait: the work queued before it over ``capacity``, in seconds.

    Arrivals are taken in submit order (then job id); each one counts ``queued`` (the
    work of the jobs already waiting) plus the work of the arrivals submitted before it.

    Args:
        arrivals: ``(job, work)`` pairs, work in the policy's units x seconds
            (:meth:`Policy.work`).
        capacity: the cluster's capacity (:meth:`Policy.capacity`); 0 or less gives
            every job a backlog wait of 0.
        queued: work of the jobs that were waiting before these arrived.
    """
    waits: dict[int, float] = {}
    for job, work in sorted(arrivals, key=lambda jw: (jw[0].submit_time, jw[0].job_id)):
        waits[job.job_id] = queued / capacity if capacity > 0 else 0.0
        queued += work
    return waits


class Policy(Protocol):
    """A queue-ordering policy (registered by name in :mod:`slurmsched.policy.registry`).

    Attributes:
        name: registry name.
        reorders: False for policies that leave Slurm's order alone.
        guard_s: the aging guard's bound in seconds, ``None`` without one.
    """

    name: str
    reorders: bool
    guard_s: float | None

    def work(self, job: JobRecord, prediction: Prediction | None) -> float:
        """The job's expected work (capacity units x seconds) for the backlog; 0 if not estimated."""
        ...

    def capacity(self, nodes: Sequence[NodeRecord]) -> float:
        """The cluster's capacity in the units of :meth:`work` (0: no backlog waits): a function
        of each node's configured ``cpus`` and ``gres`` alone, not of its state or allocation
        (an engine computes it again only when these change)."""
        ...

    def changes_at(self, job: JobRecord, prediction: Prediction | None, now: float, backlog_s: float = 0.0) -> float:
        """When the job's score next changes with time alone (``math.inf``: never)."""
        ...

    def score(self, job: JobRecord, prediction: Prediction | None, now: float, backlog_s: float = 0.0) -> float:
        """The job's own score at ``now`` given its backlog wait (lower runs earlier); pure."""
        ...

    def scorer(self, job: JobRecord, prediction: Prediction | None, backlog_s: float = 0.0) -> Scorer:
        """The job's score and next change as a function of the time alone: for every ``now``,
        ``scorer(job, prediction, backlog_s)(now) == (score(job, prediction, now, backlog_s),
        changes_at(job, prediction, now, backlog_s))``, bit for bit. What does not depend on
        the time is computed once, when the scorer is made; it keeps no state between calls."""
        ...

    def explain(self, job: JobRecord, prediction: Prediction | None, now: float, backlog_s: float = 0.0) -> str:
        """Why the job has its score, for humans."""
        ...

    def rank(self, context: PolicyContext) -> Ranking:
        """Score and order every pending job of ``context``; pure, no I/O."""
        ...


class ScoringPolicy:
    """Base of the built-in policies: :meth:`rank` sorts by :func:`sort_key` of :meth:`score`."""

    name = ""
    reorders = True
    guard_s: float | None = None

    def work(self, job: JobRecord, prediction: Prediction | None) -> float:
        """No work estimate (override to give jobs backlog waits)."""
        return 0.0

    def capacity(self, nodes: Sequence[NodeRecord]) -> float:
        """No capacity: every backlog wait is 0 (override with :meth:`work`)."""
        return 0.0

    def changes_at(self, job: JobRecord, prediction: Prediction | None, now: float, backlog_s: float = 0.0) -> float:
        """Time alone changes no score (override for aging)."""
        return math.inf

    def score(self, job: JobRecord, prediction: Prediction | None, now: float, backlog_s: float = 0.0) -> float:
        """The job's own score (subclasses define it)."""
        raise NotImplementedError

    def scorer(self, job: JobRecord, prediction: Prediction | None, backlog_s: float = 0.0) -> Scorer:
        """:meth:`score` and :meth:`changes_at` at each ``now`` (override to compute their
        time-independent parts once)."""
        return lambda now: (self.score(job, prediction, now, backlog_s),
                            self.changes_at(job, prediction, now, backlog_s))

    def explain(self, job: JobRecord, prediction: Prediction | None, now: float, backlog_s: float = 0.0) -> str:
        """Why (subclasses define it)."""
        raise NotImplementedError

    def rank(self, context: PolicyContext) -> Ranking:
        """Every pending job scored and sorted, with reasons; the pending components of a
        heterogeneous job as one job (:mod:`slurmsched.policy.hetjob`)."""
        now, predictions, backlogs = context.now, context.predictions, context.backlogs

        def verdict(subject: JobRecord, lead: int) -> tuple[float, str]:
            prediction, backlog = predictions.get(lead), backlogs.get(lead, 0.0)
            return self.score(subject, prediction, now, backlog), self.explain(subject, prediction, now, backlog)

        verdicts: dict[int, tuple[float, str]] = {}
        for group in het_groups(context.pending).values():  # one verdict for all of a job's components
            score, reason = verdict(whole(group), group[0].job_id)
            shared = (score, as_one(reason, group))
            verdicts.update((job.job_id, shared) for job in group)
        for job in context.pending:
            if job.job_id not in verdicts:
                verdicts[job.job_id] = verdict(job, job.job_id)
        rows = sorted((sort_key(job, verdicts[job.job_id][0]), job) for job in context.pending)
        scores = tuple(JobScore(job.job_id, key[0], i, verdicts[job.job_id][1]) for i, (key, job) in enumerate(rows, 1))
        return Ranking(self.name, self.reorders, scores, self.guard_s)
