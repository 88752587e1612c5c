"""Replacing a small file so that a reader never sees it half-written."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def replace_file(path: Path, text: str, mode: int) -> None:
    """Write ``text`` (UTF-8) to a temporary file beside ``path``, fsync it, give it
    ``mode`` and rename it over ``path``. The temporary file's name starts with a dot and
    does not end in the target's suffix, so directory scanners (``job_submit.lua``,
    node_exporter's textfile collector reading ``*.prom``) never pick it up; it is
    removed when anything fails, the daemon's stop signal included.

    Raises:
        OSError: the directory does not exist or is not writable, or the disk is full.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
