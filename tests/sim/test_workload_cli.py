"""Workloads, cluster sizing, metrics and the ``slurmsched simulate`` command."""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import tarfile
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurmsched.cli import main
from slurmsched.errors import ConfigError, TraceFormatError
from slurmsched.model import JobRecord, JobState
from slurmsched.sim.metrics import compute_metrics, gain_share, wait_by_size
from slurmsched.sim.runner import JobOutcome
from slurmsched.sim.sizing import SizeRequest, helios_pools, offered_load, size_cluster
from slurmsched.sim.workload import LeftOut, load_trace, workload_from_records

REQUEST = SizeRequest(target_load=0.5, default_gpus_per_node=8)


def record(job_id: int, submit: float, run: float | None, *, gpus: int = 0, cpus: int = 1) -> JobRecord:
    return JobRecord(job_id=job_id, user="u", submit_time=submit, state=JobState.COMPLETED,
                     start_time=None if run is None else submit, end_time=None if run is None else submit + run,
                     gpus=gpus, cpus=cpus)


def write_swf(path: Path, jobs: list[tuple[int, int, int, int, int, int]], max_procs: int = 16) -> Path:
    """An SWF file: (job, submit, run, procs, requested time, user) per job."""
    lines = ["; Version: 2.2", f"; MaxNodes: {max_procs}", f"; MaxProcs: {max_procs}", "; UnixStartTime: 1000000"]
    for job, submit, run, procs, req, user in jobs:
        lines.append(f"{job} {submit} 0 {run} {procs} -1 -1 {procs} {req} -1 1 {user} 1 {job % 3 + 1} 1 -1 -1 -1")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_units_are_gpus_or_processors_and_unrunnable_jobs_are_left_out() -> None:
    cpu = workload_from_records([record(2, 10.0, 5.0, cpus=4), record(1, 0.0, 5.0, cpus=2),
                                 record(3, 20.0, None, cpus=2)], "cpu")
    assert [(j.record.job_id, j.units) for j in cpu.jobs] == [(1, 2), (2, 4)]
    assert cpu.left_out == LeftOut(no_run_time=1)
    assert cpu.span_s == 10.0 and cpu.gpu_seconds == 30.0 and cpu.max_units == 4
    gpu = workload_from_records([record(1, 0.0, 5.0, gpus=2, cpus=8), record(2, 1.0, 5.0, cpus=8),
                                 record(3, 1.0, None, gpus=1)], "gpu")
    assert [(j.record.job_id, j.units) for j in gpu.jobs] == [(1, 2)]
    assert gpu.left_out == LeftOut(cpu_only=1, no_run_time=1)
    assert gpu.left_out.describe() == "2 left out: 1 CPU-only in a GPU workload, 1 without a run time"
    with pytest.raises(TraceFormatError, match="appears twice"):
        workload_from_records([record(1, 0.0, 5.0, cpus=1), record(1, 9.0, 5.0, cpus=1)], "dup")


def test_cluster_size_from_options_header_pools_or_load(tmp_path: Path) -> None:
    swf = write_swf(tmp_path / "t.swf", [(1, 0, 100, 4, 200, 1), (2, 50, 100, 2, 300, 2)], max_procs=16)
    workload = load_trace(swf, "swf")
    spec, note = size_cluster(workload, REQUEST, path=swf, fmt="swf")
    assert (len(spec.nodes), spec.total_gpus) == (1, 16) and "one pool of processors" in note
    spec, _ = size_cluster(workload, SizeRequest(0.5, 8, gpus=20), path=swf, fmt="swf")
    assert spec.total_gpus == 20                      # the header's one processor per node
    spec, _ = size_cluster(workload, SizeRequest(0.5, 8, nodes=3, gpus_per_node=4))
    assert (len(spec.nodes), spec.total_gpus) == (3, 12)
    gpu = workload_from_records([record(i, i * 100.0, 400.0, gpus=4) for i in range(1, 101)], "g")
    spec, note = size_cluster(gpu, REQUEST)
    assert spec.total_gpus == 32 and "50%" in note    # 16 GPUs of work on average, at half load
    assert offered_load(gpu, spec) == pytest.approx(16.16 / 32, rel=0.01)
    # a warm-up's jobs (here the first half, 4 GPUs each) do not count
    warmed = dataclasses.replace(gpu, jobs=tuple(dataclasses.replace(j, units=1) if j.record.job_id <= 50 else j
                                                  for j in gpu.jobs), measured_from=5100.0)
    assert offered_load(warmed, spec) == pytest.approx(4 * 400 * 50 / 4900 / 32)
    with pytest.raises(ConfigError, match="smaller than the biggest job"):
        size_cluster(workload, SizeRequest(0.5, 8, gpus=3), path=swf, fmt="swf")
    with pytest.raises(ConfigError, match=r"would have 100,000,000 nodes of 8 GPUs: more than the simulator models"):
        size_cluster(workload, SizeRequest(0.5, 8, nodes=100_000_000))  # refused before any node is built
    giant = workload_from_records([record(1, 0.0, 400.0, gpus=2**62)], "g")
    with pytest.raises(ConfigError, match=r"sized from the workload, whose biggest job asks for "
                                          r"4,611,686,018,427,387,904 GPUs: size the cluster with --gpus or --nodes"):
        size_cluster(giant, REQUEST)
    helios = tmp_path / "h.csv"
    helios.write_text("# per-VC pool sizes (nodes, 8 GPU/node): vcA=3, vcB=1\njob_id,user\n")
    assert helios_pools(helios) == {"vcA": (3, 8), "vcB": (1, 8)}
    with pytest.raises(ConfigError, match=r"--gpus-per-node: the trace's per-VC pool sizes give its nodes"):
        size_cluster(workload, SizeRequest(0.5, 8, gpus_per_node=4), path=helios, fmt="helios")
    spec, _ = size_cluster(workload, SizeRequest(0.5, 8, gpus=8, gpus_per_node=4), path=helios, fmt="helios")
    assert spec.describe() == "2 nodes x 4 = 8 GPUs"


def test_metrics() -> None:
    outcomes = [JobOutcome(1, 0.0, 0.0, 100.0, 2), JobOutcome(2, 0.0, 50.0, 55.0, 1),
                JobOutcome(3, 10.0, 110.0, 210.0, 4)]
    m = compute_metrics(outcomes, cluster_gpus=4)
    assert m.avg_jct_s == pytest.approx((100 + 55 + 200) / 3)
    assert (m.avg_wait_s, m.p50_wait_s, m.max_wait_s) == (pytest.approx(50.0), 50.0, 100.0)
    assert m.bounded_slowdown == pytest.approx((1 + 5.5 + 2) / 3)
    assert m.utilisation == pytest.approx((200 + 5 + 400) / (4 * 210))
    assert wait_by_size(outcomes) == [("1", 1, 50.0), ("2-4", 2, 50.0)]
    assert gain_share(100.0, 60.0, 70.0) == pytest.approx(0.75) and gain_share(100.0, 100.0, 90.0) is None


def test_simulate_command_prints_json_and_writes_the_report(tmp_path: Path) -> None:
    jobs = [(i, i * 30, [40, 900, 60, 3000][i % 4], [1, 2, 8, 4][i % 4], 4000, i % 5) for i in range(1, 121)]
    swf = write_swf(tmp_path / "small.swf", jobs, max_procs=8)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["simulate", "--trace", str(swf), "--format", "swf", "--policy",
                                       "fifo,sjf,multifactor", "--out", str(out), "--json", "--no-progress"],
                                env={"SLURMSCHED_CONFIG": None})
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["jobs"] == 120 and list(summary["policies"]) == ["fifo", "sjf", "multifactor"]
    assert set(summary["policies"]["sjf"]) == {"avg_jct_s", "avg_wait_s", "p50_wait_s", "p99_wait_s",
                                              "max_wait_s", "bounded_slowdown", "utilisation"}
    assert summary["policies"]["sjf"]["avg_jct_s"] < summary["policies"]["fifo"]["avg_jct_s"]
    assert sorted(p.name for p in out.iterdir()) == ["jct_cdf.png", "results.json", "table.txt", "wait_by_size.png"]
    details = json.loads((out / "results.json").read_text())
    assert details["cluster"]["gpus"] == 8 and details["policies"]["sjf"]["gain_share"] == pytest.approx(1.0)
    table = CliRunner().invoke(main, ["simulate", "--trace", str(swf), "--format", "swf", "--policy", "fifo",
                                      "--no-progress"], env={"SLURMSCHED_CONFIG": None})
    assert table.exit_code == 0 and "avg JCT" in table.output and "fifo" in table.output


def test_policies_simulated_side_by_side_give_the_same_results(tmp_path: Path) -> None:
    # over 200 jobs with users and limits: qssf's predictor fits its trees, as it would in-process
    jobs = [(i, i * 20, [40, 900, 60, 3000, 300][i % 5], [1, 2, 8, 4][i % 4], 4000, i % 7) for i in range(1, 601)]
    swf = write_swf(tmp_path / "small.swf", jobs, max_procs=8)
    args = ["simulate", "--trace", str(swf), "--format", "swf", "--policy", "fifo,qssf,sjf", "--json",
            "--no-progress", "--workers"]
    serial = CliRunner().invoke(main, [*args, "1"], env={"SLURMSCHED_CONFIG": None})
    parallel = CliRunner().invoke(main, [*args, "3"], env={"SLURMSCHED_CONFIG": None})
    assert serial.exit_code == 0 and parallel.exit_code == 0, serial.output + parallel.output
    assert list(json.loads(parallel.output)["policies"]) == ["fifo", "qssf", "sjf"]
    assert json.loads(parallel.output) == json.loads(serial.output)
    assert json.loads(serial.output)["policies"]["qssf"] != json.loads(serial.output)["policies"]["fifo"]


def test_a_policy_is_compared_with_other_settings(tmp_path: Path) -> None:
    """``qssf:KEY=VALUE`` runs qssf with that argument (or its predictor) changed, beside qssf as configured."""
    jobs = [(i, i * 20, [40, 900, 60, 3000, 300][i % 5], [1, 2, 8, 4][i % 4], 4000, i % 7) for i in range(1, 401)]
    swf = write_swf(tmp_path / "small.swf", jobs, max_procs=8)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["simulate", "--trace", str(swf), "--format", "swf", "--policy",
                                       "fifo,qssf,qssf:max_wait_h=96,qssf:max_wait_h=0.1:aging_step_h=0.05,"
                                       "qssf:predictor=slurmsched,qssf:predictor=user_limit",
                                       "--out", str(out), "--no-progress"], env={"SLURMSCHED_CONFIG": None})
    assert result.exit_code == 0, result.output
    details = json.loads((out / "results.json").read_text())["policies"]
    timing = ("description", "settings", "wall_s", "engine_s")
    runs = {name: {k: v for k, v in d.items() if k not in timing} for name, d in details.items()}
    # 96 h is qssf's default guard: the very same run; a 6-minute guard lets nearly every job's age decide
    assert runs["qssf:max_wait_h=96"] == runs["qssf"] == runs["qssf:predictor=slurmsched"]
    assert runs["qssf:predictor=user_limit"]["avg_jct_s"] != runs["qssf"]["avg_jct_s"]
    short = "qssf:max_wait_h=0.1:aging_step_h=0.05"
    assert runs[short]["avg_jct_s"] != runs["qssf"]["avg_jct_s"]
    assert details[short]["settings"] == {"max_wait_h": "0.1", "aging_step_h": "0.05"}
    assert any(line.startswith(short + " ") for line in result.output.splitlines())


@pytest.mark.parametrize("args, message", [
    (["--policy", "fifo"], "give either --trace"),
    (["--trace", "x.swf"], "--trace needs --format"),
    (["--trace", "x.swf", "--format", "swf", "--gpus", "4", "--nodes", "2"], "not both"),
    (["--trace", "missing.swf", "--format", "swf"], "cannot read trace"),
    (["--trace", "x.swf", "--format", "swf", "--policy", "lifo"], "unknown policy"),
    (["--trace", "x.swf", "--format", "swf", "--workers", "0"], "--workers"),
    (["--trace", "x.swf", "--format", "swf", "--nodes-from-slurm", "--gpus", "4"], "not both"),
    (["--trace", "x.swf", "--format", "swf", "--since", "30d"], "choose jobs of --from-db"),
    (["--trace", "x.swf", "--format", "swf", "--warmup", "1h"], "choose jobs of --from-db"),
    (["--trace", "x.swf", "--format", "swf", "--out", ""], "--out: give a directory (the value is empty)"),
    (["--trace", "x.swf", "--format", "swf", "--interval", "20m", "--submit-plugin"],
     "--interval 1200 s is longer than daemon.submit_cache_max_age_s (900 s)"),
    (["--trace", "x.swf", "--format", "swf", "--out", "x.swf/report"], "--out x.swf/report: cannot write"),
    (["--trace", "x.swf", "--format", "swf", "--policy", "fifo,qssf:max_wait_h=soon"],
     "--policy qssf:max_wait_h=soon: policy.qssf.max_wait_h must be a number (got 'soon')"),
])
def test_simulate_command_refuses_bad_input(args: list[str], message: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the arguments name files relative to it
    write_swf(tmp_path / "x.swf", [(1, 0, 10, 1, 20, 1)])
    result = CliRunner().invoke(main, ["simulate", *args, "--no-progress"], env={"SLURMSCHED_CONFIG": None})
    assert result.exit_code == 2 and message in result.output and "Traceback" not in result.output


def test_an_interval_past_the_cache_age_needs_no_cache_and_bars_stay_off_a_pipe(tmp_path: Path) -> None:
    """Without the submit plugin the simulated daemon writes no cache, so its max age does
    not bound ``--interval``; progress bars (on by default) go only to a terminal."""
    trace = write_swf(tmp_path / "x.swf", [(i, i * 600, 1800, 1, 3600, 1) for i in range(1, 40)])
    result = CliRunner().invoke(main, ["simulate", "--trace", str(trace), "--format", "swf",
                                       "--policy", "fifo,qssf", "--interval", "20m"], env={"SLURMSCHED_CONFIG": None})
    assert result.exit_code == 0, result.output
    assert "daemon cycle every 1200 s" in result.stdout
    assert result.stderr == ""  # no bar: stderr is not a terminal


def test_a_failed_run_leaves_out_as_it_was(tmp_path: Path) -> None:
    """--out is checked first but made only when the report is written; a report that
    cannot be written whole leaves the one before in place, and the error names the file."""
    trace = write_swf(tmp_path / "x.swf", [(i, i * 30, 60, 1, 100, 1) for i in range(1, 20)])
    missing = _simulate("--trace", str(tmp_path / "missing.swf"), "--format", "swf", "--out", str(tmp_path / "a/b"))
    assert missing.exit_code == 2 and "cannot read trace" in missing.output
    assert not (tmp_path / "a").exists()
    out = tmp_path / "out"
    first = _simulate("--trace", str(trace), "--format", "swf", "--out", str(out))
    assert first.exit_code == 0, first.output
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(before) == ["jct_cdf.png", "results.json", "table.txt", "wait_by_size.png"]
    (out / "wait_by_size.png").unlink()
    (out / "wait_by_size.png").mkdir()
    second = _simulate("--trace", str(trace), "--format", "swf", "--out", str(out), "--interval", "90")
    assert second.exit_code == 2 and "Traceback" not in second.output
    assert f"--out {out}: cannot write ({out / 'wait_by_size.png'}: Is a directory)" in second.output
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == {
        name: data for name, data in before.items() if name != "wait_by_size.png"}
    assert sorted(p.name for p in out.iterdir()) == sorted(before)  # no scratch directory left


def test_nodes_from_slurm_needs_multifactor(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from slurmsched.model import SchedulerConfig
    from slurmsched.sim.clock import SimClock
    from slurmsched.sim.cluster import ClusterSpec
    from slurmsched.sim.slurm import SimulatedSlurm

    basic = SimulatedSlurm(ClusterSpec.uniform(2, 4, name="site"), SchedulerConfig(priority_type="priority/basic"),
                           SimClock(0.0))
    monkeypatch.setattr("slurmsched.gateway.factory.make_gateway", lambda config: basic)
    trace = write_swf(tmp_path / "x.swf", [(1, 0, 10, 1, 20, 1)])
    result = CliRunner().invoke(main, ["simulate", "--trace", str(trace), "--format", "swf", "--nodes-from-slurm",
                                       "--no-progress"], env={"SLURMSCHED_CONFIG": None})
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "slurmctld of 'site' runs priority/basic, where SiteFactor changes nothing" in result.output


def test_simulate_replays_the_history_database(tmp_path: Path) -> None:
    from slurmsched.store.repository import SqlJobRepository
    from slurmsched.workload import WorkloadSpec, generate_workload

    url = f"sqlite:///{tmp_path / 'history.db'}"
    upgrade = CliRunner().invoke(main, ["db", "upgrade", "--db", url], env={"SLURMSCHED_CONFIG": None})
    assert upgrade.exit_code == 0, upgrade.output  # creates the file
    repo = SqlJobRepository.from_url(url)
    jobs = generate_workload(WorkloadSpec(jobs=80, mean_interarrival_s=60.0, gpu_nodes=(("a100", 8, 2),)),
                             start=1_700_000_000.0)
    jobs = [dataclasses.replace(job, cluster="gpu") for job in jobs]
    first = jobs[5]  # requeued: its second attempt is submitted again when the first ends
    again = dataclasses.replace(first, submit_time=first.end_time + 10, start_time=first.end_time + 20,
                                end_time=first.end_time + 500, restart_count=1)
    repo.ingest_finished([*jobs, again, dataclasses.replace(jobs[7], cluster="cpu")])
    repo.close()

    def simulate(*args: str):  # noqa: ANN202
        return CliRunner().invoke(main, ["simulate", "--from-db", "--db", url, "--policy", "fifo,sjf", "--gpus", "16",
                                         "--json", "--no-progress", *args], env={"SLURMSCHED_CONFIG": None})

    several = simulate()
    assert several.exit_code == 2 and "several clusters ('cpu', 'gpu'): name one with --cluster" in several.output
    result = simulate("--cluster", "gpu")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["jobs"] == 81 and set(summary["policies"]) == {"fifo", "sjf"}  # both attempts replayed
    middle = jobs[40].submit_time
    since, until = (datetime.fromtimestamp(t).isoformat() for t in (jobs[20].submit_time, middle))  # local time
    window = simulate("--cluster", "gpu", "--since", since, "--until", until)
    assert window.exit_code == 0, window.output
    in_window = sum(jobs[20].submit_time <= j.submit_time < middle for j in [*jobs, again])
    assert json.loads(window.output)["jobs"] == in_window
    # the jobs of the hour before are replayed first (the cluster is busy, not empty) but not measured
    warm = simulate("--cluster", "gpu", "--since", since, "--until", until, "--warmup", "1h")
    assert warm.exit_code == 0, warm.output
    cold_fifo, warm_fifo = (json.loads(r.output)["policies"]["fifo"] for r in (window, warm))
    assert json.loads(warm.output)["jobs"] == in_window and warm_fifo != cold_fifo
    first_ten = simulate("--cluster", "gpu", "--since", since, "--warmup", "1h", "--jobs", "10")
    assert json.loads(first_ten.output)["jobs"] == 10  # --jobs counts measured jobs, not the warm-up's
    assert "--warmup needs --since" in simulate("--cluster", "gpu", "--warmup", "1h").output
    unknown = simulate("--cluster", "tpu")
    assert unknown.exit_code == 2 and "no job of cluster 'tpu' (it has: 'cpu', 'gpu')" in unknown.output
    late = simulate("--cluster", "gpu", "--since", "2099-01-01")
    assert late.exit_code == 2 and "--since 2099-01-01 00:00 is in the future" in late.output
    before = simulate("--cluster", "gpu", "--since", "2001-01-01", "--until", "2001-02-01T12:30")
    assert before.exit_code == 2 and ("no finished job with a run time to replay submitted from 2001-01-01 00:00 "
                                      "to 2001-02-01 12:30") in before.output
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    upgrade = CliRunner().invoke(main, ["db", "upgrade", "--db", empty], env={"SLURMSCHED_CONFIG": None})
    assert upgrade.exit_code == 0, upgrade.output  # creates the file
    result = CliRunner().invoke(main, ["simulate", "--from-db", "--db", empty, "--no-progress"],
                                env={"SLURMSCHED_CONFIG": None})
    assert result.exit_code == 2 and "no finished job" in result.output


def _simulate(*args: str):  # noqa: ANN202 - click's Result
    return CliRunner().invoke(main, ["simulate", *args, "--policy", "fifo", "--no-progress"],
                              env={"SLURMSCHED_CONFIG": None})


def test_a_corrupt_or_truncated_gzip_trace_is_an_error_message(tmp_path: Path) -> None:
    swf = write_swf(tmp_path / "small.swf", [(i, i * 30, 60, 1, 100, 1) for i in range(1, 200)])
    corrupt = tmp_path / "badhdr.swf.gz"
    corrupt.write_bytes(b"\x1f\x8bXXXXXXXXXX")
    truncated = tmp_path / "trunc.swf.gz"
    truncated.write_bytes(gzip.compress(swf.read_bytes())[:60])
    for path in (corrupt, truncated):
        for command in (["simulate", "--trace", str(path), "--format", "swf", "--no-progress"],
                        ["predict", "evaluate", "--trace", str(path), "--format", "swf"]):
            result = CliRunner().invoke(main, command, env={"SLURMSCHED_CONFIG": None})
            assert result.exit_code == 2, result.output
            assert f"error: cannot read trace {path} to the end: " in result.output
            assert "Aborted" not in result.output and "Traceback" not in result.output


def test_options_have_their_documented_environment_twins(tmp_path: Path) -> None:
    swf = write_swf(tmp_path / "small.swf", [(i, i * 30, 60, 1, 100, 1) for i in range(1, 41)], max_procs=4)
    runner = CliRunner()
    env = {"SLURMSCHED_CONFIG": None, "SLURMSCHED_SIMULATE_TRACE": str(swf), "SLURMSCHED_SIMULATE_FORMAT": "swf",
           "SLURMSCHED_SIMULATE_POLICY": "fifo", "SLURMSCHED_SIMULATE_JSON": "1", "SLURMSCHED_SIMULATE_JOBS": "10",
           "SLURMSCHED_SIMULATE_PROGRESS": "0"}
    result = runner.invoke(main, ["simulate"], env=env)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    assert summary["jobs"] == 10 and list(summary["policies"]) == ["fifo"]
    bad = runner.invoke(main, ["simulate"], env={**env, "SLURMSCHED_SIMULATE_JOBS": "abc"})
    assert bad.exit_code == 2 and "env var: 'SLURMSCHED_SIMULATE_JOBS'): 'abc' is not" in bad.output
    # the Python parameter names are no environment names
    old = runner.invoke(main, ["simulate"], env={**env, "SLURMSCHED_SIMULATE_POLICY": None,
                                                 "SLURMSCHED_SIMULATE_POLICY_NAMES": "qssf"})
    assert old.exit_code == 0 and list(json.loads(old.output)["policies"]) == ["fifo", "sjf", "qssf"]
    helps = runner.invoke(main, ["simulate", "--help"]).output + runner.invoke(
        main, ["predict", "evaluate", "--help"]).output + runner.invoke(main, ["predict", "show", "--help"]).output
    for name in ("SLURMSCHED_SIMULATE_POLICY", "SLURMSCHED_SIMULATE_JSON", "SLURMSCHED_SIMULATE_JOBS",
                 "SLURMSCHED_DAEMON_INTERVAL_S", "SLURMSCHED_SIM_TARGET_LOAD", "SLURMSCHED_PREDICT_EVALUATE_TRACE",
                 "SLURMSCHED_PREDICT_EVALUATE_JSON", "SLURMSCHED_PREDICT_SHOW_JSON"):
        assert name in helps.replace("\n", "").replace(" ", ""), name
    every = runner.invoke(main, ["simulate", "--interval", "5m", "--jobs", "10"], env=env)
    assert every.exit_code == 0, every.output
    assert "'5x' is not a positive duration" in runner.invoke(main, ["simulate", "--interval", "5x"], env=env).output


def _details(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())


def test_cluster_size_notes_and_advice_fit_how_it_was_sized(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    swf = write_swf(tmp_path / "small.swf", [(1, 0, 100, 16, 200, 1), (2, 50, 100, 2, 300, 2)], max_procs=16)
    args = ["--trace", str(swf), "--format", "swf"]
    gpus = _simulate(*args, "--gpus", "10")
    assert gpus.exit_code == 2 and "give --gpus 16 or more" in gpus.output and "give --gpus or" not in gpus.output
    nodes = _simulate(*args, "--nodes", "1", "--gpus-per-node", "8")
    assert nodes.exit_code == 2 and "give --nodes 2 or more" in nodes.output
    rounded = _simulate(*args, "--gpus", "20", "--gpus-per-node", "8")
    assert rounded.exit_code == 0, rounded.output
    assert "3 nodes x 8 = 24 GPUs (--gpus 20 rounded up to whole nodes of 8)" in rounded.output
    exact = _simulate(*args, "--gpus", "24", "--gpus-per-node", "8")
    assert "(--gpus 24)" in exact.output
    from slurmsched.model import SchedulerConfig
    from slurmsched.sim.clock import SimClock
    from slurmsched.sim.cluster import ClusterSpec
    from slurmsched.sim.slurm import SimulatedSlurm

    small = SimulatedSlurm(ClusterSpec.uniform(1, 8, name="site"),
                           SchedulerConfig(priority_type="priority/multifactor"), SimClock(0.0))
    monkeypatch.setattr("slurmsched.gateway.factory.make_gateway", lambda config: small)
    live = _simulate(*args, "--nodes-from-slurm")
    assert live.exit_code == 2 and "leave out --nodes-from-slurm" in live.output and "give --gpus" not in live.output


def test_sizing_for_load_says_when_a_bound_held() -> None:
    one = workload_from_records([record(1, 0.0, 3600.0, gpus=8)], "one")
    spec, note = size_cluster(one, REQUEST)
    assert spec.total_gpus == 8 and note == "room for its one job at once: no arrival span to size for"
    assert offered_load(one, spec) is None  # no span to spread its work over
    # three 8-GPU jobs of an hour 10 s apart: half load would need thousands of GPUs; the
    # first is the warm-up's, counted in the room but not in the load
    burst = workload_from_records([record(i, 10.0 * i, 3600.0, gpus=8) for i in range(3)], "burst")
    spec, note = size_cluster(dataclasses.replace(burst, measured_from=5.0), REQUEST)
    assert spec.total_gpus == 24
    assert note == "room for all 3 jobs (the warm-up's included) at once: 50% offered load would need 11,520 GPUs"
    # 5.6 GPUs of work at 50% load need 11.2 GPUs: one node of 8 gives 70%, and says so
    rounded = workload_from_records([record(1, 0.0, 5599.0, gpus=1), record(2, 1000.0, 1.0, gpus=1)], "rounded")
    spec, note = size_cluster(rounded, REQUEST)
    assert spec.total_gpus == 8 and note == "sized for 50% offered load (70% on whole nodes)"
    # two 1-GPU jobs a day apart: half load needs less than one GPU (said as 1), but the biggest job needs 8
    sparse = workload_from_records([record(1, 0.0, 60.0, gpus=1), record(2, 86400.0, 60.0, gpus=1),
                                    record(3, 3600.0, 60.0, gpus=8)], "sparse")
    spec, note = size_cluster(sparse, REQUEST)
    assert spec.total_gpus == 8 and note == "as big as the biggest job: 50% offered load would need only 1 GPU"
    # 3.4 GPUs of work at 50% load need 7 GPUs: less than a node of 8 (rounded to none), but not 0
    light = workload_from_records([record(1, 0.0, 1000.0 * 3.4, gpus=1), record(2, 1000.0, 10.0, gpus=1),
                                   record(3, 500.0, 1.0, gpus=32)], "light")
    spec, note = size_cluster(light, REQUEST)
    assert spec.total_gpus == 32 and note.endswith("50% offered load would need only 7 GPUs")
    # sized on the measured jobs, as the offered load is: the two agree
    busy = workload_from_records([record(i, i * 100.0, 4000.0 if i > 50 else 10.0, gpus=4) for i in range(1, 101)],
                                 "busy")
    warmed = dataclasses.replace(busy, measured_from=5100.0)
    spec, note = size_cluster(warmed, REQUEST)
    assert note == "sized for 50% offered load" and offered_load(warmed, spec) == pytest.approx(0.5, rel=0.05)


def test_left_out_jobs_and_lines_are_counted_on_screen_and_in_results(tmp_path: Path) -> None:
    path = tmp_path / "eagle.csv"
    header = ("job_id,user,account,partition,qos,wallclock_req,nodes_req,processors_req,gpus_req,mem_req,"
              "submit_time,start_time,end_time,run_time,state,name,work_dir,submit_line\n")
    rows = []
    for i in range(1, 11):
        gpus = 2 if i <= 3 else 0
        start = "" if i == 10 else f"2019-01-01 00:{i:02d}:00"
        end = "" if i == 10 else f"2019-01-01 01:{i:02d}:00"
        rows.append(f"{i},u,a,p,normal,7200,1,4,{gpus},0,2019-01-01 00:{i:02d}:00,{start},{end},3600,"
                    "COMPLETED,n,w,s\n")
    rows[5:5] = ["garbage\n"] * 7
    path.write_text(header + "".join(rows))
    out = tmp_path / "out"
    result = _simulate("--trace", str(path), "--format", "eagle", "--gpus", "8", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert (f"{path}: 3 jobs (7 left out: 6 CPU-only in a GPU workload, 1 without a run time; "
            "7 unreadable lines: 7, 8, 9, 10, 11 and 2 more) on 1 node x 8 = 8 GPUs") in result.output
    left_out = _details(out)["left_out"]
    assert left_out == {"jobs": 7, "cpu_only": 6, "no_run_time": 0 + 1, "never_ran": 0, "no_processors": 0,
                        "too_big_for_partition": 0, "unreadable_lines": 7,
                        "unreadable_line_numbers": [7, 8, 9, 10, 11, 12, 13]}
    assert "dropped_jobs" not in _details(out)["policies"]["fifo"]
    as_json = _simulate("--trace", str(path), "--format", "eagle", "--gpus", "8", "--json")
    assert json.loads(as_json.output)["left_out"] == left_out


def test_swf_jobs_without_processors_are_counted_as_such(tmp_path: Path) -> None:
    swf = write_swf(tmp_path / "zero.swf", [(1, 0, 100, 4, 200, 1), (6, 50, 20, 0, 60, 1), (7, 60, 20, 0, 60, 2),
                                            (8, 90, 100, 2, 200, 2)])
    result = _simulate("--trace", str(swf), "--format", "swf", "--json")
    assert result.exit_code == 0, result.output
    left_out = json.loads(result.output)["left_out"]
    assert (left_out["no_processors"], left_out["unreadable_lines"], left_out["jobs"]) == (2, 0, 2)


def test_jobs_too_big_for_their_partition_are_counted_with_the_rest(tmp_path: Path) -> None:
    from slurmsched.sim.cluster import ClusterSpec
    from slurmsched.sim.experiment import compare
    from slurmsched.sim.policies import parse_policies
    from slurmsched.config import load_config
    from slurmsched.sim.report import details, render_table

    jobs = [dataclasses.replace(record(i, i * 10.0, 60.0, gpus=2), partition="p") for i in range(1, 5)]
    jobs.append(dataclasses.replace(record(9, 5.0, 60.0, gpus=16), partition="p"))
    workload = workload_from_records(jobs, "w")
    config = load_config(None, environ={})
    comparison = compare(workload, ClusterSpec.uniform(1, 8), "given", parse_policies("fifo", config), config)
    assert comparison.jobs == 4 and comparison.left_out == LeftOut(too_big=1)
    assert details(comparison)["left_out"]["too_big_for_partition"] == 1
    assert "4 jobs (1 left out: 1 larger than their partition) on" in render_table(comparison)


def test_a_repeated_job_id_names_both_lines_and_the_itp_hint_only_for_itp(tmp_path: Path) -> None:
    swf = write_swf(tmp_path / "dup.swf", [(1, 0, 10, 1, 20, 1), (2, 5, 10, 1, 20, 1), (1, 9, 10, 1, 20, 1)])
    with pytest.raises(TraceFormatError) as raised:
        load_trace(swf, "swf")
    assert str(raised.value) == f"{swf}: job id 1 appears twice (lines 5 and 7)"
    archive = tmp_path / "itp.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in ("cluster01.csv", "cluster02.csv"):
            data = b"job_id,submission_time,duration,num_gpu\n# c\nx,0,10,1\n"
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(TraceFormatError) as raised:
        load_trace(archive, "itp")
    assert str(raised.value) == (f"{archive}: job id 1 appears twice (line 3 of cluster01 and line 3 of cluster02); "
                                 "simulate one cluster at a time (for the ITP archive: ARCHIVE:clusterNN.csv)")


def test_an_swf_machine_whose_nodes_do_not_divide_its_processors_keeps_them_all(tmp_path: Path) -> None:
    swf = tmp_path / "t.swf"
    swf.write_text("; MaxProcs: 10\n; MaxNodes: 3\n"
                   "1 0 -1 100 10 -1 -1 10 100 -1 1 1 1 1 -1 -1 -1 -1\n"
                   "2 10 -1 50 2 -1 -1 2 50 -1 1 2 1 2 -1 -1 -1 -1\n")
    spec, note = size_cluster(load_trace(swf, "swf"), REQUEST, path=swf, fmt="swf")
    assert sorted(n.gpus for n in spec.nodes) == [1, 3, 3, 3] and spec.total_gpus == 10
    assert note == "SWF header: MaxProcs 10, 3 per node, the last node holding the remaining 1"


def test_jobs_n_counts_left_out_jobs_only_up_to_the_last_job_kept() -> None:
    records = [record(1, 0.0, 5.0, gpus=1), record(2, 1.0, 5.0), record(3, 2.0, 5.0, gpus=1),
               record(4, 3.0, 5.0), record(5, 4.0, None, gpus=1), record(6, 5.0, 5.0, gpus=1)]
    assert workload_from_records(records, "g").left_out == LeftOut(cpu_only=2, no_run_time=1)
    cut = workload_from_records(records, "g", limit=2)
    assert [j.record.job_id for j in cut.jobs] == [1, 3] and cut.left_out == LeftOut(cpu_only=1)
    warmed = workload_from_records(records, "g", limit=1, measured_from=2.0)
    assert [j.record.job_id for j in warmed.jobs] == [1, 3] and warmed.left_out == LeftOut()


def test_offered_load_leaves_out_jobs_larger_than_their_partition() -> None:
    from slurmsched.sim.cluster import ClusterSpec

    spec = ClusterSpec.pools({"a": (1, 8), "b": (1, 2)})
    fits = JobRecord(job_id=1, user="u", submit_time=0.0, partition="b", state=JobState.COMPLETED,
                     start_time=0.0, end_time=100.0, gpus=2)
    workload = workload_from_records([fits, dataclasses.replace(fits, job_id=2, submit_time=100.0, gpus=4)], "g")
    assert offered_load(workload, spec) == pytest.approx(2 * 100 / 100 / 10)  # over both arrivals


def test_multifactor_counts_a_jobs_processors_as_its_nodes_on_a_one_processor_node_machine(tmp_path: Path) -> None:
    """Modelled as one node of MaxProcs processors, the machine's job-size factor stays the
    real machine's: a job's nodes are its processors (as with --gpus, one node each)."""
    swf = tmp_path / "f.swf"
    swf.write_text("; MaxProcs: 4\n; MaxNodes: 4\n"
                   "1 0 -1 80000 4 -1 -1 4 80000 -1 1 1 1 1 -1 -1 -1 -1\n"
                   "2 10 -1 100 1 -1 -1 1 100 -1 1 2 1 2 -1 -1 -1 -1\n"
                   "3 40010 -1 300 4 -1 -1 4 300 -1 1 3 1 3 -1 -1 -1 -1\n")

    def avg_jct(*sizing: str) -> float:
        result = CliRunner().invoke(main, ["simulate", "--trace", str(swf), "--format", "swf", "--policy",
                                           "multifactor", "--json", "--no-progress", *sizing],
                                    env={"SLURMSCHED_CONFIG": None})
        assert result.exit_code == 0, result.output
        return json.loads(result.output.strip().splitlines()[-1])["policies"]["multifactor"]["avg_jct_s"]

    # at 80,000 s job 3 (4 processors: larger job size) outranks job 2's 40,000 s of extra age
    assert avg_jct() == avg_jct("--gpus", "4") == (80000 + (80300 - 40010) + (80400 - 10)) / 3
