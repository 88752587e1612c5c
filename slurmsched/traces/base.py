"""Shared pieces of the trace readers: the bad-line record, file opening, field parsing."""

from __future__ import annotations

import csv
import gzip
import io
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Callable, Iterable, Iterator, Union

from slurmsched.errors import TraceFormatError
from slurmsched.model import JobRecord

#: Fixed epoch (2020-01-01T00:00:00Z) for traces whose times are relative and carry no origin.
TRACE_EPOCH = 1_577_836_800.0
#: Start of the Helios Venus slice's window (2020-09-01T00:00:00Z); its submit times count from here.
HELIOS_EPOCH = 1_598_918_400.0


@dataclass(frozen=True, slots=True)
class BadLine:
    """A trace row that could not be read.

    Attributes:
        lineno: 1-based physical line number in the file (headers and comments count).
        reason: one line saying what was wrong.
    """

    lineno: int
    reason: str


TraceItem = Union[JobRecord, BadLine]


class RowError(ValueError):
    """Raised by a row parser; becomes a :class:`BadLine` carrying its message."""


def open_text(path: str | Path) -> IO[str]:
    """Open a plain or gzip-compressed text file (detected by its magic bytes).

    Raises:
        TraceFormatError: the file does not exist or cannot be read.
    """
    try:
        with open(path, "rb") as probe:
            magic = probe.read(2)
        if magic == b"\x1f\x8b":
            return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", errors="replace", newline="")
        return open(path, encoding="utf-8", errors="replace", newline="")
    except OSError as exc:
        raise TraceFormatError(f"cannot read trace {path}: {exc.strerror or exc}") from None


def number(text: str, what: str) -> float:
    """Parse a float field, raising :class:`RowError` naming the field."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise RowError(f"{what} is not a number ({text!r})") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise RowError(f"{what} is not a finite number ({text!r})")
    return value


def integer(text: str, what: str) -> int:
    """Parse an integer field (``"12"`` or ``"12.0"``), raising :class:`RowError`."""
    value = number(text, what)
    if value != int(value):
        raise RowError(f"{what} is not an integer ({text!r})")
    return int(value)


def utc_timestamp(text: str, what: str) -> float:
    """Parse ``YYYY-MM-DD HH:MM:SS`` (or ISO 8601) as UTC POSIX seconds."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise RowError(f"{what} is not a date-time ({text!r})") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def duration(text: str, what: str) -> float:
    """A non-negative duration in seconds."""
    value = number(text, what)
    if value < 0:
        raise RowError(f"{what} is negative ({text!r})")
    return value


def iter_csv(lines: Iterable[str], required: Iterable[str], source: str,
             parse: Callable[[dict[str, str], int], JobRecord], reason_prefix: str = "") -> Iterator[TraceItem]:
    """Read a CSV with a header row (``#`` comment lines allowed before or between rows).

    Args:
        lines: the file's lines (with their line endings).
        required: column names the header must have.
        source: file name for error messages.
        parse: maps one row (column -> text) and its data-row number (1-based) to a record,
            raising :class:`RowError` for a bad row.
        reason_prefix: prepended to every bad-line reason (e.g. a tar member's name).

    Raises:
        TraceFormatError: no header, or the header lacks required columns.
    """
    header: list[str] | None = None
    row_number = 0
    for lineno, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            fields = next(csv.reader([line]))
        except csv.Error as exc:
            yield BadLine(lineno, f"{reason_prefix}unreadable CSV ({exc})")
            continue
        if header is None:
            header = [f.strip() for f in fields]
            missing = [c for c in required if c not in header]
            if missing:
                raise TraceFormatError(f"{source}: header lacks column(s) {', '.join(missing)}")
            continue
        row_number += 1
        if len(fields) != len(header):
            yield BadLine(lineno, f"{reason_prefix}expected {len(header)} fields, found {len(fields)}")
            continue
        try:
            yield parse(dict(zip(header, fields)), row_number)
        except RowError as exc:
            yield BadLine(lineno, f"{reason_prefix}{exc}")
    if header is None:
        raise TraceFormatError(f"{source}: no CSV header row")
