"""A Slurm controller in memory, behind the :class:`~slurmsched.gateway.protocol.SlurmGateway` protocol.

:class:`SimulatedSlurm` is what the engine talks to in a simulation: ``snapshot()``
shows pending and running jobs and the nodes, ``finished_since()`` plays accounting,
``scheduler_config()`` returns the configured ``PriorityWeight*`` values, ``partitions()``
the declared partitions with their ``PriorityTier``, and ``apply()``
changes pending jobs exactly as ``scontrol update`` would: a SiteFactor set here is
the *only* way slurmsched's ranking reaches the simulated scheduler, as on a real site,
besides ``job_submit.lua`` when it is modelled (:mod:`slurmsched.sim.submit_plugin`:
it values a new job at submission from the cache the daemon writes).

The event loop (:mod:`slurmsched.sim.runner`) submits and finishes jobs and calls
:meth:`SimulatedSlurm.schedule` after every change, which starts pending jobs the way
slurmctld's main and backfill schedulers would:

* jobs are considered in :class:`~slurmsched.sim.priority.PriorityQueue` order
  (partition tier, then multifactor priority including SiteFactor);
* a job starts if it fits now (placement rules in :mod:`slurmsched.sim.placement`);
* the first job of a pool that does not fit gets a reservation at the earliest time it
  would fit if running jobs end at ``start + time limit`` (EASY backfill: one
  reservation per pool); a later job may start before it only if it fits now and either
  ends (by its limit) before the reservation or leaves the reserved job's GPUs free
  (placed on nodes that do, if its usual placement does not: backfill leaves the
  reserved nodes out of a job that would still run when the reservation starts);
* at most ``bf_max_job_test`` jobs are tested per pass (Slurm's ``bf_max_job_test``).
"""

from __future__ import annotations

import logging
import math
from bisect import bisect_left, insort
from dataclasses import dataclass, field, fields
from itertools import repeat
from operator import attrgetter
from typing import Mapping, Sequence, cast

from slurmsched.model import (Action, ActionOutcome, ClusterSnapshot, GresRequest, JobRecord, JobState,
                              NodeRecord, PartitionRecord, QueueDelta, SchedulerConfig, SetFeatures,
                              SetSiteFactor, SetSwitches)
from slurmsched.sim.clock import SimClock
from slurmsched.sim.cluster import ClusterSpec, PartitionSpec, cluster_from_nodes, expand_hostlist
from slurmsched.sim.job import SimJob
from slurmsched.sim.placement import Allocation, GpuTypes, Pool, ShadowState
from slurmsched.sim.priority import PriorityQueue
from slurmsched.sim.submit_plugin import SubmitPlugin

log = logging.getLogger(__name__)

#: Slurm's default ``bf_max_job_test``: jobs tested per scheduling pass.
DEFAULT_BF_MAX_JOB_TEST = 500
_Group = tuple[str, str, GpuTypes, int]
#: Run time assumed for a loaded job with neither a known duration nor a time limit.
DEFAULT_RUN_S = 3600.0
_RECORD_FIELDS = tuple(f.name for f in fields(JobRecord))
_RECORD_FIELD_SET = frozenset(_RECORD_FIELDS)
_RECORD_VALUES = attrgetter(*_RECORD_FIELDS)


def _evolve(record: JobRecord, **changes: object) -> JobRecord:
    """``dataclasses.replace`` for job records, a third of its cost (it runs for every
    SiteFactor update; JobRecord has no ``__post_init__`` to skip).

    Raises:
        TypeError: a name in ``changes`` is not a field (as ``replace`` would).
    """
    if not changes.keys() <= _RECORD_FIELD_SET:
        raise TypeError(f"JobRecord has no field {sorted(changes.keys() - _RECORD_FIELD_SET)}")
    new = object.__new__(JobRecord)
    # Every field copied, then the changed ones set, each loop run by map in C (any()
    # only drives it: object.__setattr__ returns None).
    any(map(object.__setattr__, repeat(new), _RECORD_FIELDS, _RECORD_VALUES(record)))
    any(map(object.__setattr__, repeat(new), changes.keys(), changes.values()))
    return new


@dataclass(slots=True)
class _Reservation:
    """EASY's reservation for a pool's first blocked job: when it can start, and the free
    GPUs expected at that time (less those of backfilled jobs still running then)."""

    head: SimJob
    shadow_time: float
    state: ShadowState | None


@dataclass(slots=True)
class _Pass:
    """What one scheduling pass concluded.

    Attributes:
        reservations: per pool, EASY's reservation.
        min_fail: per placement group (:attr:`SimJob.group`), the smallest job that did
            not fit.
        delaying: pools where a job that fit was held back because it would delay the
            reservation (a multi-node job is placed beside the reservation greedily,
            so a later start may change its verdict: it makes the verdict stale).
        delayers: (placement group, units) -> ``starts`` when such a job was last held
            back: until the next start, every such job is tried on the same nodes and
            is held back too.
        starts: jobs started by this pass so far.
        moved: pools where a job started ahead of the reservation (its kept
            reservation, if any, no longer holds).
        stale: the verdicts on older jobs may no longer hold; the next pass must be full.
        truncated: the pass, or a later one that reused it, left a job of a pool with free
            GPUs untested beyond ``bf_max_job_test`` jobs.
        at: when the pass ran.
        order_until: until when the queue keeps the order the verdicts were made in
            (:meth:`PriorityQueue.order_kept_until`); ``None`` until first needed.
    """

    reservations: dict[str, _Reservation] = field(default_factory=dict)
    min_fail: dict[int, int] = field(default_factory=dict)
    delaying: set[str] = field(default_factory=set)
    delayers: dict[tuple[int, int], int] = field(default_factory=dict)
    starts: int = 0
    moved: set[str] = field(default_factory=set)
    stale: bool = False
    truncated: bool = False
    at: float = 0.0
    order_until: float | None = None


def job_gpu_types(gpu_type: str | None, features: str) -> GpuTypes:
    """Node types a job may run on: its typed GRES and its ``Features`` OR-list, both if set.

    Simulated nodes carry their GPU type as their only feature, so an OR-list of names
    (``"a100|h100"``) is the whole ``Features`` language the simulator understands.

    Raises:
        ValueError: the expression uses ``&``, counts or brackets.
    """
    text = features.strip()
    if any(c in text for c in "&*[]()"):
        raise ValueError(f"the simulator understands only OR-lists of node features (got {features!r})")
    allowed = frozenset(part.strip() for part in text.split("|") if part.strip()) or None
    if gpu_type is None:
        return allowed
    return frozenset({gpu_type}) if allowed is None else allowed & {gpu_type}


class SimulatedSlurm:
    """An in-memory slurmctld: pending queue, nodes, scheduler and accounting.

    Args:
        spec: nodes and partitions.
        config: the ``PriorityWeight*`` settings (what ``scheduler_config()`` returns).
        clock: simulated time; snapshots and scheduling passes happen at ``clock.now()``.
        bf_max_job_test: jobs tested per scheduling pass.
    """

    def __init__(self, spec: ClusterSpec, config: SchedulerConfig, clock: SimClock, *,
                 bf_max_job_test: int = DEFAULT_BF_MAX_JOB_TEST, submit_plugin: SubmitPlugin | None = None) -> None:
        self.spec = spec
        #: ``job_submit.lua``, when modelled: values new jobs at submission.
        self.submit_plugin = submit_plugin
        self._config = config
        self._clock = clock
        self._depth = bf_max_job_test
        members: dict[str, list[tuple[int, int, str | None, frozenset[str] | None]]] = {}
        for index, node in enumerate(spec.nodes):
            members.setdefault(node.pool, []).append(
                (index, node.gpus, node.gpu_type, frozenset(node.partitions) if node.partitions else None))
        self._pools = {name: Pool(name, nodes) for name, nodes in members.items()}
        self._queue = PriorityQueue(config, spec.total_gpus if spec.unit_nodes else len(spec.nodes), spec.total_gpus,
                                    unit_nodes=spec.unit_nodes)
        self._pending: dict[int, SimJob] = {}
        self._group_ids: dict[_Group, int] = {}  # placement group -> its id (SimJob.group)
        self._group_pools: list[str] = []  # each group id's pool
        self._sizes: dict[int, dict[int, int]] = {}  # pending jobs per placement group and GPU count
        self._running: dict[int, SimJob] = {}
        self._by_end: dict[str, list[tuple[float, int]]] = {name: [] for name in self._pools}
        self._records: dict[int, JobRecord] = {}
        self._unbuilt: set[int] = set()
        self._finished: list[tuple[SimJob, JobRecord | None]] = []
        self._finished_records: list[JobRecord | None] = []
        self._finished_built = 0  # finished records before this index are built
        self._finished_ends: list[float] = []
        self._node_partitions = [node.partitions or tuple(p.name for p in spec.partitions if p.pool == node.pool)
                                 for node in spec.nodes]
        self._node_records = [self._node_record(i) for i in range(len(spec.nodes))]
        self._nodes = tuple(self._node_records)  # what the next snapshot shows, unless nodes are stale
        self._stale_nodes: set[int] = set()  # nodes whose allocation changed since ``_nodes`` was built
        self._reordered = False
        self._arrived: list[SimJob] = []
        self._last_pass: _Pass | None = None
        self._kept: dict[str, _Reservation] = {}
        self._serial = 0
        self._changed: set[int] = set()  # pending jobs whose record changed since the last snapshot
        self._left: set[int] = set()  # jobs that stopped pending since the last snapshot
        #: every action received through ``apply`` (the simulated RPC count).
        self.rpcs = 0

    @classmethod
    def from_snapshot(cls, snapshot: ClusterSnapshot, clock: SimClock, *, finished: Sequence[JobRecord] = (),
                      durations: Mapping[int, float] | None = None,
                      bf_max_job_test: int = DEFAULT_BF_MAX_JOB_TEST) -> "SimulatedSlurm":
        """A simulated twin of a live cluster as one snapshot saw it (what-if from that moment).

        Its first :meth:`snapshot` returns the very job and node records of ``snapshot``
        (so the engine sees exactly what it saw live); a node's record is rebuilt from the
        simulated state once a job starts or ends on it. Running jobs hold the GPUs of the
        nodes in their node list. Jobs without GPUs are left out.

        Args:
            snapshot: a live snapshot (``clock`` should stand at its ``taken_at``).
            finished: jobs accounting had reported by then; ``finished_since`` returns them.
            durations: true run times by job id, where known; otherwise a job runs until
                its time limit (one hour without one).

        Raises:
            ConfigError: the nodes cannot be modelled (see :func:`cluster_from_nodes`).
        """
        spec = cluster_from_nodes(snapshot.cluster, snapshot.nodes)
        slurm = cls(spec, snapshot.config, clock, bf_max_job_test=bf_max_job_test)
        index = {node.name: i for i, node in enumerate(spec.nodes)}
        slurm._node_records = [node for node in snapshot.nodes if node.name in index]
        slurm._nodes = tuple(slurm._node_records)
        known = durations or {}
        now = clock.now()
        for record in snapshot.jobs:
            partition = spec.partition(record.partition.split(",")[0])
            placement = slurm.placement(record, partition, record.gpus)
            if placement is None:
                log.info("job %d left out of the simulation: no GPUs, or more than its partition has",
                         record.job_id)
                continue
            types, nodes = placement
            limit = float(record.time_limit_s or DEFAULT_RUN_S)
            job = SimJob(trace=record, job_id=record.job_id, submit=record.submit_time,
                         duration=known.get(record.job_id, limit), units=record.gpus, bf_limit=limit,
                         final_state=JobState.COMPLETED, partition=partition, gpu_types=types, nodes=nodes,
                         site_factor=record.site_factor or 0)
            slurm._join_group(job)
            slurm._records[job.job_id] = record
            if record.state is JobState.PENDING:
                slurm._pending[job.job_id] = job
                slurm._count(job, 1)
                slurm._changed.add(job.job_id)
                slurm._queue.add(job, now)
                slurm._arrived.append(job)
                continue
            job.start = record.start_time if record.start_time is not None else now
            job.alloc = slurm._loaded_allocation(record, [index[n] for n in expand_hostlist(record.node_list)
                                                          if n in index])
            job.duration = max(job.duration, now - job.start)
            pool = slurm._pools[partition.pool]
            pool.take(job.alloc)
            slurm._running[job.job_id] = job
            insort(slurm._by_end[pool.name], (job.start + job.bf_limit, job.job_id))
        for record in sorted(finished, key=lambda j: j.end_time or 0.0):
            end = record.end_time or now
            done = SimJob(trace=record, job_id=record.job_id, submit=record.submit_time, duration=0.0, units=0,
                          bf_limit=0.0, final_state=record.state, partition=spec.default_partition,
                          start=record.start_time, end=end)
            slurm._finished.append((done, record))
            slurm._finished_records.append(record)
            slurm._finished_ends.append(end)
        return slurm

    def _loaded_allocation(self, record: JobRecord, nodes: list[int]) -> Allocation:
        """GPUs a loaded running job holds on each of its nodes (its per-node GRES, else an even split)."""
        if not nodes:
            return ()
        per_node = [g.count for g in record.gres_per_node if g.name == "gpu"]
        share, extra = divmod(record.gpus, len(nodes))
        alloc = []
        for i, node in enumerate(nodes):
            pool = self._pools[self.spec.nodes[node].pool]
            want = per_node[0] if per_node else share + (i < extra)
            alloc.append((node, min(want, pool.free[node])))
        return tuple((node, count) for node, count in alloc if count > 0)

    # --- the simulation side -------------------------------------------------------

    @property
    def pending_count(self) -> int:
        """Jobs waiting in the queue."""
        return len(self._pending)

    @property
    def running_count(self) -> int:
        """Jobs running now."""
        return len(self._running)

    def nodes_for(self, units: int, partition: PartitionSpec, gpu_types: GpuTypes = None) -> int | None:
        """Nodes a job of ``units`` GPUs would occupy, or ``None`` if its partition can never hold it."""
        return self._pools[partition.pool].nodes_needed(units, partition.nodes_of, gpu_types)

    def placement(self, record: JobRecord, partition: PartitionSpec, units: int) -> tuple[GpuTypes, int] | None:
        """The node types a job may run on and the nodes it would occupy, or ``None`` if its
        partition can never hold it. A ``Features`` expression beyond an OR-list of types
        (see :func:`job_gpu_types`) leaves the job free to run on any type, and so does a
        type that cannot hold the job: a job without a requested type is recorded with the
        type of most of its GPUs, and one spread over several types fits none of them."""
        try:
            types = job_gpu_types(record.gpu_type, record.features)
        except ValueError:
            types = None
        nodes = self.nodes_for(units, partition, types)
        if nodes is None and types is not None:
            types, nodes = None, self.nodes_for(units, partition, None)
        return None if nodes is None else (types, nodes)

    def submit(self, job: SimJob) -> None:
        """Queue a job (as ``sbatch`` would) at the current time; the submit plugin, when
        there is one, gives it its SiteFactor first (no RPC: it runs inside slurmctld)."""
        now = self._clock.now()
        self._join_group(job)
        plugin = self.submit_plugin
        value = (plugin.site_factor(job.trace, job.units, now, self.spec.default_partition.name)
                 if plugin is not None else None)
        if plugin is not None and value is not None:
            job.site_factor = value
            job.trace = plugin.stamp(job.trace, value)  # the record squeue will show
        self._pending[job.job_id] = job
        self._count(job, 1)
        self._queue.add(job, now)
        self._unbuilt.add(job.job_id)
        self._changed.add(job.job_id)
        self._arrived.append(job)

    def finish(self, job: SimJob) -> None:
        """End a running job now: free its GPUs and record it in accounting."""
        now = self._clock.now()
        del self._running[job.job_id]
        self._last_pass = None
        pool = self._pools[job.partition.pool]
        pool.release(job.alloc)
        self._touch(job.alloc)
        assert job.start is not None  # it is running
        expected_end = job.start + job.bf_limit
        ends = self._by_end[pool.name]
        del ends[bisect_left(ends, (expected_end, job.job_id))]
        kept = self._kept.get(pool.name)
        if kept is not None and not expected_end <= min(now, kept.shadow_time):
            # It ended before the reservation counted on its GPUs: the head may start sooner.
            del self._kept[pool.name]
        job.end = now
        self._unbuilt.discard(job.job_id)
        self._finished.append((job, self._records.pop(job.job_id, None)))
        self._finished_records.append(None)
        self._finished_ends.append(now)

    def schedule(self) -> list[SimJob]:
        """One pass of the main + EASY backfill scheduler at ``clock.now()``.

        When only submissions happened since the last pass (no job ended, no priority
        changed, no job's age factor reached its cap), the last pass's verdicts still
        hold for every older job: GPUs were only taken since, so none of them can start
        now that could not before, and the reservations are unchanged. Only the new jobs
        are then tested, against the kept reservations, where this gives the same starts
        as a full pass (see :meth:`_reusable`), at a fraction of the cost.

        Returns:
            The jobs started by this pass (their ``start``/``alloc`` set).
        """
        now = self._clock.now()
        arrived, self._arrived = self._arrived, []
        self._reordered = False
        queue = self._queue
        aged = queue.age(now)
        if aged:
            self._kept.clear()
        last = self._last_pass
        if last is not None and not aged and arrived:
            arrived.sort(key=lambda j: queue.sort_key(j, now))
            if self._reusable(last, arrived, now):
                return self._schedule_arrived(last, arrived, now)
        self._last_pass = state = _Pass(at=now)
        if not self._pending:
            return []
        pools, group_pools = self._pools, self._group_pools
        full_pools = {name for name, pool in pools.items() if pool.free_total == 0}
        # The groups of pools without free GPUs: their jobs are passed over, not tested.
        full = {member for member, name in enumerate(group_pools) if name in full_pools}
        single = len(pools) == 1
        started = []
        tested, depth = 0, self._depth
        min_fail, reservations, delayers = state.min_fail, state.reservations, state.delayers
        inf = math.inf
        for job in (queue.ordered(now) if len(full_pools) < len(pools) else ()):
            group = job.group
            if group in full:
                continue
            tested += 1
            if tested > depth:
                break
            # The cheap verdicts of _consider, inlined: this loop runs for every queued job.
            units = job.units
            if units >= min_fail.get(group, inf):
                continue
            if delayers.get((group, units)) == state.starts:
                reservation = reservations.get(job.partition.pool)
                if reservation is not None and now + job.bf_limit > reservation.shadow_time:
                    continue
            if self._consider(job, state, now):
                started.append(job)
                pool_name = job.partition.pool
                if pools[pool_name].free_total == 0:
                    full_pools.add(pool_name)
                    if len(full_pools) == len(pools):
                        break
                    full.update(member for member, name in enumerate(group_pools) if name == pool_name)
            elif single and min_fail.get(group) == units and self._all_refused(min_fail):
                # This job's failure leaves every later one refused untouched: count them as
                # tested (all are, in the one pool) and stop.
                tested = len(queue)
                break
        # Jobs beyond the depth limit move up as started jobs leave the queue.
        state.truncated = tested > depth
        state.stale = state.stale or (state.truncated and bool(started))
        for job in started:
            queue.remove(job)
        return started

    def _reusable(self, last: _Pass, arrived: list[SimJob], now: float) -> bool:
        """Whether testing only ``arrived`` (in queue order) against ``last``'s verdicts and
        reservations starts exactly the jobs a full pass would start now.

        It does not when ``last`` is stale; when the queue order may have changed since
        (a job whose priority grows with age passing a capped one); when a new job sorts before the reservation
        head of its own pool (a full pass tests it first, as the head); when a
        reservation's time has passed (a full pass makes it again from the jobs still
        running); when starting a new job might let a held-back job start elsewhere; or
        when a new job of a pool with free GPUs comes ``bf_max_job_test`` or more jobs
        into the queue on a cluster of several pools (a full pass counts only the jobs of
        pools with free GPUs, so whether it would test the job is not known cheaply).
        """
        if last.stale or any(r.shadow_time < now for r in last.reservations.values()):
            return False
        queue, pools, several = self._queue, self._pools, len(self._pools) > 1
        if last.order_until is None:
            last.order_until = queue.order_kept_until(last.at)
        else:
            last.order_until = min(last.order_until, queue.order_kept_until(last.at, arrived))
        if now >= last.order_until:
            return False
        for job in arrived:
            reservation = last.reservations.get(job.partition.pool)
            if reservation is not None and queue.sort_key(job, now) < queue.sort_key(reservation.head, now):
                return False
            if self._unsettled(last, job):
                return False
            if several and pools[job.partition.pool].free_total > 0 and queue.rank(job, now) >= self._depth:
                return False
        return True

    def _schedule_arrived(self, last: _Pass, arrived: list[SimJob], now: float) -> list[SimJob]:
        """The pass :meth:`_reusable` allows: test only the new jobs, in queue order, as a
        full pass would (a job of a pool without free GPUs, or beyond ``bf_max_job_test``,
        is not tested). Returns the jobs started."""
        started = []
        queue, pools = self._queue, self._pools
        for job in arrived:
            if pools[job.partition.pool].free_total == 0:
                continue
            if queue.rank(job, now) >= self._depth:
                last.truncated = True
            elif self._consider(job, last, now):
                started.append(job)
        # As after a full pass: a start may bring an untested job within the depth limit.
        last.stale = last.stale or (last.truncated and bool(started))
        for job in started:
            queue.remove(job)
        return started

    def _consider(self, job: SimJob, state: _Pass, now: float) -> bool:
        """Test one job in a pass; start it if it may start. Returns whether it started."""
        group = job.group
        units = job.units
        if units >= state.min_fail.get(group, math.inf):
            return False
        pool_name = job.partition.pool
        reservation = state.reservations.get(pool_name)
        delays = reservation is not None and now + job.bf_limit > reservation.shadow_time
        if delays and state.delayers.get((group, units)) == state.starts:
            return False
        pool = self._pools[pool_name]
        alloc = pool.place(units, job.partition.nodes_of, job.gpu_types)
        if alloc is None:
            state.min_fail[group] = units
            if reservation is None:
                kept = self._kept.get(pool_name)
                if kept is None or kept.head is not job or pool_name in state.moved or kept.shadow_time <= now:
                    kept = self._kept[pool_name] = self._reserve(pool, job, now)
                state.reservations[pool_name] = kept
            return False
        if delays:
            assert reservation is not None  # only a reservation delays
            shadow = reservation.state
            assert shadow is not None  # an infinite shadow time delays nothing
            if not shadow.try_take(alloc):
                # Backfill leaves the reserved GPUs out of its placement: another node may do.
                beside = pool.place_beside(units, job.partition.nodes_of, job.gpu_types, shadow)
                if beside is None:
                    state.delaying.add(pool_name)
                    state.delayers[(group, units)] = state.starts
                    return False
                alloc = beside
        if self._unsettled(state, job):
            state.stale = True
        if reservation is None:
            state.moved.add(pool_name)
        self._start(job, pool, alloc, now)
        state.starts += 1
        return True

    def _unsettled(self, state: _Pass, job: SimJob) -> bool:
        """Whether starting ``job`` might let a held-back job of its pool start elsewhere."""
        pool = job.partition.pool
        return pool in state.delaying and len(self._pools[pool].capacity) > 1

    def _reserve(self, pool: Pool, head: SimJob, now: float) -> _Reservation:
        """When and with what free GPUs ``head`` could start if running jobs end by their limits.

        The reservation is kept across passes while it stays exact: the same head blocks
        first, nothing started ahead of it, the order did not change, and every job that
        ended had been counted as ending by then (it ran to its limit, as jobs of traces
        without limits do). Jobs backfilled since were taken out of it as they started.

        Every job expected to end at the reservation's time is released in its state, not
        only those needed for the head to fit, so that a backfilled job may use what the
        others leave free then, whatever their job ids.
        """
        shadow = pool.shadow(head.partition.nodes_of, head.gpu_types, head.units)
        running = self._running
        ends = self._by_end[pool.name]
        for at, (expected_end, job_id) in enumerate(ends):
            shadow.release(running[job_id].alloc)
            if shadow.head_fits and (at + 1 == len(ends) or ends[at + 1][0] != expected_end):
                return _Reservation(head, max(expected_end, now), shadow)
        return _Reservation(head, math.inf, None)

    def _start(self, job: SimJob, pool: Pool, alloc: Allocation, now: float) -> None:
        pool.take(alloc)
        self._touch(alloc)
        job.start = now
        job.alloc = alloc
        del self._pending[job.job_id]
        self._count(job, -1)
        self._changed.discard(job.job_id)
        self._left.add(job.job_id)
        self._running[job.job_id] = job
        insort(self._by_end[pool.name], (now + job.bf_limit, job.job_id))
        self._unbuilt.add(job.job_id)

    def _touch(self, alloc: Allocation) -> None:
        """Mark the records of an allocation's nodes for rebuilding at the next snapshot."""
        self._stale_nodes.update(node for node, _ in alloc)

    def take_reordered(self) -> bool:
        """Whether ``apply`` changed the queue order since the last pass (and clear the flag)."""
        reordered, self._reordered = self._reordered, False
        return reordered

    # --- job records (built when the gateway first shows them) ---------------------

    def _pending_record(self, job: SimJob, **changes: object) -> JobRecord:
        """The job as ``squeue`` shows it while pending (``gpus`` are its units), with
        ``changes`` made on top of that in the same copy."""
        return _evolve(job.trace, **{
            "state": JobState.PENDING, "partition": job.partition.name, "start_time": None, "end_time": None,
            "eligible_time": job.submit, "gpus": job.units, "nodes": job.nodes, "node_list": "", "exit_code": None,
            "site_factor": job.site_factor, "priority": None, "reason": "", **changes})

    def _record(self, job: SimJob) -> JobRecord:
        """The job's current live record (pending or running), built now if needed."""
        record = self._records.get(job.job_id)
        if record is None or job.job_id in self._unbuilt:
            if job.start is None:
                record = record or self._pending_record(job)
            else:
                running = {"state": JobState.RUNNING, "start_time": job.start, "node_list": self._node_list(job),
                           "site_factor": None}
                record = self._pending_record(job, **running) if record is None else _evolve(record, **running)
            self._records[job.job_id] = record
            self._unbuilt.discard(job.job_id)
        return record

    def _node_list(self, job: SimJob) -> str:
        return ",".join(self.spec.nodes[node].name for node, _ in job.alloc)

    def _build_finished(self) -> list[JobRecord]:
        """Accounting's records of every finished job, oldest first: those of jobs that
        ended since the last call built now (``_finished_records[:_finished_built]`` are
        all built)."""
        records = self._finished_records
        for index in range(self._finished_built, len(records)):
            if records[index] is None:
                job, live = self._finished[index]
                final = {"state": job.final_state, "start_time": job.start, "end_time": job.end,
                         "node_list": self._node_list(job), "site_factor": None}
                records[index] = self._pending_record(job, **final) if live is None else _evolve(live, **final)
        self._finished_built = len(records)
        return cast(list[JobRecord], records)  # every entry built

    # --- the SlurmGateway side ---------------------------------------------------

    def _node_record(self, index: int) -> NodeRecord:
        """The node as ``sinfo`` shows it now (state and GPUs in use from the simulated allocation)."""
        node = self.spec.nodes[index]
        free = self._pools[node.pool].free[index]
        used = node.gpus - free
        state = "IDLE" if used == 0 else ("ALLOCATED" if free == 0 else "MIXED")
        features = (node.gpu_type,) if node.gpu_type else ()
        return NodeRecord(name=node.name, state=(state,), partitions=self._node_partitions[index],
                          features=features, gres=(GresRequest("gpu", node.gpu_type, node.gpus),),
                          gres_used=(GresRequest("gpu", node.gpu_type, used),))

    def _node_tuple(self) -> tuple[NodeRecord, ...]:
        """Every node's record, rebuilding only those an allocation touched since the last call."""
        if self._stale_nodes:
            records = self._node_records
            for index in self._stale_nodes:
                records[index] = self._node_record(index)
            self._stale_nodes.clear()
            self._nodes = tuple(records)
        return self._nodes

    def snapshot(self) -> ClusterSnapshot:
        """Pending jobs (with their current SiteFactor) and running jobs, and every node.

        Pending jobs' ``priority`` is left unset (the simulator keeps priorities as
        real numbers in its queue; slurmsched reads SiteFactor, not priority). The
        snapshot carries the pending queue's :class:`QueueDelta` since the previous one.
        """
        pending, running, records = self._pending, self._running, self._records
        for job_id in list(self._unbuilt):
            self._record(pending.get(job_id) or running[job_id])
        nodes = self._node_tuple()
        delta = QueueDelta(self._serial, tuple(records[i] for i in self._changed), frozenset(self._left))
        self._serial += 1
        self._changed, self._left = set(), set()
        return ClusterSnapshot(taken_at=self._clock.now(), cluster=self.spec.name, jobs=tuple(records.values()),
                               nodes=nodes, config=self._config, serial=self._serial, delta=delta)

    def finished_since(self, since: float) -> list[JobRecord]:
        """Jobs that ended at or after ``since``, oldest first (simulated accounting)."""
        return self._build_finished()[bisect_left(self._finished_ends, since):]

    def scheduler_config(self) -> SchedulerConfig:
        """The configured priority weights."""
        return self._config

    def partitions(self) -> list[PartitionRecord]:
        """The declared partitions, their tiers and priority factors; the first is the default."""
        default = self.spec.default_partition
        return [PartitionRecord(p.name, p.tier, p is default, p.priority_factor) for p in self.spec.partitions]

    def apply(self, actions: Sequence[Action]) -> list[ActionOutcome]:
        """Apply ``scontrol update`` actions to pending jobs; one outcome per action.

        SiteFactor and Features (an OR-list of GPU types) change how the job is
        scheduled; Switches are recorded on the job but have no effect (the simulated
        cluster has no switch topology).
        """
        outcomes = []
        for action in actions:
            self.rpcs += 1
            job = self._pending.get(action.job_id)
            if job is None:
                text = ("Job is no longer pending execution" if action.job_id in self._running
                        else "Invalid job id specified")
                outcomes.append(ActionOutcome(action, False, f"{text} for job {action.job_id}"))
                continue
            outcomes.append(self._apply_one(job, action))
        return outcomes

    def _apply_one(self, job: SimJob, action: Action) -> ActionOutcome:
        record = self._record(job)
        if isinstance(action, SetSiteFactor):
            self._queue.set_site_factor(job, action.value)
            self._records[job.job_id] = _evolve(record, site_factor=action.value)
        elif isinstance(action, SetFeatures):
            try:
                types = job_gpu_types(record.gpu_type, action.features)
            except ValueError as exc:
                return ActionOutcome(action, False, str(exc))
            if self.nodes_for(job.units, job.partition, types) is None:
                return ActionOutcome(action, False, "Requested node configuration is not available")
            self._requeue(job, types)
            self._records[job.job_id] = _evolve(record, features=action.features)
        elif isinstance(action, SetSwitches):
            self._records[job.job_id] = _evolve(record, switches=action.count, switch_wait_s=action.max_wait_s)
        self._changed.add(job.job_id)
        self._reordered = True
        self._last_pass = None
        self._kept.clear()
        return ActionOutcome(action, True, "")

    def _requeue(self, job: SimJob, gpu_types: GpuTypes) -> None:
        """Re-queue a pending job with other allowed GPU types (checked by the caller)."""
        self._queue.remove(job)
        self._count(job, -1)
        job.gpu_types = gpu_types
        job.nodes = self.nodes_for(job.units, job.partition, gpu_types) or job.nodes
        self._join_group(job)
        self._count(job, 1)
        self._queue.add(job, self._clock.now())

    def _join_group(self, job: SimJob) -> None:
        """Set ``job.group`` to the id of its placement group (pool, partition whose nodes
        it may use, GPU types, node count), numbering a group not seen before."""
        partition = job.partition
        key = (partition.pool, partition.nodes_of, job.gpu_types, job.nodes)
        group = self._group_ids.get(key)
        if group is None:
            group = self._group_ids[key] = len(self._group_pools)
            self._group_pools.append(partition.pool)
        job.group = group

    def _count(self, job: SimJob, change: int) -> None:
        """Count a pending job in (``change`` 1) or out of (-1) the jobs of its group and size."""
        sizes = self._sizes.setdefault(job.group, {})
        left = sizes[job.units] = sizes.get(job.units, 0) + change
        if not left:
            del sizes[job.units]
            if not sizes:
                del self._sizes[job.group]

    def _all_refused(self, min_fail: Mapping[int, int]) -> bool:
        """Whether every pending job is at least as big as a job of its group that did not
        fit in this pass (so a pass would test and refuse every job still to come)."""
        return all(min(sizes) >= min_fail.get(group, math.inf) for group, sizes in self._sizes.items())
