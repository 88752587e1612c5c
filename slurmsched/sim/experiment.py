"""Run one workload under several policies on the same simulated cluster.

The policies' runs are independent, so with ``sim.workers`` above 1 they run side by
side, each in a worker process of its own (started by a ``forkserver``: a fork of a
process whose OpenMP threads have run can hang). Every worker receives the workload
once; the runs and their results are the same as one after another.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from typing import Mapping, Sequence

from tqdm import tqdm

from slurmsched import LOG_FORMAT
from slurmsched.config import Config
from slurmsched.errors import SimulationError
from slurmsched.sim.cluster import ClusterSpec
from slurmsched.sim.metrics import PolicyMetrics, compute_metrics, gain_share
from slurmsched.sim.policies import SimPolicy, engine_factory, scheduler_config
from slurmsched.sim.runner import SimResult, SimSettings, simulate
from slurmsched.sim.sizing import offered_load
from slurmsched.sim.workload import TraceJob, Workload


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
        jobs: jobs simulated (those the cluster can run).
        cluster: the simulated cluster; ``size_note``: where its size came from.
        offered_load: work offered per GPU-second over the arrival span.
        interval_s: the daemon's cycle interval used.
        runs: one per policy, in the order asked for.
    """

    source: str
    jobs: int
    cluster: ClusterSpec
    size_note: str
    offered_load: float
    interval_s: float
    runs: tuple[PolicyRun, ...]

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

    def run(self, policy: SimPolicy, position: int | None = None) -> PolicyRun:
        """Simulate the jobs under ``policy`` (progress bar on line ``position``)."""
        result = simulate(self.jobs, self.cluster, scheduler_config(policy, self.config),
                          engine_factory(policy, self.config, self.durations), self.settings,
                          label=policy.name, position=position)
        return PolicyRun(policy, result, compute_metrics(result.outcomes, self.cluster.total_gpus))


_worker_inputs: _Inputs | None = None
_worker_line = 0


def _start_worker(inputs: _Inputs, log_level: int, lines: Synchronized) -> None:
    global _worker_inputs, _worker_line
    _worker_inputs = inputs
    with lines.get_lock():  # each worker draws its progress bars on a terminal line of its own
        _worker_line = lines.value
        lines.value += 1
    logging.basicConfig(level=log_level, format=LOG_FORMAT)  # on stderr, as the command's own log
    # tqdm would make a multiprocessing lock (a named semaphore) for its bars, which a
    # killed worker leaves behind for the resource tracker to warn about
    tqdm.set_lock(threading.RLock())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # an idle worker waits for the parent to stop it


def _run_in_worker(policy: SimPolicy) -> PolicyRun:
    if _worker_inputs is None:
        raise RuntimeError("simulation worker started without its inputs")
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C ends a run with KeyboardInterrupt
    try:
        return _worker_inputs.run(policy, _worker_line)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def _run_all(inputs: _Inputs, policies: Sequence[SimPolicy], workers: int) -> list[PolicyRun]:
    """Every policy's run, in order: in-process, or on up to ``workers`` processes.

    The workers log as this process does. Ctrl-C at the terminal reaches the workers
    too: their runs end, the runs not started are cancelled, and the command stops.

    Raises:
        SimulationError: worker processes cannot be started, or one died (killed, or
            out of memory).
    """
    workers = min(workers, len(policies))
    if workers <= 1:
        return [inputs.run(policy) for policy in policies]
    context = multiprocessing.get_context("forkserver")
    try:
        pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                                   initargs=(inputs, logging.getLogger().level, context.Value("i", 0)))
    except OSError as exc:  # no POSIX semaphores (e.g. no /dev/shm in a container)
        raise SimulationError(f"cannot start simulation worker processes ({exc.strerror or exc}); "
                              "use --workers 1") from None
    with pool:
        futures = [pool.submit(_run_in_worker, policy) for policy in policies]
        try:
            return [future.result() for future in futures]
        except BrokenProcessPool:
            raise SimulationError(f"a simulation worker process died (killed, or out of memory: each of the "
                                  f"{workers} workers holds its own copy of the workload; try fewer --workers)"
                                  ) from None
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise


def compare(workload: Workload, cluster: ClusterSpec, size_note: str, policies: Sequence[SimPolicy],
            config: Config, *, progress: bool = False) -> Comparison:
    """Simulate ``workload`` on ``cluster`` once per policy, ``config.sim.workers`` at a time.

    Args:
        config: the daemon's configuration (policy arguments, planner, cycle interval,
            refit schedule) and the simulated slurmctld's (``[sim]``).
        progress: show a progress bar per policy.
    """
    settings = SimSettings(interval_s=config.daemon.interval_s, bf_max_job_test=config.sim.bf_max_job_test,
                           progress=progress)
    durations = {job.record.job_id: job.duration for job in workload.jobs}
    runs = _run_all(_Inputs(workload.jobs, cluster, config, durations, settings), policies, config.sim.workers)
    simulated = len(runs[0].result.outcomes) if runs else len(workload.jobs)
    return Comparison(workload.source, simulated, cluster, size_note, offered_load(workload, cluster),
                      config.daemon.interval_s, tuple(runs))
