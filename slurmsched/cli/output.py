"""Where a command writes its report or plot: checked before the work starts, so a long
simulation or evaluation cannot end in a failed write."""

from __future__ import annotations

import os
import sys
import unicodedata
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from slurmsched.errors import OutputError


def output_dir(path: str, option: str) -> Path:
    """Check, before the work starts, that the directory ``path`` can be written or made.

    Nothing is created here: the writer makes the directory (with its parents), so a run
    that fails before it leaves nothing behind.

    Raises:
        OutputError: ``path`` is empty, or it (or the nearest part of it that exists) is
            not a writable directory, naming ``option``.
    """
    if not path.strip():
        raise OutputError(f"{option}: give a directory (the value is empty)")
    out = Path(path)
    existing = out
    while not existing.exists() and existing != existing.parent:  # the nearest ancestor there is
        existing = existing.parent
    if not existing.is_dir():
        raise OutputError(f"{option} {path}: cannot write ({existing} is not a directory)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputError(f"{option} {path}: cannot write ({existing} is not writable)")
    return out


def output_file(path: str, option: str) -> Path:
    """Check that the file ``path`` can be written: its directory exists and is writable.

    Raises:
        OutputError: ``path`` is empty, or cannot be written, naming ``option``.
    """
    if not path.strip():
        raise OutputError(f"{option}: give a file name (the value is empty)")
    out = Path(path)
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(f"{option} {path}: no such directory {str(parent)!r}")
    if not os.access(parent, os.W_OK | os.X_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise OutputError(f"{option} {path}: not writable")
    return out


@contextmanager
def writing(path: Path, option: str) -> Iterator[None]:
    """Turn a failed write under ``path`` into an :class:`OutputError` naming ``option``."""
    try:
        yield
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename and str(exc.filename) != str(path) else ""
        raise OutputError(f"{option} {path}: cannot write ({where}{exc.strerror or exc})") from None


def columns(text: str) -> int:
    """Terminal columns ``text`` takes: wide (CJK) characters two, combining marks none."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def fit(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` columns (ending in ``~`` when cut), padded to ``width``."""
    if columns(text) > width:
        cut, used = [], 1
        for c in text:
            used += columns(c)
            if used > width:
                break
            cut.append(c)
        text = "".join(cut) + "~"
    return text + " " * (width - columns(text))


def printable(text: str) -> str:
    """``text`` safe for a terminal: control characters (newlines, ESC sequences a job's
    owner could put in its name) shown as ``?``, and so are characters the encoding of
    standard output cannot write (an emoji under a latin-1 locale), so that a table cell
    keeps the width :func:`fit` gave it."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    shown = "".join(c if c.isprintable() else "?" for c in text)
    return shown.encode(encoding, "replace").decode(encoding, "replace")
