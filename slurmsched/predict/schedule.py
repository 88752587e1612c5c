"""When to refit a learned predictor: on a schedule, never every cycle."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RefitSchedule:
    """Refit once enough new history has accumulated.

    A refit is due when the model was never fitted and at least ``min_jobs`` finished
    jobs exist, or when at least ``min_new_jobs`` jobs finished since the last fit and
    either they grew the history by ``growth`` (a fraction of the jobs the last fit saw)
    or ``interval_s`` seconds passed since it (``None``: no time trigger).

    Attributes:
        min_jobs: history needed for the first fit.
        min_new_jobs: new finished jobs needed for any later refit: a quarter of the
            10,000 latest runs slurmsched's trees train on, so each refit sees a
            noticeably different window (history statistics, which carry most of a
            prediction, are updated every cycle anyway). With 1,000 a 75-day simulated
            replay of Philly refitted 75 times, 80 of its 380 CPU seconds; the trace
            tables moved within their run-to-run sensitivity either way (qssf on
            HPC2N: 55% of the SJF gain with 1,000, 50% with 2,500; on Philly: 8.6 and
            7.5 days avg JCT against FIFO's 7.9).
        growth: relative history growth that triggers a refit.
        interval_s: time since the last fit that triggers a refit (daemon: one day).
    """

    min_jobs: int = 200
    min_new_jobs: int = 2500
    growth: float = 0.25
    interval_s: float | None = 86400.0

    def due(self, history_jobs: int, fitted_jobs: int | None, now: float, fitted_at: float | None) -> bool:
        """True when a refit should run now.

        Args:
            history_jobs: finished jobs available now.
            fitted_jobs: finished jobs the last fit saw (``None``: never fitted).
            now: current (possibly simulated) time, POSIX seconds.
            fitted_at: time of the last fit (``None``: never fitted).
        """
        if fitted_jobs is None or fitted_at is None:
            return history_jobs >= self.min_jobs
        new = history_jobs - fitted_jobs
        if new < self.min_new_jobs:
            return False
        if new >= self.growth * fitted_jobs:
            return True
        return self.interval_s is not None and now - fitted_at >= self.interval_s

    def next_due(self, history_jobs: int, fitted_jobs: int | None, fitted_at: float | None) -> float:
        """When the time trigger makes a refit due with no new history (``inf``: never).

        Only the ``interval_s`` trigger moves with time alone; every other condition of
        :meth:`due` changes only as jobs finish. Arguments as for :meth:`due`.
        """
        if (fitted_jobs is None or fitted_at is None or self.interval_s is None
                or history_jobs - fitted_jobs < self.min_new_jobs):
            return math.inf
        return fitted_at + self.interval_s
