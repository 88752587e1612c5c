"""The planner: a policy's ranking -> concrete actions under guard rails.

Each pending job's SiteFactor is a function of its *own* score (see
:mod:`slurmsched.planner.scale`), never of its rank, so an arriving job changes no
other job's value and an unchanged queue plans nothing. Guard rails:

* protected partitions/QOS (``[planner]``) are never touched, nor held jobs
  (priority 0); a job slurmsched changed before it was protected (the setting is new, or
  the job moved there) gets its original SiteFactor back;
* a value set outside slurmsched since slurmsched set its own (an admin's ``scontrol
  update``) is left as it is, as ``revert`` leaves it;
* hysteresis: a job keeps its level until its score is ``hysteresis_levels`` past it;
* at most ``max_rpcs_per_cycle`` ``scontrol update`` calls per cycle, most urgent
  (best-ranked) jobs first; the rest waits for the next cycle;
* every action carries the value it replaces, and values slurmsched set are reverted
  to the value the job had before slurmsched first touched it.
"""

from __future__ import annotations

import enum
import logging
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

from slurmsched.config import Config
from slurmsched.gateway.cli_backend import SITE_FACTOR_BATCH
from slurmsched.model import (Action, ClusterSnapshot, JobRecord, SchedulerConfig, SetSiteFactor,
                              SetSwitches)
from slurmsched.planner.changes import original_text, record_of
from slurmsched.planner.constraints import ConstraintTuner
from slurmsched.planner.scale import GUARD_LEVEL, SiteFactorScale
from slurmsched.policy.base import Ranking
from slurmsched.store.protocol import AppliedChange

log = logging.getLogger(__name__)

SITE_FACTOR = SetSiteFactor.__name__
SWITCHES = SetSwitches.__name__


#: What ``job_submit.lua`` writes into a job's ``AdminComment`` before the value it gives.
STAMP_PREFIX = "slurmsched:site_factor="


def submit_stamp(value: int) -> str:
    """What ``job_submit.lua`` writes into the ``AdminComment`` of a job it gives ``value``."""
    return f"{STAMP_PREFIX}{value}"


def undo_reason(policy: str, protected: bool) -> str:
    """The reason recorded for restoring a job's original SiteFactor: its partition or QOS
    is protected now, or ``policy`` does not reorder."""
    return f"{'protected partition or QOS' if protected else policy}: undo slurmsched's SiteFactor"


def stamped_value(job: JobRecord) -> int | None:
    """The SiteFactor ``job_submit.lua`` gave the job at submit, from the stamp in its
    ``AdminComment``; ``None`` when it carries no stamp."""
    text = job.admin_comment or ""
    if not text.startswith(STAMP_PREFIX):
        return None
    digits = text.removeprefix(STAMP_PREFIX)
    return int(digits) if digits.isascii() and digits.isdigit() else None


def valued_at_submit(job: JobRecord) -> bool:
    """True when ``job_submit.lua`` gave the job the SiteFactor it holds: its ``AdminComment``
    is the script's stamp of that value (a level value alone might be an admin's)."""
    return job.site_factor is not None and stamped_value(job) == job.site_factor


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


class Step(enum.Enum):
    """What the planner wants for one job's SiteFactor."""

    KEEP = "keep"        # nothing to do
    SEND = "send"        # set the value (an action)
    ADOPT = "adopt"      # the job already holds a slurmsched level nobody recorded: record it
    SETTLE = "settle"    # the job holds its original value again: forget the record
    HOLD = "hold"        # a change smaller than the hysteresis: keep the current level


class Planner:
    """Turns scores into actions for one snapshot.

    :meth:`plan` is the whole-queue form; the engine calls the per-job pieces
    (:meth:`eligible`, :meth:`site_factor_step`, :attr:`tuner`, :meth:`select`) only
    for jobs that changed, which yields the same actions.

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
        """The SiteFactor levels for a scheduler configuration (cached); a capped step is
        logged as a warning when the levels are built (:meth:`SiteFactorScale.cap_warning`)."""
        if self._scale is None or self._scale[0] != config:
            self._scale = (config, SiteFactorScale.build(self.section, config))
            warning = self._scale[1].cap_warning()
            if warning is not None:
                log.warning("%s", warning)
        return self._scale[1]

    def eligible(self, job: JobRecord) -> bool:
        """False for jobs slurmsched must not touch: protected partition or QOS, or held (priority 0)."""
        return job.priority != 0 and not self.protected(job)

    def protected(self, job: JobRecord) -> bool:
        """True for a job in a protected partition (any of those it names) or QOS."""
        if job.qos in self._protected_qos:
            return True
        return bool(self._protected_partitions) and any(
            p in self._protected_partitions for p in job.partition.split(","))

    def release_step(self, job: JobRecord, record: AppliedChange | None,
                     scale: SiteFactorScale) -> tuple[Step, int, int]:
        """:meth:`site_factor_step` for a job that is not :meth:`eligible`: a protected job
        slurmsched changed before gets its original value back (SEND), as under a policy
        that does not reorder; a held job, or one never changed, is left alone (KEEP)."""
        if record is None or job.priority == 0:
            return Step.KEEP, 0, 0
        return self.site_factor_step(job, 0.0, False, record, scale)

    def site_factor_step(self, job: JobRecord, score: float, reorders: bool, record: AppliedChange | None,
                         scale: SiteFactorScale) -> tuple[Step, int, int]:
        """Decide one job's SiteFactor: ``(step, value, current)``.

        ``value`` is the value to send (SEND) or to record (ADOPT); ``current`` is the
        job's SiteFactor now (from ``sprio``, else slurmsched's record), except that a SEND
        that replaces the value ``job_submit.lua`` gave the job at submit (slurmsched's own,
        not yet recorded) replaces 0, Slurm's default, which ``revert`` then restores. A job that
        ``sprio`` does not list (its begin time is ahead) and that slurmsched never
        changed is left alone (KEEP): its value is unknown, and a change would record a
        wrong original for ``revert``; it is planned once ``sprio`` lists it. So is a job
        that holds a value that is neither slurmsched's last one, nor the original, nor
        one of ``scale``'s levels: somebody set it since (``scontrol update``), and that
        value stands, as ``revert`` lets it stand; likewise a job slurmsched never changed
        that holds a value that is neither a level nor the one ``job_submit.lua`` gave it:
        an admin set it. (A level value is taken for an update of slurmsched's that
        failed, or for one whose record is gone, and is planned again.)
        """
        if job.site_factor is not None:
            current = job.site_factor
            if scale.level_of_value(current) is None and (
                    str(current) not in (record.current, original_text(record)) if record is not None
                    else not valued_at_submit(job)):
                return Step.KEEP, current, current
        elif record is not None:
            current = int(record.current)
        else:
            return Step.KEEP, 0, 0
        if not reorders:
            if record is None:
                return Step.KEEP, current, current
            original = int(original_text(record))
            return (Step.SETTLE, current, current) if current == original else (Step.SEND, original, current)
        position = scale.position(score)
        level = math.floor(position)
        target = scale.value(level)
        held = False
        if current != target:
            now_level = scale.level_of_value(current)
            hysteresis = self.section.hysteresis_levels
            if (now_level is None or GUARD_LEVEL in (now_level, level)
                    or not now_level - hysteresis <= position < now_level + 1 + hysteresis):
                return Step.SEND, target, 0 if record is None and valued_at_submit(job) else current
            held = True
        if record is None:  # the current value's level only matters for a job that is not at it yet
            if current != 0 and valued_at_submit(job) and scale.level_of_value(current) is not None:
                return Step.ADOPT, current, current
        elif str(current) == original_text(record):
            return Step.SETTLE, current, current
        return (Step.HOLD if held else Step.KEEP), current, current

    def plan(self, ranking: Ranking, snapshot: ClusterSnapshot,
             applied: Mapping[tuple[int, str], AppliedChange]) -> Plan:
        """Actions for the pending jobs of ``snapshot`` ranked by ``ranking``.

        Args:
            ranking: the policy's scores for the pending jobs.
            snapshot: the queue as Slurm reports it (``site_factor`` from ``sprio``).
            applied: changes slurmsched made and has not reverted, by ``(job_id, kind)``;
                a task split off a job array without a record of its own has its array's
                (:func:`~slurmsched.planner.changes.record_of`).
        """
        scale = self.scale(snapshot.config)
        pending = {j.job_id: j for j in snapshot.pending}
        ranked: list[tuple[int, Action]] = []
        adopted: list[SetSiteFactor] = []
        settled: list[tuple[int, str]] = []
        eligible: list[JobRecord] = []
        rank_of: dict[int, int] = {}
        held = 0
        for score in ranking.scores:
            job = pending.get(score.job_id)
            if job is None:
                continue
            record = record_of(applied, job, SITE_FACTOR)  # a split-off array task's may be its array's
            released = not self.eligible(job)  # protected or held: only slurmsched's value is undone
            if released:
                step, value, current = self.release_step(job, record, scale)
            else:
                eligible.append(job)
                step, value, current = self.site_factor_step(job, score.score, ranking.reorders, record, scale)
            rank_of[job.job_id] = score.rank
            if step is Step.SEND:
                reason = (score.reason if ranking.reorders and not released else
                          undo_reason(ranking.policy, released))
                ranked.append((score.rank, SetSiteFactor(job.job_id, value, current, reason)))
            elif step is Step.ADOPT:
                adopted.append(SetSiteFactor(job.job_id, value, 0, score.reason))
            elif step is Step.SETTLE:
                settled.append((job.job_id, SITE_FACTOR))
            elif step is Step.HOLD:
                held += 1
        switched = {job.job_id for job in eligible if record_of(applied, job, SWITCHES) is not None}
        ranked.extend((rank_of[a.job_id], a) for a in self.tuner.plan(eligible, snapshot, switched))
        chosen, rpcs = self.select(ranked)
        return Plan(tuple(chosen), tuple(adopted), tuple(settled), held, len(ranked) - len(chosen), rpcs)

    def select(self, ranked: Sequence[tuple[int, Action]]) -> tuple[list[Action], int]:
        """The best-ranked actions that fit in ``max_rpcs_per_cycle`` calls, and the calls they take.

        Args:
            ranked: ``(rank, action)`` pairs in any order; lower ranks go first.
        """
        limit = self.section.max_rpcs_per_cycle
        batch_fill: dict[int, int] = {}
        chosen: list[Action] = []
        calls = 0
        for _, action in sorted(ranked, key=lambda ra: ra[0]):
            if isinstance(action, SetSiteFactor):
                filled = batch_fill.get(action.value, 0)
                opens_call = filled % SITE_FACTOR_BATCH == 0
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
