"""What every queue-ordering policy sees and returns.

A policy is a pure function of a :class:`PolicyContext` (the pending jobs, their
predictions and the time) to a :class:`Ranking`. It performs no I/O and keeps no
state between calls, so the daemon and the simulator get the same answer from the
same inputs.
"""

from __future__ import annotations

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
            waits, and exactly 0 once the guard has expired. It depends on the job
            and the time only, never on the other jobs.
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


class Policy(Protocol):
    """A queue-ordering policy (registered by name in :mod:`slurmsched.policy.registry`)."""

    name: str
    reorders: bool

    def rank(self, context: PolicyContext) -> Ranking:
        """Score and order every pending job of ``context``; pure, no I/O."""
        ...
