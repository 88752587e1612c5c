"""The planner: a policy's ranking -> concrete actions under guard rails.

Each pending job's SiteFactor is a function of its *own* score (see
:mod:`slurmsched.planner.scale`), never of its rank, so an arriving job changes no
other job's value and an unchanged queue plans nothing. Guard rails:

* protected partitions/QOS (``[planner]``) are never touched, nor held jobs
  (priority 0);
* hysteresis: a job keeps its level until its score is ``hysteresis_levels`` past it;
* at most ``max_rpcs_per_cycle`` ``scontrol update`` calls per cycle, most urgent
  (best-ranked) jobs first; the rest waits for the next cycle;
* every action carries the value it replaces, and values slurmsched set are reverted
  to the value the job had before slurmsched first touched it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from slurmsched.config import Config
from slurmsched.gateway.cli_backend import SITE_FACTOR_BATCH
from slurmsched.model import Action, ClusterSnapshot, JobRecord, JobState, SchedulerConfig, SetSiteFactor
from slurmsched.planner.constraints import ConstraintTuner
from slurmsched.planner.scale import GUARD_LEVEL, SiteFactorScale
from slurmsched.policy.base import Ranking
from slurmsched.store.protocol import AppliedChange

SITE_FACTOR = SetSiteFactor.__name__


@dataclass(frozen=True, slots=True)
class Plan:
    """What one cycle should change.

    Attributes:
        actions: to apply now, most urgent first.
        adopted: SiteFactor values already in place that equal the planned value but
            were never recorded (set at submit time by ``job_submit.lua``, or applied by a
            cycle whose record was lost): the engine records them so ``revert`` undoes them.
        settled: ``(job_id, kind)`` records whose job already holds its original value
            again; the engine forgets them.
        held: changes withheld by hysteresis.
        deferred: changes left for a later cycle by ``max_rpcs_per_cycle``.
        rpcs: ``scontrol update`` calls ``actions`` take.
    """

    actions: tuple[Action, ...]
    adopted: tuple[SetSiteFactor, ...] = ()
    settled: tuple[tuple[int, str], ...] = ()
    held: int = 0
    deferred: int = 0
    rpcs: int = 0


def count_rpcs(actions: Sequence[Action], jobs_per_rpc: int = SITE_FACTOR_BATCH) -> int:
    """``scontrol update`` calls the CLI gateway makes for ``actions``.

    SetSiteFactor actions sharing a value go in one call per ``jobs_per_rpc`` job ids
    (``scontrol update JobId=a,b,... SiteFactor=V``); every other action is one call.
    """
    per_value: dict[int, int] = {}
    calls = 0
    for action in actions:
        if isinstance(action, SetSiteFactor):
            per_value[action.value] = per_value.get(action.value, 0) + 1
        else:
            calls += 1
    return calls + sum(-(-n // jobs_per_rpc) for n in per_value.values())


class Planner:
    """Turns a :class:`Ranking` into actions for one snapshot.

    Args:
        config: the whole configuration (``[planner]`` and ``[constraints]`` are used).
    """

    def __init__(self, config: Config) -> None:
        self.section = config.planner
        self.tuner = ConstraintTuner(config.constraints)
        self._protected_partitions = frozenset(self.section.protected_partitions)
        self._protected_qos = frozenset(self.section.protected_qos)
        self._scale: tuple[SchedulerConfig, SiteFactorScale] | None = None

    def scale(self, config: SchedulerConfig) -> SiteFactorScale:
        """The SiteFactor levels for a scheduler configuration (cached)."""
        if self._scale is None or self._scale[0] != config:
            self._scale = (config, SiteFactorScale.build(self.section, config))
        return self._scale[1]

    def protected(self, job: JobRecord) -> bool:
        """True for jobs slurmsched must never touch (protected partition or QOS)."""
        if job.qos in self._protected_qos:
            return True
        return bool(self._protected_partitions) and any(
            p in self._protected_partitions for p in job.partition.split(","))

    def plan(self, ranking: Ranking, snapshot: ClusterSnapshot,
             applied: Mapping[tuple[int, str], AppliedChange]) -> Plan:
        """Actions for the pending jobs of ``snapshot`` ranked by ``ranking``.

        Args:
            ranking: the policy's scores for the pending jobs.
            snapshot: the queue as Slurm reports it (``site_factor`` from ``sprio``).
            applied: changes slurmsched made and has not reverted, by ``(job_id, kind)``.
        """
        scale = self.scale(snapshot.config)
        pending = {j.job_id: j for j in snapshot.jobs if j.state is JobState.PENDING}
        hysteresis = self.section.hysteresis_levels
        site_actions: list[tuple[int, Action]] = []
        adopted: list[SetSiteFactor] = []
        settled: list[tuple[int, str]] = []
        eligible: list[JobRecord] = []
        rank_of: dict[int, int] = {}
        held = 0
        for score in ranking.scores:
            job = pending.get(score.job_id)
            if job is None or job.priority == 0 or self.protected(job):
                continue
            eligible.append(job)
            rank_of[job.job_id] = score.rank
            record = applied.get((job.job_id, SITE_FACTOR))
            current = job.site_factor if job.site_factor is not None else (
                int(record.current) if record is not None else 0)
            if not ranking.reorders:
                if record is not None:
                    original = int(record.original or 0)
                    if current == original:
                        settled.append((job.job_id, SITE_FACTOR))
                    else:
                        site_actions.append((score.rank, SetSiteFactor(
                            job.job_id, original, current, f"{ranking.policy}: undo slurmsched's SiteFactor")))
                continue
            position = scale.position(score.score)
            level = int(position // 1)
            target = scale.value(level)
            if current == target:
                if record is None and target != 0:
                    adopted.append(SetSiteFactor(job.job_id, target, 0, score.reason))
                elif record is not None and str(target) == (record.original or "0"):
                    settled.append((job.job_id, SITE_FACTOR))
                continue
            now_level = scale.level_of_value(current)
            if (now_level is not None and GUARD_LEVEL not in (now_level, level)
                    and now_level - hysteresis <= position < now_level + 1 + hysteresis):
                held += 1
                continue
            site_actions.append((score.rank, SetSiteFactor(job.job_id, target, current, score.reason)))
        tuned = [(rank_of[a.job_id], a) for a in self.tuner.plan(eligible, snapshot)]
        ordered = [a for _, a in sorted(site_actions + tuned, key=lambda ra: ra[0])]
        chosen, rpcs = self._cap(ordered)
        return Plan(tuple(chosen), tuple(adopted), tuple(settled), held, len(ordered) - len(chosen), rpcs)

    def _cap(self, ordered: list[Action]) -> tuple[list[Action], int]:
        """The longest most-urgent-first selection that fits in ``max_rpcs_per_cycle`` calls."""
        limit = self.section.max_rpcs_per_cycle
        per_call = SITE_FACTOR_BATCH
        batch_fill: dict[int, int] = {}
        chosen: list[Action] = []
        calls = 0
        for action in ordered:
            if isinstance(action, SetSiteFactor):
                filled = batch_fill.get(action.value, 0)
                opens_call = filled % per_call == 0
                if opens_call and calls >= limit:
                    continue
                batch_fill[action.value] = filled + 1
                calls += opens_call
            elif calls >= limit:
                continue
            else:
                calls += 1
            chosen.append(action)
        return chosen, calls
