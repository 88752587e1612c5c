"""Which part of the history database a command reads: one cluster, a time window.

A database that ``slurmsched history import`` filled from more than one source (the
site's accounting, a trace imported with ``--cluster other``) holds the jobs of several
clusters. Every command that reads the history (``simulate --from-db``, ``predict
evaluate --from-db``, ``history stats``) works on one of them: ``--cluster NAME``,
required when the database holds several, so that jobs of different clusters are never
pooled unnoticed. A time window (``--since``, ``--until``) is named in messages as
local dates (:func:`moment_text`), and a ``--since`` in the future is refused
(:func:`check_past`): it could only ever select nothing.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Iterable, Iterator

from slurmsched.errors import ConfigError
from slurmsched.model import JobRecord


def one_cluster(records: Iterable[JobRecord], name: str | None) -> Iterator[JobRecord]:
    """The records of cluster ``name``, streamed; every record when it is ``None``.

    The check runs once the records are exhausted (so a stream is read once): a caller
    that consumes the whole iterator gets either every record of one cluster or the
    error. An empty input is not an error (the caller says what it found none of).

    Args:
        records: job records of any clusters, in any order.
        name: the cluster to keep (``--cluster``); ``None``: the only one there is.

    Raises:
        ConfigError: ``name`` is ``None`` and the records hold several clusters (the
            message names them and asks for ``--cluster``), or ``name`` is not among the
            records' clusters (the message names those there are).
    """
    clusters: set[str] = set()
    for record in records:
        clusters.add(record.cluster)
        if name is None or record.cluster == name:
            yield record
    found = ", ".join(map(repr, sorted(clusters)))
    if name is None and len(clusters) > 1:
        raise ConfigError(f"the history database holds several clusters ({found}): name one with --cluster")
    if name is not None and clusters and name not in clusters:
        raise ConfigError(f"the history database has no job of cluster {name!r} (it has: {found})")


def moment_text(moment: float) -> str:
    """A POSIX time as people give ``--since``/``--until``: local ``YYYY-MM-DD HH:MM``."""
    return datetime.fromtimestamp(moment).strftime("%Y-%m-%d %H:%M")


def check_past(moment: float | None, option: str = "--since", example: str = "30d") -> None:
    """Refuse a moment in the future (``--since``; ``history purge --before``).

    Args:
        moment: the resolved option (POSIX seconds), ``None`` when not given.
        option: the option's name, for the message.
        example: an age to suggest instead.

    Raises:
        ConfigError: ``moment`` is later than now; the message names it as a date.
    """
    if moment is not None and moment > time.time():
        raise ConfigError(f"{option} {moment_text(moment)} is in the future: give a past date or an age "
                          f"such as {example}")
