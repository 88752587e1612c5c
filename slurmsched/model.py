"""Typed domain data shared by every part of slurmsched.

Everything that crosses a module boundary is one of these frozen dataclasses: the
gateway turns Slurm's output into them, the store persists them, the predictor and
policies read them, the planner emits :class:`Action` values and the gateway applies
them. Times are POSIX seconds (``float``) in UTC; durations are whole seconds.
"""

from __future__ import annotations

import enum
import itertools
import operator
from dataclasses import dataclass, field
from typing import Union


class JobState(str, enum.Enum):
    """Slurm's base job states (``JOB_*`` in slurm.h), plus ``OTHER`` for anything new."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUSPENDED = "SUSPENDED"
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    CANCELLED = "CANCELLED"
    FAILED = "FAILED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    REQUEUED = "REQUEUED"
    OTHER = "OTHER"

    @classmethod
    def parse(cls, text: str) -> "JobState":
        """Map Slurm's state text (``"CANCELLED by 0"``, ``"PENDING"``) to a state."""
        head = text.strip().split(" ", 1)[0].upper() if text else ""
        try:
            return cls(head)
        except ValueError:
            return cls.OTHER

    @property
    def finished(self) -> bool:
        """True for every terminal state (the job will not run again as this attempt)."""
        return self not in (JobState.PENDING, JobState.RUNNING, JobState.SUSPENDED,
                            JobState.COMPLETING, JobState.REQUEUED)


@dataclass(frozen=True, slots=True)
class GresRequest:
    """One generic resource in a request or on a node, e.g. ``gpu:a100:8``.

    Attributes:
        name: resource name, ``"gpu"`` for GPUs.
        type: model/type such as ``"a100"``; ``None`` when untyped.
        count: how many (per node for requests and node inventories).
    """

    name: str
    type: str | None
    count: int


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One job (one attempt of one array task) as Slurm, accounting or a trace sees it.

    The same record type serves the live queue (``state`` PENDING/RUNNING, ``end_time``
    None), accounting history and trace jobs (``state`` terminal, ``start_time`` and
    ``end_time`` set). Fields a source cannot supply keep their defaults.

    Attributes:
        job_id: Slurm job id (for array tasks, the task's own id; for a component of a
            heterogeneous job, the component's own id: its leader's id plus its offset).
        user: user name (or anonymised id for traces).
        submit_time: POSIX seconds when the job was submitted.
        time_limit_s: requested wall time in seconds; ``None`` when unlimited or unknown.
        gpus: total GPUs requested by the job (all nodes); CPU-only jobs have 0.
        gpu_type: GPU type requested (``"a100"``), ``None`` when untyped or no GPUs.
        gres_per_node: the job's GRES request per node, as parsed.
        site_factor: current SiteFactor (from ``sprio``) for pending jobs, else ``None``.
        admin_comment: the job's ``AdminComment`` (``job_submit.lua`` stamps the SiteFactor
            it gives: ``slurmsched:site_factor=N``).
        switches: requested leaf-switch count (``--switches``); ``None``/0 means none.
        switch_wait_s: the most a job may wait for ``switches``.
        restart_count: how many times Slurm requeued this job.
        het_job_id: the leader's job id when this job is a component of a heterogeneous
            job (``sbatch ... : ...``), else ``None``.
        het_job_offset: the component's offset in its heterogeneous job (0: the leader,
            whose allocation runs the batch script), else ``None``.
        exit_code: exit status of the batch script for finished jobs.
    """

    job_id: int
    user: str
    submit_time: float
    name: str = ""
    cluster: str = ""
    array_job_id: int | None = None
    array_task_id: int | None = None
    account: str = ""
    partition: str = ""
    qos: str = ""
    state: JobState = JobState.PENDING
    reason: str = ""
    eligible_time: float | None = None
    start_time: float | None = None
    end_time: float | None = None
    time_limit_s: int | None = None
    nodes: int = 1
    cpus: int = 1
    memory_mb: int | None = None
    gpus: int = 0
    gpu_type: str | None = None
    gres_per_node: tuple[GresRequest, ...] = ()
    features: str = ""
    excluded_nodes: str = ""
    node_list: str = ""
    switches: int | None = None
    switch_wait_s: int | None = None
    priority: int | None = None
    site_factor: int | None = None
    admin_comment: str = ""
    nice: int = 0
    restart_count: int = 0
    exit_code: int | None = None
    het_job_id: int | None = None
    het_job_offset: int | None = None

    @property
    def runtime_s(self) -> float | None:
        """Seconds between start and end, or ``None`` until the job has ended."""
        if self.start_time is None or self.end_time is None:
            return None
        return max(0.0, self.end_time - self.start_time)

    @property
    def wait_s(self) -> float | None:
        """Seconds between submit and start, or ``None`` until the job has started."""
        if self.start_time is None:
            return None
        return max(0.0, self.start_time - self.submit_time)


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """One compute node as ``sinfo``/``scontrol show node`` sees it.

    Attributes:
        gres: configured GRES (``gpu:a100:8`` -> ``GresRequest("gpu", "a100", 8)``).
        gres_used: allocated GRES of the same shape.
        state: Slurm's node state words, upper-case (``("IDLE",)``, ``("MIXED", "DRAIN")``).
    """

    name: str
    state: tuple[str, ...]
    partitions: tuple[str, ...] = ()
    cpus: int = 0
    cpus_alloc: int = 0
    memory_mb: int = 0
    features: tuple[str, ...] = ()
    gres: tuple[GresRequest, ...] = ()
    gres_used: tuple[GresRequest, ...] = ()

    def gpus(self, gpu_type: str | None = None) -> int:
        """Configured GPUs, of one type or all."""
        return sum(g.count for g in self.gres
                   if g.name == "gpu" and (gpu_type is None or g.type == gpu_type))

    def gpus_used(self, gpu_type: str | None = None) -> int:
        """Allocated GPUs, of one type or all."""
        return sum(g.count for g in self.gres_used
                   if g.name == "gpu" and (gpu_type is None or g.type == gpu_type))


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    """One partition as ``scontrol show partition`` describes it.

    Attributes:
        name: the partition's name.
        tier: ``PriorityTier``: slurmctld considers jobs of a higher tier first.
        default: whether it is the default partition (``Default=YES``).
        priority_factor: the partition factor of its jobs' multifactor priority (times
            ``PriorityWeightPartition``): its ``PriorityJobFactor`` over the largest of all
            partitions', 0 to 1.
    """

    name: str
    tier: int = 1
    default: bool = False
    priority_factor: float = 1.0


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """The parts of slurmctld's configuration the planner sizes itself against.

    Read from ``scontrol show config`` (or set by the simulator). Weights are Slurm's
    ``PriorityWeight*`` values; ``priority_max_age_s`` is ``PriorityMaxAge``.
    """

    priority_type: str = "priority/multifactor"
    weight_age: int = 0
    weight_fairshare: int = 0
    weight_job_size: int = 0
    weight_partition: int = 0
    weight_qos: int = 0
    weight_tres: str = ""
    priority_max_age_s: int = 7 * 86400
    topology_plugin: str = ""
    max_switch_wait_s: int = 300
    scheduler_type: str = "sched/backfill"
    select_type: str = "select/cons_tres"


_STATE_OF = operator.attrgetter("state")


@dataclass(frozen=True, slots=True)
class QueueDelta:
    """How the pending queue changed since an earlier snapshot from the same gateway.

    A gateway that keeps the queue itself (the simulated Slurm) can say this without
    its reader comparing every job, so a cycle's cost follows what changed rather than
    the queue's length; a gateway that re-reads Slurm (the CLI one) leaves it out.

    Attributes:
        base: ``serial`` of the snapshot this delta is relative to.
        changed: pending jobs whose record is new or different since then.
        left: ids of jobs no longer pending since then (may include jobs that arrived
            and left in between).
    """

    base: int
    changed: tuple[JobRecord, ...]
    left: frozenset[int]


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """What the daemon sees of the cluster at one moment.

    Attributes:
        taken_at: POSIX seconds when the snapshot was read.
        jobs: pending and running jobs (finished jobs are filtered out).
        nodes: every node.
        config: scheduler configuration at that time.
        serial: this gateway's count of snapshots taken (0: not counted).
        delta: the pending queue's changes since an earlier snapshot, when the gateway
            knows them (``None``: compare the jobs).
    """

    taken_at: float
    cluster: str
    jobs: tuple[JobRecord, ...]
    nodes: tuple[NodeRecord, ...]
    config: SchedulerConfig = field(default_factory=SchedulerConfig)
    serial: int = 0
    delta: QueueDelta | None = None

    @property
    def pending(self) -> tuple[JobRecord, ...]:
        """Pending jobs, in the order Slurm listed them (filtered without a Python-level loop)."""
        jobs = self.jobs
        return tuple(itertools.compress(jobs, map(operator.is_, map(_STATE_OF, jobs),
                                                  itertools.repeat(JobState.PENDING))))

    @property
    def running(self) -> tuple[JobRecord, ...]:
        """Running (or completing/suspended) jobs."""
        return tuple(j for j in self.jobs if j.state is not JobState.PENDING)


# --- Actions: the only changes slurmsched ever makes to a job ----------------------

#: Slurm accepts SiteFactor within +/- this (``NICE_OFFSET`` - 3): the bound of every
#: value slurmsched sends (``gateway.argv``) and of its levels (``planner.scale``).
SITE_FACTOR_LIMIT = 2_147_483_645


@dataclass(frozen=True, slots=True)
class SetSiteFactor:
    """``scontrol update JobId=<job_id> SiteFactor=<value>``; ``previous`` restores it."""

    job_id: int
    value: int
    previous: int | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class SetSwitches:
    """``scontrol update JobId=<id> Switches=<count>@<wait>``; ``count=0`` clears it."""

    job_id: int
    count: int
    max_wait_s: int | None = None
    previous_count: int | None = None
    previous_wait_s: int | None = None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class SetFeatures:
    """``scontrol update JobId=<id> Features=<features>`` (node feature constraint)."""

    job_id: int
    features: str
    previous: str = ""
    reason: str = ""


Action = Union[SetSiteFactor, SetSwitches, SetFeatures]


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    """What Slurm said to one action: ``ok`` and its own message (error text if any)."""

    action: Action
    ok: bool
    message: str = ""


# --- What the predictor and the engine produce ------------------------------------

@dataclass(frozen=True, slots=True)
class Prediction:
    """A duration estimate for one job.

    Attributes:
        estimate_s: point estimate of the run time in seconds (> 0).
        low_s, high_s: spread (e.g. 10th and 90th percentile) in seconds.
        source: where it came from, for humans: ``"user+name history, 14 runs"``,
            ``"model v7"``, ``"cold start: user's time limit"``.
        model_version: version of the fitted model that produced it (``""`` for rules).
    """

    job_id: int
    estimate_s: float
    low_s: float
    high_s: float
    source: str
    model_version: str = ""


@dataclass(frozen=True, slots=True)
class Decision:
    """One line of ``slurmsched explain``: what a cycle decided for a job and why.

    Attributes:
        kind: ``"rank"`` for the policy's verdict, else the action class name
            (``"SetSiteFactor"``, ``"SetSwitches"``, ...), or ``"revert"``.
        previous, new: the value replaced and the value set, as text (``None`` if n/a).
        outcome: ``"ok"``, ``"failed: <slurm text>"``, ``"dry-run"``, ``"skipped: <why>"``.
        reason: human-readable reason from the policy or planner.
    """

    job_id: int
    kind: str
    outcome: str
    reason: str = ""
    previous: str | None = None
    new: str | None = None
    score: float | None = None
    rank: int | None = None
