"""``qssf`` and ``qssf-noaging``: Quasi-Shortest-Service-First.

A job's service is its predicted duration times its GPUs (CPU-only jobs count
``cpus x cpu_gpu_weight`` GPUs); the smallest service runs first (Hu et al., SC'21).

The duration is, by default (``estimate = "mean"``), the *expected* run time: the
predictor's median stretched by its spread, as for a log-normal through the predicted
10th and 90th percentiles (``median x exp(sigma^2 / 2)``, ``sigma = ln(p90 / p10) / 2.563``),
capped at the time limit. When durations are uncertain, ordering by expected duration
is what minimises mean completion time (Smith's rule), so a sure short job goes before
one that is only probably short. Measured on HPC2N (users only, wide spreads): 50-59%
of the FIFO -> oracle-SJF gain against 45% with the median; CTC-SP2 153-162% either way
(``docs/simulator.md``).
``estimate = "median"`` uses the point estimate alone.

Aging keeps that from starving big jobs, in two parts:

* while a job waits, its score halves every ``halflife_h`` hours, so a job 2^k times
  bigger than a new one passes it after ``k x halflife_h`` hours of extra waiting;
* the hard guard: once a job has waited ``max_wait_h`` its score is 0, which puts it
  ahead of every job whose guard has not expired; among expired jobs the earlier
  submission goes first.

Both stretch with the queue: a job's guard is ``max_wait_h`` or ``backlog_factor``
times its backlog wait (the wait first come, first served implied when it was first
seen: the expected service queued before it over the cluster's GPUs), whichever is
longer, and its half-life stretches by the same ratio. With a short queue nothing
changes; when the whole queue waits days, a fixed guard would hand most jobs back
to first come, first served exactly when ordering matters most, while the stretched one
still bounds a job's wait by a share of what first come, first served would have given
it. The default share is half: the backlog wait counts expected run times, which wide
predicted spreads stretch, and ignores backfill, so it runs high.

The guard also stretches with the job: a job's *patience* is the longer of that guard
and ``slowdown_factor`` times its expected run time, and its half-life stretches by
the ratio of its patience to ``max_wait_h``. Only a job with a time limit stretches so
(its expected run is capped at the limit): without one, a wide predicted spread could
make the expected run, and so the guard, weeks long. A job expected to run a week gains
little from jumping the queue after four days, while letting it jump holds the cluster
for every short job behind it; a bounded slowdown (waiting at most ``slowdown_factor`` run
times) is the fairness a long job can expect.

Measured with the defaults against the first ones (48 h guard, 6 h half-life, no
stretch; ``bench/policy_tables.py``, ``docs/simulator.md``): Philly 5% -> 93% of the
FIFO -> oracle-SJF gain (worst wait 1.07x -> 3.4x FIFO's), ITP01-07 5-73% -> 17-77%,
CTC-SP2 153% -> 146% (worst wait 1.00x -> 1.47x), HPC2N 50% -> 78% (1.09x; 65% and 1.00x
without ``slowdown_factor``); with the exact simulator of today (``docs/simulator.md``),
Philly 93%, HPC2N 74% (1.13x), CTC-SP2 21% below FIFO's avg JCT (1.82x) with a
``backlog_factor`` of 1, and with today's 0.5 Philly 93% (3.32x), HPC2N 77% (1.18x),
CTC-SP2 17% below FIFO (1.38x), ITP01-10 38% on average against 36%; with backfill
beside reservations and the simulated predictor's coded partitions, Philly 94% (3.50x),
HPC2N 79% (1.14x), CTC-SP2 20% below FIFO (1.33x), ITP01-10 31%.

Waiting time is counted from when the job became eligible to start (Slurm's
``eligible_time``: its submission, or its ``--begin`` time, or the moment a dependency
was met or a hold released; Slurm clears it while the job is held), so a job held for
days and then released does not come back with days of waiting banked, as Slurm's own
age factor does not accrue during a hold. Its submission stands in where Slurm shows no
eligible time. It is counted in whole ``aging_step_h`` ticks of the wall clock
(``floor(now / step) - floor(eligible / step)``), the same instants for every job:
between two ticks no score changes, so an unchanged queue needs no SiteFactor update.
Reordering therefore delays no job beyond its patience plus ``aging_step_h``. The
default step, 3 h, is a quarter of the shortest half-life, so one tick moves a score by
at most the planner's default hysteresis (a quarter of a SiteFactor level); against a
1 h step it does a third of the rescoring and SiteFactor updates, and the queues it gave
were no worse (``docs/simulator.md``).

Ties are broken by submit time, then job id, so the order is deterministic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from slurmsched.errors import ConfigError
from slurmsched.model import JobRecord, NodeRecord, Prediction
from slurmsched.policy.base import Scorer, ScoringPolicy
from slurmsched.text import plural

FALLBACK_DURATION_S = 3600.0
#: Bounds of ``max_wait_h``, ``halflife_h`` and ``aging_step_h``: one second to over a
#: century. Within them the aging arithmetic stays finite (clock ticks since the epoch,
#: halvings per tick, waits in seconds); outside, it overflows to a NaN score.
MIN_HOURS, MAX_HOURS = 1 / 3600, 1e6
#: Most GPUs one CPU may count as: a service (run time x GPU equivalents) stays finite.
MAX_CPU_GPU_WEIGHT = 1e6
#: Standard normal deviates between the 10th and 90th percentiles (2 x 1.2816).
P10_P90_SIGMAS = 2.5631


@dataclass(frozen=True)
class QssfArgs:
    """``[policy.qssf]`` (shared by ``qssf-noaging``, which ignores the aging keys).

    Attributes:
        max_wait_h: the hard guard: no job waits longer than this (plus one aging step)
            because of reordering, unless its backlog stretches it.
        halflife_h: a waiting job's score halves every so many hours of waiting.
        backlog_factor: a job's guard is at least this many times its backlog wait, and
            its half-life stretches by the same ratio; 0 keeps both fixed.
        slowdown_factor: a job's guard is at least this many times its expected run time
            (:meth:`QssfPolicy.duration`, capped at the time limit; jobs without a time
            limit are not stretched), and its half-life stretches by the same ratio; 0
            turns it off.
        aging_step_h: waiting is counted in whole clock ticks of this length (a job's
            score changes once per tick).
        cpu_gpu_weight: GPUs one CPU counts as, for CPU-only jobs.

    Every value is a finite number; the three lengths in hours lie within
    [:data:`MIN_HOURS`, :data:`MAX_HOURS`], ``cpu_gpu_weight`` is at most
    :data:`MAX_CPU_GPU_WEIGHT`.
        estimate: ``"mean"`` (expected run time from the predicted spread) or
            ``"median"`` (the predictor's point estimate).
    """

    max_wait_h: float = 96.0
    halflife_h: float = 12.0
    aging_step_h: float = 3.0
    cpu_gpu_weight: float = 0.125
    estimate: str = "mean"
    backlog_factor: float = 0.5
    slowdown_factor: float = 4.0

    def validate(self, prefix: str) -> None:
        """Raise :class:`ConfigError` naming the bad key (numbers are finite: :func:`slurmsched.config.parse_table`)."""
        if not self.max_wait_h > 0:
            raise ConfigError(f"{prefix}.max_wait_h must be > 0 (got {self.max_wait_h})")
        if not self.halflife_h > 0:
            raise ConfigError(f"{prefix}.halflife_h must be > 0 (got {self.halflife_h})")
        if not 0 < self.aging_step_h <= self.max_wait_h:
            raise ConfigError(f"{prefix}.aging_step_h must be > 0 and <= max_wait_h (got {self.aging_step_h})")
        for key in ("max_wait_h", "halflife_h", "aging_step_h"):
            if not MIN_HOURS <= getattr(self, key) <= MAX_HOURS:
                raise ConfigError(f"{prefix}.{key} must be at least 1 s ({MIN_HOURS:.3g} h) and at most"
                                  f" {MAX_HOURS:g} h (got {getattr(self, key)})")
        if self.estimate not in ("median", "mean"):
            raise ConfigError(f"{prefix}.estimate must be median or mean (got {self.estimate!r})")
        if not self.backlog_factor >= 0:
            raise ConfigError(f"{prefix}.backlog_factor must be >= 0 (got {self.backlog_factor})")
        if not self.slowdown_factor >= 0:
            raise ConfigError(f"{prefix}.slowdown_factor must be >= 0 (got {self.slowdown_factor})")
        if not self.cpu_gpu_weight > 0:
            raise ConfigError(f"{prefix}.cpu_gpu_weight must be > 0 (got {self.cpu_gpu_weight})")
        if self.cpu_gpu_weight > MAX_CPU_GPU_WEIGHT:
            raise ConfigError(f"{prefix}.cpu_gpu_weight must be at most {MAX_CPU_GPU_WEIGHT:g}"
                              f" (got {self.cpu_gpu_weight})")


def gpu_equivalents(job: JobRecord, cpu_gpu_weight: float) -> float:
    """GPUs a job occupies; a CPU-only job counts ``cpus x cpu_gpu_weight``."""
    if job.gpus > 0:
        return float(job.gpus)
    return max(job.cpus, 1) * cpu_gpu_weight


def _size_text(job: JobRecord, cpu_gpu_weight: float) -> str:
    if job.gpus > 0:
        return plural(job.gpus, "GPU")
    return f"{max(job.cpus, 1)} CPUs x {cpu_gpu_weight:g} GPU/CPU"


def wait_began(job: JobRecord) -> float:
    """When aging starts counting the job's wait: its eligible time where Slurm shows one
    later than the submission (a ``--begin`` time, a dependency met, a hold released),
    else its submission (Slurm shows none while the job is held)."""
    eligible = job.eligible_time
    return eligible if eligible is not None and eligible > job.submit_time else job.submit_time


class QssfPolicy(ScoringPolicy):
    """Ascending predicted service (GPU-seconds), with or without aging and the guard."""

    reorders = True

    def __init__(self, args: QssfArgs | None = None, *, aging: bool = True) -> None:
        self.args = args or QssfArgs()
        self.aging = aging
        self.name = "qssf" if aging else "qssf-noaging"
        self._max_wait_s = self.args.max_wait_h * 3600.0
        self.guard_s = self._max_wait_s if aging else None
        self._step_s = self.args.aging_step_h * 3600.0
        self._halvings_per_step = self.args.aging_step_h / self.args.halflife_h
        self._mean = self.args.estimate == "mean"

    def _ticks(self, job: JobRecord, now: float) -> int:
        """Whole ``aging_step_h`` clock ticks since the job's wait began (:func:`wait_began`; never negative)."""
        step = self._step_s
        return max(0, math.floor(now / step) - math.floor(wait_began(job) / step))

    def _halvings(self, ticks: int, patience: float) -> float:
        """Halvings after ``ticks`` aging ticks: ``halflife_h`` stretched by patience / ``max_wait_h`` (aging on)."""
        return ticks * self._halvings_per_step * self._max_wait_s / patience

    def patience_s(self, backlog_s: float, duration_s: float = 0.0) -> float:
        """When the guard expires for a job with this backlog wait and expected run time
        (:meth:`duration`): the longest of ``max_wait_h``, ``backlog_factor`` x the backlog
        wait and ``slowdown_factor`` x the run time (``inf`` without aging)."""
        if self.guard_s is None:
            return math.inf
        return max(self.guard_s, self.args.backlog_factor * backlog_s, self.args.slowdown_factor * duration_s)

    def _patience(self, job: JobRecord, backlog_s: float, duration_s: float) -> float:
        """:meth:`patience_s` for this job: the run time counts only if the job has a time
        limit (which caps its expected run); without one, a wide predicted spread would make
        its expected run, and so its guard, unbounded."""
        return self.patience_s(backlog_s, duration_s if job.time_limit_s else 0.0)

    def work(self, job: JobRecord, prediction: Prediction | None) -> float:
        """The backlog counts each queued job's service."""
        return self.service(job, prediction)

    def capacity(self, nodes: Sequence[NodeRecord]) -> float:
        """The nodes' GPUs; on a cluster without any, their CPUs x ``cpu_gpu_weight``."""
        gpus = sum(node.gpus() for node in nodes)
        return float(gpus) if gpus else sum(node.cpus for node in nodes) * self.args.cpu_gpu_weight

    def service(self, job: JobRecord, prediction: Prediction | None) -> float:
        """Predicted duration x GPUs (or CPU GPU-equivalents), in GPU-seconds."""
        return self._service(job, self.duration(job, prediction))

    def _service(self, job: JobRecord, duration_s: float) -> float:
        """:meth:`service` for a run time already computed with :meth:`duration`."""
        return duration_s * gpu_equivalents(job, self.args.cpu_gpu_weight)

    def duration(self, job: JobRecord, prediction: Prediction | None) -> float:
        """The run time the service counts: expected (``estimate = "mean"``) or the point estimate."""
        estimate = _estimate(job, prediction)
        if not self._mean or prediction is None or not 0 < prediction.low_s < prediction.high_s:
            return estimate
        sigma = math.log(prediction.high_s / prediction.low_s) / P10_P90_SIGMAS
        expected = estimate * math.exp(sigma * sigma / 2)
        return min(expected, float(job.time_limit_s)) if job.time_limit_s else expected

    def score(self, job: JobRecord, prediction: Prediction | None, now: float, backlog_s: float = 0.0) -> float:
        """Service halved once per (stretched) half-life waited; 0 once the guard expired."""
        return self.scorer(job, prediction, backlog_s)(now)[0]

    def changes_at(self, job: JobRecord, prediction: Prediction | None, now: float, backlog_s: float = 0.0) -> float:
        """The next aging tick while the guard has not expired; never without aging."""
        return self.scorer(job, prediction, backlog_s)(now)[1]

    def scorer(self, job: JobRecord, prediction: Prediction | None, backlog_s: float = 0.0) -> Scorer:
        """:meth:`score` and :meth:`changes_at` at each ``now``: the run time, service,
        patience and submission tick are computed once, here; a call costs the ticks
        waited (as :meth:`_ticks` counts them) and the halving."""
        duration = self.duration(job, prediction)
        service = self._service(job, duration)
        if self.guard_s is None:
            return lambda now: (service, math.inf)
        step, halvings = self._step_s, self._halvings
        submitted = math.floor(wait_began(job) / step)
        patience = self._patience(job, backlog_s, duration)

        def at(now: float) -> tuple[float, float]:
            tick = math.floor(now / step)
            ticks = max(0, tick - submitted)
            if ticks * step >= patience:  # the job's patience is never below its backlog guard
                return 0.0, math.inf
            return service * 2.0 ** -halvings(ticks, patience), (tick + 1) * step
        return at

    def explain(self, job: JobRecord, prediction: Prediction | None, now: float, backlog_s: float = 0.0) -> str:
        """``predicted 2.1 h x 4 GPUs = 8.4 GPU-h (source); waiting 3 h of 72 h guard ...``
        (``..., not aged yet`` before the first aging tick).

        When the spread stretches the estimate: ``expected 3.0 h (median 2.1 h, 10-90%
        1.2 h to 6.0 h) x 4 GPUs = ...``; short runs in minutes or seconds (``20 s``),
        services and scores under 0.1 GPU-h in GPU-seconds.
        When the backlog stretches the guard: ``... of 130 h guard (1 x 130 h backlog at
        arrival) ...``; when the run time does: ``... of 160 h guard (4 x 40.0 h expected
        run) ...``.
        """
        duration, point = self.duration(job, prediction), _estimate(job, prediction)
        source = prediction.source if prediction is not None else "no prediction: time limit"
        if prediction is not None and duration != point:
            stated = (f"expected {span(duration)} (median {span(point)}, 10-90%"
                      f" {span(prediction.low_s)} to {span(prediction.high_s)})")
        else:
            stated = f"predicted {span(duration)}"
        service = self._service(job, duration)
        amount = gpu_time(service, 1)
        text = f"{stated} x {_size_text(job, self.args.cpu_gpu_weight)} = {amount} ({source})"
        if self.guard_s is None:
            return text
        ticks, patience = self._ticks(job, now), self._patience(job, backlog_s, duration)
        waited, backlog_guard = ticks * self._step_s, self.patience_s(backlog_s)
        guard = f"{_wait(self.guard_s)} guard"
        if patience > backlog_guard:
            guard = f"{_wait(patience)} guard ({self.args.slowdown_factor:g} x {span(duration)} expected run)"
        elif patience > self.guard_s:
            guard = f"{_wait(patience)} guard ({self.args.backlog_factor:g} x {_wait(backlog_s)} backlog at arrival)"
        if waited >= patience:
            return f"{text}; waited {_wait(waited)}: {guard} reached, ahead of every later job"
        halved = self._halvings(ticks, patience)  # what score() applies while the guard holds
        if not halved:
            return f"{text}; waiting {_wait(waited)} of {guard}, not aged yet"
        return (f"{text}; waiting {_wait(waited)} of {guard}, score halved {halved:.2g}x"
                f" -> {gpu_time(service * 2.0 ** -halved, 2)}")


def gpu_time(service: float, digits: int) -> str:
    """GPU-hours to ``digits`` decimals from 0.1 GPU-h up, else GPU-seconds (``162 GPU-s``)."""
    return f"{service / 3600:.{digits}f} GPU-h" if service >= 360 else f"{service:.0f} GPU-s"


def _wait(seconds: float) -> str:
    """A wait or a guard in hours without trailing zeros, to one decimal from 10 h up
    (``96 h``, ``12.5 h``), else to two (``3 h``, ``0.05 h``): a sub-hour guard or aging
    step must not read ``waiting 0 h of 0 h guard``."""
    hours = seconds / 3600
    return f"{round(hours, 1 if hours >= 10 else 2):g} h"


def span(seconds: float) -> str:
    """A run time for ``explain`` (the policy's reasons and the prediction line): hours to
    one decimal from 6 minutes up, else minutes or seconds."""
    if seconds >= 360:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


def _estimate(job: JobRecord, prediction: Prediction | None) -> float:
    if prediction is not None and prediction.estimate_s > 0:
        return prediction.estimate_s
    if job.time_limit_s:
        return float(job.time_limit_s)
    return FALLBACK_DURATION_S
