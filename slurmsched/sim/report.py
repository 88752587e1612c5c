"""A comparison as people read it: a table with ratios against FIFO, JSON and PNG plots."""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from pathlib import Path

from slurmsched.sim.experiment import Comparison
from slurmsched.sim.metrics import jct_values, wait_by_size
from slurmsched.sim.workload import Window
from slurmsched.text import plural

RESULTS_FILE = "results.json"
JCT_CDF_FILE = "jct_cdf.png"
WAIT_BY_SIZE_FILE = "wait_by_size.png"
TABLE_FILE = "table.txt"
#: The simulated slurmctld's settings recorded in results.json (``[sim]`` keys).
SLURMCTLD_KEYS = ("weight_age", "weight_fairshare", "weight_job_size", "weight_partition",
                  "multifactor_weight_job_size", "priority_max_age_s", "bf_max_job_test", "submit_plugin")


def human_duration(seconds: float) -> str:
    """``42s``, ``37.5m``, ``5.2h`` or ``3.1d``."""
    if seconds < 100:
        return f"{seconds:.0f}s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.1f}m"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def _ratio(value: float, base: float) -> str:
    return f"x{value / base:.2f}" if base > 0 else "-"


def render_table(comparison: Comparison) -> str:
    """The comparison as a fixed-width table, ratios against FIFO when FIFO was run."""
    c = comparison
    left_out = c.left_out.describe()
    window = _window_clause(c.window) if c.window is not None else ""
    load = "n/a (the jobs arrive at once)" if c.offered_load is None else f"{c.offered_load:.0%}"
    lines = [f"{c.source}{f' {window}' if window else ''}: {plural(c.jobs, 'job')}"
             f"{f' ({left_out})' if left_out else ''} "
             f"on {c.cluster.describe()} ({c.size_note}); offered load {load}; "
             f"daemon cycle every {c.interval_s:g} s{'; job_submit.lua modelled' if c.slurmctld.submit_plugin else ''}"]
    width = max([13, *(len(run.policy.name) for run in c.runs)])
    header = (f"{'policy':<{width}} {'avg JCT':>8} {'vsFIFO':>6} {'avg wait':>8} {'vsFIFO':>6} {'p50 wait':>8} "
              f"{'p99 wait':>8} {'max wait':>8} {'vsFIFO':>6} {'bsld':>7} {'util':>5} {'gain':>6}")
    lines += [header, "-" * len(header)]
    fifo = c.run("fifo")
    for run in c.runs:
        m = run.metrics
        base = fifo.metrics if fifo is not None else None
        share = c.gain_share(run.policy.name)
        lines.append(
            f"{run.policy.name:<{width}} {human_duration(m.avg_jct_s):>8} "
            f"{_ratio(m.avg_jct_s, base.avg_jct_s) if base else '-':>6} {human_duration(m.avg_wait_s):>8} "
            f"{_ratio(m.avg_wait_s, base.avg_wait_s) if base else '-':>6} {human_duration(m.p50_wait_s):>8} "
            f"{human_duration(m.p99_wait_s):>8} {human_duration(m.max_wait_s):>8} "
            f"{_ratio(m.max_wait_s, base.max_wait_s) if base else '-':>6} {m.bounded_slowdown:>7.1f} "
            f"{m.utilisation:>5.0%} {f'{share:.0%}' if share is not None else '-':>6}")
    lines.append("vsFIFO: the policy's value / FIFO's; bsld: bounded slowdown (10 s); "
                 "gain: share of the FIFO -> oracle-SJF avg-JCT gain")
    return "\n".join(lines)


def _window_clause(window: Window) -> str:
    """The history replayed, for the table's first line: ``"submitted since 2026-11-01 00:00 (warm-up
    2.0d: 13 jobs, the first 1.9d before)"``; a warm-up that found no job says the replay started
    on an empty cluster."""
    text = window.span_text()
    if window.warmup_s > 0:
        asked = f"warm-up {human_duration(window.warmup_s)}"
        if window.warmup_first is None or window.since is None:
            text += f" ({asked}: no job before --since, the replay starts on an empty cluster)"
        else:
            text += (f" ({asked}: {plural(window.warmup_jobs, 'job')}, "
                     f"the first {human_duration(window.since - window.warmup_first)} before)")
    return text


def summary(comparison: Comparison) -> dict[str, object]:
    """``{"jobs": N, "left_out": {...}, "policies": {name: {avg_jct_s, ...}}}`` (what ``--json`` prints)."""
    return {"jobs": comparison.jobs, "left_out": comparison.left_out.as_dict(),
            "policies": {run.policy.name: run.metrics.as_dict() for run in comparison.runs}}


def details(comparison: Comparison) -> dict[str, object]:
    """Everything about the comparison, for the JSON file."""
    c = comparison
    policies = {}
    for run in c.runs:
        policies[run.policy.name] = {
            **run.metrics.as_dict(),
            "gain_share": c.gain_share(run.policy.name),
            "description": run.policy.description,
            "settings": dict(run.policy.settings),
            "cycles": run.result.cycles,
            "engine_s": run.result.engine_s,
            "rpcs": run.result.rpcs,
            "wall_s": run.result.wall_s,
            "wait_by_size": [{"gpus": label, "jobs": n, "avg_wait_s": w}
                             for label, n, w in wait_by_size(run.result.outcomes)],
        }
    return {"source": c.source, "jobs": c.jobs, "left_out": c.left_out.as_dict(), "offered_load": c.offered_load,
            "interval_s": c.interval_s, "window": c.window.as_dict() if c.window is not None else None,
            "cluster": {"name": c.cluster.name, "nodes": len(c.cluster.nodes), "gpus": c.cluster.total_gpus,
                        "shape": c.cluster.describe(), "size_from": c.size_note,
                        "partitions": [{"name": p.name, "tier": p.tier, "priority_factor": p.priority_factor,
                                        "gpus": c.cluster.partition_gpus(p)} for p in c.cluster.partitions]},
            "slurmctld": {key: getattr(c.slurmctld, key) for key in SLURMCTLD_KEYS},
            "policies": policies}


def write_report(comparison: Comparison, out: Path) -> list[Path]:
    """Write the table, the JSON and the plots into ``out`` (created if missing); returns the files.

    They are written into a scratch directory in ``out`` first and renamed into place
    together, so a failed write leaves ``out`` as it was (an earlier report whole).

    Raises:
        OSError: a file could not be written, or its place in ``out`` is a directory
            (``filename`` names it).
    """
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".report-", dir=out))
    try:
        (scratch / TABLE_FILE).write_text(render_table(comparison) + "\n", encoding="utf-8")
        (scratch / RESULTS_FILE).write_text(json.dumps(details(comparison), indent=2) + "\n", encoding="utf-8")
        names = [TABLE_FILE, RESULTS_FILE] + [p.name for p in write_plots(comparison, scratch)]
        for name in names:
            if (out / name).is_dir():
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(out / name))
        for name in names:
            os.replace(scratch / name, out / name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return [out / name for name in names]


def write_plots(comparison: Comparison, out: Path) -> list[Path]:
    """JCT CDF per policy, and average wait by job size per policy (PNG, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    title = f"{Path(comparison.source).name}: {plural(comparison.jobs, 'job')}, {comparison.cluster.total_gpus} GPUs"
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for run in comparison.runs:
        jct = np.maximum(jct_values(run.result.outcomes), 1.0)
        ax.plot(jct, np.arange(1, len(jct) + 1) / len(jct), label=run.policy.name)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (s, log scale)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title(f"JCT CDF - {title}")
    ax.grid(True, alpha=0.3)
    _legend_beside(ax)
    fig.tight_layout()
    cdf = out / JCT_CDF_FILE
    fig.savefig(cdf, dpi=110, bbox_inches="tight")
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(9, 4.5))
    rows = {run.policy.name: wait_by_size(run.result.outcomes) for run in comparison.runs}
    labels = [label for label, _, _ in next(iter(rows.values()))] if rows else []
    width = 0.8 / max(1, len(rows))
    for i, (name, values) in enumerate(rows.items()):
        waits = [w / 3600 for _, _, w in values]
        ax.bar(np.arange(len(labels)) + i * width - 0.4 + width / 2, waits, width, label=name)
    ax.set_xticks(np.arange(len(labels)), [f"{label}\n({n})" for label, n, _ in next(iter(rows.values()), [])])
    ax.set_xlabel("job size in GPUs (jobs)")
    ax.set_ylabel("average wait (h)")
    ax.set_title(f"Wait by job size - {title}")
    ax.grid(True, axis="y", alpha=0.3)
    _legend_beside(ax)
    fig.tight_layout()
    bars = out / WAIT_BY_SIZE_FILE
    fig.savefig(bars, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return [cdf, bars]


def _legend_beside(ax) -> None:  # noqa: ANN001 - a matplotlib Axes
    """The policies' legend right of the plot, where it hides no curve or bar."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
