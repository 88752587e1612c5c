"""The history database's tables (SQLAlchemy 2 typed ORM declarations).

These classes are the reference the Alembic migrations in ``db/versions`` must
reproduce; ``tests/store`` checks that a database migrated to head matches them.
They are used as tables (``Job.__table__``) for bulk statements and as typed rows for
queries; nothing outside ``slurmsched.store`` imports them.

One row of ``jobs`` is one *attempt* of one job: Slurm keeps the job id when it
requeues a job and gives the new attempt a new submit time, and slurmdbd keys its own
job table by ``(id_job, time_submit)``. ``sacct -D`` lists every attempt; Slurm 22.05's
``sacct --json`` carries no restart count. So the unique key is
``(cluster, job_id, submit_time)``, and ingesting the same window twice or across a
requeue never duplicates or merges attempts.
"""

from __future__ import annotations

from sqlalchemy import (JSON, BigInteger, Boolean, Float, ForeignKey, Index, Integer,
                        LargeBinary, String, Text, UniqueConstraint)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from slurmsched.store.protocol import CycleKind

# SQLite only auto-increments an INTEGER PRIMARY KEY; PostgreSQL gets BIGSERIAL-style ids.
Id = BigInteger().with_variant(Integer(), "sqlite")

#: The longest cluster name stored (a longer one an admin gives is refused, not cut: a
#: cut name would not match what the admin types again).
CLUSTER_CHARS = 64


class Base(DeclarativeBase):
    """Declarative base of every slurmsched table."""


class Job(Base):
    """One attempt of one finished job (from ``sacct`` or a trace)."""

    __tablename__ = "jobs"
    __table_args__ = (
        UniqueConstraint("cluster", "job_id", "submit_time", name="uq_jobs_attempt"),
        Index("ix_jobs_user_name", "user_name", "name"),
        Index("ix_jobs_end_time", "end_time"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    cluster: Mapped[str] = mapped_column(String(CLUSTER_CHARS))
    job_id: Mapped[int] = mapped_column(BigInteger)
    restart_count: Mapped[int] = mapped_column(Integer, default=0)
    array_job_id: Mapped[int | None] = mapped_column(BigInteger)
    array_task_id: Mapped[int | None] = mapped_column(Integer)
    user_name: Mapped[str] = mapped_column(String(128))
    account: Mapped[str] = mapped_column(String(128), default="")
    partition: Mapped[str] = mapped_column(String(128), default="")
    qos: Mapped[str] = mapped_column(String(128), default="")
    name: Mapped[str] = mapped_column(Text, default="")
    submit_time: Mapped[float] = mapped_column(Float)
    eligible_time: Mapped[float | None] = mapped_column(Float)
    start_time: Mapped[float | None] = mapped_column(Float)
    end_time: Mapped[float | None] = mapped_column(Float)
    time_limit_s: Mapped[int | None] = mapped_column(BigInteger)
    nodes: Mapped[int] = mapped_column(Integer, default=1)
    cpus: Mapped[int] = mapped_column(Integer, default=1)
    memory_mb: Mapped[int | None] = mapped_column(BigInteger)
    gpus: Mapped[int] = mapped_column(Integer, default=0)
    gpu_type: Mapped[str | None] = mapped_column(String(64))
    gres_per_node: Mapped[list | None] = mapped_column(JSON(none_as_null=True))
    features: Mapped[str] = mapped_column(Text, default="")
    node_list: Mapped[str] = mapped_column(Text, default="")
    state: Mapped[str] = mapped_column(String(32))
    exit_code: Mapped[int | None] = mapped_column(Integer)


class LiveJob(Base):
    """The state each job in the live queue is in, and since when (what ``observe`` diffs against)."""

    __tablename__ = "live_jobs"

    cluster: Mapped[str] = mapped_column(String(CLUSTER_CHARS), primary_key=True)
    job_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    state: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(Text, default="")
    restart_count: Mapped[int] = mapped_column(Integer, default=0)
    since: Mapped[float] = mapped_column(Float)


class Transition(Base):
    """A job's state changing between two snapshots (``gone`` when it left the queue)."""

    __tablename__ = "job_transitions"
    __table_args__ = (Index("ix_transitions_job", "cluster", "job_id", "at"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    cluster: Mapped[str] = mapped_column(String(CLUSTER_CHARS))
    job_id: Mapped[int] = mapped_column(BigInteger)
    restart_count: Mapped[int] = mapped_column(Integer, default=0)
    from_state: Mapped[str | None] = mapped_column(String(32))
    to_state: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(Text, default="")
    at: Mapped[float] = mapped_column(Float)


class Cycle(Base):
    """One run of ``Engine.run_cycle`` or one ``revert`` pass: when, how long, what it saw and did.

    ``kind`` is a :class:`~slurmsched.store.protocol.CycleKind` value; its server default
    exists because SQLite adds a NOT NULL column only with one. ``dry_run`` predates it
    and is kept equal to ``kind == "dry-run"``: dropping a column on SQLite takes either
    SQLite 3.35 or a copy of the table, whose drop would, with foreign keys on, delete
    the predictions and decisions of every cycle.
    """

    __tablename__ = "cycles"
    __table_args__ = (Index("ix_cycles_started_at", "started_at"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    started_at: Mapped[float] = mapped_column(Float)
    duration_s: Mapped[float | None] = mapped_column(Float)
    dry_run: Mapped[bool] = mapped_column(Boolean, default=False)
    kind: Mapped[str] = mapped_column(String(16), server_default=CycleKind.LIVE.value)
    pending: Mapped[int] = mapped_column(Integer, default=0)
    running: Mapped[int] = mapped_column(Integer, default=0)
    actions: Mapped[int] = mapped_column(Integer, default=0)
    failed: Mapped[int] = mapped_column(Integer, default=0)
    timings: Mapped[dict] = mapped_column(JSON, default=dict)


class PredictionRow(Base):
    """A duration estimate made in a cycle (written only when it changed for the job)."""

    __tablename__ = "predictions"
    __table_args__ = (Index("ix_predictions_job", "job_id", "id"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    cycle_id: Mapped[int] = mapped_column(ForeignKey("cycles.id", ondelete="CASCADE"), index=True)
    job_id: Mapped[int] = mapped_column(BigInteger)
    estimate_s: Mapped[float] = mapped_column(Float)
    low_s: Mapped[float] = mapped_column(Float)
    high_s: Mapped[float] = mapped_column(Float)
    source: Mapped[str] = mapped_column(Text)
    model_version: Mapped[str] = mapped_column(String(128), default="")


class DecisionRow(Base):
    """What a cycle decided for a job (a ranking or an action) and how it went."""

    __tablename__ = "decisions"
    __table_args__ = (Index("ix_decisions_job", "job_id", "cycle_id"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    cycle_id: Mapped[int] = mapped_column(ForeignKey("cycles.id", ondelete="CASCADE"), index=True)
    job_id: Mapped[int] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(String(64))
    outcome: Mapped[str] = mapped_column(Text)
    reason: Mapped[str] = mapped_column(Text, default="")
    previous: Mapped[str | None] = mapped_column(Text)
    new: Mapped[str | None] = mapped_column(Text)
    score: Mapped[float | None] = mapped_column(Float)
    rank: Mapped[int | None] = mapped_column(Integer)


class AppliedChangeRow(Base):
    """A change slurmsched made to a pending job and has not reverted (for ``revert``)."""

    __tablename__ = "applied_changes"

    job_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    kind: Mapped[str] = mapped_column(String(64), primary_key=True)
    original: Mapped[str | None] = mapped_column(Text)
    current: Mapped[str] = mapped_column(Text)


class ModelRow(Base):
    """One saved version of a fitted predictor model (opaque blob plus metadata)."""

    __tablename__ = "models"
    __table_args__ = (UniqueConstraint("name", "version", name="uq_models_name_version"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(128))
    version: Mapped[str] = mapped_column(String(128))
    blob: Mapped[bytes] = mapped_column(LargeBinary)
    meta: Mapped[dict] = mapped_column(JSON, default=dict)
    saved_at: Mapped[float] = mapped_column(Float)


class Control(Base):
    """The single control row (``id = 1``): the pause flag the daemon loop honours, and
    the cluster whose daemon keeps its state here (``None`` until its first cycle)."""

    __tablename__ = "control"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    updated_at: Mapped[float] = mapped_column(Float)
    cluster: Mapped[str | None] = mapped_column(String(CLUSTER_CHARS))


class Cursor(Base):
    """A named cursor, e.g. ``sacct``: POSIX seconds up to which history was read."""

    __tablename__ = "cursors"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)
