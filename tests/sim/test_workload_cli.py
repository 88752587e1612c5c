"""Workloads, cluster sizing, metrics and the ``slurmsched simulate`` command."""

from __future__ import annotations

import dataclasses
import json
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
from slurmsched.sim.workload import load_trace, workload_from_records

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
    assert [(j.record.job_id, j.units) for j in cpu.jobs] == [(1, 2), (2, 4)] and cpu.skipped == 1
    assert cpu.span_s == 10.0 and cpu.gpu_seconds == 30.0 and cpu.max_units == 4
    gpu = workload_from_records([record(1, 0.0, 5.0, gpus=2, cpus=8), record(2, 1.0, 5.0, cpus=8)], "gpu")
    assert [(j.record.job_id, j.units) for j in gpu.jobs] == [(1, 2)] and gpu.skipped == 1
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
    helios = tmp_path / "h.csv"
    helios.write_text("# per-VC pool sizes (nodes, 8 GPU/node): vcA=3, vcB=1\njob_id,user\n")
    assert helios_pools(helios) == {"vcA": (3, 8), "vcB": (1, 8)}


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
    repo = SqlJobRepository.from_url(url)
    repo.upgrade()
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
    assert unknown.exit_code == 2 and "no finished job of cluster 'tpu'" in unknown.output
    late = simulate("--cluster", "gpu", "--since", "2099-01-01")
    assert late.exit_code == 2 and "in that time window" in late.output
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    repo = SqlJobRepository.from_url(empty)
    repo.upgrade()
    repo.close()
    result = CliRunner().invoke(main, ["simulate", "--from-db", "--db", empty, "--no-progress"],
                                env={"SLURMSCHED_CONFIG": None})
    assert result.exit_code == 2 and "no finished job" in result.output
