"""``slurmsched config check`` where no Slurm answers: its lines about the config itself."""

from __future__ import annotations

import os

from click.testing import CliRunner

import slurmsched.config
from slurmsched.cli import main


def _check(env: dict[str, str]):
    """``config check`` with no config file, no Slurm (no ``scontrol`` in ``bin_dir``) and ``env``."""
    unset: dict[str, str | None] = {k: None for k in os.environ if k.startswith("SLURMSCHED_")}
    return CliRunner().invoke(main, ["config", "check"], env={**unset, "SLURMSCHED_SLURM_BIN_DIR": "/nonexistent",
                                                              **env})


def test_defaults_name_the_absent_file_and_say_they_are_live(tmp_path, monkeypatch):
    absent = tmp_path / "slurmsched.toml"
    monkeypatch.setattr(slurmsched.config, "DEFAULT_CONFIG_PATH", absent)
    result = _check({"SLURMSCHED_DAEMON_STATE_DIR": str(tmp_path)})
    assert result.stdout.splitlines()[0] == (f"warn config defaults: {absent} does not exist; "
                                             "daemon.dry_run = false: live, the daemon changes jobs")
    dry = _check({"SLURMSCHED_DAEMON_STATE_DIR": str(tmp_path), "SLURMSCHED_DAEMON_DRY_RUN": "true"})
    assert dry.stdout.splitlines()[0].endswith("daemon.dry_run = true: the daemon changes nothing")
