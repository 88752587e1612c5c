"""The jobs a simulation replays: read from a trace file or from the site's own history.

Each job keeps the record the trace gave (user, name, partition, requested time ...),
its true run time and its *units*: the GPUs it occupies. In a workload without any GPU
job (the SWF traces are CPU traces) processors play the part of GPUs; in a workload
with GPU jobs, jobs without GPUs are left out (the simulated cluster is a GPU pool).
What is left out, and why, is counted in :class:`LeftOut`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from array import array
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Sequence

from tqdm import tqdm

from slurmsched.errors import TraceFormatError
from slurmsched.model import JobRecord
from slurmsched.store.selection import moment_text, one_cluster
from slurmsched.traces import BadLine, iter_numbered, line_numbers
from slurmsched.text import plural

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LeftOut:
    """What of the input a simulation does not replay, by reason.

    With a warm-up (``--warmup``) only the measured window's jobs are counted, as
    :attr:`Workload.jobs` of the results are.

    Attributes:
        unreadable_lines: line numbers of the trace rows the reader could not parse, in
            file order (within its member, for an ITP archive).
        no_run_time: readable jobs without a run time (they never ran).
        never_ran: finished jobs on no node, without a start time or with 0 s run, in a
            history that records where jobs ran: submissions slurmctld rejected
            (``Requested node configuration is not available``), or jobs cancelled
            before they started (Slurm 22.05's accounting gives them start = end).
        cpu_only: jobs without GPUs in a workload with GPU jobs (the simulated cluster
            is a GPU pool).
        no_processors: jobs without processors (nor GPUs) in a workload without GPUs.
        too_big: jobs larger than their partition of the simulated cluster (known once
            the cluster is sized: :meth:`with_too_big`).
    """

    unreadable_lines: tuple[int, ...] = ()
    no_run_time: int = 0
    cpu_only: int = 0
    no_processors: int = 0
    too_big: int = 0
    never_ran: int = 0

    @property
    def jobs(self) -> int:
        """Readable jobs left out, for every reason (unreadable lines are not counted as jobs)."""
        return self.no_run_time + self.never_ran + self.cpu_only + self.no_processors + self.too_big

    def with_too_big(self, count: int) -> LeftOut:
        """The same, with ``count`` jobs too big for their partition."""
        return dataclasses.replace(self, too_big=count)

    def describe(self) -> str:
        """One clause for people, ``""`` when nothing was left out: ``"5 left out: 4 CPU-only in
        a GPU workload, 1 without a run time; 3 unreadable lines: 3, 4, 6"``."""
        reasons = [f"{n} {what}" for n, what in ((self.cpu_only, "CPU-only in a GPU workload"),
                                                  (self.no_run_time, "without a run time"),
                                                  (self.never_ran, "never ran (on no node)"),
                                                  (self.no_processors, "without processors"),
                                                  (self.too_big, "larger than their partition")) if n]
        parts = [f"{self.jobs} left out: {', '.join(reasons)}"] if reasons else []
        if self.unreadable_lines:
            count = len(self.unreadable_lines)
            parts.append(f"{plural(count, 'unreadable line')}: {line_numbers(self.unreadable_lines)}")
        return "; ".join(parts)

    def as_dict(self) -> dict[str, object]:
        """The counts as ``results.json`` and ``--json`` record them (every line number)."""
        return {"jobs": self.jobs, "cpu_only": self.cpu_only, "no_run_time": self.no_run_time,
                "never_ran": self.never_ran, "no_processors": self.no_processors,
                "too_big_for_partition": self.too_big, "unreadable_lines": len(self.unreadable_lines),
                "unreadable_line_numbers": list(self.unreadable_lines)}


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job to replay.

    Attributes:
        record: the job as the trace (or history) recorded it.
        duration: its true run time in seconds.
        units: GPUs it occupies (processors in a workload without GPUs).
    """

    record: JobRecord
    duration: float
    units: int


@dataclass(frozen=True, slots=True)
class Window:
    """The part of the history a replay took (``--since``, ``--until``, ``--warmup``).

    Attributes:
        since, until: the measured jobs were submitted in ``[since, until)`` (POSIX
            seconds; ``None``: unbounded on that side).
        warmup_s: the warm-up asked for, before ``since`` (0: none).
        warmup_jobs: the jobs the warm-up replayed (fewer than the asked span suggests
            when the history has few or none before ``since``).
        warmup_first: when the first of them was submitted (``None`` without any).
    """

    since: float | None = None
    until: float | None = None
    warmup_s: float = 0.0
    warmup_jobs: int = 0
    warmup_first: float | None = None

    def span_text(self) -> str:
        """The measured window for people: ``"submitted from 2026-10-01 00:00 to 2026-11-01 00:00"``,
        ``"submitted since ..."``, ``"submitted before ..."``; ``""`` without bounds."""
        if self.since is not None and self.until is not None:
            return f"submitted from {moment_text(self.since)} to {moment_text(self.until)}"
        if self.since is not None:
            return f"submitted since {moment_text(self.since)}"
        if self.until is not None:
            return f"submitted before {moment_text(self.until)}"
        return ""

    def as_dict(self) -> dict[str, object]:
        """The window as ``results.json`` records it (dates as local ISO 8601 with their offset)."""
        return {"since": _iso(self.since), "until": _iso(self.until), "warmup_s": self.warmup_s,
                "warmup_jobs": self.warmup_jobs, "warmup_first": _iso(self.warmup_first)}


def _iso(moment: float | None) -> str | None:
    return None if moment is None else datetime.fromtimestamp(moment).astimezone().isoformat(timespec="seconds")


@dataclass(frozen=True, slots=True)
class Workload:
    """Jobs in submit order (ties by job id), and what was left out while reading.

    Attributes:
        jobs: the jobs to replay.
        source: where they came from (a path, or ``"history of CLUSTER"``).
        left_out: unreadable trace rows, and readable jobs that cannot be replayed (no
            run time, no GPUs in a GPU workload, no processors in a CPU one).
        measured_from: jobs submitted before this time (POSIX seconds) are a warm-up:
            replayed, so the cluster is not empty, but left out of the results.
        window: the part of the history replayed (``None`` for a trace).
    """

    jobs: tuple[TraceJob, ...]
    source: str
    left_out: LeftOut = LeftOut()
    measured_from: float | None = None
    window: Window | None = None

    @property
    def span_s(self) -> float:
        """Seconds from the first to the last submission."""
        if not self.jobs:
            return 0.0
        return self.jobs[-1].record.submit_time - self.jobs[0].record.submit_time

    @property
    def gpu_seconds(self) -> float:
        """Total work offered: sum of run time x units."""
        return sum(j.duration * j.units for j in self.jobs)

    @property
    def max_units(self) -> int:
        """The biggest job's units."""
        return max((j.units for j in self.jobs), default=0)

    def measured(self) -> Workload:
        """The workload without its warm-up's jobs (those submitted before ``measured_from``)."""
        start = self.measured_from
        if start is None:
            return self
        return dataclasses.replace(self, jobs=tuple(j for j in self.jobs if j.record.submit_time >= start))


def workload_from_records(records: Sequence[JobRecord], source: str, *, unreadable: Sequence[int] = (),
                          limit: int | None = None, lines: Sequence[int] | None = None,
                          hint: str = "", measured_from: float | None = None) -> Workload:
    """Build a workload from finished job records.

    A record on no node that has no start time, or ran for 0 s, never ran, when other
    records of the same input name their nodes (a history that records where jobs ran,
    as accounting does; trace rows name no nodes): a submission slurmctld rejected, or
    one cancelled while pending (read from accounting by this version with no start
    time, by earlier ones as a 0 s run). It is left out as ``never_ran`` and sets neither the units of the workload
    (GPUs or processors) nor the cluster's size. Node-less records that ran for a while
    (a trace imported into the same database) are replayed.

    Args:
        records: the jobs, any order.
        source: where they came from, for messages.
        unreadable: line numbers of trace rows that could not be read (recorded in ``left_out``).
        limit: keep only the first ``limit`` measured jobs by submit time (and the
            warm-up's before them); ``left_out`` then counts only the jobs submitted up to
            the last one kept (the rest of the input is not part of the replay).
        lines: each record's line in the trace (aligned with ``records``), named when a
            job id repeats.
        hint: appended to that message (what to do about it, for this input).
        measured_from: count in ``left_out`` only the jobs submitted at or after this
            time (POSIX seconds): the ones before are a warm-up, not measured.

    Raises:
        TraceFormatError: two jobs to replay share a job id.
    """
    lists_nodes = any(r.node_list for r in records)

    def never_ran(record: JobRecord) -> bool:
        return lists_nodes and not record.node_list and (record.start_time is None or record.runtime_s == 0)

    gpu_workload = any(r.gpus > 0 and not never_ran(r) for r in records)
    jobs: list[TraceJob] = []
    skipped: list[tuple[float, str]] = []  # (submit time, reason) of each record left out
    first: dict[int, int] = {}
    for index, record in enumerate(records):
        duration = record.runtime_s
        units = record.gpus if gpu_workload else record.cpus
        if never_ran(record):
            skipped.append((record.submit_time, "never_ran"))
            continue
        if duration is None:
            skipped.append((record.submit_time, "no_run_time"))
            continue
        if units <= 0:
            skipped.append((record.submit_time, "cpu_only" if gpu_workload else "no_processors"))
            continue
        earlier = first.setdefault(record.job_id, index)
        if earlier != index:
            raise TraceFormatError(f"{source}: job id {record.job_id} appears twice"
                                   f"{_where(records, lines, earlier, index)}{hint}")
        jobs.append(TraceJob(record, duration, units))
    jobs.sort(key=lambda j: (j.record.submit_time, j.record.job_id))
    since = -math.inf if measured_from is None else measured_from
    until = math.inf
    kept = None if limit is None else limit + sum(1 for j in jobs if j.record.submit_time < since)
    if kept is not None and len(jobs) > kept:
        jobs = jobs[:kept]
        until = jobs[-1].record.submit_time if jobs else -math.inf
    counts = Counter(reason for submit, reason in skipped if since <= submit <= until)
    left_out = LeftOut(tuple(unreadable), no_run_time=counts["no_run_time"], never_ran=counts["never_ran"],
                       cpu_only=counts["cpu_only"], no_processors=counts["no_processors"])
    return Workload(tuple(jobs), source, left_out)


def _where(records: Sequence[JobRecord], lines: Sequence[int] | None, first: int, second: int) -> str:
    """`` (lines 3 and 9)`` for two records of one file, `` (line 2 of cluster01 and line 2 of
    cluster02)`` for two clusters of an archive; ``""`` without line numbers."""
    if lines is None:
        return ""
    a, b = records[first], records[second]
    if a.cluster != b.cluster:
        return f" (line {lines[first]} of {a.cluster} and line {lines[second]} of {b.cluster})"
    return f" (lines {lines[first]} and {lines[second]})"


#: What to do about repeated job ids in the ITP archive: its clusters number their jobs alike.
ITP_HINT = "; simulate one cluster at a time (for the ITP archive: ARCHIVE:clusterNN.csv)"


def load_trace(path: str | Path, fmt: str, *, limit: int | None = None, progress: bool = False) -> Workload:
    """Read a trace file (any format of :func:`slurmsched.traces.iter_trace`).

    Unreadable rows are left out and their line numbers kept in ``left_out`` (each
    reason is logged at debug level).

    Raises:
        TraceFormatError: unreadable file (also part-way: a corrupt gzip), unknown
            format, no job with a run time, or a job id that appears twice (the message
            names both lines).
    """
    records: list[JobRecord] = []
    lines = array("q")
    bad: list[int] = []
    items = tqdm(iter_numbered(path, fmt), desc="reading trace", unit=" jobs",
                 disable=None if progress else True, mininterval=0.5, leave=False)  # None: on a terminal only
    for lineno, item in items:
        if isinstance(item, BadLine):
            bad.append(lineno)
            log.debug("%s line %d: %s", path, lineno, item.reason)
        else:
            records.append(item)
            lines.append(lineno)
    workload = workload_from_records(records, str(path), unreadable=bad, limit=limit, lines=lines,
                                     hint=ITP_HINT if fmt == "itp" else "")
    if not workload.jobs:
        left_out = workload.left_out.describe()
        raise TraceFormatError(f"{path}: no job with a run time to simulate" + (f" ({left_out})" if left_out else ""))
    return workload


def workload_from_history(records: Sequence[JobRecord], *, cluster: str | None = None, since: float | None = None,
                          until: float | None = None, warmup_s: float = 0.0, limit: int | None = None) -> Workload:
    """The site's own finished jobs (one cluster's) as a workload.

    Args:
        records: finished attempts from the history database.
        cluster: the cluster to replay; ``None``: the only one the history holds.
        since, until: replay only jobs submitted in ``[since, until)`` (POSIX seconds).
        warmup_s: with ``since``, also replay the jobs submitted in the ``warmup_s``
            seconds before it, left out of the results and of ``left_out`` (the simulated
            cluster starts empty at the first job replayed).
        limit: keep only the first ``limit`` measured jobs by submit time (and the
            warm-up's jobs before them).

    A requeued job's attempts each occupied the cluster, so each replays as a job of its
    own: the first keeps the job id, later ones get fresh ids above the history's largest.
    The workload's ``window`` says what was asked and how many jobs the warm-up found.

    Raises:
        ConfigError: ``cluster`` is not in the (non-empty) history, or it holds several and
            none was named (:func:`~slurmsched.store.selection.one_cluster`).
    """
    chosen = list(one_cluster(records, cluster))
    first_fresh = next_id = max((r.job_id for r in chosen), default=0) + 1
    chosen.sort(key=lambda r: (r.submit_time, r.job_id))
    first = None if since is None else since - warmup_s
    seen: set[int] = set()
    replayed: list[JobRecord] = []
    for record in chosen:
        if record.job_id in seen:
            record = dataclasses.replace(record, job_id=next_id)
            next_id += 1
        seen.add(record.job_id)
        if (first is None or record.submit_time >= first) and (until is None or record.submit_time < until):
            replayed.append(record)
    if since is not None and not any(r.submit_time >= since for r in replayed):
        replayed = []  # a warm-up with nothing to measure
    if next_id > first_fresh:
        log.info("%d later attempts of requeued jobs replay as jobs of their own (ids from %d)",
                 next_id - first_fresh, first_fresh)
    measured_from = since if warmup_s > 0 else None
    name = cluster or (chosen[0].cluster if chosen else "")
    workload = workload_from_records(replayed, f"history of {name}" if name else "history",
                                     measured_from=measured_from, limit=limit)
    warm = [j for j in workload.jobs if since is not None and j.record.submit_time < since]
    window = Window(since, until, warmup_s, len(warm), warm[0].record.submit_time if warm else None)
    return dataclasses.replace(workload, measured_from=measured_from, window=window)
