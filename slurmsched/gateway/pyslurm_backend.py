"""The pyslurm gateway: the same protocol in-process, for sites whose pyslurm matches Slurm.

pyslurm >= 25.11 only builds against Slurm 25.11 headers, so it is an extra
(``pip install slurmsched[pyslurm]``), imported lazily by :class:`PyslurmGateway`.
Calls per cycle:

* ``snapshot()``: ``pyslurm.Jobs.load()`` and ``pyslurm.Nodes.load()`` (one RPC each,
  in-process: no JSON, no subprocess), plus ``scontrol show config`` and ``sprio``
  (pyslurm exposes no SiteFactor);
* ``finished_since(t)``: ``sacct --json`` as in the CLI backend: pyslurm 25.11.2's
  ``db.Job`` has no documented GPU/TRES accessor, and GPU counts are what the
  predictor needs most (slurmdbd serves it, not slurmctld, so nothing is lost);
* ``apply()``: ``pyslurm.Job(id).modify(pyslurm.JobSubmitDescription(...))`` per action
  (~1.3 ms). Values pyslurm 25.11.2 silently drops (``site_factor=0``, an empty
  feature or node list) go through ``scontrol update`` instead;
* ``scheduler_config()`` and ``partitions()``: ``scontrol`` as in the CLI backend.

Known pyslurm 25.11.2 pitfalls handled here: ``tres_per_node`` is always ``None`` (GPU
requests come from ``gres_per_node``), ``state_reason`` may be the string ``"None"``,
``array_task_id`` is ``None`` for task 0.
"""

from __future__ import annotations

import os
import time
from typing import Any, Mapping, Sequence

from slurmsched.errors import ConfigError, InvalidAction, SlurmParseError, SlurmUnavailable
from slurmsched.gateway.argv import update_argv
from slurmsched.gateway.cli_backend import CliGateway
from slurmsched.gateway.gres import gpu_count, gpu_type_of, gres_from_mapping
from slurmsched.gateway.parse import accounting_name
from slurmsched.model import (Action, ActionOutcome, ClusterSnapshot, GresRequest, JobRecord, JobState,
                              NodeRecord, PartitionRecord, SchedulerConfig, SetFeatures, SetSiteFactor,
                              SetSwitches)


def import_pyslurm() -> Any:
    """Import pyslurm, or raise :class:`ConfigError` saying why it cannot be used."""
    try:
        import pyslurm  # noqa: PLC0415 - optional extra, imported on demand
    except Exception as exc:  # ImportError, or pyslurm's RuntimeError on a version mismatch
        raise ConfigError(f"slurm.backend is pyslurm but 'import pyslurm' fails: {exc}") from None
    return pyslurm


class PyslurmGateway:
    """:class:`~slurmsched.gateway.protocol.SlurmGateway` over pyslurm (Slurm 25.11 API).

    Args: as :class:`~slurmsched.gateway.cli_backend.CliGateway`; ``slurm_conf`` is
    exported as ``SLURM_CONF`` before pyslurm is imported (it reads it at import time).

    Raises:
        ConfigError: pyslurm cannot be imported.
    """

    def __init__(self, slurm_conf: str | None = None, bin_dir: str | None = None,
                 timeout_s: float = 60, env: Mapping[str, str] | None = None) -> None:
        if slurm_conf:
            os.environ["SLURM_CONF"] = slurm_conf
        self.pyslurm = import_pyslurm()
        self.cli = CliGateway(slurm_conf=slurm_conf, bin_dir=bin_dir, timeout_s=timeout_s, env=env)

    def _call(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except self.pyslurm.RPCError as exc:
            raise SlurmUnavailable(f"{what}: {exc}") from None

    def snapshot(self) -> ClusterSnapshot:
        """Jobs and nodes via pyslurm; config and SiteFactor via ``scontrol``/``sprio``."""
        taken_at = time.time()
        cluster, config = self.cli.read_config()
        factors = self.cli.site_factors(config)
        jobs = self._call("pyslurm.Jobs.load", self.pyslurm.Jobs.load)
        nodes = self._call("pyslurm.Nodes.load", self.pyslurm.Nodes.load)
        records = []
        for job in jobs.values():
            record = _convert("pyslurm.Jobs", job, lambda j: _live_job(j, factors))
            if not record.state.finished:
                records.append(record)
        node_records = [_convert("pyslurm.Nodes", n, _node) for n in nodes.values()]
        return ClusterSnapshot(taken_at=taken_at, cluster=cluster, jobs=tuple(records),
                               nodes=tuple(node_records), config=config)

    def scheduler_config(self) -> SchedulerConfig:
        """From ``scontrol show config`` (as the CLI backend)."""
        return self.cli.scheduler_config()

    def partitions(self) -> list[PartitionRecord]:
        """From ``scontrol -a -o show partition`` (as the CLI backend)."""
        return self.cli.partitions()

    def finished_since(self, since: float) -> list[JobRecord]:
        """Job attempts that ended at or after ``since``, via ``sacct --json`` (see module doc)."""
        return self.cli.finished_since(since)

    def apply(self, actions: Sequence[Action]) -> list[ActionOutcome]:
        """One ``Job(id).modify(JobSubmitDescription(...))`` per action; never raises."""
        outcomes = []
        for action in actions:
            try:
                update_argv(action)  # the same checks as the CLI backend
            except InvalidAction as exc:
                outcomes.append(ActionOutcome(action, False, str(exc)))
                continue
            changes = _changes(action)
            if changes is None:
                outcomes.extend(self.cli.apply([action]))
                continue
            try:
                self.pyslurm.Job(action.job_id).modify(self.pyslurm.JobSubmitDescription(**changes))
            except self.pyslurm.RPCError as exc:
                outcomes.append(ActionOutcome(action, False, str(exc)))
            else:
                outcomes.append(ActionOutcome(action, True, ""))
        return outcomes


def _changes(action: Action) -> dict[str, Any] | None:
    """JobSubmitDescription keywords for an action; ``None`` where pyslurm would drop them."""
    if isinstance(action, SetSiteFactor):
        return {"site_factor": action.value} if action.value != 0 else None
    if isinstance(action, SetSwitches):
        if action.count == 0:
            return None
        return {"switches": {"count": action.count, "max_wait_time": action.max_wait_s}}
    if isinstance(action, SetFeatures):
        return {"constraints": action.features} if action.features else None
    return None


def _convert(what: str, obj: Any, build: Any) -> Any:
    try:
        return build(obj)
    except (AttributeError, TypeError, ValueError) as exc:
        raise SlurmParseError(f"{what}: {obj!r}: {exc}") from None


def _seconds(value: Any) -> float | None:
    return float(value) if value else None


def _text(value: Any) -> str:
    if value is None or value == "None":
        return ""
    return ",".join(value) if isinstance(value, (list, tuple)) else str(value)


def _array_task(job: Any) -> int | None:
    array_id = job.array_id or None
    task = job.array_task_id
    if array_id and task is None and job.id != array_id:
        return 0  # pyslurm 25.11.2 reports task 0 as None
    return task


def _live_job(job: Any, factors: Mapping[int, int]) -> JobRecord:
    state = JobState.parse(job.state)
    gres: tuple[GresRequest, ...] = gres_from_mapping(job.gres_per_node)
    nodes = job.num_nodes or 1
    limit = job.time_limit
    return JobRecord(
        job_id=int(job.id), user=job.user_name or str(job.user_id), submit_time=float(job.submit_time or 0),
        name=accounting_name(job.name or ""), cluster=job.cluster or "", array_job_id=job.array_id or None,
        array_task_id=_array_task(job), account=job.account or "", partition=job.partition or "",
        qos=job.qos or "", state=state, reason=_text(job.state_reason),
        eligible_time=_seconds(job.eligible_time),
        start_time=_seconds(job.start_time) if state is not JobState.PENDING else None,
        time_limit_s=int(limit) * 60 if isinstance(limit, int) else None,
        nodes=nodes, cpus=job.cpus or 1, memory_mb=job.memory, gpus=gpu_count(gres) * nodes,
        gpu_type=gpu_type_of(gres), gres_per_node=gres, features=_text(job.constraints),
        excluded_nodes=_text(job.excluded_nodes), node_list=_text(job.allocated_nodes),
        switches=job.required_switches, switch_wait_s=job.max_wait_time_switches, priority=job.priority,
        site_factor=factors.get(int(job.id)) if state is JobState.PENDING else None,
        admin_comment=_text(job.admin_comment),
        nice=job.nice or 0, restart_count=job.requeue_count or 0,
        het_job_id=job.hetjob_id or None,
        het_job_offset=(job.hetjob_offset or 0) if job.hetjob_id else None,
    )


def _node(node: Any) -> NodeRecord:
    return NodeRecord(
        name=node.name, state=tuple(w.upper() for w in (node.state or "").split("+") if w),
        partitions=tuple(node.partitions or ()), cpus=node.total_cpus or 0,
        cpus_alloc=node.allocated_cpus or 0, memory_mb=node.real_memory or 0,
        features=tuple(node.active_features or ()), gres=gres_from_mapping(node.configured_gres),
        gres_used=gres_from_mapping(node.allocated_gres),
    )

