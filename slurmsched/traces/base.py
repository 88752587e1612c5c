"""Shared pieces of the trace readers: the bad-line record, file opening, field parsing."""

from __future__ import annotations

import csv
import gzip
import io
import tarfile
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Callable, Iterable, Iterator, Sequence, Tuple, Union

from slurmsched.errors import TraceFormatError
from slurmsched.model import JobRecord

#: Fixed epoch (2020-01-01T00:00:00Z) for traces whose times are relative and carry no origin.
TRACE_EPOCH = 1_577_836_800.0
#: Bound on a field's magnitude: beyond it a job id, size, time or memory is no job's, and
#: no 64-bit SQL integer (SQLite's, PostgreSQL's ``bigint``) could store it.
MAX_FIELD = 2.0 ** 63
#: Bound on a count (nodes, processors, GPUs): the jobs table stores counts as 32-bit SQL
#: integers (PostgreSQL's ``integer``), and no job is that big.
MAX_COUNT = 2 ** 31 - 1
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
#: A trace item and the 1-based line its row begins on (within its member, for a tar member).
Numbered = Tuple[int, TraceItem]


def line_numbers(numbers: Sequence[int], show: int = 5) -> str:
    """Line numbers for people, short however many: ``"3, 4, 6"``, ``"3, 4, 6, 9, 12 and 995 more"``.

    Args:
        numbers: the line numbers, in the order to show them.
        show: how many to name before counting the rest.
    """
    named = ", ".join(str(n) for n in numbers[:show])
    return f"{named} and {len(numbers) - show} more" if len(numbers) > show else named


@contextmanager
def reading(path: str | Path) -> Iterator[None]:
    """Turn a failure while reading ``path`` part-way into :class:`TraceFormatError`.

    A corrupt or truncated gzip (or tar) file opens fine and fails only when read:
    ``gzip.BadGzipFile``, ``EOFError``, ``zlib.error``, ``tarfile.ReadError``, or an I/O
    error. Every reader of trace files reads inside this, so each command that reads a
    trace reports ``cannot read trace PATH to the end: ...`` instead of a traceback.

    Raises:
        TraceFormatError: the file could not be read to the end.
    """
    try:
        yield
    except (EOFError, zlib.error, OSError, tarfile.TarError) as exc:
        raise TraceFormatError(f"cannot read trace {path} to the end: {exc}") from None


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
    """Parse a float field, raising :class:`RowError` naming the field (also when its
    magnitude reaches :data:`MAX_FIELD`)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise RowError(f"{what} is not a number ({text!r})") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise RowError(f"{what} is not a finite number ({text!r})")
    if abs(value) >= MAX_FIELD:
        raise RowError(f"{what} is out of range ({text!r})")
    return value


def integer(text: str, what: str) -> int:
    """Parse an integer field (``"12"`` or ``"12.0"``), raising :class:`RowError`."""
    value = number(text, what)
    if value != int(value):
        raise RowError(f"{what} is not an integer ({text!r})")
    return int(value)


def count(text: str, what: str, *, unknown_below_zero: bool = False) -> int:
    """Parse a count field (nodes, processors, GPUs) as :func:`integer`, raising
    :class:`RowError` when it is negative or its magnitude exceeds :data:`MAX_COUNT`.

    Args:
        unknown_below_zero: let a negative value through, for formats that write unknown
            so (SWF's -1); the caller decides what it means.
    """
    value = integer(text, what)
    if abs(value) > MAX_COUNT:
        raise RowError(f"{what} is out of range ({text!r})")
    if value < 0 and not unknown_below_zero:
        raise RowError(f"{what} is negative ({text!r})")
    return value


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


class _Records:
    """The lines of a CSV file as :func:`csv.reader` takes them, skipping blank and ``#``
    lines between records (not inside a quoted field, where they are data).

    Attributes:
        lineno: the physical line last handed out (1-based).
        start: the line the current record began on.
        between: True until a record begins; the caller sets it again after each record.
    """

    __slots__ = ("_lines", "lineno", "start", "between")

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = iter(lines)
        self.lineno = 0
        self.start = 0
        self.between = True

    def __iter__(self) -> _Records:
        return self

    def __next__(self) -> str:
        for line in self._lines:
            self.lineno += 1
            if self.between:
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                self.between = False
                self.start = self.lineno
            return line
        raise StopIteration

    def span(self) -> str:
        """``" (a record of lines 7-9: a quote left open?)"`` when the last record spans lines, else ``""``."""
        if self.lineno == self.start:
            return ""
        return f" (a record of lines {self.start}-{self.lineno}: a quote left open?)"


def iter_csv(lines: Iterable[str], required: Iterable[str], source: str,
             parse: Callable[[dict[str, str], int], JobRecord], reason_prefix: str = "") -> Iterator[Numbered]:
    """Read a CSV with a header row (``#`` comment lines allowed before or between rows).

    A quoted field may hold line breaks (valid CSV): the record then spans several
    lines and is numbered by its first one.

    Args:
        lines: the file's lines (with their line endings; opened with ``newline=""``).
        required: column names the header must have.
        source: file name for error messages.
        parse: maps one row (column -> text) and its data-row number (1-based) to a record,
            raising :class:`RowError` for a bad row.
        reason_prefix: prepended to every bad-line reason (e.g. a tar member's name).

    Yields:
        ``(line, item)``: the line the row begins on, and its record or :class:`BadLine`.

    Raises:
        TraceFormatError: no header, or the header lacks required columns.
    """
    feed = _Records(lines)
    reader = csv.reader(feed, strict=True)  # strict: a quote left open is an error, not the rest of the file
    header: list[str] | None = None
    row_number = 0
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            feed.between = True
            yield feed.start, BadLine(feed.start, f"{reason_prefix}unreadable CSV ({exc}){feed.span()}")
            continue
        feed.between = True
        lineno = feed.start
        if header is None:
            header = [f.strip() for f in fields]
            missing = [c for c in required if c not in header]
            if missing:
                raise TraceFormatError(f"{source}: header lacks column(s) {', '.join(missing)}")
            continue
        row_number += 1
        if len(fields) != len(header):
            yield lineno, BadLine(lineno, f"{reason_prefix}expected {len(header)} fields, found {len(fields)}"
                                          f"{feed.span()}")
            continue
        try:
            yield lineno, parse(dict(zip(header, fields)), row_number)
        except RowError as exc:
            yield lineno, BadLine(lineno, f"{reason_prefix}{exc}")
    if header is None:
        raise TraceFormatError(f"{source}: no CSV header row")
