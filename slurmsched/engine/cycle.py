"""One scheduling cycle: the only scheduling code path, for the daemon and the simulator.

``Engine.run_cycle(now)``:

1. ``gateway.snapshot()`` and ``gateway.finished_since(cursor)`` (Slurm reads);
2. the :class:`~slurmsched.engine.tracker.QueueTracker` predicts and scores only the
   jobs that need it (new or edited jobs, jobs of users/names with newly finished
   runs, everything after a refit or a failed cycle, and at each aging tick of the
   policy) -- the same scores ``policy.rank`` gives for the whole queue;
3. the planner decides the SiteFactor and constraints of just those jobs and of jobs
   whose last plan is not in place yet, then caps the RPCs (best ranks first);
4. when there are actions to send (and not dry-run): one repository transaction reads
   the pause flag and, unless paused, records the change each action makes (its
   original kept for ``revert``); it commits before ``gateway.apply`` sends them, so a
   database that fails later never leaves a change in Slurm without a record;
5. one repository transaction: open the cycle (recorded as live, dry-run or paused),
   ingest finished jobs, move the cursor, observe states, record new predictions,
   decisions and Slurm's answers (forgetting the records of restored values), close
   the cycle;
6. after the commit, fold the finished jobs into the predictor's statistics.

Every dependency is injected; nothing here knows whether Slurm is real or simulated.
An unchanged queue costs no prediction, no record and no RPC.
"""

from __future__ import annotations

import logging
import math
import operator
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence, TypedDict

from slurmsched.errors import SlurmError
from slurmsched.gateway.protocol import SlurmGateway
from slurmsched.model import (Action, ActionOutcome, ClusterSnapshot, Decision, JobRecord, Prediction, QueueDelta,
                              SchedulerConfig, SetFeatures, SetSiteFactor, SetSwitches)
from slurmsched.engine.tracker import QueueChanges, QueueTracker, Tracked
from slurmsched.planner import Plan, Planner, describe
from slurmsched.planner.changes import record_of
from slurmsched.planner.plan import SITE_FACTOR, SWITCHES, Step, undo_reason
from slurmsched.policy.base import Policy, Ranking
from slurmsched.predict.protocol import Predictor
from slurmsched.store.protocol import AppliedChange, CycleKind, JobRepository
from slurmsched.text import plural

log = logging.getLogger(__name__)

CURSOR = "sacct"
KINDS = tuple(cls.__name__ for cls in (SetSiteFactor, SetSwitches, SetFeatures))

_Key = tuple[int, str]
#: An applied change's ``(job_id, kind)``, the key of the engine's copy of them.
_change_key: Callable[[AppliedChange], _Key] = operator.attrgetter("job_id", "kind")


class _QueueArgs(TypedDict, total=False):
    """The keyword arguments :meth:`QueueTracker.update` takes the queue as: one of the two."""

    pending: Sequence[JobRecord]
    delta: QueueDelta


@dataclass(frozen=True, slots=True)
class CycleReport:
    """What one cycle saw, decided and did.

    Attributes:
        cycle_id: the repository's id of the cycle.
        started_at: the ``now`` the cycle ran at.
        pending, running: job counts in the snapshot.
        finished: finished jobs newly read from accounting.
        outcomes: Slurm's answer to each action sent (empty on dry-run or pause).
        decisions: everything recorded for ``explain`` this cycle.
        plan: the planner's output (actions, adopted, held by hysteresis, deferred by
            the RPC cap, RPCs).
        predictions: predictions that are new or changed this cycle.
        dry_run, paused: why nothing was applied, if so.
        timings: seconds per stage (``snapshot``, ``finished``, ``predict``, ``plan``,
            ``store``, ``apply``, ``record``, ``total``).
        in_force: changes recorded as in force after the cycle (what ``revert`` would
            restore; records of jobs that left the queue go at the next full pass).
    """

    cycle_id: int
    started_at: float
    pending: int
    running: int
    finished: int
    outcomes: tuple[ActionOutcome, ...]
    decisions: tuple[Decision, ...]
    plan: Plan
    predictions: tuple[Prediction, ...]
    dry_run: bool
    paused: bool
    timings: dict[str, float] = field(default_factory=dict)
    in_force: int = 0

    @property
    def failed(self) -> int:
        """Actions Slurm refused."""
        return sum(1 for o in self.outcomes if not o.ok)

    @property
    def kind(self) -> CycleKind:
        """What the cycle was recorded as (:func:`cycle_kind`)."""
        return cycle_kind(self.dry_run, self.paused)


def cycle_kind(dry_run: bool, paused: bool) -> CycleKind:
    """What a cycle is recorded as: dry-run wins over paused; either sends nothing."""
    if dry_run:
        return CycleKind.DRY_RUN
    return CycleKind.PAUSED if paused else CycleKind.LIVE


def fit_history(repository: JobRepository, limit: int | None) -> list[JobRecord]:
    """The finished jobs a fit learns from: the newest ``limit`` by end time
    (``daemon.fit_history_jobs``), oldest end first; ``None``: every one."""
    return repository.history(limit=limit)


class Engine:
    """Runs scheduling cycles over injected Slurm, history, predictor, policy and planner.

    Args:
        gateway: Slurm (real or simulated).
        repository: slurmsched's state (SQL or in-memory).
        predictor: duration predictor, already fitted (or see ``refit_interval_s``).
        policy: queue-ordering policy.
        planner: turns scores into actions.
        dry_run: plan and record, send nothing to Slurm.
        refit_interval_s: refit the predictor on its history (:func:`fit_history`) at
            the first cycle and then every so many seconds of ``now``; ``None``: never
            (the caller fits it).
        fit_limit: a fit learns from the newest this many finished jobs; ``None``: every one.
        refresh_s: every so many seconds of ``now`` (and after a cycle that found
            slurmsched paused, as ``revert`` leaves it) a full pass re-reads slurmsched's
            applied changes (``slurmsched revert`` or another tool may have changed
            them), plans again the jobs whose record there changed and drops the
            records of jobs that left the queue since (:meth:`_stale_records`). Predictions
            are renewed by refits, not by this pass: a pass that re-predicted every
            job would cost, summed over a run, one prediction per job per
            ``refresh_s`` of waiting.
        history_lookback_s: on a fresh database, how far back the first cycle reads
            accounting.
        overlap_s: accounting is re-read this far behind the cursor, because a finished
            job can show up in ``sacct`` a few seconds late; duplicates are dropped.
        timer: the clock of the per-stage timings (wall seconds by default; a benchmark
            may pass ``time.process_time`` to count CPU seconds).
    """

    def __init__(self, gateway: SlurmGateway, repository: JobRepository, predictor: Predictor,
                 policy: Policy, planner: Planner, *, dry_run: bool = False,
                 refit_interval_s: float | None = None, fit_limit: int | None = None,
                 refresh_s: float = 3600.0,
                 history_lookback_s: float = 86400.0, overlap_s: float = 300.0,
                 timer: Callable[[], float] = time.perf_counter) -> None:
        self.gateway = gateway
        self.repository = repository
        self.predictor = predictor
        self.policy = policy
        self.planner = planner
        self.dry_run = dry_run
        self.refit_interval_s = refit_interval_s
        self.fit_limit = fit_limit
        self.refresh_s = refresh_s
        self.history_lookback_s = history_lookback_s
        self.overlap_s = overlap_s
        self.timer = timer
        self._tracker = QueueTracker(policy, predictor)
        self._applied: dict[_Key, AppliedChange] = {}
        self._full_at: float | None = None
        self._config: SchedulerConfig | None = None
        self._jobs: tuple[JobRecord, ...] = ()
        self._serial: int | None = None
        self._last_fit: float | None = None
        self._cursor: float | None = None
        self._seen: dict[tuple[int, int], float] = {}
        self._seen_limit = 4096
        self._dirty_users: set[str] = set()
        self._dirty_names: set[str] = set()
        self._pinned: set[int] = set()
        self._intents: dict[_Key, str] = {}
        self._paused = False  # the last cycle found slurmsched paused
        #: True from the moment a cycle records the updates it will send to Slurm until
        #: Slurm's answers are committed: a caller that would cut the cycle short (a
        #: signal) waits for it to clear, so that the cycle's outcomes reach ``explain``.
        self.sending = False

    # -- public ---------------------------------------------------------------------

    def run_cycle(self, now: float) -> CycleReport:
        """Run one cycle at time ``now`` (POSIX seconds; simulated time in the simulator).

        Raises:
            SlurmError: the snapshot could not be read (nothing recorded). Accounting that
                cannot be read (slurmdbd down) is logged and skipped: the cycle plans the
                queue without newly finished jobs, and the next one reads them from the
                same cursor.
            StoreError: the repository failed; the transaction in progress is rolled
                back and the next cycle re-plans every job. Before sending, nothing is
                sent; after it, the changes sent stay recorded (committed before
                sending), their outcomes and the cycle's other records are not.
            DatabaseOfAnotherCluster: the repository keeps another cluster's daemon state
                (:meth:`JobRepository.claim`, asked by a first cycle when Slurm names its
                cluster): nothing is recorded or sent, and the next cycle asks again.
        """
        timings: dict[str, float] = {}
        timer = self.timer
        began = mark = timer()

        def lap(stage: str) -> None:
            nonlocal mark
            moment = timer()
            timings[stage] = moment - mark
            mark = moment

        snapshot = self.gateway.snapshot()
        if self._full_at is None:  # a first cycle: the database must be this cluster's
            self.repository.claim(snapshot.cluster)
        lap("snapshot")
        finished, cursor = self._read_finished(now)
        lap("finished")
        if self.refit_interval_s is not None and (
                self._last_fit is None or now - self._last_fit >= self.refit_interval_s):
            self.refit(now)
        first = self._full_at is None  # the first cycle, or the one after a failed cycle
        # after a paused cycle too: ``revert`` (which pauses) may have restored jobs
        full = self._full_at is None or not 0 <= now - self._full_at < self.refresh_s or self._paused
        moved: set[int] = set()
        if full:
            records = self.repository.applied_changes()
            applied, known = dict(zip(map(_change_key, records), records)), self._applied
            if applied != known:  # usually equal: compared in one pass before looking for what moved
                moved = {key[0] for key in applied.keys() ^ known.keys()}
                moved.update(key[0] for key, change in applied.items() if known.get(key, change) != change)
            self._applied, self._full_at = applied, now
        changes = self._tracker.update(now, **self._queue(snapshot, first), repredict_all=first,
                                       replan_all=first or snapshot.config != self._config, replan=moved,
                                       users=self._dirty_users, names=self._dirty_names,
                                       nodes=snapshot.nodes)
        pending = len(self._tracker.jobs)
        running = len(snapshot.jobs) - pending
        self._config = snapshot.config
        self._dirty_users, self._dirty_names = set(), set()
        lap("predict")
        plan = self._plan(changes, snapshot, now)
        stale = self._stale_records(snapshot) if full else []
        lap("plan")
        paused: bool | None = None
        outcomes: list[ActionOutcome] = []
        try:
            if plan.actions and not self.dry_run:
                self.sending = True
                with self.repository.transaction():  # committed before anything is sent
                    paused = self.repository.is_paused()
                    if not paused:
                        self._record_before_sending(plan.actions)
                if not paused:
                    outcomes = self.gateway.apply(plan.actions)
            lap("apply")
            with self.repository.transaction():
                paused = self.repository.is_paused() if paused is None else paused
                cycle_id = self.repository.start_cycle(now, cycle_kind(self.dry_run, paused))
                if finished:
                    self.repository.ingest_finished(finished)
                cursor = max([cursor] + [j.end_time for j in finished if j.end_time is not None])
                self.repository.set_cursor(CURSOR, cursor)
                self.repository.observe(snapshot)
                lap("store")
                decisions, mirror = self._record(cycle_id, changes, plan, outcomes, stale, now)
                self.repository.finish_cycle(  # a dry-run cycle counts what it would have sent
                    cycle_id, pending=pending, running=running,
                    actions=len(plan.actions) if self.dry_run else len(outcomes),
                    failed=sum(1 for o in outcomes if not o.ok),
                    timings={**timings, "total": timer() - began})
        except BaseException:
            self._full_at = None
            raise
        finally:
            self.sending = False
        self._paused = paused
        self._after_commit(finished, cursor, mirror)
        lap("record")
        timings["total"] = timer() - began
        return CycleReport(cycle_id, now, pending, running, len(finished),
                           tuple(outcomes), tuple(decisions), plan,
                           tuple(t.prediction for t in changes.fresh), self.dry_run, paused, timings,
                           len(self._applied))

    def refit(self, now: float) -> None:
        """Refit the predictor on its history (:func:`fit_history`); every job is predicted again."""
        history = fit_history(self.repository, self.fit_limit)
        log.info("refitting predictor %s on %s", self.predictor.name, plural(len(history), "finished job"))
        self.predictor.fit(history)
        self._tracker.repredict()
        self._last_fit = now

    def next_change(self) -> float:
        """The earliest time at which a cycle could act otherwise than one run right after
        the last, if neither the queue nor accounting changed in between: a score's change
        (:meth:`QueueTracker.next_change`), the periodic full pass (``refresh_s``) or refit
        (``refit_interval_s``). ``-inf``: the next cycle has work already (re-predictions for
        users with newly finished runs, plans not settled, the first cycle or the one after
        a paused or failed one). A cycle in between does nothing that this one would not.
        """
        if self._full_at is None or self._paused or self._dirty_users or self._dirty_names:
            return -math.inf
        times = [self._tracker.next_change(), self._full_at + self.refresh_s]
        if self.refit_interval_s is not None and self._last_fit is not None:
            times.append(self._last_fit + self.refit_interval_s)
        return min(times)

    def ranking(self, now: float) -> Ranking:
        """The policy's current order of the pending queue, with reasons (as of the last cycle)."""
        return self._tracker.ranking(now)

    # -- stages ---------------------------------------------------------------------

    def _read_finished(self, now: float) -> tuple[list[JobRecord], float]:
        """Finished jobs from accounting not seen before, and the cursor they were read from.

        Accounting is re-read ``overlap_s`` behind the cursor and de-duplicated; when it
        cannot be read, no job and the same cursor (logged). The
        first call takes the cursor from the repository (else ``history_lookback_s``
        before ``now``) and the jobs already stored around it.
        """
        cursor = self._cursor
        if cursor is None:
            stored = self.repository.get_cursor(CURSOR)
            cursor = stored if stored is not None else now - self.history_lookback_s
            for job in self.repository.history(since=cursor - self.overlap_s):
                self._seen[(job.job_id, job.restart_count)] = job.end_time or cursor
        seen = self._seen
        try:
            finished = self.gateway.finished_since(cursor - self.overlap_s)
        except SlurmError as exc:
            log.warning("accounting not read (%s): this cycle plans without newly finished jobs", exc)
            return [], cursor
        return [job for job in finished if (job.job_id, job.restart_count) not in seen], cursor

    def _plan(self, changes: QueueChanges, snapshot: ClusterSnapshot, now: float) -> Plan:
        """Plan the jobs that changed or are not settled, plus GPU-type widening of pinned jobs."""
        planner, tuner, tracker = self.planner, self.planner.tuner, self._tracker
        scale = planner.scale(snapshot.config)
        reorders = self.policy.reorders
        applied = self._applied
        ranked: list[tuple[Tracked, Action]] = []
        adopted: list[SetSiteFactor] = []
        settled: list[_Key] = []
        held = 0
        for job_id in changes.departed:
            self._pinned.discard(job_id)
        unsettled = tracker.unsettled
        switches_on, widens = tuner.tunes_switches(snapshot.config), tuner.widens
        eligible, site_factor_step, release_step = planner.eligible, planner.site_factor_step, planner.release_step
        keep, send, adopt, settle, hold = Step.KEEP, Step.SEND, Step.ADOPT, Step.SETTLE, Step.HOLD
        for tracked in changes.replan:
            job = tracked.job
            job_id = job.job_id
            unsettled.discard(job_id)
            record = record_of(applied, job, SITE_FACTOR)  # a split-off array task's may be its array's
            released = not eligible(job)  # protected or held: only slurmsched's value is undone
            if released:
                self._pinned.discard(job_id)
                step, value, current = release_step(job, record, scale)
            else:
                step, value, current = site_factor_step(job, tracked.score, reorders, record, scale)
            if step is keep:
                pass
            elif step is send:  # the policy's reason is added once chosen
                ranked.append((tracked, SetSiteFactor(job_id, value, current,
                                                      undo_reason(self.policy.name, True) if released else "")))
                unsettled.add(job_id)
            elif step is adopt:
                adopted.append(SetSiteFactor(job_id, value, 0, tracker.explain(tracked, now)))
            elif step is settle:
                settled.append((job_id, SITE_FACTOR))
            elif step is hold:
                held += 1
            if released:
                continue
            if switches_on and job.nodes > 1:
                switches = tuner.switches(job, snapshot.config, record_of(applied, job, SWITCHES) is not None)
                if switches is not None:
                    ranked.append((tracked, switches))
                    unsettled.add(job_id)
            if widens:
                if tuner.pinned(job):
                    self._pinned.add(job_id)
                else:
                    self._pinned.discard(job_id)
        if self._pinned:
            pinned = sorted((tracker.jobs[i] for i in self._pinned), key=tracker.rank)
            ranked.extend((tracker.jobs[a.job_id], a) for a in tuner.widen([t.job for t in pinned], snapshot.nodes))
        chosen, rpcs = planner.select([(tracker.rank(t), a) for t, a in ranked])
        chosen = [self._with_reason(a, now) if isinstance(a, SetSiteFactor) else a for a in chosen]
        return Plan(tuple(chosen), tuple(adopted), tuple(settled), held, len(ranked) - len(chosen), rpcs)

    def _with_reason(self, action: SetSiteFactor, now: float) -> SetSiteFactor:
        """The action with the policy's reason (only built for actions actually sent; one
        that restores a protected job's value has its reason already)."""
        if action.reason:
            return action
        reason = (self._tracker.explain(self._tracker.jobs[action.job_id], now) if self.policy.reorders
                  else undo_reason(self.policy.name, False))
        return SetSiteFactor(action.job_id, action.value, action.previous, reason)

    def _stale_records(self, snapshot: ClusterSnapshot) -> list[_Key]:
        """Applied changes of jobs that left the queue, looked for on full passes.

        A job still in ``snapshot`` (running, suspended) keeps its records: a requeue brings
        it back pending with the values slurmsched set (Slurm keeps them), which the planner
        and ``revert`` must still know for slurmsched's, with their original. So does a job
        array while a task split off it is in the queue (:func:`record_of`). A job that left
        the queue, whether it ran or was cancelled while pending, keeps its records until the
        next full pass (``refresh_s``): telling it from a job that started takes every queued
        job's id, which a cycle that saw a job start would otherwise pay for the whole queue.
        """
        pending = self._tracker.jobs
        keys = [key for key in self._applied if key[0] not in pending]
        if not keys:
            return []
        queued = {job.job_id for job in snapshot.jobs}
        gone = [key for key in keys if key[0] not in queued]
        if gone:  # an array's record speaks for its split-off tasks still queued
            arrays = {job.array_job_id for job in snapshot.jobs if job.array_job_id is not None}
            gone = [key for key in gone if key[0] not in arrays]
        return gone

    def _queue(self, snapshot: ClusterSnapshot, first: bool) -> _QueueArgs:
        """What the tracker takes in: the gateway's delta when it is relative to the last
        snapshot seen (and this is not a first cycle), else the pending jobs."""
        delta, serial = snapshot.delta, self._serial
        self._serial = snapshot.serial
        if not first and delta is not None and delta.base == serial:
            return {"delta": delta}
        jobs = snapshot.jobs
        if (not first and serial is not None and len(jobs) == len(self._jobs)
                and all(map(operator.is_, jobs, self._jobs))):
            return {"delta": QueueDelta(serial, (), frozenset())}  # the very records of the last cycle
        self._jobs = jobs
        return {"pending": snapshot.pending}

    def _record(self, cycle_id: int, changes: QueueChanges, plan: Plan, outcomes: Sequence[ActionOutcome],
                stale: list[_Key], now: float) -> tuple[list[Decision], list[tuple[_Key, AppliedChange | None]]]:
        """Write this cycle's predictions, decisions and applied changes (inside its transaction).

        Returns the decisions and the changes to make to the in-memory copy of the
        applied changes once the transaction has committed.
        """
        repo, tracker = self.repository, self._tracker
        if changes.fresh:
            repo.record_predictions(cycle_id, [t.prediction for t in changes.fresh])
        decisions = [Decision(t.job.job_id, "rank", "ranked", tracker.explain(t, now), score=t.score,
                              rank=tracker.rank(t)) for t in changes.fresh]
        mirror: list[tuple[_Key, AppliedChange | None]] = []
        if outcomes:
            for outcome in outcomes:
                decisions.append(self._decision(outcome.action, "ok" if outcome.ok else f"failed: {outcome.message}"))
                mirror.append(self._settle(outcome))
        elif plan.actions:
            status = "dry-run" if self.dry_run else "skipped: paused"
            for action in plan.actions:
                kind, _, new = describe(action)
                if self._intents.get((action.job_id, kind)) != new:
                    self._intents[(action.job_id, kind)] = new
                    decisions.append(self._decision(action, status))
        for action in plan.adopted:
            kind, previous, new = describe(action)
            repo.record_applied(action.job_id, kind, previous, new)
            mirror.append(((action.job_id, kind), AppliedChange(action.job_id, kind, previous, new)))
            decisions.append(self._decision(action, "adopted: value already set (job_submit.lua)"))
        for key in stale + list(plan.settled):
            repo.forget_applied(*key)
            mirror.append((key, None))
        for job_id in changes.departed:
            for kind in KINDS:
                self._intents.pop((job_id, kind), None)
        if decisions:
            repo.record_decisions(cycle_id, decisions)
        return decisions, mirror

    def _record_before_sending(self, actions: Sequence[Action]) -> None:
        """Record the change each action makes, in the transaction that commits before
        ``gateway.apply`` sends them: whatever happens to the database afterwards, a value
        Slurm holds has its original on record for ``revert``. An action that restores
        the original keeps the record until Slurm confirms it (:meth:`_settle`). A failed
        update stays recorded too: it may have been made (scontrol timed out, or slurmctld
        answered oddly after applying it); a value the job does not hold is settled by a
        later cycle's reading, or dropped by ``revert`` as never made.
        """
        for action in actions:
            (job_id, kind), original, new = self._change(action)
            if (original or "") != new:
                self.repository.record_applied(job_id, kind, original, new)

    def _settle(self, outcome: ActionOutcome) -> tuple[_Key, AppliedChange | None]:
        """Once Slurm answered: record the change again, or forget the record of an update
        that restored the original and succeeded. Returns the in-memory copy's entry for
        the action's change.

        A change recorded before sending is recorded again, with the original slurmsched
        knows: ``slurmsched revert``, run while the update was on its way, may have dropped
        the record (the job did not hold the value yet) or restored the original.
        """
        key, original, new = self._change(outcome.action)
        self._intents.pop(key, None)
        if (original or "") != new:
            self.repository.record_applied(*key, original, new)
            return key, AppliedChange(*key, original, new)
        record = self._applied.get(key)
        if record is not None and outcome.ok:
            self.repository.forget_applied(*key)
            return key, None
        return key, record

    def _change(self, action: Action) -> tuple[_Key, str | None, str]:
        """The action's ``(job_id, kind)``, the value slurmsched found on the job (its record's
        original; for a task split off a job array without one, its array's
        (:func:`record_of`); else the value the action replaces) and the value it sets, as text."""
        kind, previous, new = describe(action)
        key = (action.job_id, kind)
        tracked = self._tracker.jobs.get(action.job_id)
        record = self._applied.get(key) if tracked is None else record_of(self._applied, tracked.job, kind)
        return key, record.original if record is not None else previous, new

    def _decision(self, action: Action, outcome: str) -> Decision:
        kind, previous, new = describe(action)
        tracked = self._tracker.jobs.get(action.job_id)
        score = tracked.score if tracked is not None else None
        rank = self._tracker.rank(tracked) if tracked is not None else None
        return Decision(action.job_id, kind, outcome, action.reason, previous, new, score, rank)

    def _after_commit(self, finished: Sequence[JobRecord], cursor: float,
                      mirror: list[tuple[_Key, AppliedChange | None]]) -> None:
        """Update in-memory state only once the cycle's transaction has committed."""
        for key, change in mirror:
            if change is None:
                self._applied.pop(key, None)
            else:
                self._applied[key] = change
        self._cursor = cursor
        if finished:
            self.predictor.update(finished)
            for job in finished:
                self._seen[(job.job_id, job.restart_count)] = job.end_time or cursor
                self._dirty_users.add(job.user)
                self._dirty_names.add(job.name)
        if len(self._seen) > self._seen_limit:
            horizon = cursor - self.overlap_s
            self._seen = {k: t for k, t in self._seen.items() if t >= horizon}
            self._seen_limit = max(4096, 2 * len(self._seen))
