"""Summary statistics of stored job history (``slurmsched history stats``)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from slurmsched.model import JobRecord

PERCENTILES = (10, 50, 90, 99)


@dataclass(frozen=True, slots=True)
class Percentiles:
    """Run-time percentiles in seconds."""

    p10: float
    p50: float
    p90: float
    p99: float


@dataclass(frozen=True, slots=True)
class Overshoot:
    """How far requested time limits overshoot real run times (jobs with both known).

    Attributes:
        jobs: jobs with a time limit and a run time.
        median_ratio, p90_ratio: of limit / run time (run times under 1 s count as 1 s).
        median_excess_s: median of limit minus run time.
        share_over_2x, share_over_10x: jobs that asked for more than 2x (10x) what they used.
        share_at_limit: jobs that ran for their whole limit or longer (killed at the limit).
    """

    jobs: int
    median_ratio: float
    p90_ratio: float
    median_excess_s: float
    share_over_2x: float
    share_over_10x: float
    share_at_limit: float


@dataclass(frozen=True, slots=True)
class GroupStats:
    """Counts and run times of one user or one partition."""

    name: str
    jobs: int
    runtime_p50_s: float | None
    runtime_p90_s: float | None
    median_limit_ratio: float | None


@dataclass(frozen=True, slots=True)
class HistoryStats:
    """The whole summary: totals, run-time percentiles, limit overshoot, per user and partition."""

    jobs: int
    with_runtime: int
    runtime_s: Percentiles | None
    limit_overshoot: Overshoot | None
    users: tuple[GroupStats, ...]
    partitions: tuple[GroupStats, ...]


class _Group:
    __slots__ = ("jobs", "runtimes", "ratios")

    def __init__(self) -> None:
        self.jobs = 0
        self.runtimes: list[float] = []
        self.ratios: list[float] = []

    def add(self, runtime: float | None, ratio: float | None) -> None:
        self.jobs += 1
        if runtime is not None:
            self.runtimes.append(runtime)
        if ratio is not None:
            self.ratios.append(ratio)

    def stats(self, name: str) -> GroupStats:
        runtimes = np.asarray(self.runtimes)
        return GroupStats(
            name=name, jobs=self.jobs,
            runtime_p50_s=float(np.percentile(runtimes, 50)) if runtimes.size else None,
            runtime_p90_s=float(np.percentile(runtimes, 90)) if runtimes.size else None,
            median_limit_ratio=float(np.median(self.ratios)) if self.ratios else None,
        )


def summarize(jobs: Iterable[JobRecord], top: int | None = None) -> HistoryStats:
    """Summarize job attempts.

    Args:
        jobs: the attempts (a run time needs start and end; a ratio also a time limit).
        top: keep only the ``top`` users and partitions with the most jobs (all if ``None``).
    """
    total = _Group()
    users: dict[str, _Group] = defaultdict(_Group)
    partitions: dict[str, _Group] = defaultdict(_Group)
    excess: list[float] = []
    for job in jobs:
        runtime = job.runtime_s
        ratio = None
        if runtime is not None and job.time_limit_s:
            ratio = job.time_limit_s / max(runtime, 1.0)
            excess.append(job.time_limit_s - runtime)
        total.add(runtime, ratio)
        users[job.user].add(runtime, ratio)
        partitions[job.partition].add(runtime, ratio)
    return HistoryStats(
        jobs=total.jobs,
        with_runtime=len(total.runtimes),
        runtime_s=_percentiles(total.runtimes),
        limit_overshoot=_overshoot(total.ratios, excess),
        users=_ranked(users, top),
        partitions=_ranked(partitions, top),
    )


def _percentiles(values: list[float]) -> Percentiles | None:
    if not values:
        return None
    return Percentiles(*(float(v) for v in np.percentile(np.asarray(values), PERCENTILES)))


def _overshoot(ratios: list[float], excess: list[float]) -> Overshoot | None:
    if not ratios:
        return None
    ratio = np.asarray(ratios)
    return Overshoot(
        jobs=int(ratio.size),
        median_ratio=float(np.median(ratio)),
        p90_ratio=float(np.percentile(ratio, 90)),
        median_excess_s=float(np.median(np.asarray(excess))),
        share_over_2x=float(np.mean(ratio > 2)),
        share_over_10x=float(np.mean(ratio > 10)),
        share_at_limit=float(np.mean(ratio <= 1)),
    )


def _ranked(groups: dict[str, _Group], top: int | None) -> tuple[GroupStats, ...]:
    ordered = sorted(groups.items(), key=lambda item: (-item[1].jobs, item[0]))
    if top is not None:
        ordered = ordered[:top]
    return tuple(group.stats(name) for name, group in ordered)
