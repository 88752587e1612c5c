"""How a failed Slurm command reads in slurmsched's one-line errors (a script stands in for it)."""

from __future__ import annotations

import pytest

from slurmsched.errors import SlurmCommandFailed, SlurmCommandNotFound, SlurmUnavailable
from slurmsched.gateway import CliGateway
from slurmsched.gateway.commands import SlurmCommands
from slurmsched.model import SetSiteFactor


@pytest.mark.parametrize(("said", "error", "message"), [
    ("sacct: error: Problem talking to the database: Connection refused", SlurmUnavailable,
     "sacct: Problem talking to the database: Connection refused"),
    ("sacct: error: Invalid field requested: bogus", SlurmCommandFailed,
     "sacct failed: Invalid field requested: bogus"),
    ("sacct: fatal", SlurmCommandFailed, "sacct failed: fatal"),
    ("slurm_load_jobs error: Unable to contact slurm controller", SlurmUnavailable,
     "sacct: slurm_load_jobs error: Unable to contact slurm controller"),
])
def test_a_failed_command_is_named_once(tmp_path, said, error, message):
    """Slurm's commands start an error with their own name (``sacct: error: ...``); the
    message names the command once."""
    script = tmp_path / "sacct"
    script.write_text(f"#!/bin/sh\necho '{said}' >&2\nexit 1\n")
    script.chmod(0o755)
    with pytest.raises(error) as err:
        SlurmCommands(bin_dir=str(tmp_path)).run("sacct", [])
    assert str(err.value) == message


def test_a_command_that_cannot_be_started_is_a_typed_error(tmp_path):
    """An executable that the kernel refuses (a wrapper script without ``#!``: ENOEXEC; a
    failed fork is the same OSError) was an untyped OSError: 'internal error (a bug)'."""
    script = tmp_path / "squeue"
    script.write_text("exec /usr/bin/squeue \"$@\"\n")
    script.chmod(0o755)
    with pytest.raises(SlurmCommandNotFound) as err:
        SlurmCommands(bin_dir=str(tmp_path)).run("squeue", ["--json"])
    assert str(err.value) == f"{script} cannot be run: Exec format error"


def test_apply_never_raises_when_scontrol_cannot_be_started_mid_batch(tmp_path):
    """The first SiteFactor batch goes out; the second ``scontrol`` cannot be started. apply
    must still return an outcome per action (the engine records them all in one
    transaction; an exception would roll back the record of the update already made)."""
    script = tmp_path / "scontrol"
    script.write_text("#!/bin/sh\nprintf 'not a program\\n' > \"$0\"\n")  # runs once, then ENOEXEC
    script.chmod(0o755)
    outcomes = CliGateway(bin_dir=str(tmp_path)).apply([SetSiteFactor(1, 10), SetSiteFactor(2, 20)])
    assert [(o.ok, o.message) for o in outcomes] == [
        (True, ""), (False, f"{script} cannot be run: Exec format error")]


@pytest.mark.parametrize(("said", "expected"), [
    # 22.05, JobId=41,27 where array 41's task 0 has finished: everything pending was updated
    ("41_0: Job has already finished\n41_[2-9]: No error\n", [(True, ""), (True, "")]),
    ("41_0: Job has already finished\n41_1: Job is no longer pending execution\n41_2-9: No error\n"
     "Invalid job id specified for job 27\n", [(True, ""), (False, "Invalid job id specified")]),
    ("41_0: Job has already finished\n", [(False, "Job has already finished"), (True, "")]),
    ("scontrol: error: Access/permission denied\n", [(False, "scontrol: error: Access/permission denied")] * 2),
])
def test_scontrol_answers_are_attributed_to_their_jobs(tmp_path, said, expected):
    """A job array addressed by its id is answered part by part, exit status 1 even when
    nothing failed; the batch was all reported failed."""
    script = tmp_path / "scontrol"
    script.write_text(f"#!/bin/sh\nprintf '{said}' >&2\nexit 1\n")
    script.chmod(0o755)
    outcomes = CliGateway(bin_dir=str(tmp_path)).apply([SetSiteFactor(41, 5), SetSiteFactor(27, 5)])
    assert [(o.ok, o.message) for o in outcomes] == expected
