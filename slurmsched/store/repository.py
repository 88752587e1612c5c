"""``SqlJobRepository``: the :class:`JobRepository` over SQLAlchemy (SQLite or PostgreSQL).

One code path serves both databases; the only dialect-specific statement is the
upsert built by :func:`upsert` (``INSERT ... ON CONFLICT DO UPDATE``, which both speak).

Transactions: every method runs in its own transaction unless called inside
``with repo.transaction():``, which groups the calls into one (commit on exit, roll
back on any error). Driver failures become one-line :class:`StoreError` messages.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from sqlalchemy import Connection, Engine, FromClause, delete, func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from slurmsched.config import Config
from slurmsched.errors import DatabaseOfAnotherCluster, SchemaOutOfDate, StoreError
from slurmsched.model import ClusterSnapshot, Decision, JobRecord, Prediction
from slurmsched.store import migrate
from slurmsched.store.connect import DEFAULT_BUSY_TIMEOUT_S, WRITE_LOCK, display_url, make_engine, store_errors
from slurmsched.store.protocol import AppliedChange, CycleKind, CycleSummary
from slurmsched.store.records import ATTEMPT_KEY, JOB_COLUMNS, attempt_key, row_to_job, unique_attempts
from slurmsched.store.schema import (AppliedChangeRow, Control, Cursor, Cycle, DecisionRow, Job,
                                     LiveJob, ModelRow, PredictionRow, Transition)

#: ``to_state`` of the transition recorded when a job leaves the live queue.
GONE = "GONE"
#: The cluster that claimed the database (:meth:`SqlJobRepository.claim`), from the control row.
_OWNER = select(Control.cluster).where(Control.id == 1)
#: Rows (for cycles: cycles with their predictions and decisions) one purge transaction
#: deletes at most, so a daemon's cycle waits for one batch at most.
PURGE_BATCH = 2000
#: Job ids looked up per statement by ``stored_attempts`` (SQLite builds before 3.32 allow
#: 999 bound values per statement).
_IDS_PER_QUERY = 900


def upsert(conn: Connection, table: FromClause, rows: list[dict[str, Any]], key: Sequence[str],
           overwrite: Sequence[str] | None = None) -> None:
    """Insert ``rows`` (one executemany), updating the ``overwrite`` columns of rows whose ``key`` exists.

    Args:
        key: the columns of a unique constraint or primary key.
        overwrite: columns to set on conflict; default every non-key, non-id column.
    """
    if not rows:
        return
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(table)
    if overwrite is None:
        overwrite = [c.name for c in table.columns if c.name not in key and not c.primary_key]
    stmt = stmt.on_conflict_do_update(index_elements=list(key),
                                      set_={name: stmt.excluded[name] for name in overwrite})
    conn.execute(stmt, rows)


@dataclass(frozen=True, slots=True)
class PurgeReport:
    """What :meth:`SqlJobRepository.purge` deleted (or, in a dry run, would delete).

    Attributes:
        before: the cut-off (POSIX seconds).
        cycles, predictions, decisions: cycles that started before it, with their records.
        transitions: live-queue state transitions before it.
        jobs: finished attempts that ended before it; ``None`` when history was kept.
        dry_run: nothing was deleted; the counts are what would be.
    """

    before: float
    cycles: int
    predictions: int
    decisions: int
    transitions: int
    jobs: int | None
    dry_run: bool


class SqlJobRepository:
    """slurmsched's state in SQL: job history, live states, cycles, predictions, decisions.

    Build it with :meth:`from_url` or :func:`open_repository`; call :meth:`check_schema`
    before relying on the tables (``open_repository`` does).
    """

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._local = threading.local()
        self._last_predictions: dict[int, tuple[Any, ...]] = {}
        self._last_decisions: dict[tuple[int, str], tuple[Any, ...]] = {}

    @classmethod
    def from_url(cls, url: str, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S, create: bool = False,
                 state_dir: str | Path | None = None, readers_group: str = "",
                 read_only: bool = False) -> "SqlJobRepository":
        """Connect to ``sqlite:///PATH`` (WAL) or ``postgresql+psycopg://...``; the schema is not checked.

        Args:
            create: create a missing SQLite file (mode 0600) in an existing directory,
                or in ``state_dir``, which is made if missing; without it a missing
                SQLite file is refused and nothing is created.
            state_dir: the configured state directory.
            readers_group: the group the SQLite files are shared with (``db.readers_group``).
            read_only: the caller only reads: a SQLite file this user cannot write is
                opened read-only, and any write fails.

        Raises:
            StoreError: bad URL, missing driver, or the SQLite file is missing (without
                ``create``) or cannot be created (see :func:`~slurmsched.store.connect.make_engine`).
        """
        return cls(make_engine(url, busy_timeout_s, create=create, state_dir=state_dir,
                               readers_group=readers_group, read_only=read_only))

    @classmethod
    def from_config(cls, config: Config, *, create: bool = False, url: str | None = None,
                    read_only: bool = False) -> "SqlJobRepository":
        """The database the configuration names (or ``url``), its schema not checked.

        Args:
            config: ``db.url`` (default: SQLite under ``daemon.state_dir``), ``db.busy_timeout_s``,
                ``db.readers_group`` and ``daemon.state_dir`` (the directory ``create`` may make).
            create: create a missing SQLite file (see :meth:`from_url`).
            url: use this URL instead of the configured one (``--db``).
            read_only: the caller only reads (see :meth:`from_url`).

        Raises:
            StoreError: as :meth:`from_url`.
        """
        return cls.from_url(url or config.db_url, busy_timeout_s=config.db.busy_timeout_s, create=create,
                            state_dir=config.daemon.state_dir, readers_group=config.db.readers_group,
                            read_only=read_only)

    @property
    def url(self) -> str:
        """The database URL without its password."""
        return display_url(self.engine.url)

    def close(self) -> None:
        """Close every pooled connection."""
        self.engine.dispose()

    # --- schema -------------------------------------------------------------------

    def schema_revision(self) -> str | None:
        """The database's migration revision (``None`` if slurmsched never created it)."""
        with store_errors(self.engine.url):
            return migrate.current_revision(self.engine)

    def upgrade(self) -> list[tuple[str | None, str]]:
        """Migrate the database to the revision this slurmsched needs.

        Returns:
            The steps this call applied, as ``(from, to)`` revisions (:func:`migrate.upgrade`):
            empty when the database was up to date (found without taking SQLite's write lock,
            so a daemon's cycle in progress does not hold this up), also when an upgrade
            running at the same time made them.

        Raises:
            SchemaOutOfDate: the database was migrated by a newer slurmsched (nothing is changed).
        """
        current = self.schema_revision()
        self._refuse_newer(current)
        if current == migrate.head_revision():  # found by a read: a writer's transaction does not make it wait
            return []
        with store_errors(self.engine.url):
            return migrate.upgrade(self.engine)

    def plan_downgrade(self, target: str) -> migrate.DowngradePlan:
        """What downgrading the database to ``target`` would do (:func:`migrate.plan_downgrade`); nothing changes.

        Raises:
            MigrationRefused: ``target`` is unknown or not older than the database's revision,
                or the database is empty or newer than this slurmsched.
            StoreError: the database failed.
        """
        with store_errors(self.engine.url):
            return migrate.plan_downgrade(self.engine, target)

    def downgrade(self, plan: migrate.DowngradePlan) -> None:
        """Run a downgrade :meth:`plan_downgrade` made, in one transaction (:func:`migrate.downgrade`).

        Raises:
            MigrationRefused: another migration ran since the plan was made (nothing changed).
            StoreError: the database failed; nothing changed.
        """
        with store_errors(self.engine.url):
            migrate.downgrade(self.engine, plan)

    def check_schema(self) -> None:
        """Refuse a database whose schema is not the one this slurmsched needs.

        Raises:
            SchemaOutOfDate: the database is empty, older, or newer than this version.
        """
        current, needed = self.schema_revision(), migrate.head_revision()
        if current == needed:
            return
        self._refuse_newer(current)
        raise SchemaOutOfDate(f"database schema is at {current or migrate.EMPTY}, this slurmsched "
                              f"needs {needed}: run 'slurmsched db upgrade'")

    @staticmethod
    def _refuse_newer(current: str | None) -> None:
        """Raise :class:`SchemaOutOfDate` if ``current`` is a revision this slurmsched does not know."""
        if current is not None and not migrate.is_known(current):
            raise SchemaOutOfDate(f"database schema is at {current}, newer than this slurmsched "
                                  f"knows (it needs {migrate.head_revision()}): upgrade slurmsched")

    # --- transactions -------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group the calls inside into one transaction (commit on exit, roll back on error).

        Nested uses join the outer transaction.
        """
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        try:
            with self._begin(write=True) as conn:
                self._local.conn = conn
                yield
        except BaseException:
            # What was recorded in the rolled-back transaction must be written again.
            self._last_predictions.clear()
            self._last_decisions.clear()
            raise
        finally:
            self._local.conn = None

    @contextmanager
    def _begin(self, write: bool) -> Iterator[Connection]:
        """A new transaction; ``write`` ones take SQLite's write lock at the start."""
        with store_errors(self.engine.url), self.engine.connect() as conn:
            if write:
                conn.execution_options(**{WRITE_LOCK: True})
            with conn.begin():
                yield conn

    @contextmanager
    def _conn(self, write: bool = True) -> Iterator[Connection]:
        """The open ``transaction()``'s connection, else a transaction of its own."""
        active = getattr(self._local, "conn", None)
        if active is not None:
            yield active
            return
        with self._begin(write) as conn:
            yield conn

    # --- job history --------------------------------------------------------------

    def ingest_finished(self, jobs: Sequence[JobRecord], *, cluster: str = "") -> int:
        """Upsert finished job attempts in one transaction; returns the attempts written.

        An attempt is keyed by ``(cluster, job_id, submit_time)`` (see
        :mod:`slurmsched.store.schema`): the same record ingested again overwrites its
        row, a requeued job's next attempt gets its own row. Either every row of the
        call is written or none.

        Args:
            cluster: cluster name stored for records that carry none (trace jobs).

        Raises:
            StoreError: the database refused the batch (nothing of it is kept).
        """
        rows = unique_attempts(jobs, cluster)
        with self._conn() as conn:
            upsert(conn, Job.__table__, rows, ATTEMPT_KEY)
        return len(rows)

    def stored_attempts(self, jobs: Sequence[JobRecord], *, cluster: str = "") -> int:
        """How many of these attempts are stored already (keyed as :meth:`ingest_finished` keys them).

        Called inside the ``transaction()`` that then ingests ``jobs``, it tells the new
        attempts from the ones the ingest only overwrites. Looks the attempts up by
        cluster and job id (an index search), a few hundred ids per statement.

        Args:
            cluster: cluster name for records that carry none, as for :meth:`ingest_finished`.
        """
        wanted = {attempt_key(job, cluster) for job in jobs}
        ids: dict[str, set[int]] = {}
        for name, job_id, _ in wanted:
            ids.setdefault(name, set()).add(job_id)
        found = 0
        with self._conn(write=False) as conn:
            for name, of_cluster in ids.items():
                ordered = sorted(of_cluster)
                for start in range(0, len(ordered), _IDS_PER_QUERY):
                    query = select(Job.job_id, Job.submit_time).where(
                        Job.cluster == name, Job.job_id.in_(ordered[start:start + _IDS_PER_QUERY]))
                    found += sum((name, job_id, submit) in wanted for job_id, submit in conn.execute(query))
        return found

    def history(self, since: float | None = None, limit: int | None = None) -> list[JobRecord]:
        """Finished attempts with an end time, oldest end first.

        Args:
            since: only attempts that ended after this time (POSIX seconds).
            limit: only the ``limit`` most recently ended of those (still oldest first).
        """
        query = select(*JOB_COLUMNS).where(Job.end_time.is_not(None))
        if since is not None:
            query = query.where(Job.end_time > since)
        if limit is not None:
            query = query.order_by(Job.end_time.desc(), Job.id.desc()).limit(limit)
        else:
            query = query.order_by(Job.end_time, Job.id)
        with self._conn(write=False) as conn:
            records = [row_to_job(row) for row in conn.execute(query).all()]
        if limit is not None:
            records.reverse()
        return records

    def nth_newest_end(self, n: int) -> float | None:
        """The end time of the ``n``-th most recently ended attempt (1: the newest); ``None``
        when fewer than ``n`` have ended."""
        query = select(Job.end_time).where(Job.end_time.is_not(None)).order_by(Job.end_time.desc()).offset(n - 1)
        with self._conn(write=False) as conn:
            return conn.execute(query.limit(1)).scalar()

    def iter_jobs(self, batch: int = 10_000) -> Iterator[JobRecord]:
        """Every stored attempt (with or without an end time), in insertion order, streamed."""
        last_id = 0
        while True:
            query = select(Job.id, *JOB_COLUMNS).where(Job.id > last_id).order_by(Job.id).limit(batch)
            with self._conn(write=False) as conn:
                rows = conn.execute(query).all()
            if not rows:
                return
            last_id = rows[-1][0]
            for row in rows:
                yield row_to_job(row[1:])

    def count_jobs(self) -> int:
        """How many job attempts are stored."""
        with self._conn(write=False) as conn:
            return conn.execute(select(func.count()).select_from(Job)).scalar_one()

    # --- live queue ---------------------------------------------------------------

    def observe(self, snapshot: ClusterSnapshot) -> None:
        """Record live jobs' state transitions seen in a snapshot.

        A transition row is written when a job appears, changes state or is requeued
        (restart count changes), and a ``GONE`` transition when it leaves the queue; a
        queue that did not change costs no writes.
        """
        cluster, now = snapshot.cluster, snapshot.taken_at
        with self._conn() as conn:
            known = {row.job_id: row for row in conn.execute(
                select(LiveJob.job_id, LiveJob.state, LiveJob.restart_count).where(LiveJob.cluster == cluster))}
            changed, transitions = [], []
            for job in snapshot.jobs:
                before = known.pop(job.job_id, None)
                state = job.state.value
                if before is not None and before.state == state and before.restart_count == job.restart_count:
                    continue
                changed.append({"cluster": cluster, "job_id": job.job_id, "state": state,
                                "reason": job.reason, "restart_count": job.restart_count, "since": now})
                transitions.append({"cluster": cluster, "job_id": job.job_id,
                                    "restart_count": job.restart_count,
                                    "from_state": before.state if before is not None else None,
                                    "to_state": state, "reason": job.reason, "at": now})
            for job_id, before in known.items():
                transitions.append({"cluster": cluster, "job_id": job_id, "restart_count": before.restart_count,
                                    "from_state": before.state, "to_state": GONE, "reason": "", "at": now})
            upsert(conn, LiveJob.__table__, changed, ("cluster", "job_id"))
            if known:
                conn.execute(delete(LiveJob).where(LiveJob.cluster == cluster, LiveJob.job_id.in_(list(known))))
            if transitions:
                conn.execute(insert(Transition), transitions)

    def id_reused_at(self, job_id: int) -> float | None:
        """When ``job_id`` last passed to another job: the time the previous job of that id
        was seen leaving the queue, before the newest one was seen arriving. ``None`` when
        the recorded transitions show one job of that id only.

        A job id comes back when slurmctld loses its state or wraps at ``MaxJobId``; a
        requeued job keeps its id and its records (it arrives again with a restart count
        above 0, after leaving the queue if it had finished). Records of cycles that
        started after this time are of the newest job; older ones are of earlier jobs.
        Transitions are per cluster: those of the database's cluster (:meth:`owner`)
        count, or every cluster's where none claimed it.
        """
        query = (select(Transition.at, Transition.from_state, Transition.to_state, Transition.restart_count)
                 .where(Transition.job_id == job_id).order_by(Transition.at, Transition.id))
        with self._conn(write=False) as conn:
            cluster = conn.execute(_OWNER).scalar_one_or_none()
            if cluster:
                query = query.where(Transition.cluster == cluster)
            rows = conn.execute(query).all()
        left = reused = None
        for at, from_state, to_state, restarts in rows:
            if to_state == GONE:
                left = at
            elif from_state is None and not restarts and left is not None:
                reused = left
        return reused

    def transitions(self, job_id: int, cluster: str | None = None) -> list[tuple[float, str | None, str, str]]:
        """A job's recorded transitions ``(at, from_state, to_state, reason)``, oldest first."""
        query = select(Transition.at, Transition.from_state, Transition.to_state, Transition.reason).where(
            Transition.job_id == job_id).order_by(Transition.at, Transition.id)
        if cluster is not None:
            query = query.where(Transition.cluster == cluster)
        with self._conn(write=False) as conn:
            return [(at, from_state, to_state, reason) for at, from_state, to_state, reason in conn.execute(query)]

    # --- cursors and control ------------------------------------------------------

    def get_cursor(self, name: str) -> float | None:
        """A named cursor (e.g. ``"sacct"``: POSIX seconds up to which history was read)."""
        with self._conn(write=False) as conn:
            return conn.execute(select(Cursor.value).where(Cursor.name == name)).scalar_one_or_none()

    def set_cursor(self, name: str, value: float) -> None:
        """Move a named cursor (to any value: callers decide whether it may go back)."""
        with self._conn() as conn:
            upsert(conn, Cursor.__table__, [{"name": name, "value": value, "updated_at": time.time()}], ("name",))

    def is_paused(self) -> bool:
        """The pause flag the daemon loop honours (``False`` until set)."""
        with self._conn(write=False) as conn:
            return bool(conn.execute(select(Control.paused).where(Control.id == 1)).scalar_one_or_none())

    def set_paused(self, paused: bool) -> None:
        """Set or clear the pause flag."""
        with self._conn() as conn:
            upsert(conn, Control.__table__, [{"id": 1, "paused": paused, "updated_at": time.time()}], ("id",),
                   overwrite=("paused", "updated_at"))

    def claim(self, cluster: str) -> None:
        """Keep ``cluster``'s daemon state here (:class:`~slurmsched.store.protocol.JobRepository`):
        the control row takes the name when it holds none, under the write lock, so of two
        daemons claiming a new database at once one gets it and the other is refused.

        Raises:
            DatabaseOfAnotherCluster: another cluster's daemon claimed it first.
        """
        if not cluster:
            return
        with self._conn() as conn:
            dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
            conn.execute(dialect.insert(Control).values(id=1, paused=False, updated_at=time.time())
                         .on_conflict_do_nothing(index_elements=["id"]))
            conn.execute(update(Control).where(Control.id == 1, Control.cluster.is_(None)).values(cluster=cluster))
            owner = conn.execute(_OWNER).scalar_one()
        refused = DatabaseOfAnotherCluster.refusal(self.url, owner, cluster)
        if refused is not None:
            raise refused

    def owner(self) -> str | None:
        """The cluster whose daemon claimed the database (:meth:`claim`), if one did."""
        with self._conn(write=False) as conn:
            return conn.execute(_OWNER).scalar_one_or_none()

    def check_cluster(self, cluster: str) -> None:
        """:meth:`claim`'s refusal, without claiming: for commands that only read.

        Raises:
            DatabaseOfAnotherCluster: another cluster's daemon claimed the database.
        """
        refused = DatabaseOfAnotherCluster.refusal(self.url, self.owner(), cluster)
        if refused is not None:
            raise refused

    def release(self) -> str | None:
        """Forget the database's cluster (``slurmsched db release``), so that the next claim
        takes it; returns the cluster it held, if any."""
        with self._conn() as conn:
            owner = conn.execute(_OWNER).scalar_one_or_none()
            conn.execute(update(Control).where(Control.id == 1).values(cluster=None))
        return owner

    # --- cycles, predictions, decisions ------------------------------------------

    def start_cycle(self, started_at: float, kind: CycleKind) -> int:
        """Open a cycle row of the given kind; returns its id."""
        with self._conn() as conn:
            result = conn.execute(insert(Cycle).values(started_at=started_at, kind=kind.value,
                                                       dry_run=kind is CycleKind.DRY_RUN, pending=0,
                                                       running=0, actions=0, failed=0, timings={}))
            # SQLAlchemy types inserted_primary_key Optional; a single-row INSERT always sets it
            return int(result.inserted_primary_key[0])  # type: ignore[index]

    def finish_cycle(self, cycle_id: int, *, pending: int, running: int, actions: int,
                     failed: int, timings: dict[str, float]) -> None:
        """Close a cycle row with its counts and per-stage timings (seconds).

        The cycle's duration is ``timings["total"]`` when given, else the sum of the stages.
        """
        duration = timings.get("total", sum(timings.values()))
        with self._conn() as conn:
            result = conn.execute(update(Cycle).where(Cycle.id == cycle_id).values(
                pending=pending, running=running, actions=actions, failed=failed,
                timings=dict(timings), duration_s=duration))
            if result.rowcount == 0:
                raise StoreError(f"no cycle {cycle_id} in {self.url}")

    def recent_cycles(self, limit: int = 10) -> list[CycleSummary]:
        """The last cycles, newest first."""
        query = select(Cycle).order_by(Cycle.id.desc()).limit(limit)
        with self._conn(write=False) as conn:
            return [CycleSummary(cycle_id=c.id, started_at=c.started_at, duration_s=c.duration_s or 0.0,
                                 pending=c.pending, running=c.running, actions=c.actions, failed=c.failed,
                                 kind=CycleKind(c.kind), timings=dict(c.timings or {}))
                    for c in conn.execute(query)]

    def record_predictions(self, cycle_id: int, predictions: Sequence[Prediction]) -> None:
        """Store the predictions of a cycle.

        A prediction equal to the one this repository last stored for the job (same
        estimate, spread, source and model version) is not written again, so a stable
        queue costs no rows; :meth:`latest_prediction` still returns the current one.
        """
        current = {p.job_id: (p.estimate_s, p.low_s, p.high_s, p.source, p.model_version) for p in predictions}
        rows = [{"cycle_id": cycle_id, "job_id": job_id, "estimate_s": v[0], "low_s": v[1], "high_s": v[2],
                 "source": v[3], "model_version": v[4]}
                for job_id, v in current.items() if self._last_predictions.get(job_id) != v]
        if rows:
            with self._conn() as conn:
                conn.execute(insert(PredictionRow), rows)
        self._last_predictions = current

    def latest_prediction(self, job_id: int, *, since: float | None = None,
                          before: float | None = None) -> Prediction | None:
        """The most recent prediction for a job, of a cycle that started after ``since``
        (:meth:`id_reused_at`: the job now holding a reused id) and before ``before`` (a
        finished job's end: not a later job's of the same id); ``None`` when none was."""
        query = select(PredictionRow).where(PredictionRow.job_id == job_id).order_by(PredictionRow.id.desc()).limit(1)
        if since is not None or before is not None:
            query = query.join(Cycle, Cycle.id == PredictionRow.cycle_id)
            if since is not None:
                query = query.where(Cycle.started_at > since)
            if before is not None:
                query = query.where(Cycle.started_at < before)
        with self._conn(write=False) as conn:
            row = conn.execute(query).first()
        if row is None:
            return None
        return Prediction(job_id=row.job_id, estimate_s=row.estimate_s, low_s=row.low_s, high_s=row.high_s,
                          source=row.source, model_version=row.model_version)

    def record_decisions(self, cycle_id: int, decisions: Sequence[Decision]) -> None:
        """Store what a cycle decided and why.

        A decision identical to the job's previous one of the same kind (outcome, reason,
        values, score and rank all equal) is not stored again: ``explain`` shows when each
        verdict was first reached.
        """
        current: dict[tuple[int, str], tuple[Any, ...]] = {}
        rows = []
        for d in decisions:
            value = (d.outcome, d.reason, d.previous, d.new, d.score, d.rank)
            current[(d.job_id, d.kind)] = value
            if self._last_decisions.get((d.job_id, d.kind)) != value:
                rows.append({"cycle_id": cycle_id, "job_id": d.job_id, "kind": d.kind, "outcome": d.outcome,
                             "reason": d.reason, "previous": d.previous, "new": d.new, "score": d.score,
                             "rank": d.rank})
        if rows:
            with self._conn() as conn:
                conn.execute(insert(DecisionRow), rows)
        self._last_decisions = current

    def decisions_for(self, job_id: int, *, since: float | None = None) -> list[tuple[float, Decision]]:
        """Every stored decision about a job with its cycle's start time, oldest first; with
        ``since``, only those of cycles that started after it (see :meth:`latest_prediction`)."""
        query = (select(Cycle.started_at, DecisionRow).join(Cycle, Cycle.id == DecisionRow.cycle_id)
                 .where(DecisionRow.job_id == job_id).order_by(DecisionRow.cycle_id, DecisionRow.id))
        if since is not None:
            query = query.where(Cycle.started_at > since)
        with self._conn(write=False) as conn:
            return [(row.started_at, Decision(job_id=row.job_id, kind=row.kind, outcome=row.outcome,
                                              reason=row.reason, previous=row.previous, new=row.new,
                                              score=row.score, rank=row.rank))
                    for row in conn.execute(query)]

    # --- applied changes (for revert) ---------------------------------------------

    def record_applied(self, job_id: int, kind: str, previous: str | None, new: str) -> None:
        """Remember a change made to a job; the first ``previous`` is kept as the original."""
        with self._conn() as conn:
            upsert(conn, AppliedChangeRow.__table__,
                   [{"job_id": job_id, "kind": kind, "original": previous, "current": new}],
                   ("job_id", "kind"), overwrite=("current",))

    def applied_changes(self) -> list[AppliedChange]:
        """Every change not yet reverted, by job id."""
        query = select(AppliedChangeRow).order_by(AppliedChangeRow.job_id, AppliedChangeRow.kind)
        with self._conn(write=False) as conn:
            return [AppliedChange(job_id=r.job_id, kind=r.kind, original=r.original, current=r.current)
                    for r in conn.execute(query)]

    def forget_applied(self, job_id: int, kind: str) -> None:
        """Drop a change after it was reverted (or the job left the queue)."""
        with self._conn() as conn:
            conn.execute(delete(AppliedChangeRow).where(AppliedChangeRow.job_id == job_id,
                                                        AppliedChangeRow.kind == kind))

    # --- model registry -----------------------------------------------------------

    def save_model(self, name: str, version: str, blob: bytes, meta: dict[str, object]) -> None:
        """Store a fitted model as the one version of ``name``, replacing the earlier ones in the
        same transaction: only the newest is ever loaded, and a blob is megabytes (a daemon
        refits several times a day)."""
        with self._conn() as conn:
            conn.execute(delete(ModelRow).where(ModelRow.name == name))
            conn.execute(insert(ModelRow).values(name=name, version=version, blob=blob, meta=dict(meta),
                                                 saved_at=time.time()))

    # --- upkeep ------------------------------------------------------------------------

    def purge(self, before: float, *, history: bool = False, dry_run: bool = False,
              batch: int = PURGE_BATCH) -> PurgeReport:
        """Delete the records older than ``before`` (``slurmsched history purge``).

        Deletes the cycles that started before it with their predictions and decisions,
        the live queue's transitions before it and, with ``history``, the finished
        attempts that ended before it. What the daemon acts on is never touched: applied
        changes (``revert``), the live queue, cursors, models, the pause flag, and
        attempts without an end time. Each table goes oldest first in transactions of
        at most ``batch`` rows (cycles: ``batch`` cycles), so a daemon's cycle waits for
        one batch at most; an interrupted purge keeps the batches it finished.

        Args:
            dry_run: count what would go; delete nothing.

        Raises:
            StoreError: the database failed (batches already deleted stay deleted).
        """
        old_cycles = select(Cycle.id).where(Cycle.started_at < before)
        old_transitions = select(Transition.id).where(Transition.at < before)
        old_jobs = select(Job.id).where(Job.end_time < before)
        if dry_run:
            with self._conn(write=False) as conn:
                def count(query: Any) -> int:
                    return int(conn.execute(select(func.count()).select_from(query.subquery())).scalar_one())

                return PurgeReport(
                    before, count(old_cycles),
                    count(select(PredictionRow.id).where(PredictionRow.cycle_id.in_(old_cycles))),
                    count(select(DecisionRow.id).where(DecisionRow.cycle_id.in_(old_cycles))),
                    count(old_transitions), count(old_jobs) if history else None, True)
        cycles = predictions = decisions = 0
        while (last := self._batch_end(old_cycles, Cycle.id, batch)) is not None:
            these = old_cycles.where(Cycle.id <= last)
            with self._conn() as conn:  # children first: no reliance on ON DELETE CASCADE
                predictions += conn.execute(delete(PredictionRow).where(PredictionRow.cycle_id.in_(these))).rowcount
                decisions += conn.execute(delete(DecisionRow).where(DecisionRow.cycle_id.in_(these))).rowcount
                cycles += conn.execute(delete(Cycle).where(Cycle.id.in_(these))).rowcount
        transitions = self._delete_oldest(Transition, old_transitions, batch)
        jobs = self._delete_oldest(Job, old_jobs, batch) if history else None
        return PurgeReport(before, cycles, predictions, decisions, transitions, jobs, False)

    def _batch_end(self, query: Any, column: Any, batch: int) -> int | None:
        """The highest of the first ``batch`` ids ``query`` selects; ``None`` when it selects none."""
        with self._conn(write=False) as conn:
            ids = conn.execute(query.order_by(column).limit(batch)).scalars().all()
        return ids[-1] if ids else None

    def _delete_oldest(self, table: type[Transition] | type[Job], query: Any, batch: int) -> int:
        """Delete the rows ``query`` selects from ``table``, ``batch`` a transaction; how many went."""
        deleted = 0
        while (last := self._batch_end(query, table.id, batch)) is not None:
            with self._conn() as conn:
                deleted += conn.execute(delete(table).where(table.id.in_(query.where(table.id <= last)))).rowcount
        return deleted

    def load_model(self, name: str) -> tuple[str, bytes, dict[str, Any]] | None:
        """The newest (version, blob, meta) of a model, or ``None`` if none was saved."""
        query = select(ModelRow.version, ModelRow.blob, ModelRow.meta).where(
            ModelRow.name == name).order_by(ModelRow.id.desc()).limit(1)
        with self._conn(write=False) as conn:
            row = conn.execute(query).first()
        return None if row is None else (row.version, bytes(row.blob), dict(row.meta or {}))


def open_repository(config: Config, *, create: bool = False, url: str | None = None,
                    read_only: bool = False) -> SqlJobRepository:
    """The repository the configuration names, with its schema checked.

    Only commands that write history on purpose (``history import``) pass ``create``;
    every other one refuses a missing SQLite file without creating it, so a command run
    as root never leaves a database the daemon's user cannot open.

    Args:
        config: ``db.url`` (default: SQLite under ``daemon.state_dir``) and ``db.busy_timeout_s``.
        create: create a missing SQLite file (see :meth:`SqlJobRepository.from_url`) and
            migrate a database that slurmsched never touched (no tables yet) to the current
            schema instead of refusing it; an older schema is still refused.
        url: use this URL instead of the configured one (``--db``).
        read_only: the caller only reads (not with ``create``): a SQLite file this user
            cannot write is opened read-only (see :meth:`SqlJobRepository.from_url`); the
            schema is checked, never migrated.

    Raises:
        SchemaOutOfDate: the schema is not the one this slurmsched needs.
        StoreError: the database cannot be opened (or, without ``create``, the SQLite file is missing).
    """
    repo = SqlJobRepository.from_config(config, create=create, url=url, read_only=read_only)
    try:
        if create and repo.schema_revision() is None:
            repo.upgrade()
        repo.check_schema()
    except BaseException:
        repo.close()
        raise
    return repo
