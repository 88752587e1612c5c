"""What every queue-ordering policy sees and returns.

A policy is pure: each job's score is a function of that job, its prediction and the
time only (never of the other jobs), so a job's score can be computed once and kept
while nothing about it changes. :meth:`Policy.changes_at` says when time itself will
change a job's score (an aging tick); until then an unchanged job keeps its score.
The order is ascending ``(score, submit time, job id)``: deterministic tie-breaks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Protocol

from slurmsched.model import JobRecord, Prediction


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """Inputs of one ranking.

    Attributes:
        now: POSIX seconds of the cycle.
        pending: pending jobs in the order Slurm listed them.
        predictions: duration prediction per job id (a job may be missing: the policy
            then falls back to the job's time limit).
    """

    now: float
    pending: tuple[JobRecord, ...]
    predictions: Mapping[int, Prediction]


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


def sort_key(job: JobRecord, score: float) -> tuple[float, float, int]:
    """The total order of every policy: score, then submit time, then job id."""
    return (score, job.submit_time, job.job_id)


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

    def changes_at(self, job: JobRecord, prediction: Prediction | None, now: float) -> float:
        """When the job's score next changes with time alone (``math.inf``: never)."""
        ...

    def score(self, job: JobRecord, prediction: Prediction | None, now: float) -> float:
        """The job's own score at ``now`` (lower runs earlier); pure."""
        ...

    def explain(self, job: JobRecord, prediction: Prediction | None, now: float) -> str:
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

    def changes_at(self, job: JobRecord, prediction: Prediction | None, now: float) -> float:
        """Time alone changes no score (override for aging)."""
        return math.inf

    def score(self, job: JobRecord, prediction: Prediction | None, now: float) -> float:
        """The job's own score (subclasses define it)."""
        raise NotImplementedError

    def explain(self, job: JobRecord, prediction: Prediction | None, now: float) -> str:
        """Why (subclasses define it)."""
        raise NotImplementedError

    def rank(self, context: PolicyContext) -> Ranking:
        """Every pending job scored and sorted, with reasons."""
        now, predictions = context.now, context.predictions
        rows = sorted((sort_key(job, self.score(job, predictions.get(job.job_id), now)), job)
                      for job in context.pending)
        scores = tuple(JobScore(job.job_id, key[0], i, self.explain(job, predictions.get(job.job_id), now))
                       for i, (key, job) in enumerate(rows, 1))
        return Ranking(self.name, self.reorders, scores, self.guard_s)
