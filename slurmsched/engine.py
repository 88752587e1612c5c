"""One scheduling cycle: the only scheduling code path, for the daemon and the simulator.

``Engine.run_cycle(now)``:

1. ``gateway.snapshot()`` and ``gateway.finished_since(cursor)`` (Slurm reads);
2. predict pending jobs, re-using each job's cached prediction unless the job changed,
   the model was refit, a job of the same user or name finished since, or the cached
   value is older than ``refresh_s``;
3. ``policy.rank`` (pure) and, inside one repository transaction,
   ``planner.plan`` -> ``gateway.apply`` (unless dry-run or paused) -> record finished
   jobs, cursor, observed states, new predictions, decisions and applied changes;
4. after the commit, fold the finished jobs into the predictor's statistics.

Every dependency is injected; nothing here knows whether Slurm is real or simulated.
Cost scales with what changed: unchanged jobs are neither re-predicted nor recorded,
and an unchanged queue plans no action.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Mapping, Protocol, Sequence

from slurmsched.gateway.protocol import SlurmGateway
from slurmsched.model import (Action, ActionOutcome, ClusterSnapshot, Decision, JobRecord, JobState,
                              Prediction)
from slurmsched.planner import Plan, Planner, describe
from slurmsched.policy import JobScore, Policy, PolicyContext, Ranking
from slurmsched.predict.protocol import Predictor
from slurmsched.store.protocol import AppliedChange, JobRepository

log = logging.getLogger(__name__)

CURSOR = "sacct"


class Clock(Protocol):
    """Time as the loop sees it: the wall clock for the daemon, simulated time in the simulator."""

    def now(self) -> float:
        """POSIX seconds."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (a simulated clock just advances)."""
        ...


class SystemClock:
    """The wall clock; :meth:`sleep` returns early once ``stop`` is set (graceful shutdown).

    Args:
        stop: an event that interrupts :meth:`sleep` when set (e.g. by a SIGTERM handler).
    """

    def __init__(self, stop: threading.Event | None = None) -> None:
        self.stop = stop or threading.Event()

    def now(self) -> float:
        """``time.time()``."""
        return time.time()

    def sleep(self, seconds: float) -> None:
        """Sleep up to ``seconds``, less if :attr:`stop` gets set."""
        if seconds > 0:
            self.stop.wait(seconds)


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
        ranking: the policy's order of the pending queue.
        plan: the planner's output (actions, held by hysteresis, deferred by the cap).
        predictions: the current prediction of every pending job, by job id.
        dry_run, paused: why nothing was applied, if so.
        timings: seconds per stage (``snapshot``, ``finished``, ``predict``, ``rank``,
            ``plan``, ``apply``, ``record``, ``total``).
    """

    cycle_id: int
    started_at: float
    pending: int
    running: int
    finished: int
    outcomes: tuple[ActionOutcome, ...]
    decisions: tuple[Decision, ...]
    ranking: Ranking
    plan: Plan
    predictions: Mapping[int, Prediction]
    dry_run: bool
    paused: bool
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def failed(self) -> int:
        """Actions Slurm refused."""
        return sum(1 for o in self.outcomes if not o.ok)


@dataclass(slots=True)
class _Cached:
    """A pending job's prediction and what it was made from."""

    job: JobRecord
    key: tuple
    prediction: Prediction
    made_at: float
    version: str


def _job_key(job: JobRecord) -> tuple:
    """The fields a prediction may depend on; a change means the user edited the job."""
    return (job.user, job.name, job.account, job.partition, job.qos, job.time_limit_s, job.nodes,
            job.cpus, job.gpus, job.gpu_type, job.memory_mb, job.submit_time)


class Engine:
    """Runs scheduling cycles over injected Slurm, history, predictor, policy and planner.

    Args:
        gateway: Slurm (real or simulated).
        repository: slurmsched's state (SQL or in-memory).
        predictor: duration predictor, already fitted (or see ``refit_interval_s``).
        policy: queue-ordering policy.
        planner: turns rankings into actions.
        dry_run: plan and record, send nothing to Slurm.
        refit_interval_s: refit the predictor on the repository's whole history at the
            first cycle and then every so many seconds of ``now``; ``None``: never
            (the caller fits it).
        refresh_s: re-predict a pending job at least this often even when nothing it
            depends on changed visibly (history-wide statistics drift slowly).
        history_lookback_s: on a fresh database, how far back the first cycle reads
            accounting.
        overlap_s: accounting is re-read this far behind the cursor, because a finished
            job can show up in ``sacct`` a few seconds late; duplicates are dropped.
    """

    def __init__(self, gateway: SlurmGateway, repository: JobRepository, predictor: Predictor,
                 policy: Policy, planner: Planner, *, dry_run: bool = False,
                 refit_interval_s: float | None = None, refresh_s: float = 3600.0,
                 history_lookback_s: float = 86400.0, overlap_s: float = 300.0) -> None:
        self.gateway = gateway
        self.repository = repository
        self.predictor = predictor
        self.policy = policy
        self.planner = planner
        self.dry_run = dry_run
        self.refit_interval_s = refit_interval_s
        self.refresh_s = refresh_s
        self.history_lookback_s = history_lookback_s
        self.overlap_s = overlap_s
        self._cursor: float | None = None
        self._seen: dict[tuple[int, int], float] = {}
        self._seen_limit = 4096
        self._cache: dict[int, _Cached] = {}
        self._dirty_users: set[str] = set()
        self._dirty_names: set[str] = set()
        self._last_fit: float | None = None
        self._intents: dict[tuple[int, str], str] = {}

    # -- the cycle ------------------------------------------------------------------

    def run_cycle(self, now: float) -> CycleReport:
        """Run one cycle at time ``now`` (POSIX seconds; simulated time in the simulator).

        Raises:
            SlurmError: the snapshot or accounting could not be read (nothing recorded).
            StoreError: the repository failed; the cycle's transaction is rolled back.
        """
        timings: dict[str, float] = {}
        began = mark = time.perf_counter()

        def lap(stage: str) -> None:
            nonlocal mark
            moment = time.perf_counter()
            timings[stage] = moment - mark
            mark = moment

        snapshot = self.gateway.snapshot()
        lap("snapshot")
        finished, cursor = self._read_finished(now)
        lap("finished")
        if self.refit_interval_s is not None and (
                self._last_fit is None or now - self._last_fit >= self.refit_interval_s):
            self.refit(now)
        pending = snapshot.pending
        predictions, fresh = self._predict(pending, now)
        lap("predict")
        ranking = self.policy.rank(PolicyContext(now, pending, predictions))
        lap("rank")
        with self.repository.transaction():
            cycle_id = self.repository.start_cycle(now, self.dry_run)
            if finished:
                self.repository.ingest_finished(finished)
            cursor = max([cursor] + [j.end_time for j in finished if j.end_time is not None])
            self.repository.set_cursor(CURSOR, cursor)
            self.repository.observe(snapshot)
            paused = self.repository.is_paused()
            applied = {(c.job_id, c.kind): c for c in self.repository.applied_changes()}
            lap("store")
            plan = self.planner.plan(ranking, snapshot, applied)
            lap("plan")
            if self.dry_run or paused or not plan.actions:
                outcomes: list[ActionOutcome] = []
            else:
                outcomes = self.gateway.apply(plan.actions)
            lap("apply")
            decisions = self._record(cycle_id, snapshot, ranking, plan, outcomes, applied, fresh, paused)
            self.repository.finish_cycle(
                cycle_id, pending=len(pending), running=len(snapshot.jobs) - len(pending),
                actions=len(outcomes), failed=sum(1 for o in outcomes if not o.ok),
                timings={**timings, "total": time.perf_counter() - began})
        self._after_commit(finished, cursor)
        lap("record")
        timings["total"] = time.perf_counter() - began
        return CycleReport(cycle_id, now, len(pending), len(snapshot.jobs) - len(pending), len(finished),
                           tuple(outcomes), tuple(decisions), ranking, plan, predictions,
                           self.dry_run, paused, timings)

    def refit(self, now: float) -> None:
        """Refit the predictor on the repository's whole history; every prediction is redone."""
        history = self.repository.history()
        log.info("refitting predictor %s on %d finished jobs", self.predictor.name, len(history))
        self.predictor.fit(history)
        self._cache.clear()
        self._last_fit = now

    # -- stages ---------------------------------------------------------------------

    def _read_finished(self, now: float) -> tuple[list[JobRecord], float]:
        """Finished jobs from accounting not seen before, and the cursor they were read from.

        Accounting is re-read ``overlap_s`` behind the cursor and de-duplicated. The
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
        new = [job for job in self.gateway.finished_since(cursor - self.overlap_s)
               if (job.job_id, job.restart_count) not in seen]
        return new, cursor

    def _predict(self, pending: Sequence[JobRecord], now: float) -> tuple[dict[int, Prediction], set[int]]:
        """Current prediction per pending job; also the ids whose prediction is new or changed."""
        version = self.predictor.version
        old = self._cache
        cache: dict[int, _Cached] = {}
        predictions: dict[int, Prediction] = {}
        stale: list[JobRecord] = []
        expire = now - self.refresh_s
        users, names = self._dirty_users, self._dirty_names
        for job in pending:
            entry = old.get(job.job_id)
            if (entry is None or entry.version != version or entry.made_at < expire
                    or (entry.job is not job and entry.key != _job_key(job))
                    or job.user in users or job.name in names):
                stale.append(job)
                continue
            entry.job = job
            cache[job.job_id] = entry
            predictions[job.job_id] = entry.prediction
        fresh: set[int] = set()
        if stale:
            for job, prediction in zip(stale, self.predictor.predict(stale)):
                before = old.get(job.job_id)
                if (before is None or before.prediction.estimate_s != prediction.estimate_s
                        or before.prediction.source != prediction.source):
                    fresh.add(job.job_id)
                cache[job.job_id] = _Cached(job, _job_key(job), prediction, now, version)
                predictions[job.job_id] = prediction
        self._cache = cache
        self._dirty_users, self._dirty_names = set(), set()
        return predictions, fresh

    def _record(self, cycle_id: int, snapshot: ClusterSnapshot, ranking: Ranking, plan: Plan,
                outcomes: Sequence[ActionOutcome], applied: Mapping[tuple[int, str], AppliedChange],
                fresh: set[int], paused: bool) -> list[Decision]:
        """Write predictions, decisions and applied changes of this cycle (inside its transaction)."""
        repo = self.repository
        if fresh:
            repo.record_predictions(cycle_id, [self._cache[i].prediction for i in fresh])
        scores: dict[int, JobScore] = {}
        if fresh or plan.actions or plan.adopted:
            wanted = fresh | {a.job_id for a in plan.actions} | {a.job_id for a in plan.adopted}
            scores = {s.job_id: s for s in ranking.scores if s.job_id in wanted}
        decisions = [Decision(i, "rank", "ranked", s.reason, score=s.score, rank=s.rank)
                     for i, s in ((i, scores.get(i)) for i in sorted(fresh)) if s is not None]
        if outcomes:
            for outcome in outcomes:
                decision = self._decision(outcome.action, "ok" if outcome.ok else f"failed: {outcome.message}",
                                          scores)
                decisions.append(decision)
                if outcome.ok:
                    self._remember(outcome.action, applied)
        else:
            status = "dry-run" if self.dry_run else "skipped: paused"
            for action in plan.actions:
                kind, _, new = describe(action)
                if self._intents.get((action.job_id, kind)) != new:
                    self._intents[(action.job_id, kind)] = new
                    decisions.append(self._decision(action, status, scores))
        for action in plan.adopted:
            kind, previous, new = describe(action)
            repo.record_applied(action.job_id, kind, previous, new)
            decisions.append(self._decision(action, "adopted: value already set (job_submit.lua)", scores))
        pending_ids = {j.job_id for j in snapshot.jobs if j.state is JobState.PENDING}
        for job_id, kind in [k for k in applied if k[0] not in pending_ids] + list(plan.settled):
            repo.forget_applied(job_id, kind)
        if len(self._intents) > 2 * len(pending_ids) + 1000:
            self._intents = {k: v for k, v in self._intents.items() if k[0] in pending_ids}
        if decisions:
            repo.record_decisions(cycle_id, decisions)
        return decisions

    def _remember(self, action: Action, applied: Mapping[tuple[int, str], AppliedChange]) -> None:
        """Record an applied change, or forget it when it restored the original value."""
        kind, previous, new = describe(action)
        record = applied.get((action.job_id, kind))
        original = record.original if record is not None else previous
        if new == (original or ""):
            if record is not None:
                self.repository.forget_applied(action.job_id, kind)
        else:
            self.repository.record_applied(action.job_id, kind, previous, new)
        self._intents.pop((action.job_id, kind), None)

    @staticmethod
    def _decision(action: Action, outcome: str, scores: Mapping[int, JobScore]) -> Decision:
        kind, previous, new = describe(action)
        score = scores.get(action.job_id)
        return Decision(action.job_id, kind, outcome, action.reason, previous, new,
                        score.score if score is not None else None, score.rank if score is not None else None)

    def _after_commit(self, finished: Sequence[JobRecord], cursor: float) -> None:
        """Fold finished jobs into the predictor and move the in-memory cursor (only after commit)."""
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
