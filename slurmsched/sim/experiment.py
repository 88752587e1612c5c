"""Run one workload under several policies on the same simulated cluster.

The policies' runs are independent: with ``sim.workers`` above 1 they run side by side
(:func:`slurmsched.sim.workers.run_side_by_side`), with the same results.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping, Sequence

from slurmsched.config import Config, SimSection
from slurmsched.sim.cluster import ClusterSpec
from slurmsched.sim.metrics import PolicyMetrics, compute_metrics, gain_share
from slurmsched.sim.policies import SimPolicy, engine_factory, scheduler_config
from slurmsched.sim.runner import SimResult, SimSettings, simulate
from slurmsched.sim.sizing import offered_load
from slurmsched.sim.workers import run_side_by_side
from slurmsched.sim.workload import LeftOut, TraceJob, Window, Workload


@dataclass(frozen=True, slots=True)
class PolicyRun:
    """One policy's simulation and its metrics."""

    policy: SimPolicy
    result: SimResult
    metrics: PolicyMetrics


@dataclass(frozen=True, slots=True)
class Comparison:
    """Every policy's run over one workload and cluster.

    Attributes:
        source: where the jobs came from.
        jobs: jobs simulated and measured (those the cluster can run; not the warm-up).
        cluster: the simulated cluster; ``size_note``: where its size came from.
        offered_load: work offered per GPU-second over the arrival span (``None``: the
            jobs all arrive at once).
        interval_s: the daemon's cycle interval used.
        runs: one per policy, in the order asked for.
        slurmctld: the simulated slurmctld's settings (``[sim]``, or the live cluster's
            priority weights with ``--nodes-from-slurm``).
        left_out: what of the input was not replayed, and why (the same for every policy:
            the jobs too big for their partition depend on the cluster alone); the
            measured jobs only, not the warm-up's.
        window: the part of the history replayed (``None`` for a trace).
    """

    source: str
    jobs: int
    cluster: ClusterSpec
    size_note: str
    offered_load: float | None
    interval_s: float
    runs: tuple[PolicyRun, ...]
    slurmctld: SimSection
    left_out: LeftOut = LeftOut()
    window: Window | None = None

    def run(self, name: str) -> PolicyRun | None:
        """The run of the named policy, if it was simulated."""
        return next((r for r in self.runs if r.policy.name == name), None)

    def gain_share(self, name: str) -> float | None:
        """Share of the FIFO -> oracle-SJF avg-JCT gain that ``name`` reaches (needs fifo and sjf)."""
        fifo, sjf, run = self.run("fifo"), self.run("sjf"), self.run(name)
        if fifo is None or sjf is None or run is None:
            return None
        return gain_share(fifo.metrics.avg_jct_s, sjf.metrics.avg_jct_s, run.metrics.avg_jct_s)


@dataclass(frozen=True, slots=True)
class _Inputs:
    """What every policy's run of one comparison shares."""

    jobs: tuple[TraceJob, ...]
    cluster: ClusterSpec
    config: Config
    durations: Mapping[int, float]
    settings: SimSettings
    measured_from: float | None

    def run(self, policy: SimPolicy, position: int | None = None) -> PolicyRun:
        """Simulate the jobs under ``policy`` (progress bar on line ``position``); the
        result holds the measured jobs only (not the warm-up)."""
        result = simulate(self.jobs, self.cluster, scheduler_config(policy, self.config),
                          engine_factory(policy, self.config, self.durations), self.settings,
                          label=policy.name, position=position)
        if self.measured_from is not None:
            start = self.measured_from
            result = dataclasses.replace(result, outcomes=tuple(o for o in result.outcomes if o.submit >= start))
        return PolicyRun(policy, result, compute_metrics(result.outcomes, self.cluster.total_gpus))


def compare(workload: Workload, cluster: ClusterSpec, size_note: str, policies: Sequence[SimPolicy],
            config: Config, *, progress: bool = False) -> Comparison:
    """Simulate ``workload`` on ``cluster`` once per policy, ``config.sim.workers`` at a time.

    Args:
        config: the daemon's configuration (policy arguments, planner, cycle interval,
            refit schedule) and the simulated slurmctld's (``[sim]``).
        progress: show a progress bar per policy.
    """
    settings = SimSettings(interval_s=config.daemon.interval_s, bf_max_job_test=config.sim.bf_max_job_test,
                           progress=progress, submit_plugin=config.sim.submit_plugin)
    durations = {job.record.job_id: job.duration for job in workload.jobs}
    inputs = _Inputs(workload.jobs, cluster, config, durations, settings, workload.measured_from)
    runs = run_side_by_side(inputs.run, policies, config.sim.workers)
    measured = len(workload.measured().jobs)
    simulated = len(runs[0].result.outcomes) if runs else measured
    too_big = measured - simulated  # the measured jobs the cluster cannot run (the warm-up's are not counted)
    return Comparison(workload.source, simulated, cluster, size_note, offered_load(workload, cluster),
                      config.daemon.interval_s, tuple(runs), config.sim, workload.left_out.with_too_big(too_big),
                      workload.window)
