"""Standard Workload Format (Parallel Workloads Archive) reader and header parser.

See the package docstring for how SWF fields map onto :class:`JobRecord`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from slurmsched.model import JobRecord, JobState
from slurmsched.traces.base import (MAX_FIELD, TRACE_EPOCH, BadLine, Numbered, RowError, count, integer, number,
                                    open_text, reading)

_FIELDS = 18
_STATUS = {1: JobState.COMPLETED, 0: JobState.FAILED, 4: JobState.FAILED, 5: JobState.CANCELLED}


@dataclass(frozen=True, slots=True)
class SwfHeader:
    """The SWF header fields slurmsched uses (``None`` where the header lacks them).

    Attributes:
        max_procs: ``MaxProcs``: processors in the machine (the simulator's cluster size).
        max_nodes: ``MaxNodes``: nodes in the machine.
        unix_start_time: ``UnixStartTime``: POSIX time of submit time 0.
        time_zone_s: ``TimeZone``: offset of local time from UTC in seconds.
        queues: ``Queue:`` lines, number -> name.
    """

    max_procs: int | None = None
    max_nodes: int | None = None
    unix_start_time: float | None = None
    time_zone_s: int | None = None
    queues: tuple[tuple[int, str], ...] = ()

    @property
    def procs_per_node(self) -> int:
        """Processors per node (MaxProcs / MaxNodes, at least 1; 1 when unknown)."""
        if self.max_procs and self.max_nodes:
            return max(1, self.max_procs // self.max_nodes)
        return 1


def _leading_int(text: str) -> int | None:
    head = text.strip().split(" ", 1)[0]
    try:
        return int(head)
    except ValueError:
        return None


def parse_header_lines(lines: list[str]) -> SwfHeader:
    """Build a :class:`SwfHeader` from ``;`` comment lines (the ``;`` already removed)."""
    values: dict[str, str] = {}
    queues: list[tuple[int, str]] = []
    for line in lines:
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip()
        if key == "Queue":
            parts = value.split()
            if len(parts) >= 2 and parts[0].isdigit():
                queues.append((int(parts[0]), parts[1]))
        else:
            values.setdefault(key, value)
    start = _leading_int(values.get("UnixStartTime", ""))
    return SwfHeader(
        max_procs=_leading_int(values.get("MaxProcs", "")),
        max_nodes=_leading_int(values.get("MaxNodes", "")),
        unix_start_time=float(start) if start is not None else None,
        time_zone_s=_leading_int(values.get("TimeZone", "")),
        queues=tuple(queues),
    )


def read_swf_header(path: str | Path) -> SwfHeader:
    """Read the ``;`` header of an SWF file (plain or gzip) without reading the jobs.

    Raises:
        TraceFormatError: the file cannot be read (also part-way: a corrupt gzip).
    """
    header: list[str] = []
    with reading(path), open_text(path) as handle:
        for line in handle:
            stripped = line.strip()
            if not stripped:
                continue
            if not stripped.startswith(";"):
                break
            header.append(stripped[1:])
    return parse_header_lines(header)


def _missing(value: float) -> bool:
    return value < 0


def _partition(queue: int, partition: int, header: SwfHeader) -> str:
    """Queue name from the header (or its number); the SWF partition number when no queue."""
    if queue >= 0:
        return dict(header.queues).get(queue, str(queue))
    return str(partition) if partition >= 0 else ""


def _parse_row(fields: list[str], header: SwfHeader, epoch: float) -> JobRecord:
    if len(fields) != _FIELDS:
        raise RowError(f"expected {_FIELDS} SWF fields, found {len(fields)}")
    job_id = integer(fields[0], "job number (field 1)")
    submit = number(fields[1], "submit time (field 2)")
    if _missing(submit):
        raise RowError("submit time (field 2) is missing")
    wait = number(fields[2], "wait time (field 3)")
    run = number(fields[3], "run time (field 4)")
    procs = count(fields[4], "allocated processors (field 5)", unknown_below_zero=True)
    if procs <= 0:
        procs = count(fields[7], "requested processors (field 8)", unknown_below_zero=True)
    procs = max(procs, 0)  # a well-formed row may give none (0 or -1): a job without processors
    requested = number(fields[8], "requested time (field 9)")
    memory_kb = number(fields[9], "requested memory (field 10)")
    memory_mb = round(memory_kb * procs / 1024) if memory_kb > 0 and procs > 0 else None
    if memory_mb is not None and memory_mb >= MAX_FIELD:
        raise RowError(f"requested memory (field 10) is out of range for {procs} processors ({fields[9]!r})")
    status = integer(fields[10], "status (field 11)")
    user = integer(fields[11], "user id (field 12)")
    group = integer(fields[12], "group id (field 13)")
    executable = integer(fields[13], "executable id (field 14)")
    queue = integer(fields[14], "queue (field 15)")
    partition = integer(fields[15], "partition (field 16)")
    submit_time = epoch + submit
    start = end = None
    if not _missing(run):
        start = submit_time + (0.0 if _missing(wait) else wait)
        end = start + run
    return JobRecord(
        job_id=job_id,
        user=str(user) if user >= 0 else "",
        submit_time=submit_time,
        name=str(executable) if executable >= 0 else "",
        account=str(group) if group >= 0 else "",
        partition=_partition(queue, partition, header),
        state=_STATUS.get(status, JobState.OTHER),
        start_time=start,
        end_time=end,
        time_limit_s=int(round(requested)) if requested > 0 else None,
        nodes=max(1, math.ceil(procs / header.procs_per_node)),
        cpus=procs,
        memory_mb=memory_mb,
        gpus=0,
    )


def iter_swf(path: str | Path) -> Iterator[Numbered]:
    """Yield ``(line, item)`` for each row of an SWF file (plain or gzip): its job, or a
    :class:`BadLine`."""
    header_lines: list[str] = []
    header: SwfHeader | None = None
    epoch = TRACE_EPOCH
    with open_text(path) as handle:
        for lineno, line in enumerate(handle, start=1):
            stripped = line.strip()
            if not stripped:
                continue
            if stripped.startswith(";"):
                if header is None:
                    header_lines.append(stripped[1:])
                continue
            if header is None:
                header = parse_header_lines(header_lines)
                if header.unix_start_time is not None:
                    epoch = header.unix_start_time
            try:
                yield lineno, _parse_row(stripped.split(), header, epoch)
            except RowError as exc:
                yield lineno, BadLine(lineno, str(exc))
