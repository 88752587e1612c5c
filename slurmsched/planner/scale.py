"""SiteFactor levels: a job's own score -> one of a fixed set of SiteFactor values.

Scores (predicted service in GPU-seconds, aged) are put on a logarithmic scale:
level 0 holds every score up to ``min_service_gpu_h``, each further level covers a
factor ``level_ratio``, and the last level ``L`` holds everything from
``max_service_gpu_h`` up. A score of exactly 0 (the policy's aging guard expired) gets
the *guard* level above level 0. Level ``l`` is SiteFactor ``(L - l) * step`` and the
guard level ``(L + 1) * step``, so the biggest jobs keep SiteFactor 0 and there are
only ``L + 2`` distinct values: one batched ``scontrol update`` per value suffices.

``step`` is sized against slurmctld's ``PriorityWeight*`` settings:

* ``dominate``: ``step`` = sum of all other weights + 1, so one level outweighs
  age, fair-share, job size, partition, QOS and TRES together: QSSF decides.
* ``blend``: all levels together span ``blend_range`` (default: the largest other
  weight), so QSSF is one factor among Slurm's own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from slurmsched.config import PlannerSection
from slurmsched.model import SITE_FACTOR_LIMIT, SchedulerConfig

GUARD_LEVEL = -1
DEFAULT_BLEND_RANGE = 1000


def other_weights(config: SchedulerConfig) -> int:
    """Sum of every multifactor weight besides SiteFactor (``PriorityWeight*`` and TRES weights)."""
    total = (config.weight_age + config.weight_fairshare + config.weight_job_size
             + config.weight_partition + config.weight_qos)
    for item in config.weight_tres.split(","):
        _, _, number = item.partition("=")
        try:
            total += max(0, int(float(number)))
        except ValueError:
            continue
    return max(0, total)


@dataclass(frozen=True, slots=True)
class SiteFactorScale:
    """The level set in force for one scheduler configuration.

    Attributes:
        min_service_s: scores up to this share level 0.
        log_ratio: natural log of the service ratio between adjacent levels.
        top: ``L``, the last (largest-service) level.
        step: SiteFactor difference between adjacent levels.
        capped_from: the step the mode asks for when it was cut so that the guard level
            fits :data:`SITE_FACTOR_LIMIT`; ``None`` when ``step`` is that step.
    """

    min_service_s: float
    log_ratio: float
    top: int
    step: int
    capped_from: int | None = None

    @classmethod
    def build(cls, planner: PlannerSection, config: SchedulerConfig) -> "SiteFactorScale":
        """Size the scale for ``planner``'s mode against ``config``'s weights, capping the step
        so that every value fits :data:`SITE_FACTOR_LIMIT` (:meth:`cap_warning` says so; the
        caller reports it: nothing is logged here)."""
        min_s = planner.min_service_gpu_h * 3600.0
        log_ratio = math.log(planner.level_ratio)
        top = planner.top_level
        if planner.mode == "dominate":
            step = other_weights(config) + 1
        else:
            span = planner.blend_range or max(config.weight_age, config.weight_fairshare, config.weight_job_size,
                                              config.weight_partition, config.weight_qos) or DEFAULT_BLEND_RANGE
            step = max(1, span // (top + 1))
        if (top + 1) * step > SITE_FACTOR_LIMIT:
            return cls(min_s, log_ratio, top, SITE_FACTOR_LIMIT // (top + 1), capped_from=step)
        return cls(min_s, log_ratio, top, step)

    def cap_warning(self) -> str | None:
        """Why ``step`` is smaller than the mode asks (for the log and ``config check``);
        ``None`` when it is not capped."""
        if self.capped_from is None:
            return None
        return (f"PriorityWeight* sum too large for {self.top + 2} SiteFactor levels; step capped at {self.step}"
                f" (the mode asks for {self.capped_from})")

    def position(self, score: float) -> float:
        """Continuous level of a score (level ``l`` covers ``[l, l + 1)``); -1 for the guard."""
        if score <= 0.0:
            return float(GUARD_LEVEL)
        if score <= self.min_service_s:
            return 0.0
        return min(math.log(score / self.min_service_s) / self.log_ratio, self.top + 0.999)

    def level(self, score: float) -> int:
        """The level a score falls in (``GUARD_LEVEL`` for 0)."""
        return math.floor(self.position(score))

    def value(self, level: int) -> int:
        """SiteFactor of a level."""
        return (self.top - level) * self.step

    def level_of_value(self, value: int) -> int | None:
        """The level a SiteFactor value belongs to, or ``None`` if it is not one of ours."""
        if value % self.step:
            return None
        level = self.top - value // self.step
        return level if GUARD_LEVEL <= level <= self.top else None

    def site_factor(self, score: float) -> int:
        """SiteFactor for a score (what ``job_submit.lua``'s cache holds for new jobs)."""
        return self.value(self.level(score))
