"""Bulk ingestion of finished jobs: from a trace file or from Slurm accounting.

Both paths write in batches, one transaction per batch: a batch is written whole or
not at all, earlier batches stay. Trace rows that cannot be read arrive as
:class:`~slurmsched.traces.BadLine` and are counted and reported, never written; the
good rows of the same batch are imported. Jobs without processors or GPUs (an SWF row
with 0 processors) are readable but occupied nothing: they are counted apart and not
written.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from tqdm import tqdm

from slurmsched.errors import ImportInterrupted, StoreError, TraceFormatError
from slurmsched.gateway.protocol import SlurmGateway
from slurmsched.model import JobRecord
from slurmsched.store import DEFAULT_BATCH
from slurmsched.store.protocol import JobRepository
from slurmsched.store.repository import SqlJobRepository
from slurmsched.text import plural
from slurmsched.traces import BadLine, TraceItem, iter_trace, line_numbers

log = logging.getLogger(__name__)

#: The accounting cursor's name (``get_cursor``/``set_cursor``).
SACCT_CURSOR = "sacct"
#: What to do after an import stopped part-way (batches are upserts: the ones written are not added twice).
_RESUME = "importing the whole file again later adds only the rest"
#: How far behind "now" the accounting cursor is left after a backfill: slurmdbd
#: records a finished job a few seconds late, and upserts make re-reading harmless.
ACCOUNTING_LAG_S = 300.0


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What an import wrote.

    Attributes:
        rows: job attempts written (inserted or updated).
        new: of those, the attempts that were not stored before (the rest were overwritten
            with what was read, which is how re-importing stays idempotent).
        batches: transactions committed.
        bad_lines: every unreadable row, in file order.
        seconds: wall time of the import.
        no_processors: readable jobs skipped for having neither processors nor GPUs.
    """

    rows: int
    new: int
    batches: int
    bad_lines: tuple[BadLine, ...] = ()
    seconds: float = 0.0
    no_processors: int = 0

    @property
    def rows_per_s(self) -> float:
        """Import throughput."""
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    @property
    def present(self) -> int:
        """Attempts written that were stored already (updated, not added)."""
        return self.rows - self.new

    def summary(self, source: str, show: int = 10) -> str:
        """One line for people: new and already present attempts, batches, the jobs skipped for
        having no processors, and the first bad line numbers."""
        text = (f"imported {plural(self.new, 'new job attempt')}, {self.present} already present, from {source} "
                f"in {plural(self.batches, 'batch', 'batches')} ({self.seconds:.1f} s)")
        if self.no_processors:
            text += f"; skipped {plural(self.no_processors, 'job')} without processors"
        if self.bad_lines:
            numbers = line_numbers([b.lineno for b in self.bad_lines], show=show)
            text += f"; skipped {plural(len(self.bad_lines), 'bad line')}: {numbers}"
        return text


def import_items(repo: SqlJobRepository, items: Iterable[TraceItem], *, cluster: str = "",
                 batch_size: int = DEFAULT_BATCH, progress: tqdm | None = None) -> ImportReport:
    """Write the jobs of a trace in batches, collecting the bad lines (and counting, not
    writing, the jobs without processors or GPUs).

    Reading the next batch overlaps writing the last one (one writer thread, so at most
    one batch is in flight and batches commit in file order).

    Args:
        repo: where to write (each batch in one transaction, which also counts the
            attempts stored before it).
        items: ``JobRecord`` or ``BadLine`` values, as :func:`slurmsched.traces.iter_trace` yields.
        cluster: cluster name for records that carry none (traces mostly do not), so
            job ids of different traces do not collide.
        batch_size: rows per transaction.
        progress: a tqdm bar advanced by the rows read.

    Raises:
        StoreError: a batch could not be written; it was rolled back whole, the batches
            before it stay, and the message says how far the import got.
        TraceFormatError: ``items`` failed (a missing file, a header without the format's
            columns) or failed part-way (a truncated file); the batches read before stay,
            and the message says how many rows they held, or that nothing was imported.
        ImportInterrupted: Ctrl-C (``KeyboardInterrupt``) part-way; the batch being
            written is finished first, the batches written stay, and the message says how
            many rows they held.
    """
    started = time.perf_counter()
    rows = new = batches = no_processors = 0
    bad: list[BadLine] = []
    batch: list[JobRecord] = []
    in_flight: tuple[Future[tuple[int, int]], int] | None = None

    def settle() -> None:
        """Wait for the batch being written; count it, or say how far the import got."""
        nonlocal rows, new, batches, in_flight
        if in_flight is None:
            return
        future, size = in_flight
        try:
            written, added = future.result()  # an interrupt here leaves the batch in flight, to wait for again
        except StoreError as exc:
            raise StoreError(f"{exc} (batch {batches + 1} of {size} rows rolled back; "
                             f"{rows} rows in {batches} earlier batches were imported)") from exc
        in_flight = None
        rows += written
        new += added
        batches += 1

    # One writer thread: batch N is written while batch N+1 is read and parsed.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="slurmsched-ingest") as writer:
        def flush() -> None:
            nonlocal batch, in_flight
            settle()
            in_flight = (writer.submit(_write_batch, repo, batch, cluster), len(batch))
            batch = []

        try:
            for item in items:
                if isinstance(item, BadLine):
                    bad.append(item)
                elif item.cpus <= 0 and item.gpus <= 0:
                    no_processors += 1
                else:
                    batch.append(item)
                    if len(batch) >= batch_size:
                        flush()
                if progress is not None:
                    progress.update(1)
            if batch:
                flush()
            settle()
        except TraceFormatError as exc:  # the file ends early: the batches sent so far stay
            settle()
            so_far = (f"{rows} rows in {batches} batches were imported before it; {_RESUME}" if batches
                      else "nothing was imported")
            raise TraceFormatError(f"{exc} ({so_far})") from None
        except KeyboardInterrupt:
            settle()
            raise ImportInterrupted(f"import interrupted: {rows} rows in {batches} batches were imported "
                                    f"(each batch whole); {_RESUME}") from None
    return ImportReport(rows=rows, new=new, batches=batches, bad_lines=tuple(bad),
                        seconds=time.perf_counter() - started, no_processors=no_processors)


def _write_batch(repo: SqlJobRepository, jobs: Sequence[JobRecord], cluster: str = "") -> tuple[int, int]:
    """Upsert ``jobs`` in one transaction (or the caller's): (attempts written, how many of them are new)."""
    with repo.transaction():
        present = repo.stored_attempts(jobs, cluster=cluster)
        written = repo.ingest_finished(jobs, cluster=cluster)
    return written, written - present


def trace_cluster_name(path: str | Path) -> str:
    """Default cluster name for a trace's jobs: the file name without its extensions."""
    name = Path(str(path).split(":", 1)[0]).name
    for suffix in (".gz", ".swf", ".csv", ".tar"):
        name = name.removesuffix(suffix)
    return name


def import_trace(repo: SqlJobRepository, path: str | Path, fmt: str, *, cluster: str | None = None,
                 batch_size: int = DEFAULT_BATCH, progress: tqdm | None = None) -> ImportReport:
    """Import a public trace file (see :mod:`slurmsched.traces` for formats).

    Args:
        cluster: name for jobs whose format carries none; default :func:`trace_cluster_name`.

    Raises:
        TraceFormatError: the file cannot be read (also part-way: a truncated gzip), or it
            has rows and not one of them reads as ``fmt`` (most likely the wrong format).
        StoreError: a batch could not be written (see :func:`import_items`).
    """
    report = import_items(repo, iter_trace(path, fmt), cluster=cluster or trace_cluster_name(path),
                          batch_size=batch_size, progress=progress)
    if report.bad_lines and not report.rows and not report.no_processors:
        first = report.bad_lines[0]
        raise TraceFormatError(f"{path}: none of its {len(report.bad_lines)} rows reads as {fmt} (line "
                               f"{first.lineno}: {first.reason}): wrong format?")
    return report


@dataclass(frozen=True, slots=True)
class Accounting:
    """Finished job attempts read from Slurm accounting, not written yet.

    Attributes:
        since: the read holds every attempt that ended at or after this time.
        jobs: those attempts, oldest end time first.
        read_at: when the read started (epoch seconds).
        read_s: how long it took.
    """

    since: float
    jobs: tuple[JobRecord, ...]
    read_at: float
    read_s: float


def read_accounting(gateway: SlurmGateway, since: float) -> Accounting:
    """Read every attempt that ended at or after ``since`` with one ``gateway.finished_since(since)``
    call, before anything is written (``history import`` reads before it opens the database).

    Raises:
        SlurmError: accounting could not be read.
    """
    started = time.perf_counter()
    read_at = time.time()
    jobs = tuple(sorted(gateway.finished_since(since), key=lambda j: (j.end_time or 0.0)))
    return Accounting(since=since, jobs=jobs, read_at=read_at, read_s=time.perf_counter() - started)


def import_accounting(repo: SqlJobRepository, accounting: Accounting, *,
                      window_s: float = 86400.0, progress: tqdm | None = None) -> ImportReport:
    """Backfill history with what :func:`read_accounting` read and advance the ``sacct`` cursor.

    Writes the attempts in windows of ``window_s`` seconds of end time, oldest first, one
    transaction per window; each window's transaction also moves the cursor to the
    window's end, and a last step to the read time minus :data:`ACCOUNTING_LAG_S` (never
    backwards), so an interrupted backfill resumes where it stopped and the daemon reads
    only what is newer. The report's time includes the read.

    Raises:
        StoreError: a window could not be written; it was rolled back whole, the windows
            before it stay, and the message says how many rows they held.
    """
    started = time.perf_counter()
    jobs = accounting.jobs
    windows = _windows(jobs, accounting.since, window_s)
    ceiling = accounting.read_at - ACCOUNTING_LAG_S
    rows = new = batches = 0
    if progress is not None:
        progress.reset(total=len(jobs))
    for window_end, window in windows:
        try:
            with repo.transaction():
                written, added = _write_batch(repo, window)
                _advance_cursor(repo, min(window_end, ceiling))
        except StoreError as exc:
            raise StoreError(f"{exc} (window {batches + 1} of {len(window)} rows rolled back; {rows} rows in "
                             f"{batches} earlier windows were imported: run it again to resume)") from exc
        rows += written
        new += added
        batches += 1
        if progress is not None:
            progress.update(len(window))
    _advance_cursor(repo, ceiling)
    log.info("backfilled %d job attempts from accounting since %s (%d new)", rows, accounting.since, new)
    return ImportReport(rows=rows, new=new, batches=batches,
                        seconds=accounting.read_s + time.perf_counter() - started)


def _advance_cursor(repo: JobRepository, value: float) -> None:
    """Move the accounting cursor forward to ``value`` (never backwards)."""
    with repo.transaction():
        cursor = repo.get_cursor(SACCT_CURSOR)
        if cursor is None or value > cursor:
            repo.set_cursor(SACCT_CURSOR, value)


def _windows(jobs: Sequence[JobRecord], since: float, window_s: float) -> list[tuple[float, list[JobRecord]]]:
    """Split jobs sorted by end time into ``(window_end, jobs)`` windows of ``window_s`` seconds."""
    windows: list[tuple[float, list[JobRecord]]] = []
    for job in jobs:
        index = int(max(0.0, (job.end_time or since) - since) // window_s)
        end = since + (index + 1) * window_s
        if not windows or windows[-1][0] != end:
            windows.append((end, []))
        windows[-1][1].append(job)
    return windows
