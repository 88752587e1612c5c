"""The :class:`SlurmGateway` protocol every backend implements.

Backends: ``cli`` (JSON CLI: ``squeue``/``sinfo``/``sacct --json``, ``sprio``,
``scontrol``), ``pyslurm`` (optional extra) and the simulator's in-memory Slurm.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from slurmsched.model import Action, ActionOutcome, ClusterSnapshot, JobRecord, PartitionRecord, SchedulerConfig


class SlurmGateway(Protocol):
    """Reads the queue and history from Slurm and applies actions to pending jobs."""

    def snapshot(self) -> ClusterSnapshot:
        """Pending and running jobs (with each pending job's current SiteFactor) and nodes.

        Raises:
            SlurmUnavailable: slurmctld did not answer.
            SlurmParseError: Slurm's output could not be parsed.
        """
        ...

    def finished_since(self, since: float) -> list[JobRecord]:
        """Jobs that reached a terminal state at or after ``since`` (POSIX seconds).

        Returns one record per job attempt, from accounting; an empty list when
        accounting has nothing new. An attempt that never ran (cancelled while
        pending) has no ``start_time``.
        """
        ...

    def scheduler_config(self) -> SchedulerConfig:
        """Priority weights, topology plugin and related scheduler settings."""
        ...

    def partitions(self) -> list[PartitionRecord]:
        """Every partition with its ``PriorityTier`` and priority factor, in configuration order
        (not read by cycles)."""
        ...

    def apply(self, actions: Sequence[Action]) -> list[ActionOutcome]:
        """Apply actions to pending jobs; one outcome per action, in order.

        A failed action never raises: its outcome carries ``ok=False`` and Slurm's
        own error text. Never changes a job's typed GRES, time limit or Nice.
        """
        ...
