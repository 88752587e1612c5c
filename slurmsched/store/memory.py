"""``MemoryJobRepository``: the :class:`~slurmsched.store.protocol.JobRepository` in process memory.

The simulator's store: the same contract as the SQL repository (same attempt key,
same "ended after ``since``" history filter, same de-duplication of repeated
predictions and decisions), without a database, so a simulated cycle costs what the
daemon's in-memory work costs. Nothing survives the process.

Transactions are real: every write inside ``with repo.transaction():`` logs how to undo
itself, and an exception rolls them all back, so a failed cycle leaves nothing half
written. Calls outside a transaction take effect at once.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections import deque
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

from slurmsched.errors import DatabaseOfAnotherCluster
from slurmsched.model import ClusterSnapshot, Decision, JobRecord, JobState, Prediction
from slurmsched.store.protocol import AppliedChange, CycleKind, CycleSummary

#: ``to_state`` of the transition recorded when a job leaves the live queue (as in SQL).
GONE = "GONE"

_Attempt = tuple[str, int, float]


class MemoryJobRepository:
    """slurmsched's state in dictionaries and sorted lists.

    Args:
        cluster: cluster name stored for finished records that carry none.
        track_live: record live-queue transitions in :meth:`observe`. Diffing every
            snapshot costs time proportional to the queue each cycle; the simulator,
            where nothing reads them, turns it off.
        keep_cycles: how many cycle summaries :meth:`recent_cycles` can return.
    """

    def __init__(self, *, cluster: str = "", track_live: bool = True, keep_cycles: int = 1000) -> None:
        self.cluster = cluster
        self.track_live = track_live
        self._jobs: dict[_Attempt, JobRecord] = {}
        self._ended: list[tuple[float, int, _Attempt]] = []
        self._end_of: dict[_Attempt, tuple[float, int, _Attempt]] = {}
        self._seq = 0
        self._live: dict[tuple[str, int], tuple[str, int]] = {}
        self._transitions: dict[int, list[tuple[float, str | None, str, str]]] = {}
        self._cursors: dict[str, float] = {}
        self._paused = False
        self._owner: str | None = None
        self._next_cycle = 1
        self._cycles: deque[CycleSummary] = deque(maxlen=keep_cycles)
        self._open_cycles: dict[int, tuple[float, CycleKind]] = {}
        self._cycle_started: dict[int, float] = {}
        self._predictions: dict[int, Prediction] = {}
        self._decisions: dict[int, list[tuple[int, Decision]]] = {}
        self._last_decisions: dict[tuple[int, str], tuple[Any, ...]] = {}
        self._applied: dict[tuple[int, str], AppliedChange] = {}
        self._models: dict[str, tuple[str, bytes, dict[str, object]]] = {}
        self._undo: list[Callable[[], object] | tuple[dict, Any, bool, Any]] | None = None

    # --- transactions ---------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group the calls inside into one transaction; nested uses join the outer one."""
        if self._undo is not None:
            yield
            return
        self._undo = []
        try:
            yield
        except BaseException:
            for undo in reversed(self._undo):
                if callable(undo):
                    undo()
                else:
                    table, key, missing, before = undo
                    if missing:
                        table.pop(key, None)
                    else:
                        table[key] = before
            raise
        finally:
            self._undo = None

    def _log(self, undo: Callable[[], object]) -> None:
        if self._undo is not None:
            self._undo.append(undo)

    def _set(self, table: dict, key: Any, value: Any) -> None:
        """``table[key] = value``, undoable."""
        if self._undo is not None:
            self._undo.append((table, key, key not in table, table.get(key)))
        table[key] = value

    def _pop(self, table: dict, key: Any) -> None:
        """``del table[key]`` if present, undoable."""
        if key in table:
            before = table.pop(key)
            if self._undo is not None:
                self._undo.append((table, key, False, before))

    # --- job history ----------------------------------------------------------------

    def ingest_finished(self, jobs: Sequence[JobRecord]) -> int:
        """Upsert finished attempts keyed by (cluster, job id, submit time); returns attempts written."""
        written: dict[_Attempt, JobRecord] = {}
        for job in jobs:
            written[(job.cluster or self.cluster, job.job_id, job.submit_time)] = job
        for key, job in written.items():
            self._store(key, job)
        return len(written)

    def _store(self, key: _Attempt, job: JobRecord) -> None:
        old_entry = self._end_of.get(key)
        if old_entry is not None:
            self._remove_entry(old_entry)
        self._set(self._jobs, key, job)
        if job.end_time is not None:
            self._seq += 1
            entry = (job.end_time, self._seq, key)
            insort(self._ended, entry)
            self._set(self._end_of, key, entry)
            self._log(lambda: self._drop_entry(entry))
        elif old_entry is not None:
            self._pop(self._end_of, key)

    def _remove_entry(self, entry: tuple[float, int, _Attempt]) -> None:
        self._drop_entry(entry)
        self._log(lambda: insort(self._ended, entry))

    def _drop_entry(self, entry: tuple[float, int, _Attempt]) -> None:
        at = bisect_left(self._ended, entry)
        if at < len(self._ended) and self._ended[at] == entry:
            del self._ended[at]

    def history(self, since: float | None = None, limit: int | None = None) -> list[JobRecord]:
        """Finished attempts, oldest end first: those ended after ``since``, the last ``limit`` of them."""
        start = 0 if since is None else bisect_right(self._ended, (since, float("inf")))
        entries = self._ended[start:]
        if limit is not None:
            entries = entries[-limit:] if limit > 0 else []
        jobs = self._jobs
        return [jobs[key] for _, _, key in entries]

    def count_jobs(self) -> int:
        """How many job attempts are stored."""
        return len(self._jobs)

    # --- live queue -----------------------------------------------------------------

    def observe(self, snapshot: ClusterSnapshot) -> None:
        """Record live jobs' state transitions (appeared, changed state, requeued, gone).

        Does nothing when the repository was made with ``track_live=False``.
        """
        if not self.track_live:
            return
        cluster, now = snapshot.cluster, snapshot.taken_at
        known = {key: value for key, value in self._live.items() if key[0] == cluster}
        for job in snapshot.jobs:
            key = (cluster, job.job_id)
            before = known.pop(key, None)
            state = (job.state.value, job.restart_count)
            if before == state:
                continue
            self._set(self._live, key, state)
            self._transition(job.job_id, (now, before[0] if before else None, job.state.value, job.reason))
        for key, before in known.items():
            self._pop(self._live, key)
            self._transition(key[1], (now, before[0], GONE, ""))

    def _transition(self, job_id: int, row: tuple[float, str | None, str, str]) -> None:
        rows = self._transitions.setdefault(job_id, [])
        rows.append(row)
        self._log(rows.pop)

    def transitions(self, job_id: int) -> list[tuple[float, str | None, str, str]]:
        """A job's recorded transitions ``(at, from_state, to_state, reason)``, oldest first."""
        return list(self._transitions.get(job_id, ()))

    def live_state(self, job_id: int, cluster: str = "") -> JobState | None:
        """The state a job had in the last observed snapshot (``None`` if not live)."""
        state = self._live.get((cluster, job_id))
        return None if state is None else JobState(state[0])

    # --- cursors and control --------------------------------------------------------

    def get_cursor(self, name: str) -> float | None:
        """A named cursor."""
        return self._cursors.get(name)

    def set_cursor(self, name: str, value: float) -> None:
        """Move a named cursor."""
        self._set(self._cursors, name, value)

    def is_paused(self) -> bool:
        """The pause flag."""
        return self._paused

    def set_paused(self, paused: bool) -> None:
        """Set or clear the pause flag."""
        before = self._paused
        self._paused = paused
        self._log(lambda: setattr(self, "_paused", before))

    def claim(self, cluster: str) -> None:
        """Keep ``cluster``'s state here (the first cluster claims the store for good)."""
        refused = DatabaseOfAnotherCluster.refusal("the in-memory store", self._owner, cluster)
        if refused is not None:
            raise refused
        if self._owner is None and cluster:
            self._owner = cluster

    # --- cycles, predictions, decisions --------------------------------------------

    def start_cycle(self, started_at: float, kind: CycleKind) -> int:
        """Open a cycle of the given kind; returns its id."""
        cycle_id = self._next_cycle
        self._next_cycle += 1
        self._set(self._open_cycles, cycle_id, (started_at, kind))
        self._set(self._cycle_started, cycle_id, started_at)
        return cycle_id

    def finish_cycle(self, cycle_id: int, *, pending: int, running: int, actions: int,
                     failed: int, timings: dict[str, float]) -> None:
        """Close a cycle with its counts and timings (duration: ``timings["total"]``, else their sum).

        Raises:
            KeyError: no open cycle ``cycle_id``.
        """
        started_at, kind = self._open_cycles[cycle_id]
        self._pop(self._open_cycles, cycle_id)
        summary = CycleSummary(cycle_id, started_at, timings.get("total", sum(timings.values())), pending,
                               running, actions, failed, kind, dict(timings))
        self._cycles.append(summary)
        self._log(lambda: self._cycles.remove(summary))

    def recent_cycles(self, limit: int = 10) -> list[CycleSummary]:
        """The last closed cycles, newest first (at most ``keep_cycles`` are kept)."""
        return list(reversed(self._cycles))[:limit]

    def record_predictions(self, cycle_id: int, predictions: Sequence[Prediction]) -> None:
        """Store a cycle's predictions (the latest per job is kept)."""
        for prediction in predictions:
            self._set(self._predictions, prediction.job_id, prediction)

    def latest_prediction(self, job_id: int) -> Prediction | None:
        """The most recent prediction for a job."""
        return self._predictions.get(job_id)

    def record_decisions(self, cycle_id: int, decisions: Sequence[Decision]) -> None:
        """Store what a cycle decided; a decision equal to the job's previous one of its kind is not stored again."""
        for decision in decisions:
            value = (decision.outcome, decision.reason, decision.previous, decision.new, decision.score,
                     decision.rank)
            key = (decision.job_id, decision.kind)
            if self._last_decisions.get(key) == value:
                continue
            self._set(self._last_decisions, key, value)
            rows = self._decisions.setdefault(decision.job_id, [])
            rows.append((cycle_id, decision))
            self._log(rows.pop)

    def decisions_for(self, job_id: int) -> list[tuple[float, Decision]]:
        """Every stored decision about a job with its cycle's start time, oldest first."""
        return [(self._cycle_started.get(cycle_id, 0.0), d) for cycle_id, d in self._decisions.get(job_id, ())]

    # --- applied changes ------------------------------------------------------------

    def record_applied(self, job_id: int, kind: str, previous: str | None, new: str) -> None:
        """Remember a change; the first ``previous`` stays the original."""
        before = self._applied.get((job_id, kind))
        original = before.original if before is not None else previous
        self._set(self._applied, (job_id, kind), AppliedChange(job_id, kind, original, new))

    def applied_changes(self) -> list[AppliedChange]:
        """Every change not yet reverted, by job id and kind."""
        return [self._applied[key] for key in sorted(self._applied)]

    def forget_applied(self, job_id: int, kind: str) -> None:
        """Drop a change."""
        self._pop(self._applied, (job_id, kind))

    # --- model registry -------------------------------------------------------------

    def save_model(self, name: str, version: str, blob: bytes, meta: dict[str, object]) -> None:
        """Keep a fitted model as the newest version of ``name``."""
        self._set(self._models, name, (version, bytes(blob), dict(meta)))

    def load_model(self, name: str) -> tuple[str, bytes, dict[str, Any]] | None:
        """The newest (version, blob, meta) of a model, or ``None``."""
        saved = self._models.get(name)
        return None if saved is None else (saved[0], saved[1], dict(saved[2]))
