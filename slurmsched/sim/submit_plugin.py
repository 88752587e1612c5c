"""``contrib/slurm.conf.d/job_submit.lua`` as the simulated slurmctld runs it.

On a site that installs the script, slurmctld gives a new job the SiteFactor the daemon
would set, at submission, from the cache file the daemon writes
(:mod:`slurmsched.submit_cache`); the daemon's next cycle then finds most jobs already
valued. With ``[sim] submit_plugin`` (``simulate --submit-plugin``) the simulated
daemon writes that very file (in a temporary directory) and :class:`SubmitPlugin`
reads it as the script does: the cache is re-read only when its ``written`` stamp
changes, ignored once older than its ``max_age`` (by the simulated clock), and a job
whose (user, job name) it does not list is left alone.
"""

from __future__ import annotations

from pathlib import Path

from slurmsched.model import JobRecord
from slurmsched.submit_cache import MAGIC, SubmitCache, read_submit_cache, submit_site_factor


class SubmitPlugin:
    """The Lua plugin's lookup, over the cache file at ``path``.

    Args:
        path: the cache file the simulated daemon writes (``daemon.submit_cache``).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._cache: SubmitCache | None = None
        self._estimates: dict[tuple[str, str], int] = {}

    def site_factor(self, job: JobRecord, gpus: int, now: float) -> int | None:
        """The SiteFactor the script gives ``job`` (asking for ``gpus``) submitted at ``now``;
        ``None`` leaves it untouched (no cache, a stale one, or a job it does not list)."""
        cache = self._load(now)
        if cache is None:
            return None
        estimate = self._estimates.get((job.user, job.name))
        if estimate is None:
            return None
        return submit_site_factor(cache, estimate, time_limit_s=job.time_limit_s, gpus=gpus, cpus=job.cpus)

    def _load(self, now: float) -> SubmitCache | None:
        """The cache if it exists and is fresh; parsed again only when its ``written`` line changed."""
        try:
            with self.path.open(encoding="utf-8") as handle:
                magic, written = handle.readline().rstrip("\n"), handle.readline().rstrip("\n")
        except FileNotFoundError:
            return None
        if magic != MAGIC:
            return None
        if self._cache is None or written != f"written {self._cache.written_at}":
            self._cache = read_submit_cache(self.path)
            if self._cache is None:  # removed between the two reads
                return None
            self._estimates = {(e.user, e.name): e.estimate_s for e in self._cache.estimates}
        cache = self._cache
        return cache if now - cache.written_at <= cache.max_age_s else None
