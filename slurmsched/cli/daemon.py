"""Daemon commands: ``run``, ``status``, ``explain``, ``pause``, ``resume``, ``revert``, ``config check``.

Every option has an environment twin: options that mirror a config key use that key's
variable (``--interval`` = ``SLURMSCHED_DAEMON_INTERVAL_S``), the rest
``SLURMSCHED_<COMMAND>_<OPTION>``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import time
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence, cast

import click

from slurmsched.cli import get_config
from slurmsched.cli.params import Duration, JobId
from slurmsched.config import Config, DbSection, PolicySection
from slurmsched.errors import DatabaseOfAnotherCluster, SlurmError, SlurmschedError
from slurmsched.model import Decision, JobRecord, Prediction
from slurmsched.policy.qssf import gpu_time, span
from slurmsched.store.connect import mask_password
from slurmsched.store.protocol import AppliedChange, CycleSummary, JobRepository
from slurmsched.text import plural

if TYPE_CHECKING:
    from slurmsched.gateway.protocol import SlurmGateway
    from slurmsched.store.repository import SqlJobRepository

PAUSED_HINT = "run 'slurmsched resume' to let it act again"


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h" if seconds >= 360 else f"{seconds:.0f} s"


def _service(score: float | None) -> str:
    """A QSSF score (GPU-seconds) for humans, as the policy's reasons write it; 0 means
    the aging guard was reached."""
    if score == 0:
        return "aging guard reached"
    if score is None:
        return "no score"
    return f"score {gpu_time(score, 2)}"


def _prediction(prediction: Prediction) -> str:
    """``prediction: ...``: the estimate, its likely range when it has one, and its source,
    in the units the policy's reasons use (``5 min`` there, not ``300 s`` here)."""
    spread = (f" (likely {span(prediction.low_s)} to {span(prediction.high_s)})"
              if prediction.low_s < prediction.high_s else "")
    return (f"prediction: {span(prediction.estimate_s)}{spread}, from {prediction.source}"
            + (f" [model {prediction.model_version}]" if prediction.model_version else ""))


def _repository(config: Config, *, read_only: bool = False):
    """The configured store, its schema checked; ``read_only`` for commands that only read
    (``status``, ``explain``, ``config check``): a SQLite file this user cannot write, as
    a member of ``db.readers_group``, is then opened read-only."""
    from slurmsched.store.repository import open_repository

    return open_repository(config, read_only=read_only)


def _pause(config: Config, repo: JobRepository) -> tuple[str, bool]:
    """Set the pause flag and remove the submit cache (job_submit.lua then leaves new jobs alone).

    Returns what became of the cache, for the command's message (``""`` when there was
    none), and whether it is gone. One that cannot be removed (``daemon.submit_cache``
    names a directory, or one this user cannot write) is said so; the paused daemon
    removes it at its next cycle.
    """
    repo.set_paused(True)
    path = config.daemon.submit_cache_path
    try:
        path.unlink()
    except FileNotFoundError:
        return "", True
    except OSError as exc:
        return f"submit cache {path} NOT removed ({exc.strerror}): the daemon removes it at its next cycle", False
    return "submit cache removed, job_submit.lua leaves new jobs alone", True


def _claim_for_revert(gateway: "SlurmGateway", repo: JobRepository) -> None:
    """Refuse to revert (or pause) another cluster's database (:meth:`JobRepository.claim`)
    before anything is changed. A Slurm that does not answer names no cluster: the revert
    then pauses all the same, and stops at its first read of the queue."""
    try:
        cluster = gateway.snapshot().cluster
    except SlurmError:
        return
    repo.claim(cluster)


# --- run ---------------------------------------------------------------------------------

@click.command("run")
@click.option("--interval", type=Duration(), default=None, envvar="SLURMSCHED_DAEMON_INTERVAL_S",
              allow_from_autoenv=False, show_envvar=True,
              help="Time between cycles (3600, 90s, 5m); default daemon.interval_s.")
@click.option("--once", is_flag=True, envvar="SLURMSCHED_RUN_ONCE", show_envvar=True,
              help="Run one cycle and exit (status 2 if it failed); slurmsched -v run --once logs what it did.")
@click.option("--dry-run/--no-dry-run", "dry_run", default=None, envvar="SLURMSCHED_DAEMON_DRY_RUN",
              allow_from_autoenv=False, show_envvar=True,
              help="Plan and record, send nothing to Slurm, leave the submit cache alone; default daemon.dry_run.")
@click.option("--policy", default=None, envvar="SLURMSCHED_POLICY_NAME", allow_from_autoenv=False,
              show_envvar=True,
              help="Queue policy: qssf, qssf-noaging or fifo; default policy.name.")
@click.option("--predictor", default=None, envvar="SLURMSCHED_DAEMON_PREDICTOR", allow_from_autoenv=False,
              show_envvar=True,
              help="Duration predictor; default daemon.predictor.")
@click.pass_context
def run(ctx: click.Context, interval: float | None, once: bool, dry_run: bool | None, policy: str | None,
        predictor: str | None) -> None:
    """Run the scheduling loop (SIGTERM/SIGINT: stop after this cycle; twice: stop now)."""
    from slurmsched.daemon import build_daemon

    config = (get_config(ctx).with_overrides("daemon", interval_s=interval, dry_run=dry_run, predictor=predictor)
              .with_overrides("policy", name=policy))
    daemon = build_daemon(config)
    try:
        result = daemon.run(once=once)
    finally:
        cast("SqlJobRepository", daemon.repository).close()  # build_daemon opens the SQL store
    if result.interrupted:
        ctx.exit(130)


# --- status ------------------------------------------------------------------------------

def _prediction_error(repo: SqlJobRepository, now: float, limit: int = 200) -> tuple[int, float, float] | None:
    """(jobs, median |log2(predicted/actual)|, share within 2x) over recent finished jobs."""
    errors = []
    for job in repo.history(since=now - 30 * 86400)[-limit:]:
        prediction = repo.latest_prediction(job.job_id, before=job.end_time)  # not a later job's of its id
        runtime = job.runtime_s
        if prediction is None or not runtime or prediction.estimate_s <= 0:
            continue
        errors.append(abs(math.log2(prediction.estimate_s / max(runtime, 1.0))))
    if not errors:
        return None
    return len(errors), statistics.median(errors), sum(e <= 1.0 for e in errors) / len(errors)


def _stalled(recent: Sequence[CycleSummary], interval_s: float, now: float) -> str | None:
    """A warning when no cycle has started for over two intervals after the last one ended
    (and a minute of slack): the daemon is stopped or stuck. None while cycles come on time.

    The interval is the config's, or the median gap between the listed cycles of the last
    one's kind when that is longer (a daemon started with a longer ``run --interval``).
    """
    last = recent[0]
    starts = [c.started_at for c in recent if c.kind == last.kind]
    gaps = [a - b for a, b in zip(starts, starts[1:])]
    interval_s = max(interval_s, statistics.median(gaps)) if gaps else interval_s
    overdue = now - (last.started_at + last.duration_s) - 2 * interval_s - 60
    if overdue <= 0:
        return None
    return f"WARNING: no cycle for {_hours(now - last.started_at)} (interval {interval_s:g} s): is 'slurmsched run' running?"


#: Version of ``status --json``'s document (its ``format`` key).
STATUS_JSON_FORMAT = 1


@click.command("status")
@click.option("--cycles", type=click.IntRange(1, 1000), default=10, show_default=True,
              envvar="SLURMSCHED_STATUS_CYCLES", show_envvar=True, help="How many recent cycles to list.")
@click.option("--json", "as_json", is_flag=True, envvar="SLURMSCHED_STATUS_JSON", allow_from_autoenv=False,
              show_envvar=True, help="Print one JSON document (for monitoring) instead of text.")
@click.pass_context
def status(ctx: click.Context, cycles: int, as_json: bool) -> None:
    """Last cycles (live, dry-run, paused or revert), queue size, actions taken, changes in force, prediction error."""
    from slurmsched.submit_cache import read_submit_cache

    config = get_config(ctx)
    now = time.time()
    with closing(_repository(config, read_only=True)) as repo:
        recent = repo.recent_cycles(cycles)
        paused = repo.is_paused()
        applied = repo.applied_changes()
        model = repo.load_model(config.daemon.predictor)
        error = _prediction_error(repo, now)
        url, owner = repo.url, repo.owner()
    stalled = _stalled(recent, config.daemon.interval_s, now) if recent else None
    kinds: dict[str, int] = {}
    for change in applied:
        kinds[change.kind] = kinds.get(change.kind, 0) + 1
    changed_jobs = len({c.job_id for c in applied})
    path = config.daemon.submit_cache_path
    try:
        cache, cache_error = read_submit_cache(path), None
    except SlurmschedError as exc:
        cache, cache_error = None, str(exc)
    if as_json:
        click.echo(json.dumps({
            "format": STATUS_JSON_FORMAT, "database": url, "cluster": owner, "paused": paused,
            "policy": config.policy.name,
            "planner": config.planner.mode, "interval_s": config.daemon.interval_s, "now": now,
            "warning": stalled,
            "cycles": [{"id": c.cycle_id, "started_at": c.started_at, "duration_s": c.duration_s, "kind": c.kind,
                        "pending": c.pending, "running": c.running, "actions": c.actions, "failed": c.failed}
                       for c in recent],
            "changes_in_force": kinds, "jobs_changed": changed_jobs,
            "prediction_error": None if error is None else
            {"jobs": error[0], "median_factor": 2 ** error[1], "within_2x": error[2]},
            "model": None if model is None else
            {"predictor": config.daemon.predictor, "version": model[0], "fitted_at": model[2].get("fitted_at")},
            "submit_cache": {"path": str(path), "error": cache_error,
                             "estimates": None if cache is None else len(cache.estimates),
                             "written_at": None if cache is None else cache.written_at,
                             "in_use": cache is not None and cache.fresh(now)},
        }))
        return
    click.echo(f"database: {url} " + (f"(the state of cluster {owner!r}'s daemon)" if owner is not None
                                      else "(claimed by no cluster yet)"))
    click.echo(f"state: {'PAUSED (' + PAUSED_HINT + ')' if paused else 'active'}; configured: policy "
               f"{config.policy.name}, planner {config.planner.mode}, interval {config.daemon.interval_s:g} s")
    if not recent:
        click.echo("no cycle has run yet")
    else:
        last = recent[0]
        click.echo(f"last cycle {last.cycle_id} at {_when(last.started_at)} ({now - last.started_at:.0f} s ago, "
                   f"{last.kind}): {last.pending} pending, {last.running} running")
        if stalled:
            click.echo(stalled)
        click.echo(f"{'cycle':>7} {'started':19} {'took':>7} {'pending':>8} {'running':>8} {'actions':>8} "
                   f"{'failed':>7}  mode")
        for c in recent:
            click.echo(f"{c.cycle_id:>7} {_when(c.started_at):19} {c.duration_s:>6.2f}s {c.pending:>8} "
                       f"{c.running:>8} {c.actions:>8} {c.failed:>7}  {c.kind}")
    click.echo("changes in force: " + (", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
                                       + f" on {plural(changed_jobs, 'job')}" if applied else "none"))
    if error is None:
        click.echo("prediction error: no finished job with a prediction yet")
    else:
        n, median, within = error
        click.echo(f"prediction error over the last {n} finished jobs: median {2 ** median:.2f}x off, "
                   f"{within:.0%} within 2x")
    if model is not None:
        version, _, meta = model
        click.echo(f"model: {config.daemon.predictor} {version}, fitted {_when(float(meta.get('fitted_at', 0)))}")
    if cache_error is not None:
        click.echo(f"submit cache: {cache_error}")
    elif cache is None:
        click.echo(f"submit cache {path}: absent (job_submit.lua leaves new jobs alone)")
    else:
        age = now - cache.written_at
        state = "in use" if cache.fresh(now) else "STALE: ignored by job_submit.lua"
        click.echo(f"submit cache {path}: {plural(len(cache.estimates), 'estimate')}, written {age:.0f} s ago "
                   f"({state})")


# --- explain -----------------------------------------------------------------------------

#: Version of ``explain --json``'s document (its ``format`` key).
EXPLAIN_JSON_FORMAT = 1


@dataclasses.dataclass(frozen=True, slots=True)
class JobNow:
    """The job as Slurm shows it now: what ``explain`` reports on its ``now:`` line.

    Attributes:
        job: the job in Slurm's queue; ``None`` when it is not queued or Slurm could not be read.
        ahead: pending jobs of its partition before it in Slurm's order (a higher priority,
            or the same and submitted earlier; held jobs and jobs not yet eligible are in
            no line); ``None`` unless it is pending, not held and eligible.
        unknown: why Slurm could not be read; ``None`` when it was.
    """

    job: JobRecord | None
    ahead: int | None = None
    unknown: str | None = None

    @property
    def pending(self) -> JobRecord | None:
        """The job, when it is pending."""
        return self.job if self.job is not None and self.job.state.value == "PENDING" else None


@dataclasses.dataclass(frozen=True, slots=True)
class InForce:
    """A change in force on the job, and what Slurm holds for it now.

    Attributes:
        change: the change as the database records it.
        live: the job's value of ``change.kind`` in Slurm's queue, read as ``revert`` reads
            it (:func:`~slurmsched.planner.changes.live_text`); ``None`` unless the job is
            pending and the queue shows that kind exactly (SiteFactor, Features, Switches).
    """

    change: AppliedChange
    live: str | None

    @property
    def overridden(self) -> bool:
        """Slurm holds another value than slurmsched's (set outside slurmsched)."""
        return self.live is not None and self.live != self.change.current


@dataclasses.dataclass(frozen=True, slots=True)
class Explanation:
    """Everything ``explain`` tells about one job, gathered once for its text and its JSON.

    Attributes:
        job_id: the job.
        now: the job as Slurm shows it now.
        prediction: its latest prediction, or ``None``.
        ranking: when and with which decision it was last ranked (a "rank" line or an
            action, which records the rank and score that made it), or ``None``.
        in_force: the changes in force on it.
        history: every ranking and action recorded for it, oldest first, with its time.
        id_reused_at: when an earlier job with this id was seen leaving the queue before
            this one arrived (its records are left out), or ``None``.
    """

    job_id: int
    now: JobNow
    prediction: Prediction | None
    ranking: tuple[float, Decision] | None
    in_force: list[InForce]
    history: list[tuple[float, Decision]]
    id_reused_at: float | None


def _reused(at: float) -> str:
    return f"the records of an earlier job with this id, which left the queue at {_when(at)}, are not shown"


def _describe_decision(at: float, d: Decision) -> str:
    if d.kind == "rank":
        return f"{_when(at)}  rank #{d.rank}  {_service(d.score)}: {d.reason}"
    change = f"{d.previous} -> {d.new}" if d.previous is not None or d.new is not None else ""
    return f"{_when(at)}  {d.kind} {change}  [{d.outcome}]  {d.reason}"


def _job_now(config: Config, job_id: int) -> JobNow:
    """The job as Slurm shows it now.

    explain's story comes from the database and stays useful while slurmctld is down or
    on a host without Slurm's config, so why Slurm could not be read is returned
    (``unknown``), not raised.
    """
    from slurmsched.gateway import make_gateway

    try:
        snap = make_gateway(config).snapshot()
    except SlurmschedError as exc:
        return JobNow(None, unknown=str(exc))
    now = JobNow(next((j for j in snap.jobs if j.job_id == job_id), None))
    job = now.pending
    return now if job is None else JobNow(job, jobs_ahead(job, snap.pending, snap.taken_at))


def jobs_ahead(job: JobRecord, pending: Sequence[JobRecord], now: float) -> int | None:
    """How many of the ``pending`` jobs of ``job``'s partition Slurm takes before it: a
    higher priority, or the same one and submitted earlier. ``None`` for a job in no line:
    held (priority 0), or not eligible until later (``--begin``); such jobs are ahead of none."""
    def in_line(j: JobRecord) -> bool:
        return j.priority != 0 and (j.eligible_time is None or j.eligible_time <= now)

    if not in_line(job):
        return None

    def place(j: JobRecord) -> tuple[int, float, int]:
        return -(j.priority or 0), j.submit_time, j.job_id

    mine = place(job)
    return sum(1 for j in pending if j.partition == job.partition and in_line(j) and place(j) < mine)


def _now_line(now: JobNow) -> str:
    """The ``now: ...`` line: the job's state, or why Slurm could not be read."""
    job = now.job
    if now.unknown is not None:
        return f"now: unknown ({now.unknown})"
    if job is None:
        return "now: not in Slurm's queue (finished, cancelled or removed)"
    if now.pending is None:
        return f"now: {job.state.value}" + (f" since {_when(job.start_time)}" if job.start_time else "")
    if now.ahead is not None:
        place = f"{plural(now.ahead, 'job')} ahead in {job.partition}"
    elif job.priority == 0 or job.eligible_time is None:
        place = "held: in no line"
    else:
        place = f"not eligible before {_when(job.eligible_time)}: in no line yet"
    return (f"now: PENDING ({job.reason or 'None'}): priority {job.priority}, SiteFactor "
            f"{'-' if job.site_factor is None else job.site_factor}, {place}")


def _in_force(item: InForce) -> str:
    """One change in force, and where the pending job holds another value, that value too."""
    change = item.change
    text = f"{change.kind} {change.original or '(none)'} -> {change.current}"
    if item.overridden:
        text += f" (but Slurm holds {item.live}: set outside slurmsched?)"
    return text


@dataclasses.dataclass(frozen=True, slots=True)
class NoRecord:
    """``explain``'s finding when slurmsched has no record of the job.

    Attributes:
        id_reused_at: as :attr:`Explanation.id_reused_at` (an earlier job's records exist).
    """

    id_reused_at: float | None


def _explanation(config: Config, job_id: int) -> Explanation | NoRecord:
    """What the database records about the job and what Slurm shows of it now, or
    :class:`NoRecord` (Slurm is not asked then).

    Only the records of the newest job with this id are told: a job id comes back after
    slurmctld lost its state or wrapped at ``MaxJobId``."""
    from slurmsched.planner.changes import live_text

    with closing(_repository(config, read_only=True)) as repo:
        reused_at = repo.id_reused_at(job_id)
        prediction = repo.latest_prediction(job_id, since=reused_at)
        decisions = repo.decisions_for(job_id, since=reused_at)
        changes = [c for c in repo.applied_changes() if c.job_id == job_id]
    if prediction is None and not decisions:
        return NoRecord(reused_at)
    now = _job_now(config, job_id)
    pending = now.pending
    # A cycle records a "rank" line only when the job's prediction changes; an action
    # records the rank and score that made it, so the latest of either is the latest ranking.
    ranks = [(at, d) for at, d in decisions if d.rank is not None]
    return Explanation(job_id, now, prediction, ranks[-1] if ranks else None,
                       [InForce(c, None if pending is None else live_text(pending, c.kind)) for c in changes],
                       decisions, reused_at)


def explain_document(e: Explanation) -> dict[str, Any]:
    """``explain --json``'s document: ``format`` (:data:`EXPLAIN_JSON_FORMAT`), ``job_id``;
    ``now`` (``queued``, and the queued job's ``state``, ``reason``, ``priority``,
    ``site_factor``, ``partition``, ``start_time`` and ``jobs_ahead``, null unless pending,
    not held and eligible), or ``null`` with ``unknown`` saying why Slurm could not be
    read; ``prediction`` (the record's fields) or ``null``; ``latest_ranking`` (``at``,
    ``rank``, ``score``) or ``null``; ``in_force`` (``field``, ``original``, ``value`` and
    ``slurm_holds``); ``history``, each decision's fields with its time ``at``; and
    ``id_reused_at``, when an earlier job with this id (whose records are left out) was
    seen leaving the queue, or ``null``. Times are epoch seconds."""
    job = e.now.job
    now = None if e.now.unknown is not None else {
        "queued": job is not None,
        **{key: None if job is None else getattr(job, key)
           for key in ("state", "reason", "priority", "site_factor", "partition", "start_time")},
        "jobs_ahead": e.now.ahead}
    return {
        "format": EXPLAIN_JSON_FORMAT, "job_id": e.job_id, "now": now, "unknown": e.now.unknown,
        "prediction": None if e.prediction is None else dataclasses.asdict(e.prediction),
        "latest_ranking": None if e.ranking is None else
        {"at": e.ranking[0], "rank": e.ranking[1].rank, "score": e.ranking[1].score},
        "in_force": [{"field": i.change.kind, "original": i.change.original, "value": i.change.current,
                      "slurm_holds": i.live} for i in e.in_force],
        "history": [{"at": at, **dataclasses.asdict(d)} for at, d in e.history],
        "id_reused_at": e.id_reused_at,
    }


@click.command("explain")
@click.argument("job_id", type=JobId())
@click.option("--json", "as_json", is_flag=True, envvar="SLURMSCHED_EXPLAIN_JSON", allow_from_autoenv=False,
              show_envvar=True, help="Print one JSON document (for monitoring and portals) instead of text.")
@click.pass_context
def explain(ctx: click.Context, job_id: int, as_json: bool) -> None:
    """Why a job sits where it does: prediction and source, score, rank, every action and why."""
    e = _explanation(get_config(ctx), job_id)
    if isinstance(e, NoRecord):
        click.echo(f"no record of job {job_id}: slurmsched has not seen it pending"
                   + ("" if e.id_reused_at is None else f" ({_reused(e.id_reused_at)})"), err=True)
        ctx.exit(1)
    if as_json:
        click.echo(json.dumps(explain_document(e)))
        return
    click.echo(f"job {job_id}" + ("" if e.id_reused_at is None else f" ({_reused(e.id_reused_at)})"))
    click.echo(_now_line(e.now))
    if e.prediction is not None:
        click.echo(_prediction(e.prediction))
    if e.ranking is not None:
        at, last = e.ranking
        click.echo(f"latest ranking ({_when(at)}): #{last.rank}, {_service(last.score)}")
    click.echo("in force: " + ("; ".join(_in_force(i) for i in e.in_force) or "nothing (job untouched or restored)"))
    click.echo("history:")
    for at, decision in e.history:
        click.echo("  " + _describe_decision(at, decision))


# --- pause / resume ----------------------------------------------------------------------

@click.command("pause")
@click.pass_context
def pause(ctx: click.Context) -> None:
    """Stop changing jobs from the next cycle on (and at once for new submissions)."""
    config = get_config(ctx)
    with closing(_repository(config)) as repo:
        cache, _ = _pause(config, repo)
    click.echo("paused: the daemon applies nothing from its next cycle on" + (f"; {cache}" if cache else "")
               + ". Values already set stay; 'slurmsched revert' restores them.")


@click.command("resume")
@click.pass_context
def resume(ctx: click.Context) -> None:
    """Let the daemon change jobs again."""
    with closing(_repository(get_config(ctx))) as repo:
        repo.set_paused(False)
    click.echo("resumed: the daemon acts again from its next cycle on")


# --- revert ------------------------------------------------------------------------------

@click.command("revert")
@click.option("--dry-run", is_flag=True, envvar="SLURMSCHED_REVERT_DRY_RUN", show_envvar=True,
              help="List what would be restored; send nothing to Slurm and do not pause.")
@click.pass_context
def revert(ctx: click.Context, dry_run: bool) -> None:
    """Pause, then restore every job slurmsched changed; report how many."""
    from slurmsched.daemon import kept_text, plan_revert, revert_all
    from slurmsched.gateway import make_gateway
    from slurmsched.planner import describe

    config = get_config(ctx)
    gateway = make_gateway(config)
    with closing(_repository(config)) as repo:
        if dry_run:
            snapshot = gateway.snapshot()
            repo.check_cluster(snapshot.cluster)
            plan = plan_revert(snapshot, repo.applied_changes())
            for action in plan.actions:
                kind, current, restored = describe(action)
                click.echo(f"job {action.job_id}: {kind} {current} -> {restored}  ({action.reason})")
            for change, live in plan.left:
                click.echo(f"job {change.job_id}: {change.kind} is {live}, not slurmsched's {change.current}:"
                           " would be left as it is")
            for change, state in plan.kept:
                click.echo(f"would keep: {kept_text(change, state)}")
            click.echo(f"would restore {plural(len(plan.actions), 'change')} on "
                       f"{plural(len({a.job_id for a in plan.actions}), 'job')}"
                       + (f"; would drop {plural(len(plan.gone), 'record')} of jobs that left the queue"
                          if plan.gone else "") + ". Dry run: nothing sent, not paused.")
            return
        _claim_for_revert(gateway, repo)
        cache, gone = _pause(config, repo)
        if not gone:  # said before the restores, so a revert that stops does not hide it
            click.echo(f"warning: {cache}", err=True)
        try:
            report = revert_all(gateway, repo)
        except SlurmError as exc:
            raise SlurmError(f"slurmsched is paused, but the revert stopped: {exc}. Run 'slurmsched revert' "
                             "again once Slurm answers: it restores what is left") from exc
    click.echo(f"reverted {plural(report.reverted, 'change')} on {plural(report.jobs, 'job')}"
               + (f" ({', '.join(f'{n} {k}' for k, n in sorted(report.kinds.items()))})" if report.kinds else "")
               + (f"; {plural(report.forgotten, 'record')} of jobs that left the queue dropped" if report.forgotten
                  else ""))
    for line in report.left:
        click.echo(f"left alone: {line}")
    for line in report.kept:
        click.echo(f"kept: {line}")
    for line in report.failures:
        click.echo(f"failed: {line}", err=True)
    click.echo(f"slurmsched is paused: {PAUSED_HINT}")
    if report.failures:
        ctx.exit(1)


# --- config check ------------------------------------------------------------------------

def _submit_cache_place(config: Config) -> tuple[str, str]:
    """``config check``'s finding on where the daemon writes the submit cache: (state, text).

    ``FAIL`` when the daemon could not write it there (each of its cycles would then
    fail): ``daemon.submit_cache`` names a directory, or the file's directory is not a
    directory, is not writable by this user, or does not exist (the daemon creates none).
    A missing ``daemon.state_dir`` that holds the SQLite database is a ``warn``:
    ``slurmsched db upgrade`` makes it (and the database check fails until then). ``ok``
    when the daemon writes no cache
    (:attr:`~slurmsched.config.DaemonSection.writes_submit_cache`).
    """
    from slurmsched.store.connect import parse_url

    settings = config.daemon
    cache = settings.submit_cache_path
    if not settings.writes_submit_cache:
        why = "daemon.dry_run" if settings.dry_run else "daemon.submit_cache_entries = 0"
        return "ok", f"submit cache {cache}: not written ({why})"
    directory = cache.parent
    if not directory.exists():
        db = parse_url(config.db_url)
        if db.get_backend_name() == "sqlite" and (os.path.abspath(directory) == os.path.abspath(settings.state_dir)
                                                  == os.path.abspath(os.path.dirname(db.database or ""))):
            return "warn", (f"submit cache {cache}: directory {directory} does not exist "
                            "('slurmsched db upgrade' makes it)")
    problem = _unwritable(cache, "submit cache", "daemon.submit_cache")
    return ("FAIL", problem) if problem else ("ok", f"submit cache {cache}: directory writable")


def _metrics_place(path: Path) -> tuple[str, str]:
    """``config check``'s finding on ``daemon.metrics_file``: ``warn`` where the daemon could
    not write it (it logs that and goes on, so monitoring would see no new metrics)."""
    problem = _unwritable(path, "metrics file", "daemon.metrics_file")
    return ("warn", problem) if problem else ("ok", f"metrics file {path}: directory writable")


def _unwritable(path: Path, what: str, key: str) -> str | None:
    """Why the daemon could not replace the file at ``path`` (:func:`~slurmsched.atomic.replace_file`:
    a temporary file beside it, renamed over it), ``what`` that file is and the config
    ``key`` naming it; ``None`` when it could."""
    if path.is_dir():
        return f"{what} {path}: is a directory ({key} names the file)"
    directory = path.parent
    if not directory.exists():
        return (f"{what} {path}: directory {directory} does not exist: the daemon does not create it "
                "(make it, writable by the daemon's user)")
    if not directory.is_dir():
        return f"{what} {path}: {directory} is not a directory"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"{what} {path}: directory {directory} NOT writable"
    return None


@click.group("config")
def config_group() -> None:
    """Inspect the configuration."""


@config_group.command("check")
@click.pass_context
def check(ctx: click.Context) -> None:
    """Validate the config, then check the database, Slurm, the wait bound and job_submit.lua (exit 1 on a failure).

    Slurm is read as a cycle reads it (``scontrol show config``, ``sprio``, ``squeue``,
    ``sinfo``), so a command the daemon needs and cannot run fails the check; accounting
    (``sacct``) that does not answer is a warning, as a cycle goes on without it.
    """
    from slurmsched.gateway import make_gateway
    from slurmsched.planner import SiteFactorScale, guaranteed_wait_bound
    from slurmsched.submit_cache import CACHE_FILE_NAME, script_reads

    config = get_config(ctx)
    failures = 0

    def line(state: str, text: str) -> None:
        nonlocal failures
        failures += state == "FAIL"
        click.echo(f"{state:4} {text}")

    if config.source == "defaults":  # load_config found no file at the default path
        from slurmsched.config import DEFAULT_CONFIG_PATH

        line("warn", f"config defaults: {DEFAULT_CONFIG_PATH} does not exist; daemon.dry_run = "
                     + ("true: the daemon changes nothing" if config.daemon.dry_run
                        else "false: live, the daemon changes jobs"))
    else:
        line("ok", f"config {config.source}")
    for field in dataclasses.fields(config):
        section = getattr(config, field.name)
        if dataclasses.is_dataclass(section) and not isinstance(section, type):
            shown = dataclasses.asdict(section)
            if isinstance(section, PolicySection):  # its tables with their defaults, not as written
                shown.update(section.effective_tables())
            if isinstance(section, DbSection):
                shown["url"] = mask_password(section.url)
            values = ", ".join(f"{k}={v!r}" for k, v in shown.items())
            click.echo(f"     [{field.name}] {values}")
    claimed: tuple[str, str | None] | None = None  # the database's URL and the cluster that claimed it
    try:
        with closing(_repository(config, read_only=True)) as repo:
            owner = repo.owner()
            line("ok", f"database {repo.url}: schema current" + (", PAUSED" if repo.is_paused() else "")
                 + (f", the state of cluster {owner!r}'s daemon" if owner is not None else ", claimed by no cluster yet"))
            claimed = (repo.url, owner)
    except SlurmschedError as exc:
        line("FAIL", f"database: {exc}")
    try:
        gateway = make_gateway(config)
        snap = gateway.snapshot()  # every read of a cycle's, not scontrol's alone
    except SlurmschedError as exc:
        line("FAIL", f"slurm: {exc}")
    else:
        scheduler = snap.config
        state = "ok" if scheduler.priority_type == "priority/multifactor" else "FAIL"
        line(state, f"slurm: PriorityType={scheduler.priority_type}, weights age={scheduler.weight_age} "
                    f"fairshare={scheduler.weight_fairshare} jobsize={scheduler.weight_job_size} "
                    f"partition={scheduler.weight_partition} qos={scheduler.weight_qos}, "
                    f"TopologyPlugin={scheduler.topology_plugin or 'none'}; queue read: "
                    f"{len(snap.pending)} pending, {len(snap.running)} running, {plural(len(snap.nodes), 'node')}")
        refused = None if claimed is None else DatabaseOfAnotherCluster.refusal(*claimed, snap.cluster)
        if refused is not None:
            line("FAIL", f"database: {refused}")
        capped = SiteFactorScale.build(config.planner, scheduler).cap_warning()
        if capped is not None:
            line("warn", f"planner: {capped}")
        bound = guaranteed_wait_bound(config, scheduler)
        line("ok" if bound.seconds is not None else "warn",
             f"wait bound: {'none' if bound.seconds is None else _hours(bound.seconds)}: {bound.explanation}")
        try:
            gateway.finished_since(time.time() - 1)
        except SlurmError as exc:  # a cycle goes on without it, as the daemon does
            line("warn", f"accounting: {exc}: cycles plan without newly finished jobs, and predictions "
                         "learn nothing new")
        else:
            line("ok", "accounting answers")
    line(*_submit_cache_place(config))
    if config.daemon.metrics_file:
        line(*_metrics_place(Path(config.daemon.metrics_file)))
    cache = config.daemon.submit_cache_path
    conf_dir = config.slurm.conf_dir
    lua, link = conf_dir / "job_submit.lua", conf_dir / CACHE_FILE_NAME
    reads = script_reads(conf_dir, cache)
    if reads is None:
        line("warn", f"{lua} not installed: new jobs get their SiteFactor at the next cycle, not at submit")
    elif not reads:
        line("warn", f"{link} is not {cache}: job_submit.lua will not see the daemon's cache "
                     f"(ln -s {cache} {link})")
    else:
        line("ok", f"{lua} reads {cache}")
    if failures:
        ctx.exit(1)


COMMANDS = [run, status, explain, pause, resume, revert, config_group]
