"""GRES and TRES strings as Slurm prints them, turned into :class:`GresRequest` values.

Slurm spells the same request several ways, depending on version and field:

* node inventories (``sinfo``): ``gpu:a100:8``, ``gpu:a100:8(S:0-1)``, ``gpu:a100:0(IDX:N/A)``;
* job requests (``tres_per_node`` ...): ``gres:gpu:a100:2`` (<= 23.02), ``gres/gpu:a100:2``
  (>= 23.11), ``gres/gpu:3``, several comma-separated;
* TRES strings (``tres_req_str``): ``cpu=2,mem=2G,gres/gpu=4,gres/gpu:a100=4``;
* accounting TRES lists (``sacct --json``): ``{"type": "gres", "name": "gpu:a100", "count": 4}``.

Every function here is pure and cheap; the two string parsers the gateway calls for
every job are memoised (a queue repeats a handful of distinct GRES/TRES strings), and
their results are immutable, so sharing them is safe.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable, Mapping

from slurmsched.model import GresRequest

_EMPTY = ("", "(null)", "N/A", "None")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses (``gpu:a100:8(IDX:0,2),mps:100``)."""
    if "(" not in text:
        return text.split(",")
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def parse_gres_item(item: str) -> GresRequest | None:
    """Parse one GRES item (``gres/gpu:a100:2``, ``gpu:8(S:0)``, ``gres/gpu:a100=4``).

    Returns ``None`` for empty placeholders and for TRES that are not GRES (``cpu=2``).
    Like Slurm, a numeric second field is a count (``gpu:2``), anything else a type.

    Raises:
        ValueError: the count is not an integer (the caller wraps it in SlurmParseError).
    """
    item = item.strip()
    paren = item.find("(")
    if paren >= 0:
        item = item[:paren]
    if item in _EMPTY:
        return None
    if item.startswith(("gres/", "gres:")):
        item = item[5:]
    elif "=" in item:
        return None  # another TRES, e.g. cpu=2 or mem=4G
    if "=" in item:
        key, count_text = item.split("=", 1)
        fields = key.split(":")
        gres_type = fields[1] if len(fields) > 1 else None
    else:
        fields = item.split(":")
        if len(fields) == 1:
            gres_type, count_text = None, "1"
        elif len(fields) == 2:
            numeric = fields[1][:1].isdigit()
            gres_type, count_text = (None, fields[1]) if numeric else (fields[1], "1")
        else:
            gres_type, count_text = fields[1], fields[2]
    if not fields[0]:
        return None
    return GresRequest(name=fields[0], type=gres_type or None, count=_count(count_text))


_MULTIPLIERS = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}


def _count(text: str) -> int:
    """GRES counts may carry a unit suffix (``2K`` for MPS); GPUs never do."""
    if text.isdigit():
        return int(text)
    text = text.strip()
    if text and text[-1].upper() in _MULTIPLIERS:
        return int(text[:-1]) * _MULTIPLIERS[text[-1].upper()]
    return int(text)


@lru_cache(maxsize=4096)
def parse_gres(text: str | None) -> tuple[GresRequest, ...]:
    """Parse a comma-separated GRES list; non-GRES TRES entries are skipped.

    >>> parse_gres("gres:gpu:a100:2")
    (GresRequest(name='gpu', type='a100', count=2),)
    """
    if not text or text in _EMPTY:
        return ()
    out = []
    for part in _split_top_level(text):
        gres = parse_gres_item(part)
        if gres is not None:
            out.append(gres)
    return tuple(out)


def _gpu_totals(pairs: Iterable[tuple[str, int]]) -> tuple[int, str | None]:
    """``[("gpu", 4), ("gpu:a100", 4)]`` -> ``(4, "a100")``; other GRES names are ignored."""
    total: int | None = None
    typed: dict[str, int] = {}
    for name, count in pairs:
        if name == "gpu":
            total = count
        elif name.startswith("gpu:"):
            kind = name[4:]
            typed[kind] = typed.get(kind, 0) + count
    if total is None:
        total = sum(typed.values())
    gpu_type = max(typed, key=typed.__getitem__) if typed else None
    return total, gpu_type


@lru_cache(maxsize=4096)
def gpus_from_tres(text: str | None) -> tuple[int, str | None]:
    """Total GPUs and GPU type from a TRES string (``...,gres/gpu=4,gres/gpu:a100=4``).

    Returns:
        ``(total, type)``: ``total`` from ``gres/gpu=N`` (else the sum of typed counts);
        ``type`` the typed entry with the largest count, ``None`` if only untyped.

    Raises:
        ValueError: a GPU count is not an integer (the caller wraps it).
    """
    if not text or "gpu" not in text:
        return 0, None
    pairs = []
    for part in text.split(","):
        if part.startswith(("gres/gpu", "gres:gpu")):
            key, _, value = part.partition("=")
            pairs.append((key[5:], _count(value) if value else 0))
    return _gpu_totals(pairs)


def gpus_from_tres_list(entries: Iterable[Mapping[str, Any]] | None) -> tuple[int, str | None]:
    """Total GPUs and GPU type from an accounting TRES list (``sacct --json``'s ``tres``).

    Entries look like ``{"type": "gres", "name": "gpu:a100", "count": 4}``.

    Raises:
        KeyError, TypeError, ValueError: an entry is not shaped like that (caller wraps it).
    """
    return _gpu_totals((str(e["name"]), int(e["count"] or 0))
                       for e in entries or () if e["type"] == "gres")


def gpu_count(requests: Iterable[GresRequest]) -> int:
    """How many GPUs a GRES list holds."""
    return sum(g.count for g in requests if g.name == "gpu")


def gpu_type_of(requests: Iterable[GresRequest]) -> str | None:
    """The first GPU type named in a GRES list (``None`` if untyped or no GPUs)."""
    for g in requests:
        if g.name == "gpu" and g.type:
            return g.type
    return None


def gres_from_mapping(mapping: Mapping[str, Any] | None) -> tuple[GresRequest, ...]:
    """pyslurm's GRES dicts -> GresRequest values.

    Keys look like ``"gres/gpu:a100"``, ``"gpu:a100"`` or ``"gpu"``; values are counts
    or ``{"count": N, "indexes": ...}``.

    Raises:
        TypeError, ValueError: a value is not a count (caller wraps it).
    """
    out = []
    for key, value in (mapping or {}).items():
        count = value.get("count") if isinstance(value, Mapping) else value
        name = key[5:] if key.startswith(("gres/", "gres:")) else key
        gres_name, _, gres_type = name.partition(":")
        out.append(GresRequest(name=gres_name, type=gres_type or None, count=int(count or 0)))
    return tuple(out)
