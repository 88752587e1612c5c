"""Runs Slurm's client commands as argument lists and turns failures into typed errors.

Never through a shell: every call is ``subprocess.run([binary, *args])``, so job names,
features and node lists reach Slurm byte for byte. Errors:

* the binary is missing, not executable or cannot be started (no ``#!`` line, or the
  fork itself failed: too many processes, no memory) -> :class:`SlurmCommandNotFound`;
* the command ran past the timeout, or Slurm says the controller/database cannot be
  reached -> :class:`SlurmUnavailable`; after a timeout the message carries the first
  line the command had written to stderr by then, if any (``scontrol`` retries for a
  minute on an unreadable ``slurm.conf`` and says so only there);
* any other non-zero exit -> :class:`SlurmCommandFailed` with the first line of stderr.
"""

from __future__ import annotations

import logging
import os
import subprocess
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

from slurmsched.errors import SlurmCommandFailed, SlurmCommandNotFound, SlurmUnavailable

log = logging.getLogger(__name__)

#: Substrings of Slurm's stderr that mean "the daemon is not there", not "you asked wrong".
UNREACHABLE_MARKERS = (
    "Unable to contact slurm controller",
    "Connection refused",
    "Connection timed out",
    "Socket timed out",
    "Zero Bytes were transmitted or received",
    "Communication connection failure",
    "Problem talking to the database",
    "failed to open persistent connection",
    "Unable to connect to database",
    "slurmdbd: Connection",
)


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What one command returned: exit status, raw stdout, decoded stderr, seconds taken."""

    argv: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: str
    seconds: float

    @property
    def text(self) -> str:
        """stdout decoded as UTF-8 (undecodable bytes replaced)."""
        return self.stdout.decode("utf-8", "replace")

    @property
    def first_error_line(self) -> str:
        """The first non-empty line of stderr (else of stdout), for one-line messages."""
        return _first_line(self.stderr) or _first_line(self.text) or f"exit status {self.returncode}"

    @property
    def unreachable(self) -> bool:
        """True when stderr says slurmctld/slurmdbd could not be reached."""
        return any(marker in self.stderr for marker in UNREACHABLE_MARKERS)


class SlurmCommands:
    """Locates and runs Slurm client commands with one environment and one timeout.

    Args:
        bin_dir: directory holding ``squeue`` & co.; ``None`` searches ``$PATH``.
        slurm_conf: exported as ``SLURM_CONF`` when given.
        timeout_s: seconds before a command counts as unreachable (it is killed).
        env: extra environment entries, laid over this process's environment.
    """

    def __init__(self, bin_dir: str | None = None, slurm_conf: str | None = None,
                 timeout_s: float = 60.0, env: Mapping[str, str] | None = None) -> None:
        self.bin_dir = bin_dir or None
        self.timeout_s = timeout_s
        self.env = {**os.environ, **(env or {})}
        if slurm_conf:
            self.env["SLURM_CONF"] = slurm_conf

    def binary(self, name: str) -> str:
        """The path (or bare name, searched on ``PATH``) that runs command ``name``."""
        return os.path.join(self.bin_dir, name) if self.bin_dir else name

    def run(self, name: str, args: Sequence[str], *, check: bool = True) -> CommandResult:
        """Run ``name args...`` and return its result.

        Args:
            name: the Slurm command (``squeue``, ``scontrol`` ...).
            args: its arguments, passed as they are (no shell, no quoting).
            check: raise on a non-zero exit; with ``False`` only a binary that cannot be
                run, a timeout and an unreachable daemon raise, other failures are returned.

        Raises:
            SlurmCommandNotFound: the binary does not exist, is not executable or could not
                be started.
            SlurmUnavailable: timeout (with the first line of stderr written so far), or
                Slurm reports the daemon unreachable.
            SlurmCommandFailed: non-zero exit (only with ``check=True``).
        """
        argv = (self.binary(name), *args)
        started = time.monotonic()
        try:
            proc = subprocess.run(argv, capture_output=True, env=self.env, timeout=self.timeout_s,
                                  stdin=subprocess.DEVNULL, check=False)
        except (FileNotFoundError, NotADirectoryError):
            where = self.bin_dir or "PATH"
            raise SlurmCommandNotFound(f"{name} not found in {where} (is slurm-client installed?)") from None
        except PermissionError:
            raise SlurmCommandNotFound(f"{self.binary(name)} is not executable") from None
        except OSError as exc:  # ENOEXEC (a script without #!), EAGAIN or ENOMEM (fork failed)
            raise SlurmCommandNotFound(f"{self.binary(name)} cannot be run: {exc.strerror}") from None
        except subprocess.TimeoutExpired as exc:
            said = _unprefixed(name, _first_line(exc.stderr))
            raise SlurmUnavailable(f"{name} did not answer within {self.timeout_s:g} s "
                                   + (f"and said: {said}" if said else "(slurmctld down or overloaded?)")) from None
        result = CommandResult(argv=argv, returncode=proc.returncode, stdout=proc.stdout,
                               stderr=proc.stderr.decode("utf-8", "replace"),
                               seconds=time.monotonic() - started)
        log.debug("%s %s: exit %d in %.3f s, %d bytes", name, args[:2], result.returncode,
                  result.seconds, len(result.stdout))
        if result.returncode != 0:
            said = _unprefixed(name, result.first_error_line)
            if result.unreachable:
                raise SlurmUnavailable(f"{name}: {said}")
            if check:
                raise SlurmCommandFailed(f"{name} failed: {said}")
        return result


def _unprefixed(name: str, line: str) -> str:
    """A line command ``name`` wrote, without the ``<name>: error: `` Slurm's commands start
    their errors with (``sacct: error: ...``): the messages built here name the command once."""
    return line.removeprefix(f"{name}: ").removeprefix("error: ")


def _first_line(stderr: bytes | str | None) -> str:
    """The first non-empty line of a command's output, bytes or text (``''`` if none): its
    stderr or stdout, or what a command killed at its timeout had written by then."""
    if isinstance(stderr, bytes):
        stderr = stderr.decode("utf-8", "replace")
    return next((line.strip() for line in (stderr or "").splitlines() if line.strip()), "")
