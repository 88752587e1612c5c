"""The entry points: :func:`iter_trace` dispatches on the format name; :func:`iter_numbered`
also gives each item's line number."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Iterator

from slurmsched.errors import TraceFormatError
from slurmsched.traces.base import Numbered, TraceItem, open_text, reading
from slurmsched.traces.csv_formats import iter_eagle, iter_helios, iter_itp, iter_philly
from slurmsched.traces.swf import iter_swf

#: Format names accepted by :func:`iter_trace`.
FORMATS = ("swf", "helios", "philly", "itp", "eagle")


def _split_member(path: str | Path) -> tuple[Path, str | None]:
    """``"x.tar.gz:cluster04.csv"`` -> (x.tar.gz, "cluster04.csv"); plain paths -> (path, None)."""
    text = str(path)
    if not Path(text).exists() and ":" in text:
        archive, member = text.rsplit(":", 1)
        return Path(archive), member
    return Path(text), None


def _open_tar(archive: Path) -> tarfile.TarFile:
    try:
        return tarfile.open(archive, "r:*")
    except (OSError, tarfile.TarError) as exc:
        raise TraceFormatError(f"cannot read tar archive {archive}: {exc}") from None


def list_members(path: str | Path) -> list[str]:
    """The CSV members of a trace archive (e.g. the ITP tar), in name order.

    Raises:
        TraceFormatError: the file is not a readable tar archive.
    """
    with _open_tar(Path(path)) as tar:
        return sorted(m.name for m in tar.getmembers() if m.isfile() and m.name.endswith(".csv"))


def _iter_itp(path: str | Path) -> Iterator[Numbered]:
    archive, member = _split_member(path)
    if member is None and not tarfile.is_tarfile(archive):
        with open_text(archive) as handle:
            yield from iter_itp(handle, str(archive), cluster=archive.stem)
        return
    names = list_members(archive) if member is None else [member]
    with _open_tar(archive) as tar:
        for name in names:
            try:
                raw = tar.extractfile(name)
            except KeyError:
                raise TraceFormatError(f"{archive} has no member {name!r} (members: "
                                       f"{', '.join(list_members(archive))})") from None
            if raw is None:
                raise TraceFormatError(f"{archive}:{name} is not a regular file")
            with io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="") as handle:
                yield from iter_itp(handle, f"{archive}:{name}", cluster=Path(name).stem, reason_prefix=f"{name}: ")


def _iter_csv_file(path: str | Path, reader) -> Iterator[Numbered]:  # noqa: ANN001 - iter_helios & co
    with open_text(path) as handle:
        yield from reader(handle, str(path))


def _to_the_end(path: str | Path, items: Iterator[Numbered]) -> Iterator[Numbered]:
    """``items``, with a failure part-way (a truncated gzip) as :class:`TraceFormatError`."""
    with reading(path):
        yield from items


def iter_numbered(path: str | Path, fmt: str) -> Iterator[Numbered]:
    """Yield ``(line, item)`` for every row of a trace file: the 1-based line the row
    begins on (within its member, for an ITP tar), and its ``JobRecord`` or ``BadLine``.

    Args:
        path: the trace file (plain or gzip). For ``itp`` also a tar archive (all its
            CSV members) or ``ARCHIVE:MEMBER`` for one member.
        fmt: one of :data:`FORMATS`.

    Raises:
        TraceFormatError: unknown format (at once); an unreadable file, one that cannot
            be read to the end (a corrupt or truncated gzip or tar), or a CSV header
            without the format's columns (when iteration reaches it).
    """
    if fmt not in FORMATS:
        raise TraceFormatError(f"unknown trace format {fmt!r} (expected one of {', '.join(FORMATS)})")
    if fmt == "itp":
        items = _iter_itp(path)
    elif fmt == "swf":
        items = iter_swf(path)
    else:
        readers = {"helios": iter_helios, "philly": iter_philly, "eagle": iter_eagle}
        items = _iter_csv_file(path, readers[fmt])
    return _to_the_end(path, items)


def iter_trace(path: str | Path, fmt: str) -> Iterator[TraceItem]:
    """Yield every job of a trace file as a ``JobRecord``, or a ``BadLine`` for a row it cannot read.

    The same items as :func:`iter_numbered`, without their line numbers.

    Raises:
        TraceFormatError: as :func:`iter_numbered`.
    """
    numbered = iter_numbered(path, fmt)
    return (item for _, item in numbered)
