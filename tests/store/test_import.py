"""Trace import: bad lines skipped and named, whole batches only (also on Ctrl-C), and the CLI round trip."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from slurmsched.cli.output import columns
from slurmsched.errors import ImportInterrupted, StoreError, TraceFormatError
from slurmsched.model import JobRecord, JobState
from slurmsched.store import migrate
from slurmsched.store.ingest import import_accounting, import_items, import_trace, read_accounting, trace_cluster_name
from slurmsched.store.repository import SqlJobRepository
from slurmsched.traces import TraceItem, iter_trace

HEADER = ["; Version: 2.2", "; UnixStartTime: 1000000000", "; MaxNodes: 16", "; MaxProcs: 64",
          "; Queue: 1 batch", "; Queue: 2 short"]


@dataclass
class Swf:
    path: Path
    good: int
    bad_lines: list[int]
    users: Counter


def write_swf(path: Path, jobs: int, corrupt_every: int | None = None, seed: int = 7) -> Swf:
    """An SWF trace of ``jobs`` rows; every ``corrupt_every``-th row is broken in some way."""
    rng = random.Random(seed)
    lines = list(HEADER)
    bad: list[int] = []
    users: Counter = Counter()
    for n in range(1, jobs + 1):
        lineno = len(lines) + 1
        run = rng.randint(1, 20_000)
        user = rng.randint(1, 6)
        fields = [n, n * 30, rng.randint(0, 600), run, rng.choice([1, 4, 8]), -1, -1, -1,
                  run * rng.choice([1, 2, 5, 20]), -1, 1, user, 3, -1, rng.choice([1, 2]), 1, -1, -1]
        row = " ".join(str(f) for f in fields)
        if corrupt_every and n % corrupt_every == 0:
            row = rng.choice([row.replace(f" {run} ", " 12x ", 1), " ".join(row.split()[:9]), row + " 99", "garbage"])
            bad.append(lineno)
        else:
            users[str(user)] += 1
        lines.append(row)
    path.write_text("\n".join(lines) + "\n")
    return Swf(path=path, good=jobs - len(bad), bad_lines=bad, users=users)


def test_one_percent_bad_lines_import_the_rest_and_are_named(repo: SqlJobRepository, tmp_path: Path) -> None:
    swf = write_swf(tmp_path / "site-2024.swf", jobs=1000, corrupt_every=100)
    assert len(swf.bad_lines) == 10
    report = import_trace(repo, swf.path, "swf", batch_size=128)
    assert report.rows == swf.good == 990
    assert [b.lineno for b in report.bad_lines] == swf.bad_lines
    assert report.batches == -(-990 // 128)
    assert repo.count_jobs() == 990
    assert {j.cluster for j in repo.iter_jobs()} == {"site-2024"}
    summary = report.summary(str(swf.path), show=3)
    assert f"skipped 10 bad lines: {swf.bad_lines[0]}, {swf.bad_lines[1]}, {swf.bad_lines[2]} and 7 more" in summary
    assert (report.new, report.present) == (990, 0)
    # Importing the same file again changes nothing, and says so.
    again = import_trace(repo, swf.path, "swf", batch_size=128)
    assert (again.rows, again.new, again.present) == (990, 0, 990)
    assert repo.count_jobs() == 990
    assert again.summary("x").startswith("imported 0 new job attempts, 990 already present, from x in 8 batches")


def test_jobs_without_processors_are_skipped_as_such_not_as_bad_lines(repo: SqlJobRepository,
                                                                      tmp_path: Path) -> None:
    path = tmp_path / "zero.swf"
    rows = ["1 0 5 20 4 -1 -1 4 60 -1 1 1 1 1 1 -1 -1 -1", "6 50 0 20 0 -1 -1 0 60 -1 1 1 1 1 1 -1 -1 -1",
            "7 60 0 20 -1 -1 -1 -1 60 -1 1 1 1 1 1 -1 -1 -1"]
    path.write_text("\n".join(HEADER + rows) + "\n")
    report = import_trace(repo, path, "swf")
    assert (report.rows, report.no_processors, report.bad_lines) == (1, 2, ())
    assert report.summary("zero.swf").endswith("; skipped 2 jobs without processors")
    assert [j.job_id for j in repo.iter_jobs()] == [1]


def test_a_longer_trace_over_an_imported_one_counts_only_its_new_attempts(repo: SqlJobRepository,
                                                                            tmp_path: Path) -> None:
    first = write_swf(tmp_path / "site.swf", jobs=300)
    assert import_trace(repo, first.path, "swf", batch_size=128).new == 300
    longer = write_swf(tmp_path / "longer.swf", jobs=1100)  # the same 300 jobs first, then 800 more
    report = import_trace(repo, longer.path, "swf", cluster="site", batch_size=500)
    assert (report.rows, report.new, report.present) == (1100, 800, 300)
    assert repo.count_jobs() == 1100


class _Accounting:
    """A gateway whose accounting holds ``jobs`` (``finished_since`` is all ``read_accounting`` asks)."""

    def __init__(self, jobs: list[JobRecord]) -> None:
        self.jobs = jobs

    def finished_since(self, since: float) -> list[JobRecord]:
        return [j for j in self.jobs if (j.end_time or 0) >= since]


def test_accounting_backfilled_twice_reports_the_second_as_already_present(repo: SqlJobRepository) -> None:
    now = time.time()
    jobs = [JobRecord(job_id=i, user="u", submit_time=now - 7200 + i, start_time=now - 7000 + i,
                      end_time=now - 3600 + 60 * i, state=JobState.COMPLETED, cluster="c") for i in range(18)]
    gateway = _Accounting(jobs)
    first = import_accounting(repo, read_accounting(gateway, now - 86400), window_s=1800)  # type: ignore[arg-type]
    assert (first.rows, first.new, first.present) == (18, 18, 0)
    gateway.jobs = [*jobs, dataclasses.replace(jobs[0], job_id=99)]
    second = import_accounting(repo, read_accounting(gateway, now - 86400), window_s=1800)  # type: ignore[arg-type]
    assert (second.rows, second.new, second.present) == (19, 1, 18)
    assert second.summary("accounting").startswith("imported 1 new job attempt, 18 already present, from accounting")
    assert repo.count_jobs() == 19


def test_an_accounting_window_the_database_refuses_says_what_was_imported(repo: SqlJobRepository) -> None:
    # The 5th job, with a job number beyond 64 bits, lands in the third window of 1800 s.
    now = time.time()
    jobs = [JobRecord(job_id=10**20 if i == 4 else i, user="u", submit_time=now - 9000, start_time=now - 8000,
                      end_time=now - 7200 + 900 * i, state=JobState.COMPLETED, cluster="c") for i in range(8)]
    accounting = read_accounting(_Accounting(jobs), now - 7200)  # type: ignore[arg-type]
    with pytest.raises(StoreError) as err:
        import_accounting(repo, accounting, window_s=1800)
    message = str(err.value)
    assert "\n" not in message
    assert "window 3 of 2 rows rolled back; 4 rows in 2 earlier windows were imported: run it again" in message
    assert repo.count_jobs() == 4


def test_a_batch_the_database_refuses_is_rolled_back_whole(repo: SqlJobRepository, tmp_path: Path) -> None:
    # The 250th job, with a job number beyond 64 bits (which the trace readers refuse as an
    # unreadable line, so it is made here), lands in the third batch of 100.
    swf = write_swf(tmp_path / "poison.swf", jobs=400)
    items = [dataclasses.replace(item, job_id=10**20) if isinstance(item, JobRecord) and item.job_id == 250 else item
             for item in iter_trace(swf.path, "swf")]
    with pytest.raises(StoreError) as err:
        import_items(repo, items, cluster="poison", batch_size=100)
    message = str(err.value)
    assert "\n" not in message
    assert "batch 3 of 100 rows rolled back; 200 rows in 2 earlier batches were imported" in message
    assert repo.count_jobs() == 200
    assert max(j.job_id for j in repo.iter_jobs()) == 200


def test_truncated_gzip_is_a_trace_error(repo: SqlJobRepository, tmp_path: Path) -> None:
    swf = write_swf(tmp_path / "t.swf", jobs=2000)
    data = gzip.compress(swf.path.read_bytes())
    broken = tmp_path / "t.swf.gz"
    broken.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceFormatError, match="cannot read trace .*t.swf.gz to the end") as err:
        import_trace(repo, broken, "swf", batch_size=500)
    stored = sum(1 for _ in repo.iter_jobs())
    assert stored >= 500 and stored % 500 == 0  # whole batches only
    assert f"({stored} rows in {stored // 500} batches were imported before it;" in str(err.value)


def test_a_file_of_another_format_is_an_error_not_an_empty_import(repo: SqlJobRepository, tmp_path: Path,
                                                                   cli, db_url: str) -> None:
    csv = tmp_path / "jobs.csv"
    csv.write_text("job_id,user,submit_time\n1,alice,2020-01-01 00:00:00\n2,bob,2020-01-01 00:01:00\n")
    with pytest.raises(TraceFormatError) as err:
        import_trace(repo, csv, "swf")
    assert str(err.value) == (f"{csv}: none of its 3 rows reads as swf (line 1: expected 18 SWF fields, "
                              "found 1): wrong format?")
    wrong = cli("history", "import", "--trace", str(csv), "--format", "swf", "--db", db_url)
    assert wrong.returncode == 2 and wrong.stderr == f"error: {err.value}\n"
    assert repo.count_jobs() == 0


def test_cluster_name_from_file_name() -> None:
    assert trace_cluster_name("/x/HPC2N-2002-2.2-cln.swf.gz") == "HPC2N-2002-2.2-cln"
    assert trace_cluster_name("itp.tar.gz:cluster04.csv") == "itp"
    assert trace_cluster_name("helios_venus.csv") == "helios_venus"


def test_cli_import_then_stats(db_url: str, tmp_path: Path, cli) -> None:
    swf = write_swf(tmp_path / "small.swf", jobs=300, corrupt_every=100)
    imported = cli("history", "import", "--trace", str(swf.path), "--format", "swf", "--db", db_url)
    assert imported.returncode == 0, imported.stderr
    assert f"imported {swf.good} new job attempts, 0 already present, from {swf.path} in 1 batch" in imported.stdout
    assert "skipped 3 bad lines: " + ", ".join(map(str, swf.bad_lines)) in imported.stdout

    again = cli("history", "import", "--trace", str(swf.path), "--format", "swf", "--db", db_url)
    assert again.returncode == 0, again.stderr
    assert f"imported 0 new job attempts, {swf.good} already present" in again.stdout

    as_json = cli("history", "import", "--trace", str(swf.path), "--format", "swf", "--db", db_url, "--json")
    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["rows"] == swf.good and report["bad_line_numbers"] == swf.bad_lines
    assert report["new"] == 0 and report["already_present"] == swf.good

    stats = cli("history", "stats", "--db", db_url, "--json")
    assert stats.returncode == 0, stats.stderr
    summary = json.loads(stats.stdout)
    assert summary["jobs"] == swf.good
    assert {u["name"]: u["jobs"] for u in summary["users"]} == dict(swf.users)
    assert sum(p["jobs"] for p in summary["partitions"]) == swf.good
    assert {p["name"] for p in summary["partitions"]} == {"batch", "short"}
    overshoot = summary["limit_overshoot"]
    assert overshoot["jobs"] == swf.good and overshoot["median_ratio"] >= 1.0

    text = cli("history", "stats", "--db", db_url)
    assert text.returncode == 0 and f"jobs: {swf.good}" in text.stdout


def test_console_script_round_trip(tmp_path: Path, cli_process) -> None:
    swf = write_swf(tmp_path / "small.swf", jobs=200, corrupt_every=100)
    env = {"SLURMSCHED_DAEMON_STATE_DIR": str(tmp_path / "state")}  # made by the import, with the database
    imported = cli_process("history", "import", "--trace", str(swf.path), "--format", "swf", env=env)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.startswith(f"imported {swf.good} new job attempts, 0 already present")
    assert (tmp_path / "state" / "slurmsched.db").is_file()
    stats = cli_process("history", "stats", "--json", env=env)
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["jobs"] == swf.good


def test_cli_errors_are_one_line(tmp_path: Path, cli) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    missing = cli("history", "import", "--trace", str(tmp_path / "nope.swf"), "--format", "swf", "--db", db)
    assert missing.returncode == 2
    assert missing.stderr == (f"error: cannot read trace {tmp_path / 'nope.swf'}: No such file or directory "
                              "(nothing was imported)\n")
    no_file = cli("history", "stats", "--db", f"sqlite:///{tmp_path / 'empty.db'}")
    assert no_file.returncode == 2
    assert no_file.stderr.strip() == (f"error: no database at {tmp_path / 'empty.db'}: run 'slurmsched db upgrade' "
                                      "(as the daemon's user)")
    assert not (tmp_path / "empty.db").exists()
    (tmp_path / "empty.db").touch()
    no_schema = cli("history", "stats", "--db", f"sqlite:///{tmp_path / 'empty.db'}")
    assert no_schema.returncode == 2
    assert no_schema.stderr.strip() == ("error: database schema is at empty, this slurmsched needs "
                                        f"{migrate.head_revision()}: run 'slurmsched db upgrade'")
    bad_url = cli("history", "stats", "--db", "mysql://x/y")
    assert bad_url.returncode == 2 and "unsupported database 'mysql'" in bad_url.stderr
    usage = cli("history", "import", "--db", db)
    assert usage.returncode == 2 and "give either --trace FILE --format FORMAT or --from-sacct" in usage.stderr


def test_history_stats_of_several_clusters_needs_cluster(repo: SqlJobRepository, cli, db_url: str) -> None:
    repo.ingest_finished([JobRecord(job_id=i, user=f"u{i}", submit_time=1e9 + i, start_time=1e9 + i,
                                    end_time=1e9 + i + 60, state=JobState.COMPLETED,
                                    cluster="site" if i <= 3 else "other") for i in range(1, 6)])
    pooled = cli("history", "stats", "--db", db_url, "--json")
    assert pooled.returncode == 2 and "several clusters ('other', 'site'): name one with --cluster" in pooled.stderr
    site = cli("history", "stats", "--db", db_url, "--cluster", "site", "--json")
    assert site.returncode == 0, site.stderr
    assert json.loads(site.stdout)["jobs"] == 3
    assert "SLURMSCHED_HISTORY_STATS_CLUSTER" in cli("history", "stats", "--help").stdout


def test_history_stats_shows_odd_names_safe_and_in_line(repo: SqlJobRepository, cli, db_url: str) -> None:
    """User and partition names reach the table printable (a newline or an escape sequence
    as ``?``) and cut to its 16 terminal columns, a wide (CJK) character counting two."""
    names = [("ev\nil\x1b[31m", "gpu\x1b]0;x\x07"), ("ユーザー名前ユーザー名前", "パーティション名前"), ("bob", "short")]
    repo.ingest_finished([JobRecord(job_id=i, user=user, partition=partition, submit_time=1e9 + i,
                                    start_time=1e9 + i, end_time=1e9 + i + 60, state=JobState.COMPLETED, cluster="c")
                          for i, (user, partition) in enumerate(names, 1)])
    result = cli("history", "stats", "--db", db_url)
    assert result.returncode == 0, result.stderr
    table = [line for line in result.stdout.split("\n\n", 1)[1].splitlines() if line]
    assert len(table) == 2 + 2 * len(names) and {columns(line) for line in table} == {62}
    cells = {line[:line.index("  ")].rstrip() for line in table}
    assert {"ev?il?[31m", "gpu?]0;x?", "ユーザー名前ユ~", "パーティション~"} < cells


def test_history_import_refuses_a_since_in_the_future(cli, db_url: str) -> None:
    future = cli("history", "import", "--from-sacct", "--since", "2099-01-01", "--db", db_url)
    assert future.returncode == 2 and "--since 2099-01-01 00:00 is in the future" in future.stderr


def test_history_import_refuses_options_of_the_other_source(tmp_path: Path, cli) -> None:
    """An option the chosen source does not use is an error, never ignored; the environment
    twin of one that has a default, set for the other kind of import, is not."""
    swf = write_swf(tmp_path / "t.swf", jobs=3)
    db = tmp_path / "x.db"
    trace = ("history", "import", "--trace", str(swf.path), "--format", "swf", "--db", f"sqlite:///{db}")
    since = cli(*trace, "--since", "2024-01-01T05:00")
    assert since.returncode == 2
    assert since.stderr.endswith("Error: --since is for --from-sacct, not --trace (a trace is imported whole)\n")
    window = cli(*trace, "--window", "2d", "--since", "1d")
    assert window.returncode == 2 and "Error: --since and --window are for --from-sacct, not --trace" in window.stderr
    sacct = ("history", "import", "--from-sacct", "--since", "30d", "--db", f"sqlite:///{db}")
    both = cli(*sacct, "--cluster", "other", "--batch-size", "5")
    assert both.returncode == 2
    assert both.stderr.endswith("Error: --cluster and --batch-size are for --trace, not --from-sacct\n")
    fmt = cli(*sacct, "--format", "eagle")
    assert fmt.returncode == 2 and fmt.stderr.endswith("Error: --format is for --trace, not --from-sacct\n")
    long_name = cli(*trace, "--cluster", "c" * 65)  # was cut to 64, so --cluster NAME never found it again
    assert long_name.returncode == 2
    assert long_name.stderr.endswith("Error: --cluster: at most 64 characters, the database's limit (got 65)\n")
    assert not db.exists()

    assert cli(*trace, env={"SLURMSCHED_HISTORY_IMPORT_WINDOW": "2d"}).returncode == 0
    no_slurm = cli(*sacct, env={"SLURMSCHED_HISTORY_IMPORT_BATCH_SIZE": "5",
                                "SLURMSCHED_SLURM_BIN_DIR": str(tmp_path / "no-slurm")})
    assert no_slurm.stderr == (f"error: sacct not found in {tmp_path / 'no-slurm'} (is slurm-client installed?) "
                               "(nothing was imported)\n")


def interrupted_after(items: Iterator[TraceItem], count: int) -> Iterator[TraceItem]:
    """``items``, then Ctrl-C as the reader would see it after ``count`` of them."""
    for n, item in enumerate(items):
        if n == count:
            raise KeyboardInterrupt
        yield item


def test_ctrl_c_keeps_the_written_batches_and_counts_them(repo: SqlJobRepository, tmp_path: Path) -> None:
    swf = write_swf(tmp_path / "site.swf", jobs=1000)
    stopped: BaseException | None = None
    try:
        import_items(repo, interrupted_after(iter_trace(swf.path, "swf"), 350), cluster="site", batch_size=100)
    except (ImportInterrupted, KeyboardInterrupt) as exc:  # a bare KeyboardInterrupt would end the test session
        stopped = exc
    # Three batches were sent; the third was still being written when the interrupt came.
    assert isinstance(stopped, ImportInterrupted)
    assert str(stopped) == ("import interrupted: 300 rows in 3 batches were imported (each batch whole); "
                              "importing the whole file again later adds only the rest")
    assert repo.count_jobs() == 300


def test_sigint_to_the_command_says_how_much_was_imported(tmp_path: Path) -> None:
    swf = write_swf(tmp_path / "big.swf", jobs=200_000)
    db = tmp_path / "h.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURMSCHED_")}
    proc = subprocess.Popen([sys.executable, "-m", "slurmsched", "--config", os.devnull, "history", "import",
                             "--trace", str(swf.path), "--format", "swf", "--batch-size", "1000",
                             "--db", f"sqlite:///{db}"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            preexec_fn=_interruptible)
    try:
        deadline = time.monotonic() + 60
        while _stored(db) == 0 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 2, stderr
    match = re.fullmatch(r"error: import interrupted: (\d+) rows in (\d+) batches were imported \(each batch "
                         r"whole\); importing the whole file again later adds only the rest\n", stderr)
    assert match, stderr
    assert int(match[1]) == _stored(db) == 1000 * int(match[2]) > 0
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def _interruptible() -> None:
    """In the child before exec: SIGINT back to its default. Tests run from a background
    job (``nohup``, ``&`` in a script) inherit it ignored, and Python then installs no
    KeyboardInterrupt handler, so the command would never see the Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stored(db: Path) -> int:
    """Rows in the ``jobs`` table of the SQLite file ``db`` (0 before it has one)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
            return conn.execute("SELECT count(*) FROM jobs").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
