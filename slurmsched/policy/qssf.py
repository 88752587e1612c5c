"""``qssf`` and ``qssf-noaging``: Quasi-Shortest-Service-First.

A job's service is its predicted duration times its GPUs (CPU-only jobs count
``cpus x cpu_gpu_weight`` GPUs); the smallest service runs first (Hu et al., SC'21).

Aging keeps that from starving big jobs, in two parts:

* while a job waits, its score halves every ``halflife_h`` hours, so a job 2^k times
  bigger than a new one passes it after ``k x halflife_h`` hours of extra waiting. The
  hours are counted in whole ticks of the wall clock (``floor(now / halflife)``), the
  same instants for every job: between two ticks no score changes, so an unchanged
  queue needs no SiteFactor update;
* the hard guard: once a job has waited ``max_wait_h`` its score is 0, which puts it
  ahead of every job whose guard has not expired; among expired jobs the earlier
  submission goes first. So reordering delays no job beyond ``max_wait_h``.

Ties are broken by submit time, then job id, so the order is deterministic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from slurmsched.errors import ConfigError
from slurmsched.model import JobRecord, Prediction
from slurmsched.policy.base import ScoringPolicy

FALLBACK_DURATION_S = 3600.0


@dataclass(frozen=True)
class QssfArgs:
    """``[policy.qssf]`` (shared by ``qssf-noaging``, which ignores the aging keys).

    Attributes:
        max_wait_h: the hard guard: no job waits longer than this because of reordering.
        halflife_h: a waiting job's score halves every so many hours (whole clock ticks).
        cpu_gpu_weight: GPUs one CPU counts as, for CPU-only jobs.
    """

    max_wait_h: float = 72.0
    halflife_h: float = 6.0
    cpu_gpu_weight: float = 0.125

    def validate(self, prefix: str) -> None:
        """Raise :class:`ConfigError` naming the bad key."""
        if not self.max_wait_h > 0:
            raise ConfigError(f"{prefix}.max_wait_h must be > 0 (got {self.max_wait_h})")
        if not self.halflife_h > 0:
            raise ConfigError(f"{prefix}.halflife_h must be > 0 (got {self.halflife_h})")
        if not self.cpu_gpu_weight > 0:
            raise ConfigError(f"{prefix}.cpu_gpu_weight must be > 0 (got {self.cpu_gpu_weight})")


def gpu_equivalents(job: JobRecord, cpu_gpu_weight: float) -> float:
    """GPUs a job occupies; a CPU-only job counts ``cpus x cpu_gpu_weight``."""
    if job.gpus > 0:
        return float(job.gpus)
    return max(job.cpus, 1) * cpu_gpu_weight


def _size_text(job: JobRecord, cpu_gpu_weight: float) -> str:
    if job.gpus > 0:
        return f"{job.gpus} GPU{'s' if job.gpus != 1 else ''}"
    return f"{max(job.cpus, 1)} CPUs x {cpu_gpu_weight:g} GPU/CPU"


class QssfPolicy(ScoringPolicy):
    """Ascending predicted service (GPU-seconds), with or without aging and the guard."""

    reorders = True

    def __init__(self, args: QssfArgs | None = None, *, aging: bool = True) -> None:
        self.args = args or QssfArgs()
        self.aging = aging
        self.name = "qssf" if aging else "qssf-noaging"
        self.guard_s = self.args.max_wait_h * 3600.0 if aging else None
        self._halflife_s = self.args.halflife_h * 3600.0

    def halvings(self, job: JobRecord, now: float) -> int:
        """Clock ticks of ``halflife_h`` passed since the job was submitted."""
        step = self._halflife_s
        return max(0, math.floor(now / step) - math.floor(job.submit_time / step))

    def service(self, job: JobRecord, prediction: Prediction | None) -> float:
        """Predicted duration x GPUs (or CPU GPU-equivalents), in GPU-seconds."""
        return _estimate(job, prediction) * gpu_equivalents(job, self.args.cpu_gpu_weight)

    def score(self, job: JobRecord, prediction: Prediction | None, now: float) -> float:
        """Service halved per aging tick waited; 0 once the guard expired."""
        service = self.service(job, prediction)
        if self.guard_s is None:
            return service
        if now - job.submit_time >= self.guard_s:
            return 0.0
        return math.ldexp(service, -self.halvings(job, now))

    def changes_at(self, job: JobRecord, prediction: Prediction | None, now: float) -> float:
        """The next aging tick, or the guard's expiry if sooner; never without aging."""
        if self.guard_s is None or now - job.submit_time >= self.guard_s:
            return math.inf
        step = self._halflife_s
        return min((math.floor(now / step) + 1) * step, job.submit_time + self.guard_s)

    def explain(self, job: JobRecord, prediction: Prediction | None, now: float) -> str:
        """``predicted 2.1 h x 4 GPUs = 8.4 GPU-h (source); waiting 3.0 h of 72 h guard ...``."""
        estimate = _estimate(job, prediction)
        source = prediction.source if prediction is not None else "no prediction: time limit"
        text = (f"predicted {estimate / 3600:.1f} h x {_size_text(job, self.args.cpu_gpu_weight)}"
                f" = {self.service(job, prediction) / 3600:.1f} GPU-h ({source})")
        if self.guard_s is None:
            return text
        waited = max(0.0, now - job.submit_time)
        if waited >= self.guard_s:
            return (f"{text}; waited {waited / 3600:.1f} h: {self.args.max_wait_h:g} h guard reached,"
                    " ahead of every later job")
        halvings = self.halvings(job, now)
        return (f"{text}; waiting {waited / 3600:.1f} h of {self.args.max_wait_h:g} h guard, score halved"
                f" {halvings} time{'s' if halvings != 1 else ''} -> {self.score(job, prediction, now) / 3600:.2f} GPU-h")


def _estimate(job: JobRecord, prediction: Prediction | None) -> float:
    if prediction is not None and prediction.estimate_s > 0:
        return prediction.estimate_s
    if job.time_limit_s:
        return float(job.time_limit_s)
    return FALLBACK_DURATION_S
