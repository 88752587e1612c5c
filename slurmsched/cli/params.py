"""Parameter types shared by the commands: points in time, lengths of time, job ids."""

from __future__ import annotations

import re
import time
from datetime import datetime

import click

from slurmsched.config import parse_seconds


class Moment(click.ParamType):
    """A point in time: ISO date/time (local time unless it names an offset) or ``7d`` ago."""

    name = "DATE"

    def convert(self, value, param, ctx) -> float:  # noqa: ANN001 - click API
        if isinstance(value, (int, float)):
            return float(value)
        text = str(value).strip()
        ago = parse_seconds(text, bare=False)
        if ago is not None:
            return time.time() - ago
        try:
            return datetime.fromisoformat(text).timestamp()
        except ValueError:
            self.fail(f"{text!r} is not a date (YYYY-MM-DD[THH:MM[:SS]]) or an age like 7d, 12h", param, ctx)


class Duration(click.ParamType):
    """A length of time: ``3600``, ``90m``, ``1d`` (:func:`slurmsched.config.parse_seconds`,
    which config keys in seconds share)."""

    name = "DURATION"

    def convert(self, value, param, ctx) -> float:  # noqa: ANN001 - click API
        text = str(value).strip()
        seconds = parse_seconds(text)
        if not seconds:
            self.fail(f"{text!r} is not a positive duration (e.g. 3600, 90m, 1d)", param, ctx)
        return seconds


class JobId(click.ParamType):
    """A Slurm job id: digits only (``12345``).

    Python's ``int()`` would read ``9_1`` (an array task as ``squeue`` prints it) as 91,
    another job; an array task is refused with the id to give instead.
    """

    name = "JOB_ID"

    def convert(self, value, param, ctx) -> int:  # noqa: ANN001 - click API
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if re.fullmatch(r"\d+_\d+", text):
            self.fail(f"{text!r} is an array task: give its own job id (squeue -o %i shows the array's"
                      " form; squeue -o %A shows each task's job id)", param, ctx)
        if not text.isascii() or not text.isdigit() or int(text) < 1:
            self.fail(f"{text!r} is not a job id (a positive whole number)", param, ctx)
        return int(text)
