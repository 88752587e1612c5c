"""Readers for the CSV traces: Helios Venus, Philly (Pollux export), ITP and NREL Eagle.

See the package docstring for how each maps onto :class:`JobRecord`.
"""

from __future__ import annotations

from typing import Iterable, Iterator, TypedDict

from slurmsched.model import JobRecord, JobState
from slurmsched.traces.base import (HELIOS_EPOCH, TRACE_EPOCH, Numbered, RowError, count, duration, integer, iter_csv,
                                    number, utc_timestamp)

_HELIOS_STATES = {"CANCELED": JobState.CANCELLED}


class _Ran(TypedDict):
    """The ``start_time``/``end_time`` keywords of :func:`_ran`."""

    start_time: float
    end_time: float


def _ran(submit: float, seconds: float) -> _Ran:
    """start/end for traces without a start time: wait unknown, recorded as zero."""
    return {"start_time": submit, "end_time": submit + seconds}


def _helios_row(row: dict[str, str], _: int) -> JobRecord:
    status = row["final_status"].strip().upper()
    submit = HELIOS_EPOCH + number(row["submit_time"], "submit_time") / 1e6
    return JobRecord(
        job_id=integer(row["job_id"], "job_id"),
        user=row["user"].strip(),
        submit_time=submit,
        partition=row["tenant"].strip(),
        state=_HELIOS_STATES.get(status) or JobState.parse(status),
        nodes=max(1, count(row["num_nodes"], "num_nodes")),
        gpus=count(row["num_chips"], "num_chips"),
        gpu_type=row.get("chip_type", "").strip() or None,
        **_ran(submit, duration(row["duration_s"], "duration_s")),
    )


def iter_helios(lines: Iterable[str], source: str) -> Iterator[Numbered]:
    """Helios Venus CSV rows (``walltime_limit_s`` ignored: it copies the duration)."""
    required = ("job_id", "user", "tenant", "submit_time", "num_chips", "num_nodes", "duration_s", "final_status")
    return iter_csv(lines, required, source, _helios_row)


def _philly_row(row: dict[str, str], row_number: int) -> JobRecord:
    submit = utc_timestamp(row["timestamp"], "timestamp")
    return JobRecord(
        job_id=row_number,
        user="",
        submit_time=submit,
        cluster="philly",
        partition=row["cluster"].strip(),
        state=JobState.COMPLETED,
        gpus=count(row["num_gpus"], "num_gpus"),
        **_ran(submit, duration(row["duration"], "duration")),
    )


def iter_philly(lines: Iterable[str], source: str) -> Iterator[Numbered]:
    """Philly (Pollux re-export) CSV rows."""
    return iter_csv(lines, ("timestamp", "duration", "num_gpus", "cluster"), source, _philly_row)


def iter_itp(lines: Iterable[str], source: str, cluster: str, reason_prefix: str = "") -> Iterator[Numbered]:
    """One ITP cluster CSV; ``cluster`` is recorded on every job."""

    def parse(row: dict[str, str], row_number: int) -> JobRecord:
        submit = TRACE_EPOCH + number(row["submission_time"], "submission_time")
        return JobRecord(
            job_id=row_number,
            user="",
            submit_time=submit,
            cluster=cluster,
            state=JobState.COMPLETED,
            gpus=count(row["num_gpu"], "num_gpu"),
            **_ran(submit, duration(row["duration"], "duration")),
        )

    return iter_csv(lines, ("job_id", "submission_time", "duration", "num_gpu"), source, parse, reason_prefix)


def _eagle_row(row: dict[str, str], _: int) -> JobRecord:
    limit = number(row["wallclock_req"], "wallclock_req") if row["wallclock_req"].strip() else 0.0
    memory = number(row["mem_req"], "mem_req") if row.get("mem_req", "").strip() else 0.0
    start_text, end_text = row["start_time"].strip(), row["end_time"].strip()
    start = utc_timestamp(start_text, "start_time") if start_text else None
    end = utc_timestamp(end_text, "end_time") if end_text else None
    if start is not None and end is not None and end < start:
        raise RowError("end_time is before start_time")
    submit = utc_timestamp(row["submit_time"], "submit_time")
    if start is not None and start < submit:
        raise RowError("start_time is before submit_time")
    return JobRecord(
        job_id=integer(row["job_id"], "job_id"),
        user=row["user"].strip(),
        submit_time=submit,
        name=row["name"].strip(),
        account=row["account"].strip(),
        partition=row["partition"].strip(),
        qos=row["qos"].strip(),
        state=JobState.parse(row["state"]),
        start_time=start,
        end_time=end,
        time_limit_s=int(round(limit)) if limit > 0 else None,
        nodes=max(1, count(row["nodes_req"], "nodes_req")),
        cpus=max(1, count(row["processors_req"], "processors_req")),
        gpus=count(row["gpus_req"], "gpus_req"),
        memory_mb=int(memory) if memory > 0 else None,
    )


def iter_eagle(lines: Iterable[str], source: str) -> Iterator[Numbered]:
    """NREL Eagle Slurm accounting export rows."""
    required = ("job_id", "user", "account", "partition", "qos", "wallclock_req", "nodes_req", "processors_req",
                "gpus_req", "submit_time", "start_time", "end_time", "state", "name")
    return iter_csv(lines, required, source, _eagle_row)
