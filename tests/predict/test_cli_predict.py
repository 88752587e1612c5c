"""``slurmsched predict evaluate`` on generated data, ``slurmsched predict JOBID`` on the live cluster."""

from __future__ import annotations

import json
import re
import random
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurmsched.cli import main
from slurmsched.model import JobRecord, JobState
from slurmsched.store.repository import SqlJobRepository

KEYS = ("median_abs_log2_error", "within_50pct", "within_2x", "mae_s", "under_rate")


def _swf(path: Path, n: int, seed: int = 3) -> None:
    """An SWF trace of users re-running a few executables with repeating run times."""
    rng = random.Random(seed)
    lines = ["; UnixStartTime: 1000000000", "; MaxProcs: 64", "; MaxNodes: 64"]
    typical = {(u, e): rng.choice([30, 300, 3000, 20000]) for u in range(6) for e in range(4)}
    for i in range(n):
        user, exe = rng.randrange(6), rng.randrange(4)
        run = typical[(user, exe)] if rng.random() < 0.7 else int(typical[(user, exe)] * rng.uniform(0.2, 1.2))
        lines.append(f"{i + 1} {i * 300} 5 {run} 4 -1 -1 4 {4 * typical[(user, exe)]} -1 1 {user} 1 {exe} 1 -1 -1 -1")
    lines.append("this line is broken")
    path.write_text("\n".join(lines) + "\n")


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args), env={"SLURMSCHED_CONFIG": None})


def test_evaluate_trace_json_table_and_plot(tmp_path: Path) -> None:
    trace = tmp_path / "t.swf"
    _swf(trace, 600)
    out = _invoke("predict", "evaluate", "--trace", str(trace), "--format", "swf", "--json")
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["jobs"] == 600
    assert set(result["predictors"]) == {"user_limit", "helios", "last2", "slurmsched"}
    for metrics in result["predictors"].values():
        assert set(KEYS) <= set(metrics)
        assert 0 <= metrics["within_50pct"] <= metrics["within_2x"] <= 1
    assert "skipped 1 unreadable line(s): 604" in out.stderr
    plot = tmp_path / "errors.png"
    table = _invoke("predict", "evaluate", "--trace", str(trace), "--format", "swf", "--plot", str(plot))
    assert table.exit_code == 0, table.output
    assert "600 jobs" in table.stdout and "slurmsched" in table.stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_evaluate_from_db_without_time_limits_skips_user_limit(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    assert _invoke("db", "upgrade", "--db", url).exit_code == 0  # creates the file
    repo = SqlJobRepository.from_url(url)
    jobs = [JobRecord(job_id=i, user=f"u{i % 3}", name=f"n{i % 2}", submit_time=1e9 + 100 * i,
                      start_time=1e9 + 100 * i, end_time=1e9 + 100 * i + 50 * (1 + i % 3),
                      state=JobState.COMPLETED, cluster="c") for i in range(1, 301)]
    repo.ingest_finished(jobs)
    repo.close()
    out = _invoke("predict", "evaluate", "--from-db", "--db", url, "--json")
    assert out.exit_code == 0, out.output
    result = json.loads(out.stdout)
    assert result["jobs"] == 300 and set(result["predictors"]) == {"helios", "last2", "slurmsched"}


def test_evaluate_from_a_database_of_several_clusters_needs_cluster(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    assert _invoke("db", "upgrade", "--db", url).exit_code == 0  # creates the file
    repo = SqlJobRepository.from_url(url)
    repo.ingest_finished([JobRecord(job_id=i, user="u", submit_time=1e9 + 100 * i, start_time=1e9 + 100 * i,
                                    end_time=1e9 + 100 * i + 60, state=JobState.COMPLETED,
                                    cluster="site" if i <= 40 else "other") for i in range(1, 61)])
    repo.close()
    pooled = _invoke("predict", "evaluate", "--from-db", "--db", url, "--json")
    assert pooled.exit_code == 2 and "several clusters ('other', 'site'): name one with --cluster" in pooled.output
    site = _invoke("predict", "evaluate", "--from-db", "--db", url, "--cluster", "site", "--json")
    assert site.exit_code == 0, site.output
    assert json.loads(site.stdout)["jobs"] == 40
    assert "SLURMSCHED_PREDICT_EVALUATE_CLUSTER" in _invoke("predict", "evaluate", "--help").output
    unknown = _invoke("predict", "evaluate", "--from-db", "--db", url, "--cluster", "tpu")
    assert unknown.exit_code == 2 and "no job of cluster 'tpu' (it has: 'other', 'site')" in unknown.output
    trace = _invoke("predict", "evaluate", "--trace", "x.swf", "--format", "swf", "--cluster", "site")
    assert trace.exit_code == 2 and "--cluster chooses jobs of --from-db" in trace.output


def test_evaluate_usage_errors(tmp_path: Path) -> None:
    assert "give either --trace" in _invoke("predict", "evaluate").output
    assert "--trace needs --format" in _invoke("predict", "evaluate", "--trace", "x").output
    missing = _invoke("predict", "evaluate", "--trace", str(tmp_path / "none.swf"), "--format", "swf")
    assert missing.exit_code == 2 and "error: cannot read trace" in missing.stderr
    trace = tmp_path / "t.swf"
    _swf(trace, 10)
    nowhere = _invoke("predict", "evaluate", "--trace", str(trace), "--format", "swf",
                      "--plot", str(tmp_path / "no" / "plot.png"))
    assert nowhere.exit_code == 2 and "--plot" in nowhere.stderr and "no such directory" in nowhere.stderr
    assert "Traceback" not in nowhere.output
    for name in ("plot.txt", "plot"):  # refused before the evaluation, not by matplotlib after it
        other = _invoke("predict", "evaluate", "--trace", str(trace), "--format", "swf", "--plot", str(tmp_path / name))
        assert other.exit_code == 2 and "the plot is a PNG file, give a name ending in .png" in other.output
        assert not (tmp_path / name).exists() and not (tmp_path / f"{name}.png").exists()
    empty = _invoke("predict", "evaluate", "--trace", str(trace), "--format", "swf", "--plot", "")  # was ignored
    assert empty.exit_code == 2 and "--plot: give a file name (the value is empty)" in empty.stderr


def test_evaluate_without_a_finished_job_is_an_error_like_the_others(tmp_path: Path) -> None:
    empty = tmp_path / "empty.swf"
    empty.write_text("; MaxProcs: 8\n")
    out = _invoke("predict", "evaluate", "--trace", str(empty), "--format", "swf")
    assert out.exit_code == 2 and out.stderr == f"error: {empty}: no finished job with a run time to evaluate on\n"


def test_evaluate_names_many_unreadable_lines_briefly(tmp_path: Path) -> None:
    trace = tmp_path / "t.swf"
    _swf(trace, 300)
    with trace.open("a") as handle:
        handle.write("garbage\n" * 12)
    out = _invoke("predict", "evaluate", "--trace", str(trace), "--format", "swf", "--json")
    assert out.exit_code == 0, out.output
    assert "skipped 13 unreadable line(s): 304, 305, 306, 307, 308 and 8 more" in out.stderr


@pytest.mark.slurm
def test_predict_jobid_shows_estimate_spread_and_source(tmp_path: Path, slurm_cluster, slurm_jobs) -> None:
    config = tmp_path / "slurmsched.toml"
    url = f"sqlite:///{tmp_path / 'h.db'}"
    config.write_text(f'[slurm]\nconf = "{slurm_cluster.conf}"\n[db]\nurl = "{url}"\n'
                      f'[daemon]\nstate_dir = "{tmp_path}"\npredictor = "slurmsched"\n')
    user = slurm_cluster.run("id", "-un").stdout.strip()
    name = slurm_jobs.prefix + "train"
    now = time.time()
    assert _invoke("db", "upgrade", "--db", url).exit_code == 0  # creates the file
    repo = SqlJobRepository.from_url(url)
    repo.ingest_finished([JobRecord(job_id=90_000_000 + i, user=user, name=name, submit_time=now - 4000 + i * 600,
                                    start_time=now - 4000 + i * 600, end_time=now - 4000 + i * 600 + 420,
                                    state=JobState.COMPLETED, time_limit_s=3600, gpus=1, memory_mb=2000,
                                    cluster="slurmsched")
                          for i in range(3)])
    repo.close()
    job_id = slurm_jobs.submit("--hold", "--gres=gpu:1", "--mem=2000", "-t", "60", name="train")
    slurm_jobs.wait_state(job_id, {"PENDING"})
    shown = CliRunner().invoke(main, ["--config", str(config), "predict", str(job_id)], env={"SLURMSCHED_CONFIG": None})
    assert shown.exit_code == 0, shown.output
    assert f"job {job_id} ({user}, {name}, PENDING, time limit 01:00:00)" in shown.stdout
    assert "predicted run time 00:07:00" in shown.stdout
    assert "source: user+name+mem, same size: last run (3 runs)" in shown.stdout
    as_json = CliRunner().invoke(main, ["--config", str(config), "predict", "show", str(job_id), "--json"],
                                 env={"SLURMSCHED_CONFIG": None})
    data = json.loads(as_json.stdout)
    assert data["estimate_s"] == 420 and data["low_s"] <= 420 <= data["high_s"] <= 3600
    assert data["elapsed_s"] is None and "running for" not in shown.stdout
    slurm_cluster.run("scontrol", "release", str(job_id))
    slurm_jobs.wait_state(job_id, {"RUNNING"})
    running = CliRunner().invoke(main, ["--config", str(config), "predict", str(job_id)],
                                 env={"SLURMSCHED_CONFIG": None})
    assert running.exit_code == 0, running.output
    assert re.search(r"^running for 00:00:\d\d: about 00:0[67]:\d\d left by the prediction$", running.stdout,
                     re.M), running.stdout
    odd = slurm_jobs.submit("--hold", "--gres=gpu:1", "-t", "60", name="x\x1b[2Jy\nz")
    slurm_jobs.wait_state(odd, {"PENDING"})
    shown = CliRunner().invoke(main, ["--config", str(config), "predict", str(odd)], env={"SLURMSCHED_CONFIG": None})
    assert f"({user}, {slurm_jobs.prefix}x?[2Jy?z, PENDING" in shown.stdout  # no ESC or newline reaches the terminal
    missing = CliRunner().invoke(main, ["--config", str(config), "predict", "999999999"],
                                 env={"SLURMSCHED_CONFIG": None})
    assert missing.exit_code == 1 and missing.stderr == "job 999999999 is not in the queue (finished, or never existed)\n"



@pytest.mark.slurm
def test_an_arrays_pending_tasks_as_squeue_lists_them_name_the_id_to_give(tmp_path: Path, slurm_cluster,
                                                                          slurm_jobs) -> None:
    """``12_[1-3]`` copied from squeue's JOBID column used to be 'not a job id'; it now names
    the array's job id, and that id is the one predict (and explain) find in the queue."""
    url = f"sqlite:///{tmp_path / 'h.db'}"
    config = tmp_path / "slurmsched.toml"
    config.write_text(f'[slurm]\nconf = "{slurm_cluster.conf}"\n[db]\nurl = "{url}"\n'
                      f'[daemon]\nstate_dir = "{tmp_path}"\n')
    assert _invoke("db", "upgrade", "--db", url).exit_code == 0
    array = slurm_jobs.submit("--hold", "--array=1-3", "-t", "5", name="array")
    slurm_jobs.wait_state(array, {"PENDING"})
    listed = slurm_cluster.run("squeue", "-h", "-j", str(array), "-o", "%i").stdout.strip()
    assert listed == f"{array}_[1-3]"
    refused = CliRunner().invoke(main, ["--config", str(config), "predict", listed], env={"SLURMSCHED_CONFIG": None})
    assert refused.exit_code == 2
    assert f"is an array's pending tasks, queued as one job: give the array's job id {array}" in refused.stderr
    shown = CliRunner().invoke(main, ["--config", str(config), "predict", str(array)], env={"SLURMSCHED_CONFIG": None})
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.startswith(f"job {array} (") and f"{slurm_jobs.prefix}array, PENDING" in shown.stdout


def test_predict_takes_its_options_before_the_job_id_too(tmp_path: Path) -> None:
    """``predict --json 7`` is ``predict show --json 7`` (it was 'No such option')."""
    no_slurm = {"SLURMSCHED_SLURM_BIN_DIR": str(tmp_path)}  # no Slurm there: the job is looked up, and fails so
    for args in (["--json", "7"], ["--db", f"sqlite:///{tmp_path / 'x.db'}", "7"], ["7", "--json"]):
        result = CliRunner().invoke(main, ["predict", *args], env={"SLURMSCHED_CONFIG": None, **no_slurm})
        assert result.exit_code == 2 and f"scontrol not found in {tmp_path}" in result.stderr, (args, result.output)
    assert "Commands:" in CliRunner().invoke(main, ["predict", "--help"]).output
