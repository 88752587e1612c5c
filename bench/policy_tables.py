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

The traces are read in place from ``$SLURMSCHED_TRACES`` (default
``<repo>/../shared/traces``). Usage:
``python bench/policy_tables.py [--trace ctc,hpc2n,...] [--policy fifo,sjf,qssf] [--workers N] [--out DIR]``
(``--workers``: policies simulated at once, one process each; the tables are the same);
the last output line is ``{"<trace>": {"qssf_gain_share": ..., "qssf_max_wait_vs_fifo": ...,
"qssf_avg_jct_vs_fifo": ...}, ...}``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import click  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from slurmsched.config import load_config  # noqa: E402
from slurmsched.sim.experiment import Comparison, compare  # noqa: E402
from slurmsched.sim.policies import SIM_POLICIES, parse_policies  # noqa: E402
from slurmsched.sim.report import render_table, write_report  # noqa: E402
from slurmsched.sim.sizing import SizeRequest, size_cluster  # noqa: E402
from slurmsched.sim.workload import load_trace  # noqa: E402

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


def figures(comparison: Comparison) -> dict[str, float | None]:
    """qssf's share of the SJF gain, and its max wait and avg JCT over FIFO's."""
    fifo, qssf = comparison.run("fifo"), comparison.run("qssf")
    if fifo is None or qssf is None:
        return {}
    share = comparison.gain_share("qssf")
    return {"qssf_gain_share": None if share is None else round(share, 3),
            "qssf_max_wait_vs_fifo": round(qssf.metrics.max_wait_s / max(fifo.metrics.max_wait_s, 1e-9), 3),
            "qssf_avg_jct_vs_fifo": round(qssf.metrics.avg_jct_s / fifo.metrics.avg_jct_s, 3)}


@click.command()
@click.option("--trace", "names", default=",".join(TRACES), show_default=True,
              help="Comma-separated traces: " + ", ".join(TRACES) + ".")
@click.option("--policy", default=",".join(SIM_POLICIES), show_default=True, help="Policies to compare.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("policy-tables"),
              show_default=True, help="Directory for each trace's report and plots.")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="Policies simulated at once, one process each.")
def main(names: str, policy: str, out: Path, workers: int) -> None:
    """Compare the policies on the shared traces."""
    config = load_config(environ={}).with_overrides("sim", workers=workers)
    policies = parse_policies(policy, config)
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in TRACES]
    if unknown:
        raise click.BadParameter(f"unknown trace {unknown[0]!r} (known: {', '.join(TRACES)})", param_hint="--trace")
    results: dict[str, dict[str, float | None]] = {}
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
        results[name] = figures(comparison)
        click.echo(json.dumps({name: results[name]}))
    click.echo(json.dumps(results))


if __name__ == "__main__":
    main()
