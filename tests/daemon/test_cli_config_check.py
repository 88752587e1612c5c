"""``slurmsched config check``: validates, then checks database, Slurm, wait bound and job_submit.lua."""

from __future__ import annotations

import re
import shutil

import pytest

pytestmark = pytest.mark.slurm


def test_check_reports_each_part(daemon_env, lua_cache):
    result = daemon_env.cli("config", "check")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == f"ok   config {daemon_env.path}"
    assert any(line.startswith("     [daemon] interval_s=1.0,") for line in lines)
    assert any(line.startswith("     [policy] name='qssf', qssf={'max_wait_h': ") for line in lines)  # defaults shown
    assert any(line.startswith("ok   database sqlite:///") and line.endswith("schema current, claimed by no cluster yet")
               for line in lines)
    assert "ok   slurm: PriorityType=priority/multifactor, weights age=10000 fairshare=10000" in result.stdout
    assert re.search(r"; queue read: \d+ pending, \d+ running, 4 nodes\n", result.stdout), result.stdout
    assert any(re.match(r"ok   wait bound: \d+\.\d\d h: after max_wait_h=", line) for line in lines), result.stdout
    assert f"warn {lua_cache} is not " in result.stdout          # the daemon's cache is elsewhere
    daemon_env.write(submit_cache=str(lua_cache))
    linked = daemon_env.cli("config", "check")
    assert f"ok   {lua_cache.parent / 'job_submit.lua'} reads {lua_cache}" in linked.stdout


def test_check_fails_on_unreachable_slurm_and_old_schema(daemon_env, tmp_path):
    daemon_env.write(state_dir=str(tmp_path / "none"))
    daemon_env.point_at_closed_slurm()
    result = daemon_env.cli("config", "check")
    assert result.exit_code == 1
    assert "FAIL database: no database at " in result.stdout and "slurmsched db upgrade" in result.stdout
    assert not (tmp_path / "none").exists()  # a check creates nothing
    assert "FAIL slurm: " in result.stdout



@pytest.mark.parametrize("missing", ["squeue", "sprio", "sinfo"])
def test_check_fails_when_a_command_the_cycle_runs_is_missing(daemon_env, tmp_path, missing):
    """The check used to run scontrol alone: with squeue, sprio or sinfo missing it said ok
    and exited 0, and every cycle of the daemon then failed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in {"scontrol", "squeue", "sprio", "sinfo", "sacct"} - {missing}:
        (bin_dir / name).symlink_to(shutil.which(name))
    daemon_env.path.write_text(daemon_env.path.read_text().replace("[slurm]\n", f'[slurm]\nbin_dir = "{bin_dir}"\n'))
    result = daemon_env.cli("config", "check")
    assert result.exit_code == 1, result.output
    assert f"FAIL slurm: {missing} not found in {bin_dir} (is slurm-client installed?)\n" in result.stdout


def test_check_warns_when_accounting_does_not_answer(daemon_env):
    """slurmdbd down (its port closed, slurmctld up) used to pass unnoticed: the daemon then
    plans every cycle without newly finished jobs. It is a warning, not a failure."""
    assert "ok   accounting answers\n" in daemon_env.cli("config", "check").stdout
    daemon_env.point_at_closed_slurm(controller=False)
    result = daemon_env.cli("config", "check")
    assert result.exit_code == 0, result.output
    assert "ok   slurm: PriorityType=priority/multifactor" in result.stdout
    assert re.search(r"^warn accounting: sacct: .*Connection refused: cycles plan without newly finished jobs",
                     result.stdout, flags=re.MULTILINE), result.stdout


def test_check_names_the_bad_key(daemon_env):
    daemon_env.write(interval_s=0)
    result = daemon_env.cli("config", "check")
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: daemon.interval_s must be > 0 (got 0.0)"
    daemon_env.write(submit_cache_max_age_s=0.5)
    assert "daemon.submit_cache_max_age_s must be" in daemon_env.cli("config", "check").stderr
    daemon_env.write()
    daemon_env.path.write_text(daemon_env.path.read_text() + "[planner]\nbogus = 1\n")
    assert daemon_env.cli("config", "check").stderr.startswith("error: unknown key planner.bogus")
