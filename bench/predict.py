#!/usr/bin/env python3
"""Benchmark: fitting slurmsched's duration model on 200k jobs, predicting 10,000 pending jobs.

The history is the 202,871-job HPC2N trace (SWF, read in place from
``$SLURMSCHED_TRACES``, default ``<repo>/../shared/traces``). ``fit`` is the model's
whole refit as the daemon runs it: replaying the history for submit-time features and
expert records, then training the three gradient-boosted quantile models (on the most
recent 10,000 runs: ``MAX_TRAIN_JOBS``). The pending queue is the trace's last 10,000 jobs with their
start/end removed (real users, names, sizes and limits); ``predict`` is one call for
all of them, the way a daemon cycle asks, timed as the median of several calls.

Runs on one core: BLAS/OpenMP thread pools are pinned to 1 before numpy/scikit-learn
load. CPU seconds are printed beside wall seconds (the machine may be shared).

Usage: ``python bench/predict.py [--repeat 5]``; the last output line is
``{"fit_200k_s": ..., "predict_10k_ms": ...}`` (targets: <= 60 s and <= 200 ms).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import dataclasses  # noqa: E402 - the thread pins above must come first
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import click  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from slurmsched.model import JobRecord, JobState  # noqa: E402
from slurmsched.predict.registry import make_predictor  # noqa: E402
from slurmsched.traces import iter_trace  # noqa: E402

TRACE = "HPC2N-2002-2.2-cln.swf.gz"
PENDING = 10_000


def _timed(action) -> tuple[float, float]:  # noqa: ANN001 - any callable
    wall, cpu = time.perf_counter(), time.process_time()
    action()
    return time.perf_counter() - wall, time.process_time() - cpu


@click.command()
@click.option("--repeat", type=click.IntRange(min=1), default=5, show_default=True,
              help="Predict calls to time (the median is reported).")
def main(repeat: int) -> None:
    """Fit on HPC2N, predict 10,000 pending jobs, print the figures."""
    traces = Path(os.environ.get("SLURMSCHED_TRACES", REPO.parent / "shared" / "traces"))
    path = traces / TRACE
    if not path.exists():
        raise click.ClickException(f"{path} not found: set SLURMSCHED_TRACES to the folder holding {TRACE}")
    history = sorted((j for j in iter_trace(path, "swf") if isinstance(j, JobRecord)),
                     key=lambda j: (j.end_time is None, j.end_time or 0.0))
    pending = [dataclasses.replace(j, state=JobState.PENDING, start_time=None, end_time=None)
               for j in history[-PENDING:]]
    click.echo(f"history: {len(history)} jobs from {TRACE}; pending queue: {len(pending)} jobs")

    predictor = make_predictor("slurmsched")
    fit_wall, fit_cpu = _timed(lambda: predictor.fit(history))
    click.echo(f"fit: {fit_wall:.1f} s wall, {fit_cpu:.1f} s CPU ({predictor.version})")

    times = []
    for _ in range(repeat):
        wall, cpu = _timed(lambda: predictor.predict(pending))
        times.append((wall, cpu))
        click.echo(f"predict {len(pending)} jobs: {wall * 1000:.0f} ms wall, {cpu * 1000:.0f} ms CPU")
    predict_ms = statistics.median(w for w, _ in times) * 1000
    click.echo(f"median predict: {predict_ms:.0f} ms")
    click.echo(json.dumps({"fit_200k_s": round(fit_wall, 2), "predict_10k_ms": round(predict_ms, 1)}))


if __name__ == "__main__":
    main()
