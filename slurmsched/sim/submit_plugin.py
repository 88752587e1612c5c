"""``contrib/slurm.conf.d/job_submit.lua`` as the simulated slurmctld runs it.

On a site that installs the script, slurmctld gives a new job the SiteFactor the daemon
would set, at submission, from the cache the daemon writes
(:mod:`slurmsched.submit_cache`); the daemon's next cycle then finds most jobs already
valued. With ``[sim] submit_plugin`` (``simulate --submit-plugin``) the simulated
daemon keeps its cache in a :class:`SubmitPlugin` (a
:class:`~slurmsched.submit_cache.CacheTarget`) instead of a file, and the plugin reads it
as the script reads the file: only the entries the file would hold
(:func:`~slurmsched.submit_cache.listed`), ignored once older than its ``max_age`` by
the simulated clock, a job whose (user, job name) it does not list left alone. Handing
the cache over in memory spares the simulation a file rewrite every 300 simulated
seconds; the file's format has tests of its own, and a live test checks that the script
in slurmctld gives the values :func:`~slurmsched.submit_cache.submit_site_factor` does.

Beside the oracle predictor (the ``sjf`` bound) the plugin values every new job by its
true run time instead (:meth:`SubmitPlugin.use_truth`): the cache's estimates are the
previous jobs' run times, which would make the bound worse than the policies it bounds.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

from slurmsched.model import JobRecord
from slurmsched.planner.plan import submit_stamp
from slurmsched.submit_cache import SubmitCache, listed, protected, submit_site_factor


class SubmitPlugin:
    """The Lua plugin's lookup, over the cache the simulated daemon last wrote."""

    def __init__(self) -> None:
        self._cache: SubmitCache | None = None
        self._read: SubmitCache | None = None
        self._estimates: dict[tuple[str, str], int] = {}
        self._truth: Mapping[int, float] | None = None

    def use_truth(self, durations: Mapping[int, float]) -> None:
        """Value each new job by its true run time (job id -> seconds), as the oracle does."""
        self._truth = durations

    def __str__(self) -> str:
        return "in the simulated job_submit.lua"

    @property
    def cache(self) -> SubmitCache | None:
        """The cache the daemon last wrote (``None``: none, or removed)."""
        return self._cache

    # --- the daemon's side (CacheTarget) -------------------------------------------

    def exists(self) -> bool:
        """Whether the daemon has a cache in place."""
        return self._cache is not None

    def write(self, cache: SubmitCache) -> None:
        """The daemon's new cache (read by the next submission)."""
        self._cache = cache

    def remove(self) -> bool:
        """The daemon takes its cache away (paused); ``True`` when there was one."""
        existed, self._cache = self._cache is not None, None
        return existed

    # --- slurmctld's side ----------------------------------------------------------

    def site_factor(self, job: JobRecord, gpus: int, now: float, default_partition: str) -> int | None:
        """The SiteFactor the script gives ``job`` (asking for ``gpus``) submitted at ``now``
        to a slurmctld whose default partition is ``default_partition``; ``None`` leaves it
        untouched (no cache, a stale one, a protected job, or a job it does not list)."""
        cache = self._cache
        if (cache is None or not cache.fresh(now)
                or protected(cache, job.partition, job.qos, default_partition)):
            return None
        estimate: float | None
        if self._truth is not None:
            estimate = self._truth.get(job.job_id)
        else:
            if cache is not self._read:
                if self._read is None or cache.estimates != self._read.estimates:  # most rewrites change none
                    self._estimates = {(e.user, e.name): e.estimate_s for e in listed(cache)}
                self._read = cache
            estimate = self._estimates.get((job.user, job.name))
        if estimate is None:
            return None
        return submit_site_factor(cache, max(1.0, estimate), time_limit_s=job.time_limit_s, gpus=gpus, cpus=job.cpus)

    @staticmethod
    def stamp(job: JobRecord, value: int) -> JobRecord:
        """The job as the script leaves a job it values: ``AdminComment`` stamped with the
        value (by which the daemon tells it from an admin's), unless it has one already."""
        return job if job.admin_comment else dataclasses.replace(job, admin_comment=submit_stamp(value))
