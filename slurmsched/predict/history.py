"""Online run statistics per key (user, user+name, ...), updated job by job.

Each :class:`RunStats` keeps totals over every run of its key plus a short window of
the most recent runs (by end time), and caches a numeric summary used as model
features. Keys are plain tuples; a :class:`StatsTable` maps keys to stats. A finished
job is first reduced to a :class:`Run` (its facts computed once, shared by every table).
"""

from __future__ import annotations

import math
from collections import deque
from typing import NamedTuple

from slurmsched.model import JobRecord
from slurmsched.predict.common import hit_limit, limit_of, observed_runtime

#: How many recent runs each key remembers.
RECENT = 10
_NAN = float("nan")
#: Names of the values in :meth:`RunStats.summary` (log2 seconds unless noted).
SUMMARY_NAMES = ("count", "last", "last2", "median", "spread", "ratio", "hit_rate", "mean")
EMPTY_SUMMARY = (0.0,) + (_NAN,) * (len(SUMMARY_NAMES) - 1)


class Run(NamedTuple):
    """The facts of one finished run that statistics need.

    Attributes:
        runtime: run time in seconds, floored at 1 s.
        log_runtime: log2 of ``runtime``.
        ratio: log2(runtime / time limit), or ``None`` without a limit.
        hit: whether the run hit its time limit.
        end: end time (POSIX seconds).
    """

    runtime: float
    log_runtime: float
    ratio: float | None
    hit: bool
    end: float


def run_of(job: JobRecord) -> Run | None:
    """The job's :class:`Run`, or ``None`` when it never ran."""
    runtime = observed_runtime(job)
    if runtime is None:
        return None
    limit = limit_of(job)
    return Run(runtime, math.log2(runtime), math.log2(runtime / limit) if limit else None,
               hit_limit(job, runtime), job.end_time or 0.0)


class RunStats:
    """Runs of one key: totals and the last :data:`RECENT` runs.

    Attributes:
        count: runs seen.
        total_s: sum of run times (seconds).
        recent: last run times in seconds, oldest first.
        last_end: end time of the most recent run.
    """

    __slots__ = ("count", "total_s", "sum_log", "recent", "ratios", "hits", "last_end", "_summary")

    def __init__(self) -> None:
        self.count = 0
        self.total_s = 0.0
        self.sum_log = 0.0
        self.recent: deque[float] = deque(maxlen=RECENT)
        self.ratios: deque[float] = deque(maxlen=RECENT)
        self.hits = 0
        self.last_end = _NAN
        self._summary: tuple[float, ...] | None = None

    def add(self, run: Run) -> None:
        """Fold one finished run into the stats."""
        self.count += 1
        self.total_s += run.runtime
        self.sum_log += run.log_runtime
        self.recent.append(run.runtime)
        if run.ratio is not None:
            self.ratios.append(run.ratio)
        self.hits += run.hit
        self.last_end = run.end
        self._summary = None

    @property
    def mean_s(self) -> float:
        """Mean run time over every run (seconds)."""
        return self.total_s / self.count

    def last2_s(self) -> float:
        """Mean of the last two run times (the last one if only one)."""
        if len(self.recent) < 2:
            return self.recent[-1]
        return 0.5 * (self.recent[-1] + self.recent[-2])

    def summary(self) -> tuple[float, ...]:
        """Values named by :data:`SUMMARY_NAMES`, NaN where undefined.

        ``count`` is log2(1 + runs); ``spread`` the standard deviation of the recent
        log2 run times; ``ratio`` the median recent log2(run time / limit); ``hit_rate``
        the share of all runs that hit their limit; ``mean`` the mean log2 run time.
        """
        if self._summary is None:
            logs = sorted(map(math.log2, self.recent))
            n = len(logs)
            median = logs[n // 2] if n % 2 else 0.5 * (logs[n // 2 - 1] + logs[n // 2])
            mean_recent = sum(logs) / n
            spread = math.sqrt(sum([(x - mean_recent) ** 2 for x in logs]) / n) if n > 1 else _NAN
            ratios = sorted(self.ratios)
            self._summary = (
                math.log2(1 + self.count),
                math.log2(self.recent[-1]),
                math.log2(self.last2_s()),
                median,
                spread,
                ratios[len(ratios) // 2] if ratios else _NAN,
                self.hits / self.count,
                self.sum_log / self.count,
            )
        return self._summary


class StatsTable(dict):
    """``key -> RunStats``, creating entries on first use by :meth:`add`."""

    def add(self, key: tuple, run: Run) -> None:
        """Fold one run into the stats of ``key``."""
        stats = self.get(key)
        if stats is None:
            stats = self[key] = RunStats()
        stats.add(run)

    def summary(self, key: tuple) -> tuple[float, ...]:
        """The key's summary, or :data:`EMPTY_SUMMARY` for an unseen key."""
        stats = self.get(key)
        return stats.summary() if stats is not None else EMPTY_SUMMARY
