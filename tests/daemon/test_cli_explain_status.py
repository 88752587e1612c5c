"""``explain``, ``status``, ``pause``/``resume`` and ``run --once`` from the command line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from slurmsched.cli import main
from slurmsched.model import Decision, Prediction
from slurmsched.store.protocol import CycleKind
from slurmsched.store.repository import SqlJobRepository

#: A row of status's cycle table: its cycle id and its mode (the last column).
CYCLE_ROW = re.compile(r"^ +(\d+) \d{4}-.* (\S+)$", re.M)


def _status(tmp_path, cycles: list[tuple[CycleKind, float]], *args: str):
    """``slurmsched status`` over a fresh SQLite database holding ``cycles`` (kind, start
    time), with ``interval_s = 60``."""
    url = f"sqlite:///{tmp_path / 'slurmsched.db'}"
    repo = SqlJobRepository.from_url(url, create=True)
    try:
        repo.upgrade()
        for kind, started_at in cycles:
            cycle = repo.start_cycle(started_at, kind)
            repo.finish_cycle(cycle, pending=2, running=1, actions=0, failed=0, timings={"total": 0.1})
    finally:
        repo.close()
    config = tmp_path / "slurmsched.toml"
    config.write_text(f'[daemon]\nstate_dir = "{tmp_path}"\ninterval_s = 60\n[db]\nurl = "{url}"\n')
    result = CliRunner().invoke(main, ["--config", str(config), "status", *args],
                                env={k: None for k in os.environ if k.startswith("SLURMSCHED_")})
    assert result.exit_code == 0, result.output
    return result


def test_status_shows_what_kind_each_cycle_was(tmp_path):
    result = _status(tmp_path, [(kind, time.time()) for kind in (CycleKind.LIVE, CycleKind.DRY_RUN,
                                                                   CycleKind.REVERT, CycleKind.PAUSED)])
    assert re.search(r"^last cycle 4 at .* s ago, paused\): 2 pending, 1 running$", result.stdout, re.M), result.stdout
    assert CYCLE_ROW.findall(result.stdout) == [("4", "paused"), ("3", "revert"), ("2", "dry-run"), ("1", "live")]
    assert "\nchanges in force: none\n" in result.stdout  # not "none on 0 jobs"


@pytest.mark.parametrize(("age_s", "warned"), [(5, False), (3 * 3600, True)])
def test_status_warns_when_no_cycle_came_for_over_two_intervals(tmp_path, age_s, warned):
    result = _status(tmp_path, [(CycleKind.LIVE, time.time() - age_s)])
    warning = re.search(r"^WARNING: no cycle for 3\.00 h \(interval 60 s\): is 'slurmsched run' running\?$",
                        result.stdout, re.M)
    assert bool(warning) == warned, result.stdout
    assert ("WARNING" in result.stdout) == warned


@pytest.mark.parametrize(("gap_s", "warned"), [(900, False), (60, True)])
def test_status_counts_the_interval_the_daemon_runs_at(tmp_path, gap_s, warned):
    """A daemon started with ``run --interval 900`` is not overdue 20 minutes after its last
    cycle (the config says 60 s); one cycling every 60 s is."""
    last = time.time() - 1200
    result = _status(tmp_path, [(CycleKind.LIVE, last - i * gap_s) for i in (3, 2, 1, 0)])
    assert ("WARNING: no cycle for" in result.stdout) == warned, result.stdout


def test_status_json_is_one_document_for_monitoring(tmp_path):
    started = time.time() - 3 * 3600
    doc = json.loads(_status(tmp_path, [(CycleKind.LIVE, started - 60), (CycleKind.DRY_RUN, started)],
                             "--json").stdout)
    assert doc["format"] == 1 and doc["paused"] is False and doc["interval_s"] == 60
    assert [(c["id"], c["kind"], c["pending"], c["running"]) for c in doc["cycles"]] == [
        (2, "dry-run", 2, 1), (1, "live", 2, 1)]
    assert doc["warning"].startswith("WARNING: no cycle for 3.00 h")
    assert (doc["changes_in_force"], doc["jobs_changed"], doc["prediction_error"], doc["model"]) == ({}, 0, None, None)
    assert doc["submit_cache"]["estimates"] is None and doc["submit_cache"]["in_use"] is False


def _explain(tmp_path, cycles: list[tuple[float, list[Prediction], list[Decision]]]):
    """``slurmsched explain 7`` over a fresh SQLite database holding ``cycles`` (start time,
    predictions, decisions), with a slurm.conf that does not exist (Slurm is not read)."""
    url = f"sqlite:///{tmp_path / 'slurmsched.db'}"
    repo = SqlJobRepository.from_url(url, create=True)
    try:
        repo.upgrade()
        for at, predictions, decisions in cycles:
            cycle = repo.start_cycle(at, CycleKind.LIVE)
            repo.record_predictions(cycle, predictions)
            repo.record_decisions(cycle, decisions)
            repo.finish_cycle(cycle, pending=1, running=0, actions=0, failed=0, timings={"total": 0.1})
    finally:
        repo.close()
    config = tmp_path / "slurmsched.toml"
    config.write_text(f'[slurm]\nconf = "{tmp_path / "none.conf"}"\n[daemon]\nstate_dir = "{tmp_path}"\n'
                      f'[db]\nurl = "{url}"\n')
    result = CliRunner().invoke(main, ["--config", str(config), "explain", "7"],
                                env={k: None for k in os.environ if k.startswith("SLURMSCHED_")})
    assert result.exit_code == 0, result.output
    return result


def test_explain_takes_the_latest_ranking_from_actions_too(tmp_path):
    """The daemon records a "rank" line when a job's prediction changes; an aged job's
    later SiteFactor change carries its newer rank and score."""
    result = _explain(tmp_path, [
        (time.time() - 7200, [], [Decision(7, "rank", "ranked", "on arrival", score=8 * 3600.0, rank=5)]),
        (time.time() - 60, [], [Decision(7, "SetSiteFactor", "ok", "aged", "260013", "420021", 0.0, 1)])])
    assert re.search(r"^latest ranking \(.*\): #1, aging guard reached$", result.stdout, re.M), result.stdout


def test_explain_states_the_prediction_in_the_units_of_the_reasons(tmp_path):
    reason = "predicted 5 min x 1 GPU = 300 GPU-s (user mean of 3 runs); waiting 0 h of 96 h guard, not aged yet"
    result = _explain(tmp_path, [(time.time(), [Prediction(7, 300.0, 300.0, 300.0, "user mean of 3 runs")],
                                  [Decision(7, "rank", "ranked", reason, score=300.0, rank=1)])])
    # not "300 s (likely 300 s to 300 s)" beside the reason's "5 min"
    assert "\nprediction: 5 min, from user mean of 3 runs\n" in result.stdout, result.stdout
    assert "\nlatest ranking (" in result.stdout and "): #1, score 300 GPU-s\n" in result.stdout
    (tmp_path / "spread").mkdir()
    spread = _explain(tmp_path / "spread", [(time.time(), [Prediction(7, 5400.0, 1800.0, 36000.0, "model")], [])])
    assert "\nprediction: 1.5 h (likely 0.5 h to 10.0 h), from model\n" in spread.stdout, spread.stdout


@pytest.mark.slurm
def test_explain_shows_prediction_source_score_rank_and_every_action(daemon_env, busy):
    daemon_env.seed_history("short", [60, 70, 50])
    daemon_env.seed_history("long", [5000, 5200])
    long = busy.submit("--gres=gpu:2", "-t", "120", name="long")
    short = busy.submit("--gres=gpu:1", "-t", "120", name="short")
    ran = daemon_env.cli("run", "--once")
    assert ran.exit_code == 0, ran.output
    factor = daemon_env.site_factors([long])[long]
    result = daemon_env.cli("explain", str(long))
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert text.startswith(f"job {long}\n")
    assert re.search(r"^prediction: 1\.4 h( \(likely .* to .*\))?, from \S.*", text, re.M), text
    assert re.search(r"^latest ranking \(.*\): #2, score 2\.8\d GPU-h", text, re.M), text
    assert f"in force: SetSiteFactor 0 -> {factor}" in text
    assert re.search(r"rank #2 .*predicted 1\.4 h x 2 GPUs", text), text
    assert re.search(rf"SetSiteFactor 0 -> {factor}  \[ok\]  \S", text), text
    assert "rank #1" in daemon_env.cli("explain", str(short)).stdout
    missing = daemon_env.cli("explain", "999999999")
    assert missing.exit_code == 1 and "no record of job 999999999" in missing.stderr


@pytest.mark.slurm
def test_explain_says_what_slurm_shows_now_even_after_the_job_left(daemon_env, busy):
    job = busy.submit("--gres=gpu:1", "-t", "10", name="now")
    assert daemon_env.cli("run", "--once").exit_code == 0
    factor = daemon_env.site_factors([job])[job]
    pending = daemon_env.cli("explain", str(job))
    assert pending.exit_code == 0, pending.output
    assert re.search(rf"^now: PENDING \(\w+\): priority \d+, SiteFactor {factor}, 0 jobs ahead in \S+$",
                     pending.stdout, re.M), pending.stdout
    assert f"in force: SetSiteFactor 0 -> {factor}\n" in pending.stdout
    busy.cluster.run("scontrol", "update", f"jobid={job}", "sitefactor=7")  # an admin's hand
    overridden = daemon_env.cli("explain", str(job)).stdout
    assert f"in force: SetSiteFactor 0 -> {factor} (but Slurm holds 7: set outside slurmsched?)\n" in overridden
    busy.cluster.run("scancel", str(job))
    busy.wait_state(job, {"CANCELLED", ""}, timeout=30)
    gone = daemon_env.cli("explain", str(job))
    assert gone.exit_code == 0, gone.output
    assert "now: not in Slurm's queue (finished, cancelled or removed)" in gone.stdout  # not only "untouched"
    daemon_env.point_at_closed_slurm()
    down = daemon_env.cli("explain", str(job))
    assert down.exit_code == 0, down.output
    assert re.search(r"^now: unknown \(.*did not answer.*\)$", down.stdout, re.M), down.stdout
    assert "in force:" in down.stdout  # the recorded story is still told
    daemon_env.path.write_text(re.sub(r'^conf = ".*"$', 'conf = "/nonexistent.conf"', daemon_env.path.read_text(),
                                      flags=re.M))
    elsewhere = daemon_env.cli("explain", str(job))  # a host without Slurm's config
    assert elsewhere.exit_code == 0, elsewhere.output
    assert re.search(r"^now: unknown \(.*/nonexistent\.conf.*\)$", elsewhere.stdout, re.M), elsewhere.stdout


@pytest.mark.slurm
def test_status_lists_cycles_changes_and_prediction_error(daemon_env, busy):
    daemon_env.seed_history("quick", [2, 3, 2])
    job = busy.submit("--gres=gpu:1", "-t", "5", name="quick", wrap="sleep 2")
    daemon = daemon_env.daemon()
    daemon.cycle(time.time())
    paused = daemon_env.cli("pause")
    status = daemon_env.cli("status")
    assert status.exit_code == 0, status.output
    assert "state: PAUSED" in status.stdout and paused.exit_code == 0
    assert re.search(r"^last cycle \d+ at .* s ago, live\): 1 pending, \d+ running", status.stdout, re.M), status.stdout
    assert "changes in force: 1 SetSiteFactor on 1 jobs" in status.stdout
    assert "prediction error: no finished job with a prediction yet" in status.stdout
    # let the job run and finish; the next cycles read it from accounting
    busy.cluster.run("scancel", str(busy.blocker))
    busy.wait_state(job, {"COMPLETED", ""}, timeout=60)
    deadline = time.monotonic() + 30
    while True:
        daemon.cycle(time.time())
        with daemon_env.repo() as repo:
            if any(j.job_id == job for j in repo.history(since=time.time() - 600)):
                break
        assert time.monotonic() < deadline, "finished job never reached the history"
        time.sleep(1)
    daemon.cycle(time.time())
    daemon.cycle(time.time())
    status = daemon_env.cli("status", "--cycles", "3")
    assert re.search(r"^prediction error over the last \d+ finished jobs: median \d+\.\d\dx off, \d+% within 2x",
                     status.stdout, re.M), status.stdout
    assert [mode for _, mode in CYCLE_ROW.findall(status.stdout)] == ["paused"] * 3  # ran while paused
    assert re.search(r"^last cycle \d+ at .* s ago, paused\): ", status.stdout, re.M), status.stdout
    assert "\nchanges in force: none\n" in status.stdout  # not "none on 0 jobs"
    assert daemon_env.cli("resume").exit_code == 0
    assert "state: active" in daemon_env.cli("status").stdout


@pytest.mark.slurm
def test_run_once_refuses_a_database_without_the_current_schema(daemon_env, tmp_path):
    state = tmp_path / "empty-state"
    daemon_env.write(state_dir=str(state))
    argv = [sys.executable, "-m", "slurmsched", "--config", str(daemon_env.path), "run", "--once"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: no database at ") and "run 'slurmsched db upgrade'" in proc.stderr
    assert "Traceback" not in proc.stderr and not state.exists()  # the daemon creates nothing
    state.mkdir()
    (state / "slurmsched.db").touch()  # an empty file is an SQLite database without tables
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: database schema is at ") and "run 'slurmsched db upgrade'" in proc.stderr
    assert "Traceback" not in proc.stderr
