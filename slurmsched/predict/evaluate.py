"""Online, time-ordered evaluation of predictors on a job history.

Every job is predicted as of its own submit time: predictors have seen (through
:meth:`update`) exactly the jobs that ended at or before that moment, and learned
models were last refitted (on those jobs only) when the :class:`RefitSchedule` said so.
"""

from __future__ import annotations

import heapq
import logging
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from slurmsched.model import JobRecord, Prediction
from slurmsched.predict.common import limit_of, observed_runtime
from slurmsched.predict.metrics import Accuracy, accuracy
from slurmsched.predict.protocol import StagedPredictor
from slurmsched.predict.schedule import RefitSchedule

log = logging.getLogger(__name__)

#: Refit schedule of the evaluation: history growth only (a trace spans years; the
#: daemon's daily trigger would mean a thousand refits).
EVALUATION_SCHEDULE = RefitSchedule(min_jobs=200, min_new_jobs=1000, growth=0.25, interval_s=None)


@dataclass(frozen=True)
class PredictorResult:
    """One predictor's predictions over the evaluated jobs (arrays aligned with ``actual_s``)."""

    name: str
    estimate_s: np.ndarray
    low_s: np.ndarray
    high_s: np.ndarray
    accuracy: Accuracy


@dataclass(frozen=True)
class Evaluation:
    """Result of :func:`evaluate`.

    Attributes:
        jobs: jobs evaluated (those with a known run time).
        actual_s: their run times, in submit order.
        refits: how many times learned predictors were refitted.
        results: one entry per predictor, in the order given.
    """

    jobs: int
    actual_s: np.ndarray
    refits: int
    results: tuple[PredictorResult, ...]

    def as_dict(self) -> dict[str, object]:
        """``{"jobs": N, "predictors": {name: metrics}}`` as ``predict evaluate --json`` prints."""
        return {"jobs": self.jobs, "predictors": {r.name: r.accuracy.as_dict() for r in self.results}}


def has_time_limits(jobs: Iterable[JobRecord]) -> bool:
    """True when any job carries a requested time limit (``user_limit`` is meaningful)."""
    return any(limit_of(job) is not None for job in jobs)


class _Pending:
    """Prepared-but-unfinished predictions of one predictor, flushed before each refit."""

    def __init__(self, predictor: StagedPredictor) -> None:
        self.predictor = predictor
        self.prepared: list[object] = []
        self.done: list[Prediction] = []

    def flush(self) -> None:
        if self.prepared:
            self.done.extend(self.predictor.finish(self.prepared))
            self.prepared = []


def evaluate(jobs: Iterable[JobRecord], predictors: Sequence[StagedPredictor],
             schedule: RefitSchedule = EVALUATION_SCHEDULE,
             progress: Callable[[int], None] | None = None) -> Evaluation:
    """Replay jobs in submit order and score each predictor's predictions.

    Jobs that never ran (no start or end time) are skipped. Before each job is predicted,
    every job that ended at or before its submit time is passed to ``update`` (in end-time
    order); when ``schedule`` says so, every predictor that learns is refitted on all of them.

    Args:
        jobs: finished jobs, any order.
        predictors: staged predictors, freshly made (they are fitted here).
        schedule: when to refit.
        progress: called with the number of jobs just processed (for a progress bar).

    Raises:
        ValueError: no job with a known run time.
    """
    runs = sorted((j for j in jobs if observed_runtime(j) is not None), key=lambda j: (j.submit_time, j.job_id))
    if not runs:
        raise ValueError("no finished job with a known run time to evaluate")
    pending = [_Pending(p) for p in predictors]
    running: list[tuple[float, int, JobRecord]] = []
    history: list[JobRecord] = []
    fitted_jobs: int | None = None
    fitted_at: float | None = None
    refits = 0
    for seq, job in enumerate(runs):
        now = job.submit_time
        ended = []
        while running and running[0][0] <= now:
            ended.append(heapq.heappop(running)[2])
        if ended:
            history.extend(ended)
            for p in predictors:
                p.update(ended)
        if schedule.due(len(history), fitted_jobs, now, fitted_at):
            for entry in pending:
                if entry.predictor.learns:
                    entry.flush()
                    entry.predictor.fit(history)
            fitted_jobs, fitted_at, refits = len(history), now, refits + 1
            log.info("refit %d on %d jobs", refits, len(history))
        for entry in pending:
            entry.prepared.extend(entry.predictor.prepare([job]))
        assert job.end_time is not None  # a job with a run time has ended
        heapq.heappush(running, (job.end_time, seq, job))
        if progress is not None and seq % 1000 == 999:
            progress(1000)
    for entry in pending:
        entry.flush()
    if progress is not None:
        progress(len(runs) % 1000)
    actual = np.array([observed_runtime(j) for j in runs], dtype=float)
    results = []
    for entry in pending:
        estimate = np.array([p.estimate_s for p in entry.done], dtype=float)
        low = np.array([p.low_s for p in entry.done], dtype=float)
        high = np.array([p.high_s for p in entry.done], dtype=float)
        results.append(PredictorResult(entry.predictor.name, estimate, low, high,
                                       accuracy(estimate, actual, low, high)))
    return Evaluation(len(runs), actual, refits, tuple(results))
