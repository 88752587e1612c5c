"""Queueing metrics of one simulation: JCT, waits, bounded slowdown, utilisation.

Definitions (per job: wait = start - submit, run = end - start, JCT = end - submit):

* ``bounded_slowdown``: mean of ``max(1, JCT / max(run, 10 s))`` (the usual 10-second
  threshold keeps very short jobs from dominating);
* ``utilisation``: GPU-seconds used / (cluster GPUs x (last end - first submit));
* percentiles are numpy's linear interpolation.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np

from slurmsched.sim.runner import JobOutcome

BOUNDED_SLOWDOWN_THRESHOLD_S = 10.0
#: Job-size classes for "wait by job size": (label, smallest units, largest units).
SIZE_CLASSES: tuple[tuple[str, int, int], ...] = (
    ("1", 1, 1), ("2-4", 2, 4), ("5-8", 5, 8), ("9-16", 9, 16), ("17-32", 17, 32),
    ("33-64", 33, 64), ("65-128", 65, 128), (">128", 129, 1 << 62),
)


@dataclass(frozen=True, slots=True)
class PolicyMetrics:
    """The numbers ``slurmsched simulate --json`` prints for one policy."""

    avg_jct_s: float
    avg_wait_s: float
    p50_wait_s: float
    p99_wait_s: float
    max_wait_s: float
    bounded_slowdown: float
    utilisation: float

    def as_dict(self) -> dict[str, float]:
        """Field name -> value (the JSON object of one policy)."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class _Columns:
    submit: np.ndarray
    start: np.ndarray
    end: np.ndarray
    units: np.ndarray


def _columns(outcomes: Sequence[JobOutcome]) -> _Columns:
    return _Columns(
        submit=np.fromiter((o.submit for o in outcomes), float, len(outcomes)),
        start=np.fromiter((o.start for o in outcomes), float, len(outcomes)),
        end=np.fromiter((o.end for o in outcomes), float, len(outcomes)),
        units=np.fromiter((o.units for o in outcomes), float, len(outcomes)),
    )


def compute_metrics(outcomes: Sequence[JobOutcome], cluster_gpus: int) -> PolicyMetrics:
    """Summarise a simulation's job outcomes.

    Raises:
        ValueError: no outcomes.
    """
    if not outcomes:
        raise ValueError("no simulated jobs to summarise")
    c = _columns(outcomes)
    wait = c.start - c.submit
    run = c.end - c.start
    jct = c.end - c.submit
    span = float(c.end.max() - c.submit.min())
    slowdown = np.maximum(1.0, jct / np.maximum(run, BOUNDED_SLOWDOWN_THRESHOLD_S))
    used = float((run * c.units).sum())
    return PolicyMetrics(
        avg_jct_s=float(jct.mean()),
        avg_wait_s=float(wait.mean()),
        p50_wait_s=float(np.percentile(wait, 50)),
        p99_wait_s=float(np.percentile(wait, 99)),
        max_wait_s=float(wait.max()),
        bounded_slowdown=float(slowdown.mean()),
        utilisation=used / (cluster_gpus * span) if span > 0 else 0.0,
    )


def wait_by_size(outcomes: Sequence[JobOutcome]) -> list[tuple[str, int, float]]:
    """(size class, jobs, average wait) for each :data:`SIZE_CLASSES` entry that has jobs."""
    c = _columns(outcomes)
    wait = c.start - c.submit
    rows = []
    for label, low, high in SIZE_CLASSES:
        mask = (c.units >= low) & (c.units <= high)
        count = int(mask.sum())
        if count:
            rows.append((label, count, float(wait[mask].mean())))
    return rows


def jct_values(outcomes: Sequence[JobOutcome]) -> np.ndarray:
    """Every job's JCT in seconds, sorted (for a CDF)."""
    c = _columns(outcomes)
    return np.sort(c.end - c.submit)


def gain_share(fifo_jct: float, oracle_jct: float, policy_jct: float) -> float | None:
    """Share of the FIFO -> oracle-SJF avg-JCT gain a policy reaches (``None`` if no gain to share)."""
    gain = fifo_jct - oracle_jct
    if gain <= 0:
        return None
    return (fifo_jct - policy_jct) / gain
