"""``fifo``: leave Slurm's own order alone.

The score is the submit time, which only documents the order Slurm would use anyway;
``reorders`` is False, so the planner sets no SiteFactor and only undoes values
slurmsched set under another policy.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmsched.model import JobRecord, Prediction
from slurmsched.policy.base import ScoringPolicy


@dataclass(frozen=True)
class FifoArgs:
    """``[policy.fifo]``: no arguments yet."""

    def validate(self, prefix: str) -> None:
        """Nothing to check."""


class FifoPolicy(ScoringPolicy):
    """Scores each job by its submit time; changes nothing in Slurm."""

    name = "fifo"
    reorders = False

    def __init__(self, args: FifoArgs | None = None) -> None:
        self.args = args or FifoArgs()

    def score(self, job: JobRecord, prediction: Prediction | None, now: float, backlog_s: float = 0.0) -> float:
        """The submit time."""
        return job.submit_time

    def explain(self, job: JobRecord, prediction: Prediction | None, now: float, backlog_s: float = 0.0) -> str:
        """Always the same: Slurm decides."""
        return "fifo: Slurm's own order, unchanged"
