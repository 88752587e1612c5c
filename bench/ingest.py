#!/usr/bin/env python3
"""Benchmark: importing the 202,871-job HPC2N trace into SQLite and into PostgreSQL.

What runs is ``slurmsched history import --trace``'s own code path
(:func:`slurmsched.store.ingest.import_trace`: the SWF reader, batches of 5,000 rows, one
upsert transaction per batch) into an empty, freshly migrated database:

* SQLite: a new file in a temporary directory (WAL, ``synchronous=NORMAL``, as the daemon
  runs it);
* PostgreSQL: a private server started with the project's own
  ``contrib/dev-db/postgres.sh`` (Unix socket only, durable default settings), stopped
  and removed afterwards. The client needs the ``postgres`` extra (psycopg) in the venv:
  ``contrib/setup.sh postgres`` (or ``test``, as ``contrib/test.sh`` makes it); the bench
  says so before it starts when it is missing.

Each rate is rows written divided by the whole import's wall time, reading and parsing
the gzip'd trace included (the importer parses the next batch while the last one is
written). The time to only read and parse the trace, and the CPU seconds this process
spent, are printed too: on a shared machine the wall-clock rates fall with the load. The trace is found in ``$SLURMSCHED_TRACES``
(default ``<repo>/../shared/traces``) and read in place.

Usage: ``python bench/ingest.py [--batch-size 5000]``; the last output line is
``{"rows": ..., "sqlite_rows_per_s": ..., "postgres_rows_per_s": ...}``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from slurmsched.store import DEFAULT_BATCH  # noqa: E402
from slurmsched.store.ingest import ImportReport, import_trace  # noqa: E402
from slurmsched.store.repository import SqlJobRepository  # noqa: E402
from slurmsched.traces import iter_trace  # noqa: E402

TRACE = "HPC2N-2002-2.2-cln.swf.gz"
EXPECTED_ROWS = 202_871
POSTGRES_SH = REPO / "contrib" / "dev-db" / "postgres.sh"


def trace_path() -> Path:
    """The HPC2N trace in ``$SLURMSCHED_TRACES`` (default ``<repo>/../shared/traces``)."""
    folder = Path(os.environ.get("SLURMSCHED_TRACES", REPO.parent / "shared" / "traces"))
    path = folder / TRACE
    if not path.is_file():
        raise click.ClickException(f"{path} not found (set SLURMSCHED_TRACES to the folder holding {TRACE})")
    return path


def timed_import(url: str, trace: Path, batch_size: int, label: str) -> tuple[ImportReport, float]:
    """Migrate an empty database at ``url`` and import the trace; the report and this process's CPU seconds."""
    repo = SqlJobRepository.from_url(url, create=True)
    try:
        repo.upgrade()
        cpu = time.process_time()
        with tqdm(total=EXPECTED_ROWS, unit=" rows", desc=label, file=sys.stderr, mininterval=1) as bar:
            report = import_trace(repo, trace, "swf", batch_size=batch_size, progress=bar)
        cpu = time.process_time() - cpu
        stored = repo.count_jobs()
    finally:
        repo.close()
    if stored != report.rows:
        raise click.ClickException(f"{label}: {report.rows} rows reported but {stored} stored")
    return report, cpu


def parse_only(trace: Path) -> tuple[int, float, float]:
    """Rows, wall seconds and CPU seconds to read and parse the trace without writing it anywhere."""
    started, cpu = time.perf_counter(), time.process_time()
    rows = sum(1 for _ in tqdm(iter_trace(trace, "swf"), total=EXPECTED_ROWS, unit=" rows", desc="parse only",
                               file=sys.stderr, mininterval=1))
    return rows, time.perf_counter() - started, time.process_time() - cpu


def start_postgres(workdir: str) -> str:
    """Start a private PostgreSQL with the project's script; returns its URL."""
    proc = subprocess.run(["bash", str(POSTGRES_SH), "start", workdir, "5432"], capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise click.ClickException(f"cannot start PostgreSQL: {proc.stderr.strip()[-500:]}")
    return proc.stdout.strip().splitlines()[-1]


def describe(label: str, rows: int, wall_s: float, cpu_s: float, note: str = "") -> str:
    return (f"{label:<10} {rows:>7} rows in {wall_s:6.1f} s = {rows / wall_s:>8,.0f} rows/s "
            f"(client CPU {cpu_s:5.1f} s{note})")


@click.command()
@click.option("--batch-size", type=click.IntRange(min=1), default=DEFAULT_BATCH, show_default=True,
              help="Rows per transaction.")
def main(batch_size: int) -> None:
    """Import the HPC2N trace into SQLite and PostgreSQL and print rows per second."""
    trace = trace_path()
    if importlib.util.find_spec("psycopg") is None:
        raise click.ClickException("psycopg, the PostgreSQL driver, is not installed: run contrib/setup.sh postgres "
                                   "(pip install -e '.[postgres]') and try again")
    click.echo(f"trace      {trace}; load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    rows, parse_s, parse_cpu = parse_only(trace)
    click.echo(describe("parse only", rows, parse_s, parse_cpu))

    with tempfile.TemporaryDirectory(prefix="slurmsched-bench-") as tmp:
        sqlite, cpu = timed_import(f"sqlite:///{Path(tmp) / 'slurmsched.db'}", trace, batch_size, "sqlite")
    click.echo(describe("sqlite", sqlite.rows, sqlite.seconds, cpu, f"; {sqlite.batches} transactions"))

    workdir = tempfile.mkdtemp(prefix="slurmsched-bench-pg-")
    try:
        url = start_postgres(workdir)
        postgres, cpu = timed_import(url, trace, batch_size, "postgresql")
    finally:
        subprocess.run(["bash", str(POSTGRES_SH), "stop", workdir], capture_output=True, timeout=120)
        shutil.rmtree(workdir, ignore_errors=True)
    click.echo(describe("postgresql", postgres.rows, postgres.seconds, cpu,
                        f"; {postgres.batches} transactions; server CPU not counted"))

    if sqlite.rows != rows or postgres.rows != rows:
        raise click.ClickException(f"imported {sqlite.rows} (SQLite) and {postgres.rows} (PostgreSQL) of {rows} rows")
    click.echo(json.dumps({"rows": rows, "sqlite_rows_per_s": round(sqlite.rows_per_s, 1),
                           "postgres_rows_per_s": round(postgres.rows_per_s, 1)}))


if __name__ == "__main__":
    main()
