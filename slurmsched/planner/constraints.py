"""Constraint tuning: leaf-switch requests and GPU-type widening for pending jobs.

Both are switchable in ``[constraints]`` and both only ever set fields Slurm can
change safely on a pending job (``Switches``, ``Features``); a job's typed GRES is
never rewritten (on Slurm 22.05 that corrupts the job, see SLURM_LAB.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Container, Iterable, Sequence

from slurmsched.config import ConstraintsSection
from slurmsched.model import (Action, ClusterSnapshot, JobRecord, NodeRecord, SchedulerConfig, SetFeatures,
                              SetSwitches)

UNUSABLE_NODE_STATES = frozenset({
    "DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "NOT_RESPONDING", "POWERED_DOWN",
    "POWER_DOWN", "POWERING_DOWN", "FUTURE", "MAINTENANCE", "MAINT", "INVALID", "UNKNOWN",
})


@dataclass(frozen=True, slots=True)
class _GpuNode:
    partitions: frozenset[str]
    free: int


class ConstraintTuner:
    """Plans ``SetSwitches`` and ``SetFeatures`` actions.

    Switch requests depend only on the job and the scheduler configuration
    (:meth:`switches`); GPU-type widening also depends on the nodes' free GPUs, so the
    caller re-runs :meth:`widen` over the *pinned* jobs (:meth:`pinned`) whenever nodes
    or pinned jobs change.
    """

    def __init__(self, section: ConstraintsSection) -> None:
        self.section = section
        self._class_of: dict[str, tuple[str, ...]] = {
            gpu_type.lower(): tuple(t.lower() for t in group)
            for group in section.gpu_equivalence for gpu_type in group}

    def plan(self, jobs: Sequence[JobRecord], snapshot: ClusterSnapshot,
             switched: Container[int] = ()) -> list[Action]:
        """Every constraint action for ``jobs`` (pending, unprotected, most urgent first).

        Args:
            switched: ids of jobs slurmsched already gave a switch request.
        """
        actions: list[Action] = [a for a in (self.switches(job, snapshot.config, job.job_id in switched)
                                             for job in jobs) if a is not None]
        actions.extend(self.widen([job for job in jobs if self.pinned(job)], snapshot.nodes))
        return actions

    def tunes_switches(self, config: SchedulerConfig) -> bool:
        """True when switch requests are switched on and slurmctld runs ``topology/tree``."""
        return self.section.switches and config.topology_plugin == "topology/tree"

    @property
    def widens(self) -> bool:
        """True when GPU-type equivalence classes are configured."""
        return bool(self._class_of)

    def switches(self, job: JobRecord, config: SchedulerConfig, set_before: bool = False) -> SetSwitches | None:
        """``Switches=1@<wait>`` for a multi-node GPU job without a switch request (topology/tree only).

        A job's own request is in ``job.switches`` (the CLI gateway reads it from
        ``scontrol show job`` where Slurm 22.05's JSON lacks it); ``set_before`` says
        slurmsched already set one, for gateways that cannot see it.
        """
        if (set_before or job.nodes <= 1 or job.gpus <= 0 or job.switches
                or not self.tunes_switches(config)):
            return None
        wait = min(self.section.switch_wait_s, config.max_switch_wait_s)
        return SetSwitches(job.job_id, 1, wait, job.switches or 0, job.switch_wait_s,
                           f"multi-node GPU job: keep its {job.nodes} nodes on one leaf switch"
                           f" (waits up to {wait} s for that)")

    def pinned(self, job: JobRecord) -> bool:
        """True when ``Features`` pin an untyped GPU job to one type of an equivalence class."""
        return (self.widens and job.gpus > 0 and job.gpu_type is None
                and job.features.strip().lower() in self._class_of)

    def widen(self, jobs: Sequence[JobRecord], nodes: Iterable[NodeRecord]) -> list[SetFeatures]:
        """``Features=t|u`` for pinned jobs whose type ``t`` is saturated while ``u`` has room.

        Jobs are taken in the given order (most urgent first) and each widened job uses
        up its GPUs of the equivalent type's idle budget.
        """
        if not jobs:
            return []
        by_type = _gpu_nodes_by_type(nodes)
        budget = {t: sum(n.free for n in group) for t, group in by_type.items()}
        actions = []
        for job in jobs:
            pinned = job.features.strip().lower()
            group = self._class_of[pinned]
            need = math.ceil(job.gpus / max(job.nodes, 1))
            parts = frozenset(p for p in job.partition.split(",") if p)
            if _fits(by_type.get(pinned, ()), parts, need, job.nodes):
                continue
            room = [t for t in group if t != pinned and budget.get(t, 0) >= job.gpus
                    and _fits(by_type.get(t, ()), parts, need, job.nodes)]
            if not room:
                continue
            budget[room[0]] -= job.gpus
            features = "|".join([job.features.strip()] + [t for t in group if t != pinned and t in by_type])
            actions.append(SetFeatures(
                job.job_id, features, job.features,
                f"{pinned} GPUs saturated, {room[0]} has {budget[room[0]] + job.gpus} idle: "
                f"widened to equivalent types Features={features}"))
        return actions


def _gpu_nodes_by_type(nodes: Iterable[NodeRecord]) -> dict[str, list[_GpuNode]]:
    """Usable nodes per GPU type (the type must also be a node feature to be selectable)."""
    by_type: dict[str, list[_GpuNode]] = {}
    for node in nodes:
        if UNUSABLE_NODE_STATES.intersection(node.state):
            continue
        features = {f.lower() for f in node.features}
        for gpu_type in {g.type for g in node.gres if g.name == "gpu" and g.type}:
            if gpu_type.lower() in features:
                free = node.gpus(gpu_type) - node.gpus_used(gpu_type)
                by_type.setdefault(gpu_type.lower(), []).append(_GpuNode(frozenset(node.partitions), free))
    return by_type


def _fits(group: Iterable[_GpuNode], partitions: frozenset[str], need: int, count: int) -> bool:
    """At least ``count`` nodes (in the job's partitions) each have ``need`` GPUs free."""
    hits = sum(1 for n in group if n.free >= need and (not partitions or not n.partitions or partitions & n.partitions))
    return hits >= max(count, 1)
