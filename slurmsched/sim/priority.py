"""Slurm's ``priority/multifactor`` order for the simulated pending queue.

A pending job's priority is what slurmctld computes (``_get_priority_internal`` in
``priority_multifactor.c``), restricted to the factors a trace can feed::

    priority = PriorityWeightAge       * min(age, PriorityMaxAge) / PriorityMaxAge
             + PriorityWeightJobSize   * (nodes / cluster nodes + GPUs / cluster GPUs) / 2
             + PriorityWeightPartition * partition factor
             + SiteFactor

(the partition factor: the partition's ``PriorityJobFactor`` over the largest one, 1 for
a trace's partitions) and jobs are considered by partition ``PriorityTier`` first, then
priority, then submit time and job id. Fair-share and QOS are not modelled (a trace has
no associations). Slurm truncates the sum to an integer; here it stays a real
number, which only changes how exact ties fall.

While a job is younger than ``PriorityMaxAge`` every job's priority grows at the same
rate, so their order does not change with time; the queue therefore keeps them sorted
by a time-invariant key and moves a job to a second sorted list once its age factor is
capped. An order query is then a merge of two sorted lists, not a sort.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right, insort
from operator import itemgetter
from typing import Iterable, Iterator

from slurmsched.errors import ConfigError
from slurmsched.model import SchedulerConfig
from slurmsched.sim.job import SimJob

#: (-tier, -priority or its time-invariant part, submit time, job id, the job): the job id
#: is unique, so comparisons never reach the job, which is there to be read without a lookup.
_Key = tuple[int, float, float, int, SimJob]
_JOB = itemgetter(4)
#: Sorts after every key (tiers are ints): the old list's end in :meth:`PriorityQueue._merged`.
_AFTER_ALL = (math.inf,)


class PriorityQueue:
    """Pending jobs in the order slurmctld would consider them.

    Args:
        config: the weights (``weight_age``, ``weight_job_size``, ``weight_partition``,
            ``priority_max_age_s``).
        cluster_nodes, cluster_gpus: the denominators of the job-size factor.
        unit_nodes: a job's nodes are its GPUs (processors), as on a machine of
            one-processor nodes modelled as one node (:attr:`ClusterSpec.unit_nodes`).
    """

    def __init__(self, config: SchedulerConfig, cluster_nodes: int, cluster_gpus: int, *,
                 unit_nodes: bool = False) -> None:
        if config.priority_max_age_s <= 0:
            raise ConfigError(f"PriorityMaxAge must be positive (got {config.priority_max_age_s})")
        self._w_age = float(config.weight_age)
        self._w_size = float(config.weight_job_size)
        self._w_partition = float(config.weight_partition)
        self._max_age = float(config.priority_max_age_s)
        self._rate = self._w_age / self._max_age
        self._nodes = max(1, cluster_nodes)
        self._gpus = max(1, cluster_gpus)
        self._unit_nodes = unit_nodes
        self._young: list[_Key] = []
        self._old: list[_Key] = []
        self._old_scores: list[float] = []  # capped jobs' priorities, ascending
        self._young_static: list[float] = []  # the other jobs' priorities without age, ascending
        self._level: dict[int, float] = {}  # each job's value in one of those two lists
        self._keys: dict[int, _Key] = {}
        self._capped: set[int] = set()
        self._jobs: dict[int, SimJob] = {}
        self._ageing: list[tuple[float, int]] = []
        # order_kept_until's memory: the young jobs that may still pass a capped one (the
        # others cannot until a capped job is added), valid from the time it last asked at.
        self._unsettled: set[int] = set()
        self._recheck = False  # a capped job was added: every young job may pass it
        self._checked_at = -math.inf

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, job_id: int) -> bool:
        return job_id in self._jobs

    def _static(self, job: SimJob) -> float:
        size = ((job.units if self._unit_nodes else job.nodes) / self._nodes + job.units / self._gpus) / 2
        return self._w_size * size + self._w_partition * job.partition.priority_factor + job.site_factor

    def _key(self, job: SimJob, capped: bool) -> _Key:
        if capped:
            score = self._static(job) + self._w_age
        else:
            score = self._static(job) - self._rate * job.submit
        return (-job.partition.tier, -score, job.submit, job.job_id, job)

    def _insert(self, job: SimJob, capped: bool) -> None:
        key = self._key(job, capped)
        self._keys[job.job_id] = key
        if capped:
            self._capped.add(job.job_id)
            self._recheck = True
        else:
            self._unsettled.add(job.job_id)
        level = self._level[job.job_id] = -key[1] if capped else self._static(job)
        insort(self._old_scores if capped else self._young_static, level)
        insort(self._old if capped else self._young, key)

    def _delete(self, job_id: int) -> bool:
        """Remove a job's key; returns whether it was capped."""
        key = self._keys.pop(job_id)
        capped = job_id in self._capped
        self._capped.discard(job_id)
        self._unsettled.discard(job_id)
        keys = self._old if capped else self._young
        del keys[bisect_left(keys, key)]
        levels = self._old_scores if capped else self._young_static
        del levels[bisect_left(levels, self._level.pop(job_id))]
        return capped

    def add(self, job: SimJob, now: float) -> None:
        """Queue a newly submitted job."""
        self._jobs[job.job_id] = job
        capped = now - job.submit >= self._max_age
        self._insert(job, capped)
        if not capped:
            heapq.heappush(self._ageing, (job.submit + self._max_age, job.job_id))

    def remove(self, job: SimJob) -> None:
        """Drop a job (it started or left the queue)."""
        del self._jobs[job.job_id]
        self._delete(job.job_id)

    def set_site_factor(self, job: SimJob, value: int) -> None:
        """Change a pending job's SiteFactor (``scontrol update JobId=.. SiteFactor=..``)."""
        capped = self._delete(job.job_id)
        job.site_factor = value
        self._insert(job, capped)

    def age(self, now: float) -> bool:
        """Move jobs whose age factor reached its cap to the capped list; whether any moved."""
        ageing = self._ageing
        moved = False
        while ageing and ageing[0][0] <= now:
            _, job_id = heapq.heappop(ageing)
            job = self._jobs.get(job_id)
            if job is not None and job_id not in self._capped:
                self._delete(job_id)
                self._insert(job, True)
                moved = True
        return moved

    def order_kept_until(self, since: float, jobs: Iterable[SimJob] | None = None) -> float:
        """The earliest time after ``since`` at which the order of the queued jobs (or of
        ``jobs`` against the capped ones) may change with no job reaching its age cap:
        when a job whose priority still grows with age may pass a capped job's, which
        needs a larger priority without age. ``math.inf`` if none may (every job's
        priority without age alike, as without job size and SiteFactor). Partition tiers
        are not told apart (an earlier time than the true one is only cautious).

        A young job that cannot pass any capped job at ``since`` cannot at any later time
        either until a capped job is added (its priority only grows, removing capped jobs
        leaves fewer to pass), so it is not examined again until then, or until a call
        asks about an earlier ``since`` than the last one."""
        old, young = self._old_scores, self._young_static
        if not old or not young or self._rate <= 0 or old[0] >= young[-1] + self._w_age:
            return math.inf
        unsettled = self._unsettled
        if self._recheck or since < self._checked_at:
            unsettled.update(key[3] for key in self._young)
            self._recheck = False
        self._checked_at = since
        rate, cap, until = self._rate, self._w_age, math.inf
        ids = list(unsettled) if jobs is None else [j.job_id for j in jobs if j.job_id in unsettled]
        for job_id in ids:
            base = -self._keys[job_id][1]  # the job's priority is base + rate * t until it is capped
            above = bisect_right(old, base + rate * since)
            if above < len(old) and old[above] < self._level[job_id] + cap:
                until = min(until, (old[above] - base) / rate)
            else:
                unsettled.discard(job_id)
        return until

    def sort_key(self, job: SimJob, now: float) -> tuple[int, float, float, int]:
        """The job's place in the order at ``now`` (smaller comes first)."""
        return (-job.partition.tier, -self.priority(job, now), job.submit, job.job_id)

    def rank(self, job: SimJob, now: float) -> int:
        """How many queued jobs come before ``job`` at ``now``."""
        key = self._keys[job.job_id]
        if job.job_id in self._capped:
            return bisect_left(self._old, key) + bisect_left(self._young, key, key=self._young_now(now))
        return bisect_left(self._young, key) + bisect_left(self._old, self.sort_key(job, now))

    def _young_now(self, now: float):
        shift = self._rate * now
        return lambda k: (k[0], k[1] - shift, k[2], k[3])

    def priority(self, job: SimJob, now: float) -> float:
        """The job's multifactor priority at ``now`` (without the partition tier)."""
        age = min(max(0.0, now - job.submit), self._max_age)
        return self._static(job) + self._w_age * age / self._max_age

    def ordered(self, now: float) -> Iterator[SimJob]:
        """Pending jobs, highest priority first. Do not add or remove jobs while iterating."""
        self.age(now)
        if not self._old or not self._young:
            return map(_JOB, self._young or self._old)
        return self._merged(now)

    def _merged(self, now: float) -> Iterator[SimJob]:
        """The two sorted lists merged, young keys shifted to their priority at ``now``
        (both lists hold jobs)."""
        shift = self._rate * now
        olds = iter(self._old)
        head: tuple = next(olds)
        for tier, score, submit, job_id, job in self._young:
            key = (tier, score - shift, submit, job_id)
            while head < key:
                yield head[4]
                head = next(olds, _AFTER_ALL)
            yield job
        if head is not _AFTER_ALL:
            yield head[4]
            for head in olds:
                yield head[4]
