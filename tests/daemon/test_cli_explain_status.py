"""``explain``, ``status``, ``pause``/``resume`` and ``run --once`` from the command line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

import pytest
from click.testing import CliRunner

from slurmsched.cli import main
from slurmsched.model import ClusterSnapshot, Decision, JobRecord, JobState, Prediction
from slurmsched.store.protocol import CycleKind
from slurmsched.store.repository import SqlJobRepository
from slurmsched.submit_cache import CACHE_FILE_NAME, SubmitCache, write_submit_cache

#: A row of status's cycle table: its cycle id and its mode (the last column).
CYCLE_ROW = re.compile(r"^ +(\d+) \d{4}-.* (\S+)$", re.M)
#: Output recorded from real Slurm clusters, by version.
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm-json"


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
    assert doc["format"] == 1 and doc["paused"] is False and doc["interval_s"] == 60 and doc["cluster"] is None
    assert [(c["id"], c["kind"], c["pending"], c["running"]) for c in doc["cycles"]] == [
        (2, "dry-run", 2, 1), (1, "live", 2, 1)]
    assert doc["warning"].startswith("WARNING: no cycle for 3.00 h")
    assert (doc["changes_in_force"], doc["jobs_changed"], doc["prediction_error"], doc["model"]) == ({}, 0, None, None)
    assert doc["submit_cache"]["estimates"] is None and doc["submit_cache"]["in_use"] is False


@pytest.mark.parametrize(("offset_s", "in_use"), [(-60, True), (60, True), (-3600, False), (3600, False)])
def test_status_calls_a_cache_stamped_ahead_stale_as_job_submit_lua_does(tmp_path, offset_s, in_use):
    """job_submit.lua ignores a cache written over its max_age ago or stamped over max_age
    ahead (test_job_submit_lua.py); status says the same (it called a cache an hour ahead
    'in use')."""
    write_submit_cache(tmp_path / CACHE_FILE_NAME, SubmitCache(int(time.time()) + offset_s, 600, 0.25, ((10, 1),), ()))
    assert json.loads(_status(tmp_path, [], "--json").stdout)["submit_cache"]["in_use"] is in_use
    text = _status(tmp_path, []).stdout
    assert ("(in use)" if in_use else "(STALE: ignored by job_submit.lua)") in text, text


def _recorded_slurm(tmp_path: Path) -> Path:
    """A directory of Slurm client commands that print real output recorded from a 24.11
    cluster (tests/fixtures/slurm-json): its queue holds job 7, pending in ``gpu`` with
    priority 10250 and SiteFactor 250, ahead of every other pending job there."""
    bin_dir = tmp_path / "slurm-bin"
    bin_dir.mkdir()
    for command, recorded in (("scontrol", "22.05/scontrol_show_config.txt"), ("sprio", "24.11/sprio.txt"),
                              ("squeue", "24.11/squeue.json"), ("sinfo", "24.11/sinfo.json")):
        script = bin_dir / command
        script.write_text(f"#!/bin/sh\nexec cat '{FIXTURES / recorded}'\n")
        script.chmod(0o755)
    return bin_dir


def _explain(tmp_path, cycles: list[tuple[float, list[Prediction], list[Decision]]], *args: str,
             applied: Sequence[tuple[str, str | None, str]] = (), slurm: bool = False, exit_code: int = 0,
             seen: Sequence[tuple[float, int | None]] = ()):
    """``slurmsched explain 7 ARGS`` over a fresh SQLite database holding ``cycles`` (start
    time, predictions, decisions), the ``applied`` changes of job 7 (kind, previous, new)
    and the queues the daemon ``seen`` (time, job 7's restart count, or ``None`` when it
    was not in the queue); Slurm is the :func:`_recorded_slurm` one with ``slurm``, else
    a slurm.conf that does not exist (Slurm is not read)."""
    url = f"sqlite:///{tmp_path / 'slurmsched.db'}"
    repo = SqlJobRepository.from_url(url, create=True)
    try:
        repo.upgrade()
        for at, restarts in seen:
            jobs = () if restarts is None else (
                JobRecord(job_id=7, user="u", submit_time=at, state=JobState.PENDING, restart_count=restarts),)
            repo.observe(ClusterSnapshot(taken_at=at, cluster="c1", jobs=jobs, nodes=()))
        for at, predictions, decisions in cycles:
            cycle = repo.start_cycle(at, CycleKind.LIVE)
            repo.record_predictions(cycle, predictions)
            repo.record_decisions(cycle, decisions)
            repo.finish_cycle(cycle, pending=1, running=0, actions=0, failed=0, timings={"total": 0.1})
        for kind, previous, new in applied:
            repo.record_applied(7, kind, previous, new)
    finally:
        repo.close()
    slurm_conf = tmp_path / ("slurm.conf" if slurm else "none.conf")
    slurm_section = f'[slurm]\nconf = "{slurm_conf}"\n'
    if slurm:
        slurm_conf.touch()
        slurm_section += f'bin_dir = "{_recorded_slurm(tmp_path)}"\n'
    config = tmp_path / "slurmsched.toml"
    config.write_text(f'{slurm_section}[daemon]\nstate_dir = "{tmp_path}"\n[db]\nurl = "{url}"\n')
    result = CliRunner().invoke(main, ["--config", str(config), "explain", "7", *args],
                                env={k: None for k in os.environ if k.startswith("SLURMSCHED_")})
    assert result.exit_code == exit_code, result.output
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


def test_explain_json_is_the_same_story_as_one_document(tmp_path):
    ranked, acted = time.time() - 7200, time.time() - 60
    prediction = Prediction(7, 5400.0, 1800.0, 36000.0, "user+name history, 4 runs", "v3")
    rank = Decision(7, "rank", "ranked", "predicted 1.5 h x 2 GPUs \u2265 the queue's median", score=10800.0, rank=5)
    action = Decision(7, "SetSiteFactor", "ok", "aged", "0", "420021", 0.0, 1)
    cycles = [(ranked, [prediction], [rank]), (acted, [], [action])]
    applied = [("SetSiteFactor", "0", "420021")]
    result = _explain(tmp_path, cycles, "--json", applied=applied)
    assert result.stdout.isascii() and result.stdout.count("\n") == 1, result.stdout
    doc = json.loads(result.stdout)
    assert (doc["format"], doc["job_id"], doc["now"]) == (1, 7, None)
    assert doc["unknown"] == f"slurm.conf: {tmp_path / 'none.conf'} does not exist"  # why Slurm could not be read
    assert doc["prediction"] == {"job_id": 7, "estimate_s": 5400.0, "low_s": 1800.0, "high_s": 36000.0,
                                 "source": "user+name history, 4 runs", "model_version": "v3"}
    assert doc["latest_ranking"] == {"at": pytest.approx(acted), "rank": 1, "score": 0.0}
    assert doc["in_force"] == [{"field": "SetSiteFactor", "original": "0", "value": "420021", "slurm_holds": None}]
    assert [(d["at"], d["kind"], d["outcome"], d["previous"], d["new"], d["rank"], d["reason"])
            for d in doc["history"]] == [
        (pytest.approx(ranked), "rank", "ranked", None, None, 5, rank.reason),
        (pytest.approx(acted), "SetSiteFactor", "ok", "0", "420021", 1, "aged")]
    (tmp_path / "text").mkdir()
    text = _explain(tmp_path / "text", cycles, applied=applied).stdout
    assert f"\nnow: unknown (slurm.conf: {tmp_path / 'text' / 'none.conf'} does not exist)\n" in text, text
    assert "\nin force: SetSiteFactor 0 -> 420021\n" in text and "\nlatest ranking (" in text


def test_explain_json_shows_the_job_as_slurm_holds_it_now(tmp_path):
    """Slurm here prints output recorded from a real cluster, where job 7 is pending with
    SiteFactor 250: not the 420021 slurmsched set, so someone else changed it."""
    cycles = [(time.time(), [], [Decision(7, "SetSiteFactor", "ok", "ranked first", "0", "420021", 60.0, 1)])]
    applied = [("SetSiteFactor", "0", "420021")]
    doc = json.loads(_explain(tmp_path, cycles, "--json", applied=applied, slurm=True).stdout)
    assert doc["unknown"] is None
    assert {k: v for k, v in doc["now"].items() if k != "start_time"} == {
        "queued": True, "state": "PENDING", "reason": "Resources", "priority": 10250, "site_factor": 250,
        "partition": "gpu", "jobs_ahead": 0}
    assert doc["in_force"] == [{"field": "SetSiteFactor", "original": "0", "value": "420021", "slurm_holds": "250"}]
    (tmp_path / "text").mkdir()
    text = _explain(tmp_path / "text", cycles, applied=applied, slurm=True).stdout
    assert "\nnow: PENDING (Resources): priority 10250, SiteFactor 250, 0 jobs ahead in gpu\n" in text, text
    assert "\nin force: SetSiteFactor 0 -> 420021 (but Slurm holds 250: set outside slurmsched?)\n" in text


def test_explain_json_of_a_job_never_seen_is_an_error_not_a_document(tmp_path):
    result = _explain(tmp_path, [], "--json", exit_code=1)
    assert result.stdout == ""
    assert result.stderr == "no record of job 7: slurmsched has not seen it pending\n"


def test_explain_tells_of_the_job_holding_the_id_now_not_of_an_earlier_one(tmp_path):
    """A job id comes back when slurmctld loses its state or wraps at MaxJobId: the
    earlier job's prediction and decisions are not this one's story."""
    now = time.time()
    old = [(now - 7200, [Prediction(7, 36000.0, 36000.0, 36000.0, "old job's history")],
            [Decision(7, "SetSiteFactor", "ok", "old job ranked", "0", "100", 36000.0, 9)])]
    new = [(now - 60, [Prediction(7, 300.0, 300.0, 300.0, "new job's history")],
            [Decision(7, "rank", "ranked", "new job ranked", score=300.0, rank=1)])]
    queues = [(now - 7300, 0), (now - 3600, None), (now - 61, 0)]  # left, then a new job 7 came
    doc = json.loads(_explain(tmp_path, old + new, "--json", seen=queues).stdout)
    assert doc["id_reused_at"] == pytest.approx(now - 3600)
    assert doc["prediction"]["source"] == "new job's history"
    assert [d["reason"] for d in doc["history"]] == ["new job ranked"]
    (tmp_path / "text").mkdir()
    text = _explain(tmp_path / "text", old + new, seen=queues).stdout
    assert text.startswith("job 7 (the records of an earlier job with this id, which left the queue at ")
    assert "old job" not in text and "new job ranked" in text, text
    # The new job 7 not ranked yet: no record of it, and the earlier one's are named.
    (tmp_path / "none").mkdir()
    none = _explain(tmp_path / "none", old, "--json", seen=queues, exit_code=1)
    assert none.stdout == "" and none.stderr.startswith(
        "no record of job 7: slurmsched has not seen it pending (the records of an earlier job with this id")
    # A requeued job (restart count 1) that had left the queue when it finished keeps its story.
    (tmp_path / "requeued").mkdir()
    requeued = [(now - 7300, 0), (now - 3600, None), (now - 61, 1)]
    doc = json.loads(_explain(tmp_path / "requeued", old + new, "--json", seen=requeued).stdout)
    assert doc["id_reused_at"] is None
    assert [d["reason"] for d in doc["history"]] == ["old job ranked", "new job ranked"]


def test_pause_that_cannot_remove_the_submit_cache_says_so_and_stays_paused(tmp_path):
    """``daemon.submit_cache`` naming a directory (or a file this user cannot remove) made
    pause, and revert, which pauses first, fail with 'internal error (a bug)' after the
    flag was set."""
    url = f"sqlite:///{tmp_path / 'slurmsched.db'}"
    repo = SqlJobRepository.from_url(url, create=True)
    repo.upgrade()
    repo.close()
    cache = tmp_path / "cache-dir"
    cache.mkdir()
    config = tmp_path / "slurmsched.toml"
    config.write_text(f'[daemon]\nstate_dir = "{tmp_path}"\nsubmit_cache = "{cache}"\n[db]\nurl = "{url}"\n')
    result = CliRunner().invoke(main, ["--config", str(config), "pause"],
                                env={k: None for k in os.environ if k.startswith("SLURMSCHED_")})
    assert result.exit_code == 0, result.output
    assert result.stdout == (f"paused: the daemon applies nothing from its next cycle on; submit cache {cache} NOT "
                             "removed (Is a directory): the daemon removes it at its next cycle. Values already set "
                             "stay; 'slurmsched revert' restores them.\n")
    repo = SqlJobRepository.from_url(url)
    try:
        assert repo.is_paused()
    finally:
        repo.close()


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
def test_explain_puts_a_job_waiting_for_its_begin_time_in_no_line(daemon_env, busy):
    """A job submitted with a later --begin is pending but not eligible: no place in line
    (it used to count the eligible jobs of higher priority as ahead of it)."""
    later = busy.submit("--begin=now+2hours", "--gres=gpu:1", "-t", "10", name="later")
    assert daemon_env.cli("run", "--once").exit_code == 0
    result = daemon_env.cli("explain", str(later))
    assert result.exit_code == 0, result.output
    # the reason is BeginTime once slurmctld's scheduler has looked at the job, Resources or None before
    assert re.search(r"^now: PENDING \(\w+\): priority \d+, SiteFactor \S+, not eligible before "
                     r"\d{4}-\d\d-\d\d \d\d:\d\d\S*: in no line yet$", result.stdout, re.M), result.stdout


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
    assert "changes in force: 1 SetSiteFactor on 1 job" in status.stdout
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
