"""``slurmsched history``: import job history (accounting or public traces), summarize it, purge old records."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource

from slurmsched.cli import get_config
from slurmsched.cli.db import DB_OPTION
from slurmsched.cli.output import fit, printable
from slurmsched.cli.params import Duration, Moment
from slurmsched.errors import SlurmError, TraceFormatError
from slurmsched.store import DEFAULT_BATCH
from slurmsched.store.selection import check_past, moment_text, one_cluster
from slurmsched.text import plural
from slurmsched.traces import FORMATS, iter_trace

if TYPE_CHECKING:
    from slurmsched.store.ingest import ImportReport
    from slurmsched.store.stats import HistoryStats

@click.group("history")
def history() -> None:
    """Import finished jobs into the history database, summarize them, purge old records."""


@history.command("import")
@click.option("--trace", "trace", type=click.Path(dir_okay=False), default=None,
              envvar="SLURMSCHED_HISTORY_IMPORT_TRACE", allow_from_autoenv=False, show_envvar=True,
              help="Public trace file to load (see --format); for itp also ARCHIVE:MEMBER.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              envvar="SLURMSCHED_HISTORY_IMPORT_FORMAT", allow_from_autoenv=False, show_envvar=True,
              help="With --trace: the trace's format.")
@click.option("--from-sacct", is_flag=True, envvar="SLURMSCHED_HISTORY_IMPORT_FROM_SACCT",
              allow_from_autoenv=False, show_envvar=True, help="Backfill from Slurm accounting (sacct).")
@click.option("--since", type=Moment(), default=None, envvar="SLURMSCHED_HISTORY_IMPORT_SINCE",
              allow_from_autoenv=False, show_envvar=True,
              help="With --from-sacct: jobs that ended since DATE (or 30d).")
@click.option("--window", "window_s", type=Duration(), default="1d", show_default=True,
              envvar="SLURMSCHED_HISTORY_IMPORT_WINDOW", allow_from_autoenv=False, show_envvar=True,
              help="With --from-sacct: end-time span written per transaction.")
@click.option("--cluster", default=None, envvar="SLURMSCHED_HISTORY_IMPORT_CLUSTER", allow_from_autoenv=False,
              show_envvar=True, help="With --trace: cluster name for jobs that carry none (default: file name).")
@click.option("--batch-size", type=click.IntRange(min=1), default=DEFAULT_BATCH, show_default=True,
              envvar="SLURMSCHED_HISTORY_IMPORT_BATCH_SIZE", allow_from_autoenv=False, show_envvar=True,
              help="With --trace: rows per transaction.")
@DB_OPTION
@click.option("--json", "as_json", is_flag=True, envvar="SLURMSCHED_HISTORY_IMPORT_JSON", allow_from_autoenv=False,
              show_envvar=True, help="Print the result as one JSON object.")
@click.pass_context
def import_(ctx: click.Context, trace: str | None, fmt: str | None, from_sacct: bool, since: float | None,
            window_s: float, cluster: str | None, batch_size: int, db_url: str | None, as_json: bool) -> None:
    """Load finished jobs from a trace file (--trace F --format X) or from accounting (--from-sacct --since D).

    Importing is idempotent: a job attempt already stored is updated, not duplicated; the
    summary says how many attempts were new and how many were already present.
    Unreadable trace lines are skipped and reported by line number. Ctrl-C stops after the
    batch being written and says how many rows were imported. An option of the other
    source is refused when given on the command line, and unused when set in its
    environment variable.
    """
    if (trace is None) == (not from_sacct):
        raise click.UsageError("give either --trace FILE --format FORMAT or --from-sacct --since DATE")
    if trace is not None:
        _refuse_options(ctx, ("since", "window_s"), "--from-sacct, not --trace (a trace is imported whole)")
    else:
        _refuse_options(ctx, ("fmt", "cluster", "batch_size"), "--trace, not --from-sacct")
    if trace is not None and fmt is None:
        raise click.UsageError("--trace needs --format (one of " + ", ".join(FORMATS) + ")")
    if cluster is not None:
        from slurmsched.store.schema import CLUSTER_CHARS

        if len(cluster) > CLUSTER_CHARS:
            raise click.UsageError(f"--cluster: at most {CLUSTER_CHARS} characters, the database's limit "
                                   f"(got {len(cluster)})")
    if from_sacct and since is None:
        raise click.UsageError("--from-sacct needs --since DATE")
    check_past(since)
    if trace is not None:
        assert fmt is not None  # checked above
        _check_trace(trace, fmt)
    from tqdm import tqdm

    from slurmsched.store.ingest import import_accounting, import_trace, read_accounting
    from slurmsched.store.repository import open_repository

    config = get_config(ctx)
    accounting = None
    if from_sacct:  # read before the database is opened, as the trace is checked: a failed read creates nothing
        from slurmsched.gateway import make_gateway

        assert since is not None  # checked above
        try:
            accounting = read_accounting(make_gateway(config), since)
        except SlurmError as exc:
            raise type(exc)(f"{exc} (nothing was imported)") from None
    repo = open_repository(config, create=True, url=db_url)
    try:
        with tqdm(unit=" jobs", desc="importing", disable=None, leave=False) as bar:
            if accounting is not None:
                report = import_accounting(repo, accounting, window_s=window_s, progress=bar)
                source = "accounting"
            else:
                assert trace is not None and fmt is not None  # checked above
                report = import_trace(repo, trace, fmt, cluster=cluster, batch_size=batch_size, progress=bar)
                source = trace
    finally:
        repo.close()
    if as_json:
        click.echo(json.dumps(_report_json(report)))
    else:
        click.echo(report.summary(source))


def _refuse_options(ctx: click.Context, names: tuple[str, ...], owner: str) -> None:
    """Refuse the options ``names`` (parameter names) where given on the command line: they
    belong to ``owner``, the other source (an environment twin or a default is not refused).

    Raises:
        click.UsageError: ``--a and --b are for OWNER``, naming each of them given.
    """
    given = [param.opts[0] for param in ctx.command.params
             if param.name in names and ctx.get_parameter_source(param.name) is ParameterSource.COMMANDLINE]
    if given:
        listed = given[0] if len(given) == 1 else f"{', '.join(given[:-1])} and {given[-1]}"
        raise click.UsageError(f"{listed} {'is' if len(given) == 1 else 'are'} for {owner}")


def _check_trace(trace: str, fmt: str) -> None:
    """Read the trace's first row now, before the database is opened: a mistyped path
    must not leave a new (or newly migrated) empty database behind.

    Raises:
        TraceFormatError: the trace cannot be read (no such file, not readable, a CSV
            header without the format's columns), naming its path; nothing was imported.
    """
    try:
        next(iter_trace(trace, fmt), None)  # the reader, dropped at once, closes the file
    except TraceFormatError as exc:
        raise TraceFormatError(f"{exc} (nothing was imported)") from None


def _report_json(report: "ImportReport") -> dict[str, object]:
    return {"rows": report.rows, "new": report.new, "already_present": report.present, "batches": report.batches,
            "bad_lines": len(report.bad_lines), "bad_line_numbers": [b.lineno for b in report.bad_lines],
            "no_processors": report.no_processors,
            "seconds": round(report.seconds, 3), "rows_per_s": round(report.rows_per_s, 1)}


@history.command("stats")
@DB_OPTION
@click.option("--cluster", "cluster_name", metavar="NAME", default=None, envvar="SLURMSCHED_HISTORY_STATS_CLUSTER",
              allow_from_autoenv=False, show_envvar=True,
              help="The cluster to summarize (default: the only one in the history).")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True,
              envvar="SLURMSCHED_HISTORY_STATS_TOP", allow_from_autoenv=False, show_envvar=True,
              help="Users and partitions to list (most jobs first).")
@click.option("--json", "as_json", is_flag=True, envvar="SLURMSCHED_HISTORY_STATS_JSON", allow_from_autoenv=False,
              show_envvar=True, help="Print one JSON object ({\"jobs\": N, ...}).")
@click.pass_context
def stats(ctx: click.Context, db_url: str | None, cluster_name: str | None, top: int, as_json: bool) -> None:
    """Per-user and per-partition counts, run-time percentiles, and how far time limits overshoot.

    One cluster's jobs: --cluster NAME, required when the database holds several.
    """
    from slurmsched.store.repository import open_repository
    from slurmsched.store.stats import summarize

    repo = open_repository(get_config(ctx), url=db_url, read_only=True)
    try:
        summary = summarize(one_cluster(repo.iter_jobs(), cluster_name), top=top)
    finally:
        repo.close()
    if as_json:
        click.echo(json.dumps(dataclasses.asdict(summary)))
    else:
        click.echo(_render(summary))


def _hms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    days, rest = divmod(seconds, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}x"


def _render(s: "HistoryStats") -> str:
    lines = [f"jobs: {s.jobs} ({s.with_runtime} with a run time)"]
    if s.runtime_s is not None:
        p = s.runtime_s
        lines.append(f"run time p10 {_hms(p.p10)}  p50 {_hms(p.p50)}  p90 {_hms(p.p90)}  p99 {_hms(p.p99)}")
    o = s.limit_overshoot
    if o is not None:
        lines.append(f"time limit vs run time ({plural(o.jobs, 'job')} with both): median {_ratio(o.median_ratio)}, "
                     f"p90 {_ratio(o.p90_ratio)}, median excess {_hms(o.median_excess_s)}; "
                     f"{o.share_over_2x:.0%} asked > 2x, {o.share_over_10x:.0%} > 10x, "
                     f"{o.share_at_limit:.0%} ran into their limit")
    for title, groups in (("user", s.users), ("partition", s.partitions)):
        lines.append("")
        lines.append(f"{title:<16} {'jobs':>8} {'p50 run':>12} {'p90 run':>12} {'limit/run':>10}")
        for g in groups:
            lines.append(f"{fit(printable(g.name or '-'), 16)} {g.jobs:>8} {_hms(g.runtime_p50_s):>12} "
                         f"{_hms(g.runtime_p90_s):>12} {_ratio(g.median_limit_ratio):>10}")
    return "\n".join(lines)


@history.command("purge")
@click.option("--before", type=Moment(), required=True, envvar="SLURMSCHED_HISTORY_PURGE_BEFORE",
              allow_from_autoenv=False, show_envvar=True,
              help="Delete what is older than DATE, or than an age such as 180d.")
@click.option("--jobs", is_flag=True, envvar="SLURMSCHED_HISTORY_PURGE_JOBS", allow_from_autoenv=False,
              show_envvar=True, help="Also finished jobs that ended before it (none a fit learns from).")
@click.option("--dry-run", is_flag=True, envvar="SLURMSCHED_HISTORY_PURGE_DRY_RUN", allow_from_autoenv=False,
              show_envvar=True, help="Count what would be deleted; delete nothing.")
@click.option("--json", "as_json", is_flag=True, envvar="SLURMSCHED_HISTORY_PURGE_JSON", allow_from_autoenv=False,
              show_envvar=True, help="Print the counts as one JSON object.")
@DB_OPTION
@click.pass_context
def purge(ctx: click.Context, before: float, jobs: bool, dry_run: bool, as_json: bool, db_url: str | None) -> None:
    """Delete old cycle records (with their predictions and decisions) and queue transitions.

    They feed `status`, `explain` and audits, and grow with every job the daemon sees.
    With --jobs, finished jobs that ended before DATE go too, but never one a fit still
    learns from (the newest daemon.fit_history_jobs). Runs beside the daemon: it deletes in small
    transactions, oldest first, and never touches what the daemon acts on (changes in
    force, the live queue, the saved model, the pause flag).
    """
    from slurmsched.store.repository import open_repository

    config = get_config(ctx)
    check_past(before, "--before", "180d")
    limit = config.daemon.fit_limit
    if jobs and limit is None:
        raise click.UsageError("--jobs: daemon.fit_history_jobs is 0, so a fit learns from every finished job; "
                               "bound it first")
    repo = open_repository(config, url=db_url)
    try:
        if jobs:
            assert limit is not None  # refused above
            _refuse_learned(repo.nth_newest_end(limit), before, limit)
        report = repo.purge(before, history=jobs, dry_run=dry_run)
    finally:
        repo.close()
    if as_json:
        click.echo(json.dumps(dataclasses.asdict(report)))
        return
    text = (f"{plural(report.cycles, 'cycle')} (with {plural(report.predictions, 'prediction')} and "
            f"{plural(report.decisions, 'decision')}) and {plural(report.transitions, 'queue transition')}")
    if report.jobs is not None:
        text += f", {plural(report.jobs, 'finished job')}"
    click.echo(f"{'would delete' if dry_run else 'deleted'} {text} from before {moment_text(before)}")


def _refuse_learned(horizon: float | None, before: float, limit: int) -> None:
    """Refuse ``purge --jobs --before`` a time after ``horizon``, the end of the oldest of the
    newest ``limit`` finished jobs (``None``: fewer have finished), which a fit learns from.

    Raises:
        click.UsageError: naming ``daemon.fit_history_jobs`` and the latest ``--before`` allowed.
    """
    learned = f"a fit learns from the newest {limit:,} finished jobs (daemon.fit_history_jobs)"
    if horizon is None:
        raise click.UsageError(f"--jobs: {learned}, and the history holds fewer: none may go")
    if before > horizon:
        raise click.UsageError(f"--jobs: {learned}, which ended since {moment_text(horizon)}: give that --before "
                               "or an earlier one")


COMMANDS = [history]
