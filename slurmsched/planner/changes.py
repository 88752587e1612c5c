"""Actions <-> the text values the repository keeps for revert.

The repository stores each change as ``(job_id, kind, original, current)`` text
(:class:`slurmsched.store.protocol.AppliedChange`); ``kind`` is the action class name.
:func:`describe` turns an action into that text and :func:`revert_action` turns a
stored change back into the action that restores the original.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Mapping

from slurmsched.errors import StoreError
from slurmsched.model import Action, JobRecord, SetFeatures, SetSiteFactor, SetSwitches
from slurmsched.store.protocol import AppliedChange


def _switches_text(count: int | None, wait_s: int | None) -> str:
    return f"{count or 0}@{wait_s}" if wait_s is not None else str(count or 0)


def describe(action: Action) -> tuple[str, str, str]:
    """``(kind, previous, new)`` as text for :meth:`JobRepository.record_applied`."""
    kind = type(action).__name__
    if isinstance(action, SetSiteFactor):
        return kind, str(action.previous or 0), str(action.value)
    if isinstance(action, SetSwitches):
        return (kind, _switches_text(action.previous_count, action.previous_wait_s),
                _switches_text(action.count, action.max_wait_s))
    return kind, action.previous, action.features


def live_text(job: JobRecord, kind: str) -> str | None:
    """The job's value of ``kind`` now, as :func:`describe` writes it, where the queue shows
    it exactly: SiteFactor (``sprio``; ``None`` for a job it does not list, one whose begin
    time is still ahead), Features, and Switches (the request and its wait in seconds, from
    the JSON or, on 22.05, ``scontrol show job``; ``None`` where the gateway did not read
    it). ``None`` where the queue does not show it."""
    if kind == SetSiteFactor.__name__:
        return None if job.site_factor is None else str(job.site_factor)
    if kind == SetFeatures.__name__:
        return job.features
    if kind == SetSwitches.__name__:
        return None if job.switches is None else _switches_text(job.switches, job.switch_wait_s)
    return None


def inherits(job: JobRecord) -> bool:
    """True for a task split off a job array (``ArrayJobId`` other than its own id).

    Slurm 22.05 gives such a task (one started, or a pending one updated alone, which
    gets its own job id) the values its array held, and ``scontrol update
    JobId=<array id>`` changes every task of the array still in the queue."""
    return job.array_job_id is not None and job.array_job_id != job.job_id


def record_of(applied: Mapping[tuple[int, str], AppliedChange], job: JobRecord,
              kind: str) -> AppliedChange | None:
    """The record of slurmsched's ``kind`` change that speaks for ``job``: its own, else,
    for a task split off a job array (:func:`inherits`), its array's, original included,
    as the task's (``job_id`` the task's); ``None`` when neither has one."""
    own = applied.get((job.job_id, kind))
    array_id = job.array_job_id
    if own is not None or array_id is None or array_id == job.job_id:  # not inherits(job), without a call:
        return own                                                        # every queued job comes here each cycle
    array = applied.get((array_id, kind))
    return None if array is None else replace(array, job_id=job.job_id)


def original_text(change: AppliedChange) -> str:
    """The value ``change`` replaced, as the queue shows it: ``"0"`` for a SiteFactor that
    had none recorded (Slurm's default), else the recorded text (``""`` for none)."""
    return change.original or ("0" if change.kind == SetSiteFactor.__name__ else "")


#: The reason recorded for an action of ``slurmsched revert``.
REVERT_REASON = "revert: restore the value before slurmsched"


def revert_action(change: AppliedChange, reason: str = REVERT_REASON) -> Action:
    """The action that puts ``change.original`` back (current value as ``previous``)."""
    original = change.original or ""
    if change.kind == "SetSiteFactor":
        return SetSiteFactor(change.job_id, int(original or 0), int(change.current or 0), reason)
    if change.kind == "SetSwitches":
        count, _, wait = original.partition("@")
        now_count, _, now_wait = change.current.partition("@")
        return SetSwitches(change.job_id, int(count or 0), int(wait) if wait else None,
                           int(now_count or 0), int(now_wait) if now_wait else None, reason)
    if change.kind == "SetFeatures":
        return SetFeatures(change.job_id, original, change.current, reason)
    raise StoreError(f"applied change of job {change.job_id} has unknown kind {change.kind!r}")


def revert_actions(changes: list[AppliedChange]) -> list[Action]:
    """Actions restoring every change (``slurmsched revert``), in job order."""
    return [revert_action(c) for c in sorted(changes, key=lambda c: (c.job_id, c.kind))]
