"""Actions -> ``scontrol update`` argument lists (the only writes slurmsched makes).

Each function returns the arguments after ``scontrol``; every value travels as one
argv element (``Features=a100``), never through a shell. Values are checked before they
are sent: job ids must be positive integers, counts and times non-negative integers,
and feature lists may only use the characters Slurm's own
syntax uses, so whitespace, quotes, ``=`` or control characters can never smuggle a
second ``Key=Value`` into the update. There is deliberately no way to build an update of
a job's GRES, time limit or Nice.
"""

from __future__ import annotations

import re
from typing import Sequence

from slurmsched.errors import InvalidAction
from slurmsched.model import SITE_FACTOR_LIMIT, Action, SetFeatures, SetSiteFactor, SetSwitches

_FEATURES = re.compile(r"[A-Za-z0-9_.,&|*!()\[\]:-]*")


def _job_id(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidAction(f"job id must be a positive integer (got {value!r})")
    return str(value)


def _non_negative(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidAction(f"{what} must be a non-negative integer (got {value!r})")
    return value


def _matching(value: object, pattern: re.Pattern[str], what: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise InvalidAction(f"{what} {value!r} has characters Slurm's syntax does not use")
    return value


def format_duration(seconds: int) -> str:
    """Seconds -> Slurm's ``[days-]HH:MM:SS``."""
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


def site_factor_argv(job_ids: Sequence[int], value: int) -> list[str]:
    """``update JobId=a,b,c SiteFactor=V``: one call for many jobs sharing one value.

    Raises:
        InvalidAction: a job id is not a positive integer, or the value is out of range.
    """
    if not job_ids:
        raise InvalidAction("SiteFactor update without job ids")
    if isinstance(value, bool) or not isinstance(value, int) or abs(value) > SITE_FACTOR_LIMIT:
        raise InvalidAction(f"SiteFactor must be an integer within +/-{SITE_FACTOR_LIMIT} (got {value!r})")
    return ["update", "JobId=" + ",".join(_job_id(j) for j in job_ids), f"SiteFactor={value}"]


def switches_value(count: int, max_wait_s: int | None) -> str:
    """``Switches=`` value: ``N``, ``N@[days-]HH:MM:SS``; ``0`` clears the request."""
    count = _non_negative(count, "switch count")
    if count == 0 or max_wait_s is None:
        return str(count)
    return f"{count}@{format_duration(_non_negative(max_wait_s, 'switch wait'))}"


def update_argv(action: Action) -> list[str]:
    """The ``scontrol`` arguments that apply one action to one job.

    Raises:
        InvalidAction: the action carries a value that must not be sent (see module doc).
    """
    if isinstance(action, SetSiteFactor):
        return site_factor_argv([action.job_id], action.value)
    job = f"JobId={_job_id(action.job_id)}"
    if isinstance(action, SetSwitches):
        return ["update", job, f"Switches={switches_value(action.count, action.max_wait_s)}"]
    if isinstance(action, SetFeatures):
        return ["update", job, f"Features={_matching(action.features, _FEATURES, 'features')}"]
    raise InvalidAction(f"not an action slurmsched applies: {type(action).__name__}")
