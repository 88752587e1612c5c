"""How a failed Slurm command reads in slurmsched's one-line errors (a script stands in for it)."""

from __future__ import annotations

import pytest

from slurmsched.errors import SlurmCommandFailed, SlurmUnavailable
from slurmsched.gateway.commands import SlurmCommands


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
