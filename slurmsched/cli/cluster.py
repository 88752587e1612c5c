"""``slurmsched queue``: the cluster as the gateway sees it (jobs, SiteFactor, GPU use)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
from typing import Any, Sequence

import click

from slurmsched.cli import get_config
from slurmsched.cli.output import columns, fit, printable
from slurmsched.gateway import make_gateway
from slurmsched.gateway.argv import format_duration
from slurmsched.model import ClusterSnapshot, JobRecord, NodeRecord

_NAME_WIDTH = 24
#: Fewest terminal columns the job table's user, name and reason keep on a narrow terminal.
_NARROWEST = 8


def _printable(text: str, width: int) -> str:
    """One table cell: control characters shown as ``?``, cut to ``width`` terminal columns."""
    return fit(printable(text), width).rstrip(" ")


def _limit(seconds: int | None) -> str:
    return "UNLIMITED" if seconds is None else format_duration(seconds)


def _gpus(job: JobRecord) -> str:
    if not job.gpus:
        return "-"
    return f"{job.gpus} {job.gpu_type}" if job.gpu_type else str(job.gpus)


def _node_gpus(node: NodeRecord) -> str:
    types = sorted({g.type or "" for g in node.gres if g.name == "gpu"})
    if not types:
        return "-"
    return " ".join(f"{t or 'gpu'} {node.gpus_used(t or None)}/{node.gpus(t or None)}" for t in types)


def _table(rows: Sequence[tuple[str, ...]], width: int | None = None,
           narrowest: dict[int, int] | None = None) -> list[str]:
    """Rows as aligned lines; with ``width``, the columns in ``narrowest`` (index: fewest
    columns kept) give up one column at a time, the one with the most to spare first,
    until a line fits in ``width`` (cut cells end in ``~``) or each is down to its least."""
    widths = [max(columns(row[i]) for row in rows) for i in range(len(rows[0]))]
    over = sum(widths) + 2 * (len(widths) - 1) - (width or 0)
    slack = {i: widths[i] - least for i, least in (narrowest or {}).items()} if width else {}
    while over > 0 and slack:
        i = max(slack, key=slack.__getitem__)
        if slack[i] <= 0:
            break
        widths[i] -= 1
        slack[i] -= 1
        over -= 1
    return ["  ".join(fit(cell, w) for cell, w in zip(row, widths)).rstrip() for row in rows]


def _shown_id(job: JobRecord) -> str:
    """The job's id as ``squeue`` shows it: ``7_3`` for an array task, ``5+1`` for a
    heterogeneous job's component, else the number."""
    if job.array_task_id is not None:
        return f"{job.array_job_id}_{job.array_task_id}"
    if job.het_job_id is not None:
        return f"{job.het_job_id}+{job.het_job_offset}"
    return str(job.job_id)


def render_snapshot(snap: ClusterSnapshot, width: int | None = None) -> list[str]:
    """The human view of a snapshot: a job table (pending first) and a node table.

    With ``width`` (a terminal's), the job table's user, name and reason columns are cut
    (down to :data:`_NARROWEST` columns each) so its lines fit in it where they can.
    """
    jobs = sorted(snap.jobs, key=lambda j: (j.state.value != "PENDING", -(j.priority or 0), j.job_id))
    rows = [("JOBID", "USER", "NAME", "STATE", "PARTITION", "GPUS", "TIME_LIMIT", "SITEFACTOR", "PRIORITY",
             "REASON")]
    for job in jobs:
        rows.append((_shown_id(job), _printable(job.user, 12), _printable(job.name, _NAME_WIDTH), job.state.value,
                     job.partition, _gpus(job), _limit(job.time_limit_s),
                     "-" if job.site_factor is None else str(job.site_factor),
                     "-" if job.priority is None else str(job.priority), _printable(job.reason, 30)))
    lines = [f"cluster {snap.cluster or '?'}: {len(snap.pending)} pending, {len(snap.running)} running"]
    lines += _table(rows, width, {1: _NARROWEST, 2: _NARROWEST, 9: _NARROWEST})
    node_rows = [("NODE", "STATE", "PARTITIONS", "CPUS(A/T)", "GPUS(USED/TOTAL)")]
    for node in snap.nodes:
        node_rows.append((node.name, "+".join(node.state), ",".join(node.partitions),
                          f"{node.cpus_alloc}/{node.cpus}", _node_gpus(node)))
    return [*lines, "", *_table(node_rows)]


#: Version of ``queue --json``'s document (its ``format`` key), raised when a key changes meaning or goes.
QUEUE_JSON_FORMAT = 1


def snapshot_document(snap: ClusterSnapshot) -> dict[str, Any]:
    """``queue --json``'s document: ``format`` (:data:`QUEUE_JSON_FORMAT`), ``taken_at``,
    ``cluster``, ``jobs``, ``nodes`` and ``config``, each job and node with its record's
    fields. The gateway's own bookkeeping (``serial``, ``delta``) is left out."""
    return {"format": QUEUE_JSON_FORMAT, "taken_at": snap.taken_at, "cluster": snap.cluster,
            "jobs": [dataclasses.asdict(job) for job in snap.jobs],
            "nodes": [dataclasses.asdict(node) for node in snap.nodes],
            "config": dataclasses.asdict(snap.config)}


@click.command("queue")
@click.option("--json", "as_json", is_flag=True, envvar="SLURMSCHED_QUEUE_JSON", allow_from_autoenv=False,
              show_envvar=True, help="Print the snapshot as JSON instead of tables (ASCII, other characters "
                                     "escaped; a 'format' key versions the document).")
@click.pass_context
def queue(ctx: click.Context, as_json: bool) -> None:
    """Show pending and running jobs (with SiteFactor) and nodes (with GPU use).

    Reads the cluster once through the configured gateway (``squeue``/``sinfo --json``,
    ``sprio``, ``scontrol show config`` for the CLI backend); changes nothing. On a
    terminal the job table's user, name and reason are cut to fit its width.
    """
    snap = make_gateway(get_config(ctx)).snapshot()
    if as_json:
        click.echo(json.dumps(snapshot_document(snap), indent=1))  # ASCII: readable whatever the locale
        return
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    for line in render_snapshot(snap, width):
        click.echo(line)


COMMANDS = [queue]
