"""``slurmsched predict``: a pending job's predicted duration, and the predictors' online evaluation.

``slurmsched predict JOBID`` (same as ``predict show JOBID``) and
``slurmsched predict evaluate --trace FILE --format F | --from-db``. Every option has an
environment twin, ``SLURMSCHED_PREDICT_<SUBCOMMAND>_<OPTION>`` (``--help`` lists them).
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Sequence

import click

from slurmsched.cli import get_config
from slurmsched.cli.db import DB_OPTION
from slurmsched.cli.output import output_file, printable, writing
from slurmsched.cli.params import JobId
from slurmsched.errors import ConfigError, TraceFormatError
from slurmsched.predict.common import observed_runtime
from slurmsched.text import plural
from slurmsched.traces import FORMATS

if TYPE_CHECKING:
    from pathlib import Path

    from slurmsched.model import JobRecord
    from slurmsched.predict.evaluate import Evaluation
    from slurmsched.predict.protocol import StagedPredictor
    from slurmsched.traces.base import BadLine

BASELINES = ("user_limit", "helios", "last2")


class _PredictGroup(click.Group):
    """``predict [OPTIONS] JOBID [OPTIONS]`` runs ``predict show``; named subcommands and
    ``--help`` run as usual."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:  # noqa: D102 - click API
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["show", *args]
        return super().parse_args(ctx, args)


@click.group("predict", cls=_PredictGroup)
def predict() -> None:
    """Predicted durations: `predict JOBID` for a queued job, `predict evaluate` to score predictors."""


# --- predict JOBID -------------------------------------------------------------------------


def _hms(seconds: float) -> str:
    seconds = int(round(seconds))
    days, rest = divmod(seconds, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


@predict.command("show")
@click.argument("job_id", type=JobId())
@DB_OPTION
@click.option("--json", "as_json", is_flag=True, envvar="SLURMSCHED_PREDICT_SHOW_JSON", allow_from_autoenv=False,
              show_envvar=True, help="Print one JSON object.")
@click.pass_context
def show(ctx: click.Context, job_id: int, db_url: str | None, as_json: bool) -> None:
    """Predicted duration, spread and source of job JOB_ID, pending or running (for a
    running job: its whole run, beside how long it has run so far).

    Reads the queue from Slurm (squeue through the configured gateway) and the model the
    daemon saved in the database (brought up to date with the jobs finished since); with
    no saved model, the configured predictor is fitted on the stored history.
    """
    from slurmsched.gateway import make_gateway
    from slurmsched.store.repository import open_repository

    config = get_config(ctx)
    snapshot = make_gateway(config).snapshot()
    job = next((j for j in snapshot.jobs if j.job_id == job_id), None)
    if job is None:  # a finding, as explain's "no record of job": exit 1 without "Error:"
        click.echo(f"job {job_id} is not in the queue (finished, or never existed)", err=True)
        ctx.exit(1)
    repo = open_repository(config, url=db_url, read_only=True)
    try:
        predictor, origin = _restore(repo, config.daemon.predictor)
        recorded = repo.latest_prediction(job_id, since=repo.id_reused_at(job_id))  # this job's, not an earlier one's
    finally:
        repo.close()
    (prediction,) = predictor.predict([job])
    elapsed = snapshot.taken_at - job.start_time if job.start_time is not None else None
    if as_json:
        click.echo(json.dumps({"job_id": job_id, "state": job.state.value, "predictor": predictor.name,
                               "model": origin, "estimate_s": prediction.estimate_s, "low_s": prediction.low_s,
                               "high_s": prediction.high_s, "source": prediction.source,
                               "time_limit_s": job.time_limit_s, "elapsed_s": elapsed,
                               "daemon_estimate_s": recorded.estimate_s if recorded else None}))
        return
    limit = _hms(job.time_limit_s) if job.time_limit_s else "none"
    click.echo(f"job {job_id} ({printable(job.user)}, {printable(job.name) or '-'}, {job.state.value}, "
               f"time limit {limit})")
    click.echo(f"predicted run time {_hms(prediction.estimate_s)}  "
               f"(likely {_hms(prediction.low_s)} .. {_hms(prediction.high_s)})")
    if elapsed is not None:
        left = max(0.0, prediction.estimate_s - elapsed)
        click.echo(f"running for {_hms(elapsed)}: about {_hms(left)} left by the prediction")
    click.echo(f"source: {prediction.source}")
    click.echo(f"predictor: {predictor.name}, {origin}")
    if recorded is not None:
        click.echo(f"daemon's last prediction: {_hms(recorded.estimate_s)} ({recorded.source})")


def _restore(repo, name: str) -> tuple["StagedPredictor", str]:  # noqa: ANN001 - a JobRepository
    """The predictor as the daemon has it: its saved model plus newer history, else fitted now."""
    from slurmsched.errors import SlurmschedError
    from slurmsched.predict.registry import make_predictor

    predictor = make_predictor(name)
    restore = getattr(type(predictor), "from_bytes", None)
    if restore is not None and (saved := repo.load_model(name)) is not None:
        version, blob, meta = saved
        try:
            loaded = restore(blob)
        except SlurmschedError as exc:
            click.echo(f"warning: saved model {version} not used: {exc}", err=True)
        else:
            through = meta.get("fitted_through")
            if isinstance(through, (int, float)):
                loaded.update(repo.history(since=float(through)))
            return loaded, f"saved model {version}"
    history = repo.history()
    predictor.fit(history)
    return predictor, f"fitted now on {len(history)} finished jobs"


# --- predict evaluate ------------------------------------------------------------------------


@predict.command("evaluate")
@click.option("--trace", type=click.Path(dir_okay=False), default=None, envvar="SLURMSCHED_PREDICT_EVALUATE_TRACE",
              show_envvar=True, help="Trace file (see --format); for itp also ARCHIVE:MEMBER.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              envvar="SLURMSCHED_PREDICT_EVALUATE_FORMAT", allow_from_autoenv=False, show_envvar=True,
              help="Trace format.")
@click.option("--from-db", is_flag=True, envvar="SLURMSCHED_PREDICT_EVALUATE_FROM_DB", show_envvar=True,
              help="Evaluate on the history database instead of a trace.")
@DB_OPTION
@click.option("--cluster", "cluster_name", metavar="NAME", default=None,
              envvar="SLURMSCHED_PREDICT_EVALUATE_CLUSTER", allow_from_autoenv=False, show_envvar=True,
              help="With --from-db: the cluster to evaluate on (default: the only one in the history).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              envvar="SLURMSCHED_PREDICT_EVALUATE_PLOT", allow_from_autoenv=False, show_envvar=True,
              help="Write a PNG of the error distributions to this file (its name ends in .png).")
@click.option("--json", "as_json", is_flag=True, envvar="SLURMSCHED_PREDICT_EVALUATE_JSON", allow_from_autoenv=False,
              show_envvar=True, help='Print {"jobs": N, "predictors": {name: metrics}} instead of the table.')
@click.pass_context
def evaluate_cmd(ctx: click.Context, trace: str | None, fmt: str | None, from_db: bool, db_url: str | None,
                 cluster_name: str | None, plot_path: str | None, as_json: bool) -> None:
    """Online, time-ordered evaluation of every predictor.

    Each job is predicted at its submit time from the jobs that ended before it; the
    learned model is refitted as history grows (every 25% more jobs, at least 1000).
    ``user_limit`` is scored only when the jobs carry requested time limits. With
    --from-db, one cluster's jobs: --cluster NAME, required when the database holds several.
    """
    if (trace is None) == (not from_db):
        raise click.UsageError("give either --trace FILE --format FORMAT or --from-db")
    if trace is not None and fmt is None:
        raise click.UsageError("--trace needs --format (one of " + ", ".join(FORMATS) + ")")
    if trace is not None and cluster_name is not None:
        raise click.UsageError("--cluster chooses jobs of --from-db (for the ITP archive: ARCHIVE:clusterNN.csv)")
    plot = output_file(plot_path, "--plot") if plot_path is not None else None
    if plot is not None and plot.suffix.lower() != ".png":
        raise click.BadParameter(f"{plot_path}: the plot is a PNG file, give a name ending in .png",
                                 param_hint="'--plot'")
    jobs = _load_jobs(ctx, trace, fmt, db_url, cluster_name)
    if not any(observed_runtime(j) is not None for j in jobs):
        if trace is not None:
            raise TraceFormatError(f"{trace}: no finished job with a run time to evaluate on")
        raise ConfigError("the history database has no finished job with a run time to evaluate on")
    result = _run(jobs)
    if plot is not None:
        with writing(plot, "--plot"):
            _plot(result, plot)
    if as_json:
        click.echo(json.dumps(result.as_dict()))
        return
    click.echo(render(result))
    if plot is not None:
        click.echo(f"error distributions: {plot}")


def _load_jobs(ctx: click.Context, trace: str | None, fmt: str | None, db_url: str | None,
               cluster_name: str | None) -> list["JobRecord"]:
    """The trace's readable jobs (unreadable lines named on stderr), or the database's jobs of
    one cluster (:func:`~slurmsched.store.selection.one_cluster`, whose ConfigError it raises)."""
    from tqdm import tqdm

    from slurmsched.model import JobRecord

    if trace is not None:
        from slurmsched.traces import iter_trace, line_numbers

        jobs: list[JobRecord] = []
        bad: list[BadLine] = []
        with tqdm(desc="reading", unit=" jobs", disable=None, leave=False) as bar:
            for item in iter_trace(trace, fmt):  # type: ignore[arg-type]
                if isinstance(item, JobRecord):
                    jobs.append(item)
                else:
                    bad.append(item)
                bar.update()
        if bad:
            click.echo(f"skipped {len(bad)} unreadable line(s): {line_numbers([b.lineno for b in bad])}", err=True)
        return jobs
    from slurmsched.store.repository import open_repository
    from slurmsched.store.selection import one_cluster

    repo = open_repository(get_config(ctx), url=db_url, read_only=True)
    try:
        with tqdm(desc="reading", unit=" jobs", disable=None, leave=False) as bar:
            jobs = []
            for job in one_cluster(repo.iter_jobs(), cluster_name):
                jobs.append(job)
                bar.update()
    finally:
        repo.close()
    return jobs


def _run(jobs: Sequence["JobRecord"]) -> "Evaluation":
    from tqdm import tqdm

    from slurmsched.predict.evaluate import evaluate, has_time_limits
    from slurmsched.predict.registry import make_predictor

    names = [n for n in BASELINES if n != "user_limit" or has_time_limits(jobs)] + ["slurmsched"]
    runs = sum(1 for j in jobs if observed_runtime(j) is not None)
    with tqdm(total=runs, desc="evaluating", unit=" jobs", disable=None, leave=False) as bar:
        return evaluate(jobs, [make_predictor(n) for n in names], progress=bar.update)


def render(result: "Evaluation") -> str:
    """The evaluation as a text table, one row per predictor."""
    lines = [f"{plural(result.jobs, 'job')}, predicted at submit time from jobs that ended before; "
             f"{plural(result.refits, 'refit')} of the learned model",
             f"{'predictor':<12} {'med|log2 err|':>13} {'within 50%':>10} {'within 2x':>9} {'MAE':>12} "
             f"{'under':>6} {'in spread':>9}"]
    for r in result.results:
        a = r.accuracy
        lines.append(f"{r.name:<12} {a.median_abs_log2_error:>13.3f} {a.within_50pct:>10.1%} {a.within_2x:>9.1%} "
                     f"{_hms(a.mae_s):>12} {a.under_rate:>6.1%} {a.spread_coverage:>9.1%}")
    return "\n".join(lines)


def _plot(result: "Evaluation", path: Path) -> None:
    """PNG: histogram of log2(predicted/actual) per predictor, and the CDF of |log2 error|."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from slurmsched.predict.metrics import log2_errors

    fig, (hist, cdf) = plt.subplots(1, 2, figsize=(12, 4.5))
    bins = np.linspace(-8, 8, 65)
    for r in result.results:
        errors = log2_errors(r.estimate_s, result.actual_s)
        hist.hist(np.clip(errors, -8, 8), bins=bins, histtype="step", linewidth=1.5, label=r.name)
        magnitude = np.sort(np.abs(errors))
        cdf.plot(magnitude, np.arange(1, len(magnitude) + 1) / len(magnitude), label=r.name)
    hist.set_xlabel("log2(predicted / actual)  (0 = exact; clipped at ±8)")
    hist.set_ylabel("jobs")
    hist.set_title(f"error distribution, {plural(result.jobs, 'job')}")
    hist.legend()
    cdf.axvline(math.log2(1.5), color="grey", linestyle=":", linewidth=1)
    cdf.set_xlim(0, 6)
    cdf.set_xlabel("|log2(predicted / actual)|")
    cdf.set_ylabel("share of jobs")
    cdf.set_title("CDF of absolute log2 error (dotted: 1.5x)")
    cdf.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


COMMANDS = [predict]
