"""The event loop: arrivals and completions from a heap, daemon cycles on the daemon's interval.

Time jumps from event to event (no fixed ticks). At each event time the loop first
ends the jobs due, then submits the arrivals, then lets the simulated slurmctld run a
scheduling pass. The daemon's cycle (``Engine.run_cycle``, the one scheduling code path,
plus the daemon's refit schedule) runs on the daemon's interval, at multiples of ``interval_s``, but only when it could matter:

* at the first tick at or after any event, if jobs are pending (a cycle that sees an
  event at the same instant runs after it);
* while jobs are pending, at the first tick at or after the daemon's next change
  (:meth:`CycleRunner.next_change`: the next tick when the last cycle left work, such as
  unsettled plans or re-predictions; else when the aging guard moves a score next, or a
  periodic refit or full pass falls due). The ticks in between are skipped: a daemon
  cycling at every one of them would do nothing there, so the run is the same
  (``tests/sim/test_runner.py`` checks it against a daemon that cycles at every tick).

With no jobs pending there is nothing to rank and no cycle runs; finished jobs reach the
engine's history at the next cycle (accounting is read by cursor, so none is lost).
When ``job_submit.lua`` is modelled (``SimSettings.submit_plugin``) the cycles around an
event run with an empty queue too, as long as jobs are still to arrive, and one more runs
at the last tick before each event: that keeps the daemon's submit cache as fresh at an
arrival as a live daemon, which cycles whatever the queue holds, would have it (the cache
is rewritten on its own clock, which the skipped ticks do not follow exactly).
A pass of the scheduler follows every cycle whose actions changed the queue order.
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import logging
import math
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Protocol

from tqdm import tqdm

from slurmsched.model import SchedulerConfig
from slurmsched.sim.clock import SimClock
from slurmsched.sim.cluster import ClusterSpec
from slurmsched.sim.job import SimJob
from slurmsched.sim.slurm import DEFAULT_BF_MAX_JOB_TEST, SimulatedSlurm
from slurmsched.sim.submit_plugin import SubmitPlugin
from slurmsched.sim.workload import TraceJob
from slurmsched.text import plural

log = logging.getLogger(__name__)


class CycleRunner(Protocol):
    """What the loop needs of the daemon (:class:`slurmsched.daemon.Daemon`): one cycle at a given time."""

    def cycle(self, now: float) -> object:
        """Run one cycle (``Engine.run_cycle`` and what the daemon does around it) at ``now``."""
        ...

    def next_change(self) -> float:
        """The earliest time a cycle could act otherwise than one right after the last, if
        nothing happened in between (``-inf``: at the next tick); see :meth:`Daemon.next_change`."""
        ...


#: Builds the daemon for a simulation, given the simulated Slurm (its gateway) and clock.
EngineFactory = Callable[[SimulatedSlurm, SimClock], CycleRunner]


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """When one simulated job waited and ran."""

    job_id: int
    submit: float
    start: float
    end: float
    units: int


@dataclass(frozen=True, slots=True)
class SimSettings:
    """Knobs of the simulation itself.

    Attributes:
        interval_s: the daemon's cycle interval in simulated seconds.
        bf_max_job_test: jobs the simulated scheduler tests per pass.
        progress: show a tqdm progress bar (on a terminal only).
        submit_plugin: model ``job_submit.lua`` (:mod:`slurmsched.sim.submit_plugin`): the
            daemon keeps its submit cache in the simulated plugin, which values new jobs
            from it.
    """

    interval_s: float = 60.0
    bf_max_job_test: int = DEFAULT_BF_MAX_JOB_TEST
    progress: bool = False
    submit_plugin: bool = False


@dataclass(frozen=True, slots=True)
class SimResult:
    """What one simulation produced.

    Attributes:
        outcomes: one per simulated job, in completion order.
        dropped: jobs left out because their partition can never hold them.
        cycles: engine cycles run; ``engine_s``: wall seconds spent in them.
        rpcs: actions the engine sent to the simulated Slurm.
        wall_s: wall seconds for the whole simulation.
    """

    outcomes: tuple[JobOutcome, ...]
    cluster_gpus: int
    dropped: int
    cycles: int
    engine_s: float
    rpcs: int
    wall_s: float


def _tick_at_or_after(moment: float, last_cycle: float, interval: float) -> float:
    """The first multiple of ``interval`` at or after ``moment`` and after ``last_cycle``
    (either may be infinite; ``inf`` when ``moment`` is)."""
    if moment == math.inf:
        return math.inf
    after = -math.inf if last_cycle == -math.inf else (math.floor(last_cycle / interval) + 1) * interval
    return after if moment <= after else math.ceil(moment / interval) * interval


def _to_sim_job(job: TraceJob, slurm: SimulatedSlurm) -> SimJob | None:
    """The simulator's view of a trace job, or ``None`` if its partition can never run it."""
    record = job.record
    partition = slurm.spec.partition(record.partition)
    placement = slurm.placement(record, partition, job.units)
    if placement is None:
        return None
    types, nodes = placement
    limit = record.time_limit_s
    return SimJob(trace=record, job_id=record.job_id, submit=record.submit_time, duration=job.duration,
                  units=job.units, bf_limit=float(limit) if limit else job.duration, final_state=record.state,
                  partition=partition, gpu_types=types, nodes=nodes)


#: Allocations between two young-generation collections of Python's cyclic garbage
#: collector during a run (the interpreter's default is 700), and the ratios of middle and
#: old collections to them (default 10 and 10).
GC_THRESHOLDS = (50_000, 20, 100)


@contextlib.contextmanager
def _few_collections() -> Iterator[None]:
    """Run the body with the cyclic garbage collector scanning rarely; restored on exit.

    A run allocates millions of short-lived objects (records, decisions, reasons) that
    reference counting frees, and keeps a large, long-lived state (the trace, the queue,
    the store's history). At the default thresholds the collector rescanned that state
    again and again: about 4.9 s of Philly's 50 s under ``qssf``, 3.8 s of it in 13 full
    collections. The objects alive before the run are frozen out of its scans and the
    thresholds raised to :data:`GC_THRESHOLDS`; garbage in reference cycles is still
    collected, later.
    """
    before = gc.get_threshold()
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


@_few_collections()
def simulate(jobs: tuple[TraceJob, ...], spec: ClusterSpec, config: SchedulerConfig,
             engine_factory: EngineFactory | None = None, settings: SimSettings = SimSettings(),
             *, label: str = "", position: int | None = None) -> SimResult:
    """Replay ``jobs`` (in submit order) on a simulated cluster.

    Args:
        jobs: the workload, sorted by submit time.
        spec: the cluster.
        config: the simulated slurmctld's priority weights.
        engine_factory: builds the slurmsched engine over the simulated gateway; ``None``
            runs Slurm alone (its own multifactor order).
        settings: interval, backfill depth, progress bar.
        label: progress bar label.
        position: the progress bar's line (one per process when several run at once).
    """
    started_wall = time.perf_counter()
    plugin = SubmitPlugin() if settings.submit_plugin and engine_factory is not None else None
    clock = SimClock(jobs[0].record.submit_time if jobs else 0.0)
    slurm = SimulatedSlurm(spec, config, clock, bf_max_job_test=settings.bf_max_job_test, submit_plugin=plugin)
    engine = engine_factory(slurm, clock) if engine_factory is not None else None
    sim_jobs = [s for s in (_to_sim_job(j, slurm) for j in jobs) if s is not None]
    dropped = len(jobs) - len(sim_jobs)
    if dropped:  # counted in SimResult.dropped, which the report's first line and left_out show
        log.info("%s can never run on this cluster (too big for their partition): left out", plural(dropped, "job"))
    interval = settings.interval_s
    completions: list[tuple[float, int, SimJob]] = []
    outcomes: list[JobOutcome] = []
    next_arrival = 0
    due: float | None = None
    last_cycle = -math.inf
    cycles = 0
    engine_s = 0.0
    bar = tqdm(total=len(sim_jobs), desc=label or "simulating", unit=" jobs",
               disable=None if settings.progress else True,  # None: on a terminal only
               mininterval=0.5, leave=False, position=position)

    def started(batch: list[SimJob]) -> None:
        for job in batch:
            assert job.start is not None  # schedule() returns the jobs it started
            heapq.heappush(completions, (job.start + job.duration, job.job_id, job))

    while next_arrival < len(sim_jobs) or completions or slurm.pending_count:
        t_arrival = sim_jobs[next_arrival].submit if next_arrival < len(sim_jobs) else math.inf
        t_event = min(t_arrival, completions[0][0] if completions else math.inf)
        if engine is not None and (slurm.pending_count or (plugin is not None and next_arrival < len(sim_jobs))):
            if due is not None:
                tick = due
            else:
                tick = math.inf
                if slurm.pending_count:
                    tick = _tick_at_or_after(engine.next_change(), last_cycle, interval)
                if plugin is not None and t_event < math.inf:  # the submit cache, fresh at the next arrival
                    tick = min(tick, (math.ceil(t_event / interval) - 1) * interval)
            if last_cycle < tick < t_event and tick >= clock.now():
                clock.advance_to(tick)
                began = time.perf_counter()
                engine.cycle(tick)
                engine_s += time.perf_counter() - began
                cycles += 1
                last_cycle, due = tick, None
                if slurm.take_reordered():
                    started(slurm.schedule())
                continue
        if t_event == math.inf:
            raise RuntimeError(f"simulation stuck: {slurm.pending_count} jobs pending, none running, no arrivals")
        clock.advance_to(t_event)
        finished = 0
        while completions and completions[0][0] == t_event:
            job = heapq.heappop(completions)[2]
            slurm.finish(job)
            assert job.start is not None  # it ran
            outcomes.append(JobOutcome(job.job_id, job.submit, job.start, t_event, job.units))
            finished += 1
        while next_arrival < len(sim_jobs) and sim_jobs[next_arrival].submit == t_event:
            slurm.submit(sim_jobs[next_arrival])
            next_arrival += 1
        started(slurm.schedule())
        if due is None or due < t_event:
            due = math.ceil(t_event / interval) * interval
        if finished:
            bar.update(finished)
    bar.close()
    return SimResult(outcomes=tuple(outcomes), cluster_gpus=spec.total_gpus, dropped=dropped, cycles=cycles,
                     engine_s=engine_s, rpcs=slurm.rpcs, wall_s=time.perf_counter() - started_wall)
