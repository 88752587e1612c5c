"""The small cache file that ``contrib/slurm.conf.d/job_submit.lua`` reads at submit time.

The daemon writes it; slurmctld's Lua plugin reads it on every submission and gives a
new job the SiteFactor the daemon would set in its next cycle, so most jobs never need
an ``scontrol update`` at all. Format (text, one record a line, version 1)::

    slurmsched-submit-cache 1
    written <POSIX seconds, integer>
    max_age <seconds: the Lua script ignores the file when it is older, or stamped this far ahead>
    cpu_weight <GPU-equivalents per CPU for jobs without GPUs>
    level <max predicted GPU-seconds> <SiteFactor>      (ascending bounds)
    protect partition <name>    protect qos <name>      ([planner] protected_*)
    job <predicted seconds>\\t<user>\\t<job name>

A job's service is ``min(prediction, time limit) x GPUs`` (CPU jobs: ``x CPUs x
cpu_weight``); its SiteFactor is the value of the first ``level`` whose bound is at
least that service. Users or names holding a tab or a line break are left out (the
job simply gets its value from the daemon's next cycle). A job in a protected partition
or with a protected QOS is left alone, as the daemon leaves it; so is one that names no
QOS while some QOS is protected (its default QOS comes from its association, which the
script does not see), and one that names no partition while the default partition (the
one slurmctld's ``part_list`` flags as default) is protected. The file is replaced
atomically (write a temporary file beside it, fsync, rename), so slurmctld never
reads a half-written cache.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Protocol

from slurmsched.atomic import replace_file
from slurmsched.errors import StoreError
from slurmsched.planner.scale import SiteFactorScale

log = logging.getLogger(__name__)

#: File name the Lua script looks for in its own directory.
CACHE_FILE_NAME = "slurmsched-submit.cache"
MAGIC = "slurmsched-submit-cache 1"
#: Largest service bound written (GPU-seconds); the last level always uses it.
MAX_SERVICE_S = 10 ** 12


@dataclass(frozen=True, slots=True)
class SubmitEstimate:
    """Predicted run time for the next job a user submits under a job name."""

    user: str
    name: str
    estimate_s: int


@dataclass(frozen=True, slots=True)
class SubmitCache:
    """Everything the Lua script needs, as written to (or read from) the cache file.

    Attributes:
        written_at: POSIX seconds when the daemon wrote it.
        max_age_s: after this many seconds the Lua script ignores the file (fail-open);
            it ignores one stamped this far ahead too (:meth:`fresh`).
        cpu_weight: GPU-equivalents per CPU for jobs that request no GPU.
        levels: ``(max service GPU-seconds, SiteFactor)`` pairs, bounds ascending.
        estimates: one predicted run time per (user, job name).
        protected_partitions, protected_qos: ``[planner]``'s: jobs there are left alone.
    """

    written_at: int
    max_age_s: int
    cpu_weight: float
    levels: tuple[tuple[int, int], ...]
    estimates: tuple[SubmitEstimate, ...]
    protected_partitions: tuple[str, ...] = ()
    protected_qos: tuple[str, ...] = ()

    def fresh(self, now: float) -> bool:
        """Whether ``job_submit.lua`` reads the cache at ``now``: written at most
        ``max_age_s`` before, nor stamped more than that ahead (by a clock since stepped
        back, or a writer whose clock runs ahead: such a cache would never go stale)."""
        return abs(now - self.written_at) <= self.max_age_s


def protected(cache: SubmitCache, partition: str, qos: str, default_partition: str) -> bool:
    """Whether ``job_submit.lua`` leaves a job alone for its partition (a comma list; empty:
    ``default_partition``, the one slurmctld flags as default, which the script finds in
    its ``part_list``) or QOS (empty: its association's default, unknown to the script)."""
    if cache.protected_qos and (not qos or qos in cache.protected_qos):
        return True
    named = [p for p in partition.split(",") if p] or [default_partition]
    return bool(cache.protected_partitions) and any(p in cache.protected_partitions for p in named)


def levels_for(scale: SiteFactorScale) -> tuple[tuple[int, int], ...]:
    """The planner's SiteFactor levels as the cache's step table.

    Level ``l`` of ``scale`` holds services below ``min_service_s x ratio^(l+1)``; a
    whole number of GPU-seconds is below that bound exactly when it is at most
    ``ceil(bound) - 1``, which is the bound written. The last level takes everything
    above (:data:`MAX_SERVICE_S`).
    """
    levels = [(math.ceil(scale.min_service_s * math.exp(scale.log_ratio * (level + 1))) - 1, scale.value(level))
              for level in range(scale.top)]
    levels.append((MAX_SERVICE_S, scale.value(scale.top)))
    return tuple(levels)


def submit_site_factor(cache: SubmitCache, estimate_s: float, *, time_limit_s: int | None, gpus: int,
                       cpus: int) -> int | None:
    """The SiteFactor ``job_submit.lua`` gives a new job that the cache predicts ``estimate_s`` for.

    The same steps as the script's ``site_factor``: the estimate capped at the time
    limit (``time_limit_s``: the job's ``-t``, else its partition's DefaultTime or MaxTime,
    which the script looks up in its ``part_list``), times the GPUs (or the CPUs x
    ``cpu_weight`` for a job without GPUs), is the service; the first level whose bound is
    at least that service gives the value.
    ``None`` when no level holds it (the script then leaves the job alone).
    """
    if time_limit_s:
        estimate_s = min(estimate_s, time_limit_s)
    service = estimate_s * gpus if gpus > 0 else estimate_s * max(1, cpus) * cache.cpu_weight
    return next((value for bound, value in cache.levels if service <= bound), None)


def script_reads(conf_dir: Path, cache: Path) -> bool | None:
    """Whether ``job_submit.lua`` beside ``slurm.conf`` (in ``conf_dir``) reads ``cache``:
    ``None`` when no script is installed there, ``False`` when its ``CACHE_FILE_NAME``
    is not (a link to) that file."""
    if not (conf_dir / "job_submit.lua").is_file():
        return None
    return (conf_dir / CACHE_FILE_NAME).resolve() == cache.resolve()


def _safe(text: str) -> bool:
    return not any(c in text for c in "\t\r\n")


def listed(cache: SubmitCache) -> list[SubmitEstimate]:
    """The estimates the file holds: those whose user and name have no tab or line break."""
    return [e for e in cache.estimates if _safe(e.user) and _safe(e.name)]


def render(cache: SubmitCache) -> str:
    """The file content for ``cache`` (entries with a tab or line break are dropped)."""
    lines = [MAGIC, f"written {int(cache.written_at)}", f"max_age {int(cache.max_age_s)}",
             f"cpu_weight {cache.cpu_weight:g}"]
    lines += [f"level {int(bound)} {int(value)}" for bound, value in cache.levels]
    lines += [f"protect partition {name}" for name in cache.protected_partitions]
    lines += [f"protect qos {name}" for name in cache.protected_qos]
    lines += [f"job {max(1, int(e.estimate_s))}\t{e.user}\t{e.name}" for e in listed(cache)]
    return "\n".join(lines) + "\n"


class CacheTarget(Protocol):
    """Where the daemon keeps the cache: the file ``job_submit.lua`` reads
    (:class:`CacheFile`), or the simulated plugin (:mod:`slurmsched.sim.submit_plugin`)."""

    def exists(self) -> bool:
        """Whether a cache is in place."""
        ...

    def write(self, cache: SubmitCache) -> None:
        """Put ``cache`` in place (replacing the last one at once)."""
        ...

    def remove(self) -> bool:
        """Take the cache away; ``True`` when there was one."""
        ...


@dataclass(frozen=True, slots=True)
class CacheFile:
    """The cache file at ``path`` (``daemon.submit_cache``)."""

    path: Path

    def __str__(self) -> str:
        return str(self.path)

    def exists(self) -> bool:
        """Whether the file exists (one ``stat``)."""
        return self.path.exists()

    def write(self, cache: SubmitCache) -> None:
        """Replace the file atomically (:func:`write_submit_cache`).

        Raises:
            StoreError: the directory does not exist or is not writable.
        """
        write_submit_cache(self.path, cache)

    def remove(self) -> bool:
        """Delete the file; ``True`` when it existed."""
        if not self.path.exists():
            return False
        self.path.unlink(missing_ok=True)
        return True


def write_submit_cache(path: str | os.PathLike[str], cache: SubmitCache) -> None:
    """Atomically replace the cache file at ``path`` (mode 0640: the daemon's user, which
    slurmctld runs as, and its group; it names users and their jobs, so not others).

    Raises:
        StoreError: the directory does not exist or is not writable.
    """
    target = Path(path)
    try:
        replace_file(target, render(cache), 0o640)
    except OSError as exc:
        raise StoreError(f"cannot write submit cache {target}: {exc.strerror}") from None
    log.debug("wrote submit cache %s (%d levels, %d estimates)", target, len(cache.levels), len(listed(cache)))


def _parse_lines(lines: Iterable[str], path: Path) -> SubmitCache:
    it = iter(lines)
    if next(it, None) != MAGIC:
        raise StoreError(f"submit cache {path} is not a slurmsched cache (bad first line)")
    header: dict[str, str] = {}
    levels: list[tuple[int, int]] = []
    estimates: list[SubmitEstimate] = []
    protect: dict[str, list[str]] = {"partition": [], "qos": []}
    for lineno, line in enumerate(it, start=2):
        key, _, rest = line.partition(" ")
        try:
            if key == "level":
                bound, value = rest.split(" ")
                levels.append((int(bound), int(value)))
            elif key == "protect":
                kind, name = rest.split(" ")
                protect[kind].append(name)
            elif key == "job":
                est, user, name = rest.split("\t", 2)
                estimates.append(SubmitEstimate(user, name, int(est)))
            else:
                header[key] = rest
        except (ValueError, KeyError):
            raise StoreError(f"submit cache {path} line {lineno} is malformed: {line[:80]!r}") from None
    try:
        return SubmitCache(written_at=int(header["written"]), max_age_s=int(header["max_age"]),
                           cpu_weight=float(header.get("cpu_weight", "0")), levels=tuple(levels),
                           estimates=tuple(estimates), protected_partitions=tuple(protect["partition"]),
                           protected_qos=tuple(protect["qos"]))
    except (KeyError, ValueError):
        raise StoreError(f"submit cache {path} has no valid written/max_age header") from None


def read_submit_cache(path: str | os.PathLike[str]) -> SubmitCache | None:
    """Read a cache file back (``None`` when it does not exist).

    Raises:
        StoreError: the file exists but cannot be read or parsed.
    """
    target = Path(path)
    try:
        text = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreError(f"cannot read submit cache {target}: {exc}") from None
    # lines as job_submit.lua's f:lines() reads them, split at "\n" only (str.splitlines
    # would also split at a form feed or U+2028, which a job name may hold)
    return _parse_lines(text.removesuffix("\n").split("\n"), target)
