"""Typed errors. Every error a user can cause or meet has a one-line message.

The CLI catches :class:`SlurmschedError` and prints ``error: <message>`` with exit
status 2; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class SlurmschedError(Exception):
    """Base of every expected failure; ``str(err)`` is a complete one-line message."""


class ConfigError(SlurmschedError):
    """The configuration file or a ``SLURMSCHED_*`` variable is invalid; names the key."""


class SlurmError(SlurmschedError):
    """Base for failures talking to Slurm."""


class SlurmCommandNotFound(SlurmError):
    """A Slurm client command (``squeue``, ``scontrol`` ...) is not installed, not on PATH or cannot be run."""


class SlurmUnavailable(SlurmError):
    """slurmctld or slurmdbd did not answer (down, unreachable, timed out)."""


class SlurmCommandFailed(SlurmError):
    """A Slurm command ran and failed; the message carries Slurm's own error text."""


class SlurmParseError(SlurmError):
    """Slurm's output could not be parsed (malformed JSON, unexpected shape)."""


class InvalidAction(SlurmschedError):
    """An action carries a value that is never sent to Slurm (bad job id, whitespace in a name)."""


class StoreError(SlurmschedError):
    """The history database failed (locked, unreachable, schema out of date)."""


class SchemaOutOfDate(StoreError):
    """The database schema is older than this version; the message names the command to run."""


class DatabaseOfAnotherCluster(StoreError):
    """The database keeps the state of another cluster's daemon; the message names both
    clusters and how to go on."""

    @classmethod
    def refusal(cls, where: str, owner: str | None, cluster: str) -> "DatabaseOfAnotherCluster | None":
        """The error for ``where`` (a database URL shown without its password, or another
        store) claimed by ``owner``'s daemon, when ``cluster`` is another; ``None`` when it is
        the same, or either names none (nothing claimed yet, or Slurm named no cluster)."""
        if not owner or not cluster or owner == cluster:
            return None
        return cls(f"{where} keeps the state of cluster {owner!r}'s daemon, and this Slurm is cluster {cluster!r}:"
                   " give each cluster's daemon a database of its own ([db] url); if the cluster was renamed,"
                   " 'slurmsched db release' lets the next cycle claim it")


class MigrationRefused(SlurmschedError):
    """A schema migration (``db downgrade``) was refused before it changed anything; the
    message says why (an unknown revision names the known ones)."""


class TraceFormatError(SlurmschedError):
    """A trace file cannot be read at all (unknown format, unreadable file)."""


class ImportInterrupted(SlurmschedError):
    """An import was stopped (Ctrl-C) part-way; the message says how much of it was written."""


class SimulationError(SlurmschedError):
    """A simulation could not finish (one of its worker processes died)."""


class OutputError(SlurmschedError):
    """A report, table or plot cannot be written (no such directory, not writable, disk full)."""
