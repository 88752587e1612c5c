"""``slurmsched config check`` without a Slurm cluster: its lines about the config itself."""

from __future__ import annotations

import os

from click.testing import CliRunner

import slurmsched.config
import slurmsched.gateway
from slurmsched.cli import main
from slurmsched.config import load_config
from slurmsched.model import ClusterSnapshot, JobRecord, SchedulerConfig
from slurmsched.planner import SiteFactorScale


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


class _Slurm:
    """A gateway whose slurmctld runs multifactor with some weights, over an empty queue."""

    config = SchedulerConfig(priority_type="priority/multifactor", weight_age=10000, weight_fairshare=10000)

    def snapshot(self) -> ClusterSnapshot:
        return ClusterSnapshot(taken_at=0.0, cluster="c", jobs=(), nodes=(), config=self.config)

    def finished_since(self, since: float) -> list[JobRecord]:
        return []


def test_a_capped_level_step_is_a_result_line_not_a_log_record(tmp_path, monkeypatch):
    monkeypatch.setattr(slurmsched.gateway, "make_gateway", lambda config: _Slurm())
    config = tmp_path / "slurmsched.toml"
    config.write_text(f'[daemon]\nstate_dir = "{tmp_path}"\n[planner]\nlevel_ratio = 1.0000001\n')
    result = _check({"SLURMSCHED_CONFIG": str(config)})
    scale = SiteFactorScale.build(load_config(config, environ={}).planner, _Slurm.config)
    assert f"warn planner: {scale.cap_warning()}\n" in result.stdout
    assert "WARNING" not in result.output and result.stderr == ""


def test_a_metrics_file_the_daemon_could_not_write_is_a_warning(tmp_path):
    """The daemon logs such a file and goes on, so the check warns and does not fail for it."""
    env = {"SLURMSCHED_DAEMON_STATE_DIR": str(tmp_path)}
    assert "metrics file" not in _check(env).stdout  # none configured
    lines = {}
    for name, path in (("ok", tmp_path / "slurmsched.prom"), ("missing", tmp_path / "nowhere" / "slurmsched.prom"),
                       ("directory", tmp_path / "dir.prom")):
        if name == "directory":
            path.mkdir()
        out = _check({**env, "SLURMSCHED_DAEMON_METRICS_FILE": str(path)}).stdout
        (lines[name],) = [line for line in out.splitlines() if "metrics file" in line]
    assert lines["ok"] == f"ok   metrics file {tmp_path / 'slurmsched.prom'}: directory writable"
    assert lines["missing"] == (f"warn metrics file {tmp_path / 'nowhere' / 'slurmsched.prom'}: directory "
                                f"{tmp_path / 'nowhere'} does not exist: the daemon does not create it "
                                "(make it, writable by the daemon's user)")
    assert lines["directory"] == (f"warn metrics file {tmp_path / 'dir.prom'}: is a directory "
                                  "(daemon.metrics_file names the file)")
