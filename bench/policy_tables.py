#!/usr/bin/env python3
"""Benchmark: every simulated policy on every shared trace, and how much of the SJF gain ``qssf`` reaches.

For each trace (Philly, the ten ITP clusters, the Helios Venus slice, CTC-SP2, HPC2N)
this runs what ``slurmsched simulate`` runs, with the daemon's defaults: the cluster
sized from the trace (SWF headers: CTC-SP2 338 processors, HPC2N 240; the Helios
slice's per-VC pools; Philly and ITP sized for ``sim.target_load``), then every policy
of :data:`slurmsched.sim.policies.SIM_POLICIES` (or ``--policy``). It prints each
trace's table, writes its report and plots under ``--out/<trace>/``, and prints per
trace the share of the FIFO -> oracle-SJF avg-JCT gain that ``qssf`` (slurmsched's
predictor and aging guard) reaches and its max wait over FIFO's.

That share moves by a few points with settings that change nothing in kind, such as
the daemon's cycle interval (``docs/simulator.md``). ``--intervals 45,50,...`` measures
how much: ``qssf`` runs again at each of these cycle intervals (the one of the
comparison is reused), each against the comparison's FIFO and oracle-SJF runs, and
the trace's figures add the share at each interval and their mean, standard
deviation, minimum and maximum, and qssf's max wait and avg JCT over FIFO's at each
interval (the worst max wait; the avg JCT ratios' mean and standard deviation), which
also measure the spread where the oracle SJF gains nothing over FIFO (CTC-SP2).

The traces are read in place from ``$SLURMSCHED_TRACES`` (default
``<repo>/../shared/traces``). Usage:
``python bench/policy_tables.py [--trace ctc,hpc2n,...] [--policy fifo,sjf,qssf] [--workers N] [--out DIR]
[--intervals S,S,...]`` (``--workers``: simulations run at once, one process each; the
tables are the same); the last output line is ``{"<trace>": {"qssf_gain_share": ...,
"qssf_max_wait_vs_fifo": ..., "qssf_avg_jct_vs_fifo": ...}, ...}``, with ``--intervals``
also ``"qssf_gain_share_by_interval": {"45": ..., ...}``, ``"qssf_gain_share_mean"``,
``"qssf_gain_share_sd"``, ``"qssf_gain_share_min"`` and ``"qssf_gain_share_max"`` (where
FIFO -> oracle SJF gains anything), and, at every trace, ``"qssf_max_wait_vs_fifo_by_interval"``,
``"qssf_max_wait_vs_fifo_max"``, ``"qssf_avg_jct_vs_fifo_by_interval"``,
``"qssf_avg_jct_vs_fifo_mean"`` and ``"qssf_avg_jct_vs_fifo_sd"``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import NamedTuple  # noqa: E402

import click  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from slurmsched.config import Config, load_config  # noqa: E402
from slurmsched.sim.cluster import ClusterSpec  # noqa: E402
from slurmsched.sim.experiment import Comparison, compare  # noqa: E402
from slurmsched.sim.metrics import PolicyMetrics, gain_share  # noqa: E402
from slurmsched.sim.policies import SIM_POLICIES, parse_policies  # noqa: E402
from slurmsched.sim.report import render_table, write_report  # noqa: E402
from slurmsched.sim.sizing import SizeRequest, size_cluster  # noqa: E402
from slurmsched.sim.workers import run_side_by_side  # noqa: E402
from slurmsched.sim.workload import Workload, load_trace  # noqa: E402

ITP = "itp-elasticflow-traces.tar.gz"
#: name -> (file under the traces directory, format)
TRACES: dict[str, tuple[str, str]] = {
    "helios": ("helios_venus_2vc_sept.csv", "helios"),
    **{f"itp{n:02d}": (f"{ITP}:cluster{n:02d}.csv", "itp") for n in range(1, 11)},
    "ctc": ("CTC-SP2-1996-3.1-cln.swf.gz", "swf"),
    "philly": ("philly-pollux.csv", "philly"),
    "hpc2n": ("HPC2N-2002-2.2-cln.swf.gz", "swf"),
}


def traces_dir() -> Path:
    """``$SLURMSCHED_TRACES``, else ``<repo>/../shared/traces``."""
    return Path(os.environ.get("SLURMSCHED_TRACES") or REPO.parent / "shared" / "traces")


class VsFifo(NamedTuple):
    """qssf's max wait and avg JCT over FIFO's, rounded to 3 decimals."""

    max_wait: float
    avg_jct: float


def vs_fifo(qssf: PolicyMetrics, fifo: PolicyMetrics) -> VsFifo:
    """qssf's figures over FIFO's."""
    return VsFifo(round(qssf.max_wait_s / max(fifo.max_wait_s, 1e-9), 3), round(qssf.avg_jct_s / fifo.avg_jct_s, 3))


def spread(values: list[float]) -> dict[str, float]:
    """The values' mean, standard deviation (0 for one value), minimum and maximum."""
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
            "min": min(values), "max": max(values)}


def figures(comparison: Comparison) -> dict[str, float | None]:
    """qssf's share of the SJF gain, and its max wait and avg JCT over FIFO's."""
    fifo, qssf = comparison.run("fifo"), comparison.run("qssf")
    if fifo is None or qssf is None:
        return {}
    share = comparison.gain_share("qssf")
    ratio = vs_fifo(qssf.metrics, fifo.metrics)
    return {"qssf_gain_share": None if share is None else round(share, 3),
            "qssf_max_wait_vs_fifo": ratio.max_wait, "qssf_avg_jct_vs_fifo": ratio.avg_jct}


@dataclass(frozen=True)
class QssfAtInterval:
    """``qssf`` alone on one workload at a given daemon cycle interval: the task that
    :func:`run_side_by_side` runs once per interval (it pickles with the workload)."""

    workload: Workload
    cluster: ClusterSpec
    note: str
    config: Config

    def __call__(self, interval_s: float, line: int | None) -> PolicyMetrics:
        """qssf's figures with the daemon cycling every ``interval_s``."""
        config = self.config.with_overrides("daemon", interval_s=interval_s)  # one policy: run in this process
        return compare(self.workload, self.cluster, self.note, parse_policies("qssf", config), config).runs[0] \
            .metrics


def interval_figures(comparison: Comparison, task: QssfAtInterval, intervals: list[float],
                     workers: int) -> dict[str, object]:
    """qssf's share of the gain, and its max wait and avg JCT over FIFO's, at each cycle
    interval (the comparison's own run reused), against the comparison's FIFO and
    oracle-SJF runs; the shares' spread, the ratios' mean and the worst max wait."""
    fifo, sjf, qssf = comparison.run("fifo"), comparison.run("sjf"), comparison.run("qssf")
    assert fifo is not None and sjf is not None, "main() asks for both with --intervals"
    known = {comparison.interval_s: qssf.metrics} if qssf is not None else {}
    todo = [i for i in intervals if i not in known]
    click.echo(f"qssf at {len(todo)} more cycle interval(s), {min(workers, len(todo)) or 1} at a time ...")
    known.update(zip(todo, run_side_by_side(task, todo, workers)))
    shares = {i: gain_share(fifo.metrics.avg_jct_s, sjf.metrics.avg_jct_s, known[i].avg_jct_s) for i in intervals}
    ratios = {i: vs_fifo(known[i], fifo.metrics) for i in intervals}
    for interval, share in shares.items():
        click.echo(f"  cycle every {interval:g} s: qssf avg JCT {known[interval].avg_jct_s:.0f} s"
                   f" (x{ratios[interval].avg_jct:.3f} FIFO's), max wait x{ratios[interval].max_wait:.2f} FIFO's, "
                   + ("no gain to share" if share is None else f"{share:.1%} of the gain"))
    jct = spread([r.avg_jct for r in ratios.values()])
    worst = max(r.max_wait for r in ratios.values())
    click.echo(f"  avg JCT x{jct['mean']:.3f} FIFO's on average (sd {jct['sd']:.3f}), max wait at most x{worst:.2f}")
    result: dict[str, object] = {
        "qssf_max_wait_vs_fifo_by_interval": {f"{i:g}": r.max_wait for i, r in ratios.items()},
        "qssf_max_wait_vs_fifo_max": worst,
        "qssf_avg_jct_vs_fifo_by_interval": {f"{i:g}": r.avg_jct for i, r in ratios.items()},
        "qssf_avg_jct_vs_fifo_mean": round(jct["mean"], 3), "qssf_avg_jct_vs_fifo_sd": round(jct["sd"], 3),
        "qssf_gain_share_by_interval": {f"{i:g}": None if v is None else round(v, 3) for i, v in shares.items()}}
    values = [v for v in shares.values() if v is not None]
    if not values:
        return result
    shared = spread(values)
    click.echo(f"  mean {shared['mean']:.1%}, sd {shared['sd'] * 100:.1f} points, min {shared['min']:.1%}, "
               f"max {shared['max']:.1%}")
    return {**result, **{f"qssf_gain_share_{k}": round(v, 3) for k, v in shared.items()}}


def interval_list(ctx: click.Context, param: click.Parameter, value: str | None) -> list[float]:
    """``--intervals 45,50,55`` -> [45.0, 50.0, 55.0] (positive seconds, no repeats)."""
    if not value:
        return []
    try:
        intervals = [float(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of seconds") from None
    if not intervals or any(not 0 < i < float("inf") for i in intervals):
        raise click.BadParameter(f"{value!r}: every interval must be a positive number of seconds")
    return list(dict.fromkeys(intervals))


@click.command()
@click.option("--trace", "names", default=",".join(TRACES), show_default=True,
              help="Comma-separated traces: " + ", ".join(TRACES) + ".")
@click.option("--policy", default=",".join(SIM_POLICIES), show_default=True, help="Policies to compare.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("policy-tables"),
              show_default=True, help="Directory for each trace's report and plots.")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="Simulations run at once, one process each.")
@click.option("--intervals", callback=interval_list, metavar="S,S,...",
              help="Also run qssf at each of these daemon cycle intervals (seconds) and report the spread "
                   "of its share of the gain.")
def main(names: str, policy: str, out: Path, workers: int, intervals: list[float]) -> None:
    """Compare the policies on the shared traces."""
    config = load_config(environ={}).with_overrides("sim", workers=workers)
    policies = parse_policies(policy, config)
    if intervals and not {"fifo", "sjf"} <= {p.name for p in policies}:
        raise click.BadParameter("--intervals needs fifo and sjf among the policies (the gain is measured "
                                 "against them)", param_hint="--policy")
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in TRACES]
    if unknown:
        raise click.BadParameter(f"unknown trace {unknown[0]!r} (known: {', '.join(TRACES)})", param_hint="--trace")
    results: dict[str, dict[str, object]] = {}
    for name in wanted:
        file, fmt = TRACES[name]
        path = traces_dir() / file.split(":")[0]
        if not path.exists():
            raise click.ClickException(f"{path} not found: set SLURMSCHED_TRACES to the directory of the public traces")
        began = time.perf_counter()
        workload = load_trace(traces_dir() / file, fmt)
        cluster, note = size_cluster(workload, SizeRequest(target_load=config.sim.target_load,
                                                           default_gpus_per_node=config.sim.gpus_per_node),
                                     path=path, fmt=fmt)
        comparison = compare(workload, cluster, note, policies, config, progress=True)
        click.echo(f"\n== {name}: {len(workload.jobs)} jobs, {cluster.describe()} ({note}); "
                   f"{time.perf_counter() - began:.0f} s")
        click.echo(render_table(comparison))
        write_report(comparison, out / name)
        results[name] = dict(figures(comparison))
        if intervals:
            task = QssfAtInterval(workload, cluster, note, config)
            results[name].update(interval_figures(comparison, task, intervals, workers))
        click.echo(json.dumps({name: results[name]}))
    click.echo(json.dumps(results))


if __name__ == "__main__":
    main()
