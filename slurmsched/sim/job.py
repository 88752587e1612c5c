"""The simulator's own, mutable state of one job (never leaves :mod:`slurmsched.sim`).

The gateway shows jobs to the engine as frozen :class:`~slurmsched.model.JobRecord`
values; this object is what the simulated slurmctld keeps behind them.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmsched.model import JobRecord, JobState
from slurmsched.sim.cluster import PartitionSpec
from slurmsched.sim.placement import Allocation, GpuTypes


@dataclass(slots=True, eq=False)
class SimJob:
    """One job inside the simulated Slurm.

    Attributes:
        trace: the job as the trace (or history) recorded it; the records the gateway
            shows are derived from it when first needed.
        job_id, submit: Slurm job id and submit (= eligible) time.
        duration: the true run time (seconds) from the trace.
        units: GPUs the job occupies (processors for CPU traces).
        bf_limit: the run time EASY backfill plans with: the requested time limit when
            the trace has one, else the true duration.
        final_state: the state the trace recorded at the end (COMPLETED, FAILED ...).
        partition: the partition it runs in; ``gpu_types``: node types it may use.
        nodes: nodes it will occupy (the fewest that can hold it; set at submit).
        site_factor: current SiteFactor (changed only through the gateway's ``apply``).
        group: the id of its placement group, numbered by the simulated slurmctld: jobs of
            the same pool, partition whose nodes they may use, GPU types and node count
            compete for the same nodes in the same way.
        start, end, alloc: set when it starts.
    """

    trace: JobRecord
    job_id: int
    submit: float
    duration: float
    units: int
    bf_limit: float
    final_state: JobState
    partition: PartitionSpec
    gpu_types: GpuTypes = None
    nodes: int = 1
    site_factor: int = 0
    start: float | None = None
    end: float | None = None
    alloc: Allocation = ()
    group: int = 0
