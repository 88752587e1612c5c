"""The engine's memory of the pending queue between cycles.

For every pending job the tracker keeps the record last seen, its prediction, its
policy score and its place in the policy's order, and works out each cycle which jobs
need anything redone:

* re-predict: new jobs, jobs whose prediction inputs changed (the user edited them),
  jobs of a user or job name that just finished a run (an empty user or name, as in
  traces without them, identifies nobody and re-predicts nothing), everything after a
  refit or on the engine's first cycle;
* re-score: the above, plus jobs whose score the policy said would change with time by
  now (an aging tick, the guard; :meth:`Policy.changes_at`, kept in a heap); a job
  keeps its :meth:`Policy.scorer` while its record, prediction and backlog wait stay the
  same, so an aging tick costs no run-time or service arithmetic;
* re-plan: the above, plus jobs whose plan-relevant fields changed (SiteFactor,
  features, switches, hold) and jobs whose last plan is not in place yet.

The pending components of a heterogeneous job are scored as one job, as
:meth:`Policy.rank` scores them (:mod:`slurmsched.policy.hetjob`): they share one scorer,
made again when any of them changes, arrives or leaves, and are re-scored together.

It also keeps the expected work of the whole pending queue (:meth:`Policy.work`), so a
newly seen job's backlog wait (:func:`~slurmsched.policy.base.backlog_waits`) costs
nothing more than its own prediction; the backlog wait is fixed from then on. The
cluster's capacity is computed again only when the nodes' configured CPUs or GRES change.

A job whose record object is the very one seen last cycle (the simulator reuses them)
is recognised by identity, with set operations rather than a loop over the queue;
otherwise two small tuples of fields are compared. The
policy's order is kept as a sorted list of ``(score, submit time, job id)`` keys, so
ranks cost a binary search and an arrival costs one insertion.
"""

from __future__ import annotations

import heapq
import math
import operator
from bisect import bisect_left, insort
from dataclasses import dataclass
from typing import AbstractSet as Set, Collection, Sequence

from slurmsched.model import JobRecord, NodeRecord, Prediction, QueueDelta
from slurmsched.policy.base import JobScore, Policy, Ranking, Scorer, backlog_waits, sort_key
from slurmsched.policy.hetjob import as_one, component_order, whole
from slurmsched.predict.protocol import Predictor


def prediction_inputs(job: JobRecord) -> tuple:
    """The fields a prediction may depend on."""
    return (job.user, job.name, job.account, job.partition, job.qos, job.time_limit_s, job.nodes,
            job.cpus, job.gpus, job.gpu_type, job.memory_mb, job.submit_time)


def plan_inputs(job: JobRecord) -> tuple:
    """The other fields the planner looks at."""
    return (job.site_factor, job.priority == 0, job.features, job.switches, job.switch_wait_s)


@dataclass(slots=True)
class Tracked:
    """One pending job as the engine last saw, predicted, scored and planned it.

    ``scorer`` is the policy's :meth:`~Policy.scorer` for ``job``, ``prediction`` and
    ``backlog_s``, made at the next rescore; whoever changes one of these sets it to ``None``.
    """

    job: JobRecord
    inputs: tuple
    plan_inputs: tuple
    prediction: Prediction
    version: str
    score: float = 0.0
    order: tuple[float, float, int] | None = None
    due: float = math.inf
    work: float = 0.0
    backlog_s: float = 0.0
    scorer: Scorer | None = None


@dataclass(frozen=True, slots=True)
class QueueChanges:
    """What one cycle must redo.

    Attributes:
        replan: jobs to plan again (their score is current).
        fresh: jobs whose prediction is new or differs from the last one.
        departed: ids of jobs that left the pending queue.
    """

    replan: tuple[Tracked, ...]
    fresh: tuple[Tracked, ...]
    departed: tuple[int, ...]


def _as_whole(members: Sequence[Tracked]) -> tuple[JobRecord, Prediction, float]:
    """A heterogeneous job's tracked components (in component order) as one job: its
    record (:func:`~slurmsched.policy.hetjob.whole`), prediction and backlog wait (its leader's)."""
    lead = members[0]
    return whole([m.job for m in members]), lead.prediction, lead.backlog_s


class QueueTracker:
    """Per-job predictions, scores and order, updated by what changed.

    ``unsettled`` holds the ids of jobs whose planned state is not in place yet (just
    scored, or an action deferred, failed or not sent on dry-run/pause): they are
    planned again every cycle until the planner finds nothing to do for them.

    Args:
        policy: scores jobs (``scorer``, ``work``, ``capacity``, ``explain``).
        predictor: predicts re-predicted jobs in one batch.
    """

    def __init__(self, policy: Policy, predictor: Predictor) -> None:
        self.policy = policy
        self.predictor = predictor
        self.jobs: dict[int, Tracked] = {}
        self._order: list[tuple[float, float, int]] = []
        self._due: dict[float, list[int]] = {}  # due time -> ids (some since rescored to another time)
        self._due_times: list[float] = []  # heap of the keys of _due
        self._by_user: dict[str, set[int]] = {}
        self._by_name: dict[str, set[int]] = {}
        self._hets: dict[int, set[int]] = {}  # het_job_id -> ids of its tracked components
        self._regroup: set[int] = set()  # het_job_ids whose components arrived or left since the last rescore
        self._version: str | None = None
        self._seen_ids: Set[int] = frozenset()
        self._seen_records: Sequence[JobRecord] = ()
        self._repredict = False
        self._queued = 0.0
        self._reasons: dict[int, str] = {}  # explain's texts at _reasons_at, since the last update
        self._reasons_at = math.nan
        self._capacity: tuple[list[tuple[int, tuple]], float] | None = None  # (nodes' cpus and gres, capacity)
        self.unsettled: set[int] = set()

    def update(self, now: float, *, pending: Sequence[JobRecord] | None = None, delta: QueueDelta | None = None,
               repredict_all: bool = False, replan_all: bool = False, replan: Collection[int] = (),
               users: set[str] | frozenset[str] = frozenset(),
               names: set[str] | frozenset[str] = frozenset(), nodes: Sequence[NodeRecord] = ()) -> QueueChanges:
        """Take in this cycle's pending queue: all of it, or what changed since the last call.

        Work is proportional to what changed: the records that are not the very objects
        seen last call are picked out with set operations (or given by ``delta``);
        everything else comes from small sets (expired scores, unsettled plans, jobs of
        the given users and names).

        Args:
            now: cycle time (scores are computed at it).
            pending: the snapshot's pending jobs; or else
            delta: how the queue changed since the snapshot the last call took in.
            repredict_all: predict every job again (the first cycle, after a refit).
            replan_all: plan every job again (e.g. the scheduler's weights changed).
            replan: ids of jobs to plan again (their applied changes moved).
            users, names: users and job names with newly finished runs; their pending
                jobs are predicted again.
            nodes: the cluster's nodes: their capacity (:meth:`Policy.capacity`, computed
                only when jobs arrived and the nodes' configured CPUs or GRES changed)
                gives newly seen jobs their backlog waits.
        """
        table = self.jobs
        self._reasons = {}
        version = self.predictor.version
        repredict_all = repredict_all or self._repredict or version != self._version
        self._version, self._repredict = version, False
        predict: dict[int, JobRecord] = {}
        asked, replan = replan, set()
        arrived = 0
        if delta is not None:
            changed: Sequence[JobRecord] = delta.changed
            self._seen_ids, self._seen_records = frozenset(), ()
        elif pending is not None:
            changed = self._not_seen(pending)
        else:
            raise ValueError("update needs the pending jobs or a delta")
        restarted: list[int] = []  # waits that began anew (a hold released): scored again now
        for job in changed:
            tracked = table.get(job.job_id)
            if tracked is None:
                arrived += 1
                predict[job.job_id] = job
            elif prediction_inputs(job) != tracked.inputs:
                predict[job.job_id] = job
            else:
                others = plan_inputs(job)
                if others != tracked.plan_inputs:
                    tracked.plan_inputs = others
                    replan.add(job.job_id)
                if job.eligible_time != tracked.job.eligible_time:
                    restarted.append(job.job_id)
                tracked.job, tracked.scorer = job, None
        departed: tuple[int, ...] = ()
        if delta is not None:
            departed = tuple(i for i in delta.left if i in table)
        elif pending is not None and len(table) + arrived != len(pending):
            departed = tuple(table.keys() - {job.job_id for job in pending})
        for job_id in departed:
            self._drop(table.pop(job_id))
        if not table:
            self._queued = 0.0  # no rounding drift left over from the sums
        if repredict_all:
            for job_id, tracked in table.items():
                predict.setdefault(job_id, tracked.job)
        else:
            for index, keys in ((self._by_user, users), (self._by_name, names)):
                for key in keys:
                    for job_id in index.get(key, ()):
                        predict.setdefault(job_id, table[job_id].job)
        expired = self._expired(now)
        expired.update(i for i in restarted if i in table)
        rescore = [table[i] for i in expired if i not in predict]
        if replan_all:
            replan.update(table)
        replan.update(i for i in asked if i in table)
        replan.update(self.unsettled)
        replan.difference_update(predict, expired)
        fresh = self._predict(list(predict.values()), version, nodes)
        rescore.extend(table[i] for i in predict)
        if self._hets:
            rescore = self._grouped(rescore)
            replan.difference_update(t.job.job_id for t in rescore)
        self._rescore(rescore, now)
        return QueueChanges(tuple(rescore) + tuple(table[i] for i in replan), tuple(fresh), departed)

    def _not_seen(self, pending: Sequence[JobRecord]) -> list[JobRecord]:
        """The records of ``pending`` that are not the very objects the last call saw, by job id.

        Compared by object identity with set operations (no Python-level loop over the
        queue): the last call's records are kept alive, so no new record can reuse the
        ``id`` of one of them. Sorted, because a set of ``id`` values iterates in memory
        order: the queue's summed work (and so later backlog waits) and the order of a
        cycle's decisions must not depend on where the records were allocated.
        """
        current = dict(zip(map(id, pending), pending))
        new = current.keys() - self._seen_ids
        self._seen_ids, self._seen_records = current.keys(), pending
        return sorted((current[i] for i in new), key=operator.attrgetter("job_id"))

    def _expired(self, now: float) -> set[int]:
        """Ids of tracked jobs whose score the policy said would change by ``now``."""
        expired: set[int] = set()
        times, table = self._due_times, self.jobs
        while times and times[0] <= now:
            due = heapq.heappop(times)
            for job_id in self._due.pop(due):
                tracked = table.get(job_id)
                if tracked is not None and tracked.due == due:
                    expired.add(job_id)
        return expired

    def _predict(self, jobs: list[JobRecord], version: str, nodes: Sequence[NodeRecord]) -> list[Tracked]:
        """Predict ``jobs`` in one batch, giving newly seen ones their backlog wait;
        returns those whose prediction is new or changed."""
        if not jobs:
            return []
        fresh, arrived = [], []
        work = self.policy.work
        for job, prediction in zip(jobs, self.predictor.predict(jobs)):
            before = self.jobs.get(job.job_id)
            if before is None:
                tracked = Tracked(job, prediction_inputs(job), plan_inputs(job), prediction, version,
                                  work=work(job, prediction))
                self.jobs[job.job_id] = tracked
                self._index(tracked)
                if job.het_job_id is not None:
                    self._hets.setdefault(job.het_job_id, set()).add(job.job_id)
                    self._regroup.add(job.het_job_id)
                fresh.append(tracked)
                arrived.append(tracked)
                continue
            if (before.prediction.estimate_s != prediction.estimate_s
                    or before.prediction.source != prediction.source):
                fresh.append(before)
            self._unindex(before)
            before.job, before.inputs, before.plan_inputs = job, prediction_inputs(job), plan_inputs(job)
            before.prediction, before.version, before.scorer = prediction, version, None
            self._queued -= before.work
            before.work = work(job, prediction)
            self._queued += before.work
            self._index(before)
        if arrived:
            waits = backlog_waits(((t.job, t.work) for t in arrived), self._capacity_of(nodes), self._queued)
            for tracked in arrived:
                tracked.backlog_s = waits[tracked.job.job_id]
                self._queued += tracked.work
        return fresh

    def _capacity_of(self, nodes: Sequence[NodeRecord]) -> float:
        """:meth:`Policy.capacity` of ``nodes``, kept while their configured CPUs and GRES stay the same."""
        key = [(node.cpus, node.gres) for node in nodes]
        if self._capacity is None or self._capacity[0] != key:
            self._capacity = (key, self.policy.capacity(nodes))
        return self._capacity[1]

    def _index(self, tracked: Tracked) -> None:
        """File the job under its user and its name; an empty one identifies nobody and is not filed."""
        job = tracked.job
        if job.user:
            self._by_user.setdefault(job.user, set()).add(job.job_id)
        if job.name:
            self._by_name.setdefault(job.name, set()).add(job.job_id)

    def _unindex(self, tracked: Tracked) -> None:
        for index, key in ((self._by_user, tracked.job.user), (self._by_name, tracked.job.name)):
            if not key:
                continue
            ids = index.get(key)
            if ids is not None:
                ids.discard(tracked.job.job_id)
                if not ids:
                    del index[key]

    def _grouped(self, jobs: list[Tracked]) -> list[Tracked]:
        """``jobs`` and the other tracked components of every heterogeneous job among them
        or whose components arrived or left, each component of a job with several given the
        scorer of the whole job (:func:`~slurmsched.policy.hetjob.whole`, predicted and
        waiting as its leader), made again when any component's scorer was unset."""
        hets, regroup = self._hets, self._regroup
        touched = {t.job.het_job_id for t in jobs if t.job.het_job_id in hets}
        touched.update(het for het in regroup if het in hets)
        self._regroup = set()
        if not touched:
            return jobs
        grouped = [t for t in jobs if t.job.het_job_id not in touched]
        for het in sorted(touched):
            members = self._members(het)
            if het in regroup:
                for member in members:
                    member.scorer = None
            if len(members) > 1 and any(member.scorer is None for member in members):
                scorer = self.policy.scorer(*_as_whole(members))
                for member in members:
                    member.scorer = scorer
            grouped.extend(members)
        return grouped

    def _components(self, job: JobRecord) -> list[Tracked] | None:
        """The tracked components of the job's heterogeneous job in component order, when it has several."""
        het = job.het_job_id
        if het is None or len(self._hets.get(het, ())) < 2:
            return None
        return self._members(het)

    def _members(self, het: int) -> list[Tracked]:
        """The tracked components of heterogeneous job ``het``, in component order."""
        return sorted((self.jobs[i] for i in self._hets[het]), key=lambda t: component_order(t.job))

    def _rescore(self, jobs: list[Tracked], now: float) -> None:
        """Score ``jobs`` again, note when time changes their score next, and move them in the order."""
        make_scorer, unsettled, order = self.policy.scorer, self.unsettled, self._order
        rebuild = len(jobs) > len(self.jobs) // 8
        for tracked in jobs:
            job = tracked.job
            if not rebuild and tracked.order is not None:
                self._remove(tracked.order)
            scorer = tracked.scorer
            if scorer is None:
                scorer = tracked.scorer = make_scorer(job, tracked.prediction, tracked.backlog_s)
            tracked.score, tracked.due = scorer(now)
            tracked.order = sort_key(job, tracked.score)
            if tracked.due < math.inf:
                self._due_at(tracked.due).append(job.job_id)
            unsettled.add(job.job_id)
            if not rebuild:
                insort(order, tracked.order)
        if rebuild:
            self._order = sorted(t.order for t in self.jobs.values() if t.order is not None)

    def _due_at(self, due: float) -> list[int]:
        """The ids due at ``due`` (policies give many jobs the same instant, e.g. an aging tick)."""
        ids = self._due.get(due)
        if ids is None:
            ids = self._due[due] = []
            heapq.heappush(self._due_times, due)
        return ids

    def _drop(self, tracked: Tracked) -> None:
        self._queued -= tracked.work
        if tracked.order is not None:
            self._remove(tracked.order)
        self._unindex(tracked)
        self.unsettled.discard(tracked.job.job_id)
        het = tracked.job.het_job_id
        if het is not None:
            ids = self._hets[het]
            ids.discard(tracked.job.job_id)
            if ids:
                self._regroup.add(het)
            else:
                del self._hets[het]

    def _remove(self, key: tuple[float, float, int]) -> None:
        index = bisect_left(self._order, key)
        if index < len(self._order) and self._order[index] == key:
            del self._order[index]

    def rank(self, tracked: Tracked) -> int:
        """1-based position of a job in the policy's order."""
        return bisect_left(self._order, tracked.order) + 1 if tracked.order is not None else len(self._order) + 1

    def explain(self, tracked: Tracked, now: float) -> str:
        """The policy's reason for the job's score.

        Kept until the next :meth:`update` (which alone changes a job's prediction and
        backlog wait) for the same ``now``: a cycle records the reason of a job it both
        re-scored and sends an action for once, not twice.
        """
        if now != self._reasons_at:
            self._reasons, self._reasons_at = {}, now
        reason = self._reasons.get(tracked.job.job_id)
        if reason is None:
            members = self._components(tracked.job)
            if members is None:
                reason = self.policy.explain(tracked.job, tracked.prediction, now, tracked.backlog_s)
            else:
                subject, prediction, backlog_s = _as_whole(members)
                reason = as_one(self.policy.explain(subject, prediction, now, backlog_s), [m.job for m in members])
            self._reasons[tracked.job.job_id] = reason
        return reason

    def ranking(self, now: float) -> Ranking:
        """The whole current order with reasons (what ``policy.rank`` would return)."""
        scores = tuple(JobScore(key[2], key[0], i, self.explain(self.jobs[key[2]], now))
                       for i, key in enumerate(self._order, 1))
        return Ranking(self.policy.name, self.policy.reorders, scores, self.policy.guard_s)

    def next_change(self) -> float:
        """When a cycle could next act on the tracked jobs if the queue does not change:
        ``-inf`` when the next one has work already (a re-prediction asked for, plans not
        settled), else the earliest time the policy said a score changes (``inf``: never).
        It may be early, never late: a job rescored since keeps its old time here until then."""
        if self._repredict or self.unsettled:
            return -math.inf
        return self._due_times[0] if self._due_times else math.inf

    def repredict(self) -> None:
        """Predict every job again at the next update (after a refit)."""
        self._repredict = True
