"""The daemon's loop as Prometheus metrics, in the text format that node_exporter's
textfile collector reads (``daemon.metrics_file``, a ``*.prom`` file in its directory).

Counters count from the daemon's start (Prometheus's ``rate()`` and ``increase()`` take a
restart's reset in their stride); gauges are of the last cycle that succeeded. The
file names no user or job, so it is world-readable (mode 0644). What to alert on:

* ``time() - slurmsched_last_cycle_timestamp_seconds`` above a few intervals: the
  daemon is stopped or stuck (the file stays when it stops; its timestamps age);
* ``increase(slurmsched_cycle_failures_total[15m]) > 0``: Slurm or the database did
  not answer (the journal says which);
* ``slurmsched_paused == 1`` for longer than a maintenance takes;
* ``rate(slurmsched_action_failures_total[1h])``: updates slurmctld refused.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from slurmsched.atomic import replace_file
from slurmsched.engine import CycleReport
from slurmsched.store.protocol import CycleKind

#: Stages of :attr:`CycleReport.timings` exported, in the order the cycle runs them.
STAGES = ("snapshot", "finished", "predict", "plan", "apply", "store", "record")


@dataclass(slots=True)
class LoopMetrics:
    """What the daemon's loop did since it started, and what its last good cycle saw.

    Attributes:
        started_at: when the daemon started (POSIX seconds).
        info: labels of ``slurmsched_info`` (``version``, ``policy``, ``predictor``).
        cycles: cycles that succeeded, by kind (``live``, ``dry-run``, ``paused``).
        failures: cycles that failed (Slurm or the database did not answer).
        last_failure_at: when the latest of those started, if any did.
        sent: ``scontrol update`` actions sent to Slurm.
        refused: of those, the ones Slurm refused.
        finished: finished jobs read from accounting.
        last: the latest cycle that succeeded, if any did.
    """

    started_at: float
    info: dict[str, str] = field(default_factory=dict)
    cycles: dict[str, int] = field(default_factory=lambda: {kind.value: 0 for kind in (
        CycleKind.LIVE, CycleKind.DRY_RUN, CycleKind.PAUSED)})
    failures: int = 0
    last_failure_at: float | None = None
    sent: int = 0
    refused: int = 0
    finished: int = 0
    last: CycleReport | None = None

    def succeeded(self, report: CycleReport) -> None:
        """Count a cycle that ran to its end."""
        self.cycles[report.kind.value] += 1
        self.sent += len(report.outcomes)
        self.refused += report.failed
        self.finished += report.finished
        self.last = report

    def failed(self, at: float) -> None:
        """Count a cycle, started at ``at``, that failed."""
        self.failures += 1
        self.last_failure_at = at

    def render(self) -> str:
        """The metrics in Prometheus's text exposition format (version 0.0.4)."""
        last = self.last
        lines: list[str] = []
        _metric(lines, "info", "gauge", "1, labelled with the daemon's version, policy and predictor.",
                [(",".join(f'{key}="{_escape(value)}"' for key, value in self.info.items()), 1)])
        _metric(lines, "start_time_seconds", "gauge", "When the daemon started (POSIX seconds).",
                [("", self.started_at)])
        _metric(lines, "cycles_total", "counter", "Cycles that ran to their end since the daemon started, by kind.",
                [(f'kind="{kind}"', n) for kind, n in self.cycles.items()])
        _metric(lines, "cycle_failures_total", "counter",
                "Cycles that failed (Slurm or the database did not answer) since the daemon started.",
                [("", self.failures)])
        if self.last_failure_at is not None:
            _metric(lines, "last_failure_timestamp_seconds", "gauge", "When the latest failed cycle started.",
                    [("", self.last_failure_at)])
        _metric(lines, "actions_total", "counter", "scontrol update actions sent to Slurm since the daemon started.",
                [("", self.sent)])
        _metric(lines, "action_failures_total", "counter", "Actions sent that Slurm refused.", [("", self.refused)])
        _metric(lines, "finished_jobs_total", "counter", "Finished jobs read from accounting since the daemon started.",
                [("", self.finished)])
        if last is not None:
            _metric(lines, "last_cycle_timestamp_seconds", "gauge", "When the latest cycle that succeeded started.",
                    [("", last.started_at)])
            _metric(lines, "cycle_duration_seconds", "gauge", "How long the latest cycle that succeeded took.",
                    [("", last.timings.get("total", 0.0))])
            _metric(lines, "cycle_stage_seconds", "gauge", "The latest cycle's seconds in each stage.",
                    [(f'stage="{stage}"', last.timings[stage]) for stage in STAGES if stage in last.timings])
            _metric(lines, "pending_jobs", "gauge", "Pending jobs in the latest cycle's queue.", [("", last.pending)])
            _metric(lines, "running_jobs", "gauge", "Running jobs in the latest cycle's queue.", [("", last.running)])
            _metric(lines, "planned_actions", "gauge",
                    "Actions the latest cycle planned (sent unless dry-run or paused).", [("", len(last.plan.actions))])
            _metric(lines, "held_changes", "gauge", "Changes the latest cycle held back by hysteresis.",
                    [("", last.plan.held)])
            _metric(lines, "update_rpcs", "gauge", "scontrol update calls the latest cycle's planned actions take.",
                    [("", last.plan.rpcs)])
            _metric(lines, "deferred_changes", "gauge", "Changes the latest cycle left for later cycles "
                    "(planner.max_rpcs_per_cycle).", [("", last.plan.deferred)])
            _metric(lines, "changes_in_force", "gauge", "Changes slurmsched holds on jobs, which slurmsched revert "
                    "restores (those of jobs that left the queue go at the next full pass, within an hour).",
                    [("", last.in_force)])
            _metric(lines, "paused", "gauge", "1 while paused (slurmsched pause): the daemon sends nothing.",
                    [("", int(last.paused))])
            _metric(lines, "dry_run", "gauge", "1 for a dry-run daemon, which sends nothing.",
                    [("", int(last.dry_run))])
        return "\n".join(lines) + "\n"


def _metric(lines: list[str], name: str, kind: str, help_text: str,
            samples: Iterable[tuple[str, float | int]]) -> None:
    full = f"slurmsched_{name}"
    lines += [f"# HELP {full} {help_text}", f"# TYPE {full} {kind}"]
    lines += [f"{full}{{{labels}}} {_value(v)}" if labels else f"{full} {_value(v)}" for labels, v in samples]


def _escape(text: str) -> str:
    """A label value as the text format quotes it (backslash, double quote and line feed escaped)."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _value(value: float | int) -> str:
    """A sample's value: an integer as such, a float to the last bit (every value is finite)."""
    return repr(value)


def write_metrics(path: Path, metrics: LoopMetrics) -> None:
    """Replace the metrics file atomically (mode 0644: node_exporter runs as another user).

    Raises:
        OSError: the directory does not exist or is not writable.
    """
    replace_file(path, metrics.render(), 0o644)
