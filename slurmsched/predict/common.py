"""Small helpers every predictor shares: what counts as a run, units, clamping."""

from __future__ import annotations

import math

from slurmsched.model import JobRecord, JobState

#: Estimate when nothing at all is known (no history, no time limit): one hour.
DEFAULT_ESTIMATE_S = 3600.0
#: Shortest duration used in log-space arithmetic and metrics (zero-second jobs count as 1 s).
MIN_RUNTIME_S = 1.0


def units(job: JobRecord) -> int:
    """The job's allocation unit count: GPUs when it asks for any, else CPUs (SWF traces)."""
    return job.gpus if job.gpus > 0 else max(1, job.cpus)


def observed_runtime(job: JobRecord) -> float | None:
    """Run time in seconds floored at :data:`MIN_RUNTIME_S`, or ``None`` when the job never ran."""
    runtime = job.runtime_s
    if runtime is None:
        return None
    return max(MIN_RUNTIME_S, runtime)


def limit_of(job: JobRecord) -> float | None:
    """The requested time limit in seconds, or ``None`` when unlimited/unknown (or nonsense)."""
    limit = job.time_limit_s
    return float(limit) if limit is not None and limit > 0 else None


def hit_limit(job: JobRecord, runtime: float) -> bool:
    """True when the job was stopped by (or ran into) its time limit (:func:`limit_of`: none is never hit)."""
    if job.state is JobState.TIMEOUT:
        return True
    limit = limit_of(job)
    return limit is not None and runtime >= 0.99 * limit


def clamp(estimate: float, limit: float | None) -> float:
    """An estimate made safe to use: finite, at least 1 s, at most the time limit."""
    if not math.isfinite(estimate):
        estimate = limit if limit is not None else DEFAULT_ESTIMATE_S
    if limit is not None:
        estimate = min(estimate, limit)
    return max(MIN_RUNTIME_S, estimate)
