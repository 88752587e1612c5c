#!/usr/bin/env python3
"""Benchmark: the whole 82,247-job Philly trace simulated under ``qssf``.

What runs is ``slurmsched simulate``'s own path: the trace reader, the cluster sized
from the trace (448 GPUs at the default 83% offered load), the simulated slurmctld and
the real daemon (``Engine.run_cycle`` every 60 simulated seconds when something could
change, slurmsched's predictor learning online with the daemon's refit schedule).

Figures: seconds to read the trace, seconds to simulate it, their sum
(``philly_qssf_s``, target <= 30 s on one core) and jobs simulated per second of that
sum (``jobs_per_s``); beside them the daemon cycles run, the seconds spent inside them
and the scheduler's share. Everything runs single-threaded (``OMP_NUM_THREADS=1``) and
is timed in CPU seconds of this process (``time.process_time``), so other load on a
shared machine does not inflate the figures; wall seconds are printed beside them.

The trace is read from ``$SLURMSCHED_TRACES`` (default ``<repo>/../shared/traces``).
Usage: ``python bench/simulate.py [--policy qssf] [--jobs N]``; the last output line is
``{"philly_qssf_s": ..., "jobs_per_s": ...}``.
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
from slurmsched.sim.experiment import compare  # noqa: E402
from slurmsched.sim.policies import parse_policies  # noqa: E402
from slurmsched.sim.report import render_table  # noqa: E402
from slurmsched.sim.sizing import SizeRequest, size_cluster  # noqa: E402
from slurmsched.sim.workload import load_trace  # noqa: E402

TRACE = "philly-pollux.csv"


def traces_dir() -> Path:
    """``$SLURMSCHED_TRACES``, else ``<repo>/../shared/traces``."""
    return Path(os.environ.get("SLURMSCHED_TRACES") or REPO.parent / "shared" / "traces")


@click.command()
@click.option("--policy", default="qssf", show_default=True, help="Policy to time (see slurmsched simulate).")
@click.option("--jobs", "limit", type=click.IntRange(min=1), default=None, help="Only the first N jobs.")
def main(policy: str, limit: int | None) -> None:
    """Time the simulation of the Philly trace."""
    path = traces_dir() / TRACE
    if not path.exists():
        raise click.ClickException(f"{path} not found: set SLURMSCHED_TRACES to the directory of the public traces")
    config = load_config(environ={})
    cpu0, wall0 = time.process_time(), time.perf_counter()
    workload = load_trace(path, "philly", limit=limit)
    read_cpu, read_wall = time.process_time() - cpu0, time.perf_counter() - wall0
    cluster, note = size_cluster(workload, SizeRequest(target_load=config.sim.target_load,
                                                       default_gpus_per_node=config.sim.gpus_per_node),
                                 path=path, fmt="philly")
    cpu1, wall1 = time.process_time(), time.perf_counter()
    comparison = compare(workload, cluster, note, parse_policies(policy, config), config)
    sim_cpu, sim_wall = time.process_time() - cpu1, time.perf_counter() - wall1
    run = comparison.runs[0]
    total = read_cpu + sim_cpu
    click.echo(render_table(comparison))
    click.echo(f"read trace:  {read_cpu:7.1f} s CPU ({read_wall:.1f} s wall), {len(workload.jobs)} jobs")
    click.echo(f"simulate:    {sim_cpu:7.1f} s CPU ({sim_wall:.1f} s wall), {run.result.cycles} daemon cycles, "
               f"{run.result.engine_s:.1f} s wall inside them, {run.result.rpcs} scontrol updates")
    click.echo(f"total:       {total:7.1f} s CPU for {comparison.jobs} jobs = {comparison.jobs / total:,.0f} jobs/s")
    click.echo(json.dumps({"philly_qssf_s": round(total, 2), "jobs_per_s": round(comparison.jobs / total, 1)}))


if __name__ == "__main__":
    main()
