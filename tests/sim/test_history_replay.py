"""Replaying the site's history: jobs that never ran, the warm-up's counts, the window."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from click.testing import CliRunner

from slurmsched.cli import main
from slurmsched.model import JobRecord, JobState
from slurmsched.sim.workload import LeftOut, workload_from_history, workload_from_records

T0 = 1_700_000_000.0


def ran(job_id: int, submit: float, run: float = 600.0, *, gpus: int = 2, node: str = "gpu01") -> JobRecord:
    return JobRecord(job_id=job_id, user="u", submit_time=submit, cluster="dev", state=JobState.COMPLETED,
                     start_time=submit + 5, end_time=submit + 5 + run, gpus=gpus, cpus=4, node_list=node)


def rejected(job_id: int, submit: float, gpus: int = 32) -> JobRecord:
    """What sacct records for ``sbatch --gres=gpu:16 -N2`` that slurmctld refused: FAILED, start = end =
    submit, the requested GPUs, no node."""
    return JobRecord(job_id=job_id, user="u", submit_time=submit, cluster="dev", state=JobState.FAILED,
                     start_time=submit, end_time=submit, gpus=gpus, nodes=2, cpus=2, node_list="")


def test_a_rejected_submission_is_left_out_as_never_ran_and_sizes_nothing() -> None:
    workload = workload_from_history([ran(1, T0), rejected(2, T0 + 10), ran(3, T0 + 20)])
    assert [j.record.job_id for j in workload.jobs] == [1, 3] and workload.max_units == 2
    assert workload.left_out == LeftOut(never_ran=1)
    assert workload.left_out.describe() == "1 left out: 1 never ran (on no node)"
    assert workload.left_out.as_dict()["never_ran"] == 1 and workload.left_out.as_dict()["jobs"] == 1
    # nor does a GPU request that never ran make CPU jobs "CPU-only in a GPU workload"
    cpu = workload_from_history([ran(1, T0, gpus=0), rejected(2, T0 + 10)])
    assert [j.units for j in cpu.jobs] == [4] and cpu.left_out == LeftOut(never_ran=1)


def test_a_job_cancelled_while_pending_is_left_out_as_never_ran() -> None:
    """Read from accounting now: no start time (it never started), no node."""
    cancelled = JobRecord(job_id=2, user="u", submit_time=T0 + 10, cluster="dev", state=JobState.CANCELLED,
                          start_time=None, end_time=T0 + 70, gpus=1, cpus=2, node_list="")
    workload = workload_from_history([ran(1, T0), cancelled, ran(3, T0 + 20)])
    assert [j.record.job_id for j in workload.jobs] == [1, 3] and workload.left_out == LeftOut(never_ran=1)


def test_trace_rows_name_no_nodes_and_are_not_taken_for_jobs_that_never_ran() -> None:
    rows = [ran(1, T0, node=""), ran(2, T0 + 10, run=0.0, node="")]
    workload = workload_from_records(rows, "trace")
    assert len(workload.jobs) == 2 and workload.left_out == LeftOut()


def test_node_less_runs_beside_accounting_records_are_replayed() -> None:
    """A trace imported into the site's database (or the demo's seeded history) names no
    nodes, but its jobs ran: only a 0-second run on no node never ran."""
    records = [ran(1, T0), ran(2, T0 + 10, node=""), rejected(3, T0 + 20), ran(4, T0 + 30, run=0.0)]
    workload = workload_from_history(records)
    assert [j.record.job_id for j in workload.jobs] == [1, 2, 4] and workload.left_out == LeftOut(never_ran=1)


def test_the_warm_up_jobs_left_out_are_not_counted() -> None:
    since = T0 + 3600
    records = [ran(1, T0, gpus=0), rejected(2, T0 + 60), ran(3, T0 + 120),  # the warm-up: 2 left out
               ran(4, since + 10), ran(5, since + 20, gpus=0), rejected(6, since + 30)]
    workload = workload_from_history(records, since=since, warmup_s=3600.0)
    assert [j.record.job_id for j in workload.jobs] == [3, 4]  # the warm-up's job is replayed
    assert workload.left_out == LeftOut(cpu_only=1, never_ran=1)  # but its left-out jobs are not counted
    assert workload.window is not None
    assert (workload.window.warmup_jobs, workload.window.warmup_first) == (1, T0 + 120)


def test_the_window_is_on_the_first_line_and_in_results_json(tmp_path: Path) -> None:
    from slurmsched.store.repository import SqlJobRepository

    url = f"sqlite:///{tmp_path / 'history.db'}"
    upgrade = CliRunner().invoke(main, ["db", "upgrade", "--db", url], env={"SLURMSCHED_CONFIG": None})
    assert upgrade.exit_code == 0, upgrade.output
    repo = SqlJobRepository.from_url(url)
    repo.ingest_finished([ran(i, T0 + 600 * i) for i in range(1, 21)] + [rejected(99, T0 + 650)])
    repo.close()
    since = datetime.fromtimestamp(T0 + 600 * 5).isoformat()

    def simulate(*args: str):  # noqa: ANN202 - click's Result
        return CliRunner().invoke(main, ["simulate", "--from-db", "--db", url, "--policy", "fifo", "--no-progress",
                                         "--since", since, *args], env={"SLURMSCHED_CONFIG": None})

    out = tmp_path / "out"
    result = simulate("--warmup", "1h", "--out", str(out))
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert first.startswith(f"history of dev submitted since {since.replace('T', ' ')[:16]} (warm-up 60.0m: 4 jobs, "
                            "the first 40.0m before): 16 jobs on ")  # the rejected job is in the warm-up
    window = json.loads((out / "results.json").read_text())["window"]
    assert window["since"].startswith(since) and window["until"] is None
    assert (window["warmup_s"], window["warmup_jobs"]) == (3600.0, 4)
    long_ago = simulate("--warmup", "30d", "--json")
    assert long_ago.exit_code == 0 and json.loads(long_ago.output)["left_out"]["jobs"] == 0
    empty = simulate("--since", datetime.fromtimestamp(T0 + 30).strftime("%Y-%m-%dT%H:%M:%S"), "--warmup", "10s")
    assert empty.exit_code == 0, empty.output
    assert "(warm-up 10s: no job before --since, the replay starts on an empty cluster)" in empty.output
