"""A gateway that records what a live gateway returned, so a simulation can start from it.

:class:`RecordingGateway` wraps any :class:`~slurmsched.gateway.protocol.SlurmGateway`
(the live ``CliGateway`` on a real cluster) and keeps every snapshot, accounting read and
batch of actions passing through it. The last snapshot and the finished jobs seen so
far are what :meth:`SimulatedSlurm.from_snapshot` and a fresh engine need to replay the
same cycle in simulation: the sim/live parity check.
"""

from __future__ import annotations

from typing import Sequence

from slurmsched.gateway.protocol import SlurmGateway
from slurmsched.model import Action, ActionOutcome, ClusterSnapshot, JobRecord, PartitionRecord, SchedulerConfig


class RecordingGateway:
    """Passes every call to ``inner`` and remembers the answers.

    Attributes:
        snapshots: every snapshot returned, oldest first.
        finished: every ``finished_since`` answer as ``(since, jobs)``.
        applied: every batch of actions sent, with Slurm's outcomes.
    """

    def __init__(self, inner: SlurmGateway) -> None:
        self.inner = inner
        self.snapshots: list[ClusterSnapshot] = []
        self.finished: list[tuple[float, list[JobRecord]]] = []
        self.applied: list[tuple[tuple[Action, ...], list[ActionOutcome]]] = []

    def snapshot(self) -> ClusterSnapshot:
        """The inner gateway's snapshot (recorded)."""
        snapshot = self.inner.snapshot()
        self.snapshots.append(snapshot)
        return snapshot

    def finished_since(self, since: float) -> list[JobRecord]:
        """The inner gateway's finished jobs (recorded)."""
        jobs = self.inner.finished_since(since)
        self.finished.append((since, list(jobs)))
        return jobs

    def scheduler_config(self) -> SchedulerConfig:
        """The inner gateway's scheduler configuration."""
        return self.inner.scheduler_config()

    def partitions(self) -> list[PartitionRecord]:
        """The inner gateway's partitions."""
        return self.inner.partitions()

    def apply(self, actions: Sequence[Action]) -> list[ActionOutcome]:
        """Send ``actions`` through the inner gateway (recorded with the outcomes)."""
        outcomes = self.inner.apply(actions)
        self.applied.append((tuple(actions), list(outcomes)))
        return outcomes

    def history(self) -> list[JobRecord]:
        """Every distinct finished job read so far, by end time (what a repository would hold)."""
        seen: dict[tuple[int, int], JobRecord] = {}
        for _, jobs in self.finished:
            for job in jobs:
                seen[(job.job_id, job.restart_count)] = job
        return sorted(seen.values(), key=lambda j: (j.end_time or 0.0, j.job_id))
