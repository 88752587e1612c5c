"""The :class:`JobRepository` protocol the engine, CLI and simulator code against.

Implementations: ``slurmsched.store.repository.SqlJobRepository`` (SQLite/PostgreSQL)
and ``slurmsched.store.memory.MemoryJobRepository`` (in-process, for the simulator).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, Sequence

from slurmsched.model import ClusterSnapshot, Decision, JobRecord, Prediction


@dataclass(frozen=True, slots=True)
class AppliedChange:
    """A value slurmsched changed on a job and has not reverted yet.

    Attributes:
        kind: action class name (``"SetSiteFactor"``, ``"SetSwitches"``, ``"SetFeatures"`` ...).
        original: the value the job had before slurmsched first touched it (text).
        current: the value slurmsched last set (text).
    """

    job_id: int
    kind: str
    original: str | None
    current: str


class CycleKind(StrEnum):
    """What a recorded cycle was, as ``slurmsched status`` shows it (stored as its value).

    Attributes:
        LIVE: a daemon cycle that sent its actions to Slurm.
        DRY_RUN: a dry-run daemon's cycle: planned and recorded, sent nothing.
        PAUSED: a cycle run while paused: sent nothing (decisions ``skipped: paused``).
        REVERT: a ``slurmsched revert`` pass: its actions restore changed jobs.
    """

    LIVE = "live"
    DRY_RUN = "dry-run"
    PAUSED = "paused"
    REVERT = "revert"


@dataclass(frozen=True, slots=True)
class CycleSummary:
    """One row of the cycles table (``slurmsched status``)."""

    cycle_id: int
    started_at: float
    duration_s: float
    pending: int
    running: int
    actions: int
    failed: int
    kind: CycleKind
    timings: dict[str, float]


class JobRepository(Protocol):
    """Persistent state of slurmsched: job history, predictions, decisions, control flags."""

    def transaction(self) -> AbstractContextManager[None]:
        """Group the calls inside into one transaction (commit on exit, roll back on error)."""
        ...

    def ingest_finished(self, jobs: Sequence[JobRecord]) -> int:
        """Upsert finished job attempts keyed by (cluster, job_id, submit_time); returns rows written.

        A requeued job keeps its id, and each attempt gets a new submit time (slurmdbd's own
        key is (id_job, time_submit); 22.05's ``sacct --json`` has no restart count), so the
        same window ingested twice or a requeue never duplicates nor merges attempts.
        """
        ...

    def observe(self, snapshot: ClusterSnapshot) -> None:
        """Record live jobs' state transitions seen in a snapshot."""
        ...

    def get_cursor(self, name: str) -> float | None:
        """A named cursor (e.g. ``"sacct"``: POSIX seconds up to which history was read)."""
        ...

    def set_cursor(self, name: str, value: float) -> None:
        """Move a named cursor."""
        ...

    def history(self, since: float | None = None, limit: int | None = None) -> list[JobRecord]:
        """Finished jobs ordered by end time (oldest first), optionally only those ended after ``since``."""
        ...

    def start_cycle(self, started_at: float, kind: CycleKind) -> int:
        """Open a cycle row of the given kind; returns its id."""
        ...

    def finish_cycle(self, cycle_id: int, *, pending: int, running: int, actions: int,
                     failed: int, timings: dict[str, float]) -> None:
        """Close a cycle row with its counts and per-stage timings (seconds)."""
        ...

    def record_predictions(self, cycle_id: int, predictions: Sequence[Prediction]) -> None:
        """Store predictions made in a cycle (latest per job is what ``explain`` shows)."""
        ...

    def record_decisions(self, cycle_id: int, decisions: Sequence[Decision]) -> None:
        """Store what a cycle decided and why."""
        ...

    def record_applied(self, job_id: int, kind: str, previous: str | None, new: str) -> None:
        """Remember a change made to a job; the first ``previous`` is kept as the original."""
        ...

    def applied_changes(self) -> list[AppliedChange]:
        """Every change not yet reverted (what ``revert`` must undo)."""
        ...

    def forget_applied(self, job_id: int, kind: str) -> None:
        """Drop a change after it was reverted (or the job left the queue)."""
        ...

    def latest_prediction(self, job_id: int) -> Prediction | None:
        """The most recent prediction for a job."""
        ...

    def decisions_for(self, job_id: int) -> list[tuple[float, Decision]]:
        """Every decision about a job with its cycle start time, oldest first."""
        ...

    def recent_cycles(self, limit: int = 10) -> list[CycleSummary]:
        """The last cycles, newest first."""
        ...

    def save_model(self, name: str, version: str, blob: bytes, meta: dict[str, object]) -> None:
        """Store a fitted model (``blob`` is opaque bytes) as the newest version of ``name``."""
        ...

    def load_model(self, name: str) -> tuple[str, bytes, dict[str, Any]] | None:
        """The newest (version, blob, meta) of a model, or ``None`` if none was saved."""
        ...

    def is_paused(self) -> bool:
        """The pause flag the daemon loop honours."""
        ...

    def set_paused(self, paused: bool) -> None:
        """Set or clear the pause flag."""
        ...

    def claim(self, cluster: str) -> None:
        """Keep ``cluster``'s daemon state here: record it as the database's cluster if none
        is yet, in its own transaction. An empty name (Slurm names no cluster) claims nothing.

        Raises:
            DatabaseOfAnotherCluster: another cluster's daemon claimed the database first.
        """
        ...
