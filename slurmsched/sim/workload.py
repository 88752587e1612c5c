"""The jobs a simulation replays: read from a trace file or from the site's own history.

Each job keeps the record the trace gave (user, name, partition, requested time ...),
its true run time and its *units*: the GPUs it occupies. In a workload without any GPU
job (the SWF traces are CPU traces) processors play the part of GPUs; in a workload
with GPU jobs, jobs without GPUs are left out (the simulated cluster is a GPU pool).
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from tqdm import tqdm

from slurmsched.errors import ConfigError, TraceFormatError
from slurmsched.model import JobRecord
from slurmsched.traces import BadLine, iter_trace

log = logging.getLogger(__name__)


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
class Workload:
    """Jobs in submit order (ties by job id), and what was left out while reading.

    Attributes:
        jobs: the jobs to replay.
        source: where they came from (a path, or ``"history"``).
        bad_lines: trace rows the reader could not parse.
        skipped: readable jobs left out: no run time, or no units (no GPUs in a GPU
            workload, no processors in a CPU one).
        measured_from: jobs submitted before this time (POSIX seconds) are a warm-up:
            replayed, so the cluster is not empty, but left out of the results.
    """

    jobs: tuple[TraceJob, ...]
    source: str
    bad_lines: int = 0
    skipped: int = 0
    measured_from: float | None = None

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


def _trace_job(record: JobRecord, gpu_workload: bool) -> TraceJob | None:
    duration = record.runtime_s
    units = record.gpus if gpu_workload else record.cpus
    if duration is None or units <= 0:
        return None
    return TraceJob(record, duration, units)


def workload_from_records(records: Iterable[JobRecord], source: str, *, bad_lines: int = 0,
                          limit: int | None = None) -> Workload:
    """Build a workload from finished job records.

    Args:
        limit: keep only the first ``limit`` jobs by submit time.

    Raises:
        TraceFormatError: two jobs share a job id (e.g. several ITP clusters read at once).
    """
    records = list(records)
    gpu_workload = any(r.gpus > 0 for r in records)
    jobs: list[TraceJob] = []
    skipped = 0
    seen: set[int] = set()
    for record in records:
        job = _trace_job(record, gpu_workload)
        if job is None:
            skipped += 1
            continue
        if record.job_id in seen:
            raise TraceFormatError(f"{source}: job id {record.job_id} appears twice; simulate one cluster at a "
                                   f"time (for the ITP archive: ARCHIVE:clusterNN.csv)")
        seen.add(record.job_id)
        jobs.append(job)
    jobs.sort(key=lambda j: (j.record.submit_time, j.record.job_id))
    if limit is not None:
        jobs = jobs[:limit]
    if skipped:
        log.info("%s: %d jobs without a run time or resources left out", source, skipped)
    return Workload(tuple(jobs), source, bad_lines, skipped)


def load_trace(path: str | Path, fmt: str, *, limit: int | None = None, progress: bool = False) -> Workload:
    """Read a trace file (any format of :func:`slurmsched.traces.iter_trace`).

    Raises:
        TraceFormatError: unreadable file, unknown format, or duplicate job ids.
    """
    records: list[JobRecord] = []
    bad = 0
    items = tqdm(iter_trace(path, fmt), desc="reading trace", unit=" jobs", disable=not progress,
                 mininterval=0.5, leave=False)
    for item in items:
        if isinstance(item, BadLine):
            bad += 1
            log.debug("%s line %d: %s", path, item.lineno, item.reason)
        else:
            records.append(item)
    if bad:
        log.warning("%s: %d unreadable lines skipped", path, bad)
    workload = workload_from_records(records, str(path), bad_lines=bad, limit=limit)
    if not workload.jobs:
        raise TraceFormatError(f"{path}: no job with a run time to simulate")
    return workload


def workload_from_history(records: Sequence[JobRecord], *, cluster: str | None = None, since: float | None = None,
                          until: float | None = None, warmup_s: float = 0.0, limit: int | None = None) -> Workload:
    """The site's own finished jobs (one cluster's) as a workload.

    Args:
        records: finished attempts from the history database.
        cluster: the cluster to replay; ``None``: the only one the history holds.
        since, until: replay only jobs submitted in ``[since, until)`` (POSIX seconds).
        warmup_s: with ``since``, also replay the jobs submitted in the ``warmup_s``
            seconds before it, left out of the results (the simulated cluster starts
            empty at the first job replayed).
        limit: keep only the first ``limit`` measured jobs by submit time (and the
            warm-up's jobs before them).

    A requeued job's attempts each occupied the cluster, so each replays as a job of its
    own: the first keeps the job id, later ones get fresh ids above the history's largest.

    Raises:
        ConfigError: ``cluster`` is not in the (non-empty) history, or it holds several and
            none was named.
    """
    clusters = sorted({r.cluster for r in records})
    if cluster is None and len(clusters) > 1:
        raise ConfigError(f"the history database holds several clusters ({', '.join(map(repr, clusters))}): "
                          "name one with --cluster")
    if cluster is not None and clusters and cluster not in clusters:
        raise ConfigError(f"the history database has no finished job of cluster {cluster!r} "
                          f"(it has: {', '.join(map(repr, clusters)) or 'none'})")
    chosen = [r for r in records if cluster is None or r.cluster == cluster]
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
    workload = workload_from_records(replayed, f"history of {cluster}" if cluster else "history")
    jobs = workload.jobs
    if limit is not None:
        warm = 0 if since is None else sum(1 for j in jobs if j.record.submit_time < since)
        jobs = jobs[:warm + limit]
    return dataclasses.replace(workload, jobs=jobs, measured_from=since if warmup_s > 0 else None)
