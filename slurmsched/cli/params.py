"""Parameter types shared by the commands: points in time, lengths of time, job ids."""

from __future__ import annotations

import math
import re
import time
from datetime import datetime

import click

from slurmsched.config import parse_length, parse_seconds

#: Largest Slurm job id (``uint32_t``).
MAX_JOB_ID = 2**32 - 1


class Moment(click.ParamType):
    """A point in time: ISO date/time (local time unless it names an offset) or ``7d`` ago."""

    name = "DATE"

    def convert(self, value, param, ctx) -> float:  # noqa: ANN001 - click API
        if isinstance(value, (int, float)):
            return float(value)
        text = str(value).strip()
        ago = parse_seconds(text, bare=False)
        try:
            date = datetime.fromisoformat(text) if ago is None else None
        except ValueError:
            self.fail(f"{text!r} is not a date (YYYY-MM-DD[THH:MM[:SS]]) or an age like 7d, 12h", param, ctx)
        try:
            moment = date.timestamp() if date is not None else time.time() - (ago or 0.0)
            datetime.fromtimestamp(moment)  # reports and the database show it as a date
        except (OverflowError, OSError, ValueError):
            self.fail(f"{text!r} is out of the range of dates this machine shows (years 1 to 9999)", param, ctx)
        return moment


class Duration(click.ParamType):
    """A positive length of time: ``3600``, ``90m``, ``1d``, ``1e3``, read as config keys in
    seconds read it (:func:`slurmsched.config.parse_length`)."""

    name = "DURATION"

    def convert(self, value, param, ctx) -> float:  # noqa: ANN001 - click API
        text = str(value).strip()
        seconds = parse_length(text)
        if seconds is None or not 0 < seconds < math.inf:
            self.fail(f"{text!r} is not a positive duration (e.g. 3600, 90m, 1d)", param, ctx)
        return seconds


class JobId(click.ParamType):
    """A Slurm job id: digits only (``12345``), at most :data:`MAX_JOB_ID` (Slurm's are 32-bit).

    Python's ``int()`` would read ``9_1`` (an array task as ``squeue`` prints it) as 91,
    another job; an array task is refused with the id to give instead, and so are an
    array's pending tasks as ``squeue`` lists them (``9_[2-5%2]``), which are queued as
    one job with the array's id.
    """

    name = "JOB_ID"

    def convert(self, value, param, ctx) -> int:  # noqa: ANN001 - click API
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if re.fullmatch(r"\d+_\d+", text):
            self.fail(f"{text!r} is an array task: give its own job id (squeue -o %i shows the array's"
                      " form; squeue -o %A shows each task's job id)", param, ctx)
        pending_tasks = re.fullmatch(r"(\d+)_\[[\d,%-]+\]", text)
        if pending_tasks:
            self.fail(f"{text!r} is an array's pending tasks, queued as one job: give the array's job id"
                      f" {int(pending_tasks[1])}", param, ctx)
        if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= MAX_JOB_ID:
            self.fail(f"{text!r} is not a job id (a whole number from 1 to {MAX_JOB_ID})", param, ctx)
        return int(text)
