"""``fifo``: leave Slurm's own order alone.

The ranking only documents the order Slurm listed the jobs in (submit time, then job
id); ``reorders`` is False, so the planner sets no SiteFactor and only undoes values
slurmsched set under another policy.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmsched.policy.base import JobScore, PolicyContext, Ranking


@dataclass(frozen=True)
class FifoArgs:
    """``[policy.fifo]``: no arguments yet."""

    def validate(self, prefix: str) -> None:
        """Nothing to check."""


class FifoPolicy:
    """Scores each job by its submit time; changes nothing in Slurm."""

    name = "fifo"
    reorders = False

    def __init__(self, args: FifoArgs | None = None) -> None:
        self.args = args or FifoArgs()

    def rank(self, context: PolicyContext) -> Ranking:
        """Order by (submit time, job id); the score is the submit time."""
        order = sorted(context.pending, key=lambda j: (j.submit_time, j.job_id))
        scores = tuple(JobScore(job.job_id, job.submit_time, i, "fifo: Slurm's own order, unchanged")
                       for i, job in enumerate(order, 1))
        return Ranking(self.name, False, scores)
