"""Mapping between :class:`JobRecord` and rows of the ``jobs`` table."""

from __future__ import annotations

from typing import Any, Sequence

from sqlalchemy import String

from slurmsched.model import GresRequest, JobRecord, JobState
from slurmsched.store.schema import Job

_STATES = {state.value: state for state in JobState}

#: Columns that identify one job attempt (the upsert key).
ATTEMPT_KEY = ("cluster", "job_id", "submit_time")

#: Columns read back into a JobRecord, in the order :func:`row_to_job` expects.
JOB_COLUMNS = (
    Job.cluster, Job.job_id, Job.restart_count, Job.array_job_id, Job.array_task_id,
    Job.user_name, Job.account, Job.partition, Job.qos, Job.name, Job.submit_time,
    Job.eligible_time, Job.start_time, Job.end_time, Job.time_limit_s, Job.nodes, Job.cpus,
    Job.memory_mb, Job.gpus, Job.gpu_type, Job.gres_per_node, Job.features, Job.node_list,
    Job.state, Job.exit_code,
)

#: The text columns of ``jobs`` and the most characters each holds (``None``: unbounded).
_TEXT_LIMITS = {c.name: c.type.length for c in Job.__table__.columns if isinstance(c.type, String)}


def job_to_row(job: JobRecord, cluster: str = "") -> dict[str, Any]:
    """The ``jobs`` row for a finished job attempt (live-only fields are not stored).

    Text is made storable the same way on SQLite and PostgreSQL, which refuses the NUL
    character in text and a value longer than its column: NUL characters are dropped and
    a bounded column (user, account, partition, qos, cluster, ...) keeps its first
    characters, so one odd trace row cannot fail its whole batch, and the same record
    always gives the same row (re-importing stays idempotent).

    Args:
        cluster: cluster name to store when the record carries none.
    """
    row = _job_fields(job, cluster)
    for name in _TEXT_LIMITS:
        if isinstance(row[name], str):
            row[name] = _storable_text(row[name], name)
    return row


def _storable_text(text: str, column: str) -> str:
    """``text`` as the ``jobs`` column ``column`` holds it on every database: no NUL, not too long."""
    return text.replace("\x00", "")[:_TEXT_LIMITS[column]]


def _job_fields(job: JobRecord, cluster: str) -> dict[str, Any]:
    """The ``jobs`` columns of ``job`` as the record holds them."""
    return {
        "cluster": job.cluster or cluster,
        "job_id": job.job_id,
        "restart_count": job.restart_count,
        "array_job_id": job.array_job_id,
        "array_task_id": job.array_task_id,
        "user_name": job.user,
        "account": job.account,
        "partition": job.partition,
        "qos": job.qos,
        "name": job.name,
        "submit_time": job.submit_time,
        "eligible_time": job.eligible_time,
        "start_time": job.start_time,
        "end_time": job.end_time,
        "time_limit_s": job.time_limit_s,
        "nodes": job.nodes,
        "cpus": job.cpus,
        "memory_mb": job.memory_mb,
        "gpus": job.gpus,
        "gpu_type": job.gpu_type,
        "gres_per_node": [[g.name, g.type, g.count] for g in job.gres_per_node] or None,
        "features": job.features,
        "node_list": job.node_list,
        "state": job.state.value,
        "exit_code": job.exit_code,
    }


def attempt_key(job: JobRecord, cluster: str = "") -> tuple[str, int, float]:
    """The :data:`ATTEMPT_KEY` values of a job attempt (``cluster`` when the record carries none),
    as :func:`job_to_row` stores them."""
    return _storable_text(job.cluster or cluster, "cluster"), job.job_id, job.submit_time


def unique_attempts(jobs: Sequence[JobRecord], cluster: str = "") -> list[dict[str, Any]]:
    """Rows for ``jobs``, one per attempt key (the last record of an attempt wins).

    A single upsert statement may not touch the same row twice (PostgreSQL refuses), and
    ``sacct`` can list an attempt more than once.
    """
    rows: dict[tuple[str, int, float], dict[str, Any]] = {}
    for job in jobs:
        rows[attempt_key(job, cluster)] = job_to_row(job, cluster)
    return list(rows.values())


def row_to_job(row: Sequence[Any]) -> JobRecord:
    """Rebuild a JobRecord from a row selected with :data:`JOB_COLUMNS`."""
    (cluster, job_id, restart_count, array_job_id, array_task_id, user, account, partition,
     qos, name, submit, eligible, start, end, limit, nodes, cpus, memory_mb, gpus, gpu_type,
     gres, features, node_list, state, exit_code) = row
    return JobRecord(
        job_id=job_id, user=user, submit_time=submit, name=name, cluster=cluster,
        array_job_id=array_job_id, array_task_id=array_task_id, account=account,
        partition=partition, qos=qos, state=_STATES.get(state) or JobState.parse(state), eligible_time=eligible,
        start_time=start, end_time=end, time_limit_s=limit, nodes=nodes, cpus=cpus,
        memory_mb=memory_mb, gpus=gpus, gpu_type=gpu_type,
        gres_per_node=tuple(GresRequest(n, t, c) for n, t, c in gres) if gres else (),
        features=features, node_list=node_list, restart_count=restart_count, exit_code=exit_code,
    )
