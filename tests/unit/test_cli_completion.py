"""Shell completion (click's): commands, subcommands and options complete, and no config is read for it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _complete(*words: str) -> list[str]:
    """What bash completion offers for the last of ``words``, as the installed ``slurmsched`` answers it."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SLURMSCHED_")},
           "_SLURMSCHED_COMPLETE": "bash_complete", "COMP_WORDS": " ".join(("slurmsched", *words)),
           "COMP_CWORD": str(len(words)), "SLURMSCHED_CONFIG": "/nonexistent/slurmsched.toml"}
    script = Path(sys.executable).with_name("slurmsched")  # the entry point: completion keys on its name
    proc = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    return [line.split(",", 1)[1] for line in proc.stdout.splitlines()]


def test_commands_subcommands_and_options_complete():
    assert _complete("ex") == ["explain"]
    assert set(_complete("db", "")) >= {"upgrade", "release", "current"}
    assert "--dry-run" in _complete("revert", "--")
    assert _complete("simulate", "--format", "sw") == ["swf"]
