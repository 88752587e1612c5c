"""The JSON-CLI gateway against the live dev cluster (Slurm 22.05, fake GPUs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from polling import wait_until

from slurmsched.errors import ConfigError, SlurmCommandNotFound
from slurmsched.gateway import CliGateway
from slurmsched.gateway.parse import accounting_name
from slurmsched.gateway.pyslurm_backend import PyslurmGateway, import_pyslurm
from slurmsched.model import JobRecord, JobState, SetFeatures, SetSiteFactor, SetSwitches
from slurmsched.predict.features import kind

pytestmark = pytest.mark.slurm

#: Slurm refuses job names over 1024 bytes ("Pathname ... too long"); this one is just under.
HOSTILE_NAME = "x'; rm -rf / #\n$(reboot) `id` \"q\" | a=b\n" + "ü✓ج水😀" * 66


def _pyslurm_problem() -> str:
    try:
        import_pyslurm()
    except ConfigError as exc:
        return str(exc)
    return ""


needs_pyslurm = pytest.mark.skipif(
    bool(_pyslurm_problem()),
    reason=f"pyslurm backend not testable: {_pyslurm_problem()} (PyPI's pyslurm 25.11 builds only "
           "against Slurm 25.11; the dev cluster runs Debian 12's 22.05)")


@pytest.fixture
def gateway(slurm_cluster) -> CliGateway:
    return CliGateway(env=slurm_cluster.env)


def live_job(gateway: CliGateway, job_id: int) -> JobRecord | None:
    return next((j for j in gateway.snapshot().jobs if j.job_id == job_id), None)


def wait_idle(slurm_cluster, timeout: float = 60) -> None:
    """Wait until no job of anyone holds or waits for the cluster (earlier tests' leftovers)."""
    wait_until("an empty queue", lambda: not slurm_cluster.run("squeue", "-h", "-o", "%i").stdout.strip(),
               timeout, 0.3)


def sprio_site_factors(slurm_cluster) -> dict[int, int]:
    out = slurm_cluster.run("sprio", "-h", "-o", "%i|%S").stdout
    return {int(i): int(s) for i, s in (line.split("|") for line in out.split())}


def test_snapshot_shows_submitted_jobs_and_gpu_use(gateway, slurm_cluster, slurm_jobs):
    big = slurm_jobs.submit("--gres=gpu:a100:8", "-N2", "-t", "10", name="two-node", wrap="sleep 120")
    small = slurm_jobs.submit("--gres=gpu:v100:2", name="unlimited", wrap="sleep 120")
    cpu = slurm_jobs.submit("-c", "2", "-t", "5", name="cpu", wrap="sleep 120")
    array = slurm_jobs.submit("--array=0-5", "--gres=gpu:v100:1", "-t", "3", name="array", wrap="sleep 120")
    for job_id in (big, small, cpu):
        slurm_jobs.wait_state(job_id, {"RUNNING"})
    snap = gateway.snapshot()
    jobs = {j.job_id: j for j in snap.jobs}
    assert snap.cluster == "slurmsched" and snap.config.topology_plugin == "topology/tree"
    two_node = jobs[big]
    assert (two_node.state, two_node.nodes, two_node.gpus, two_node.gpu_type) == (JobState.RUNNING, 2, 16, "a100")
    assert two_node.time_limit_s == 600 and two_node.name == slurm_jobs.prefix + "two-node"
    assert (jobs[small].gpus, jobs[small].gpu_type, jobs[small].time_limit_s) == (2, "v100", None)
    assert jobs[cpu].gpus == 0 and jobs[cpu].gpu_type is None
    tasks = [j for j in snap.jobs if j.array_job_id == array]
    assert tasks and all(t.gpus == 1 and t.gpu_type == "v100" for t in tasks)
    assert {t.array_task_id for t in tasks if t.state is JobState.RUNNING} <= set(range(6))
    nodes = {n.name: n for n in snap.nodes}
    assert nodes["gpu01"].gpus_used("a100") == 8 and nodes["gpu02"].gpus_used("a100") == 8
    assert nodes["gpu03"].gpus("v100") == 4


def test_site_factor_reaches_sprio_and_changes_start_order(gateway, slurm_cluster, slurm_jobs):
    wait_idle(slurm_cluster)
    fillers = [slurm_jobs.submit("--gres=gpu:a100:8", "-w", node, name=f"fill-{node}", wrap="sleep 300")
               for node in ("gpu01", "gpu02")]
    for job_id in fillers:
        slurm_jobs.wait_state(job_id, {"RUNNING"})
    first = slurm_jobs.submit("--gres=gpu:a100:8", "-t", "5", name="first", wrap="sleep 60")
    later = slurm_jobs.submit("--gres=gpu:a100:8", "-t", "5", name="later", wrap="sleep 60")
    wait_until("both jobs in sprio", lambda: {first, later} <= set(sprio_site_factors(slurm_cluster)), 30, 0.3)
    before = {j.job_id: j for j in gateway.snapshot().pending}
    assert before[first].site_factor == 0 and before[later].site_factor == 0

    outcomes = gateway.apply([SetSiteFactor(first, 5), SetSiteFactor(later, 100_000),
                              SetSiteFactor(999_999, 5)])
    assert [(o.ok, o.message) for o in outcomes] == [(True, ""), (True, ""),
                                                      (False, "Invalid job id specified")]
    factors = sprio_site_factors(slurm_cluster)
    assert (factors[first], factors[later]) == (5, 100_000)
    after = {j.job_id: j for j in gateway.snapshot().pending}
    assert (after[first].site_factor, after[later].site_factor) == (5, 100_000)
    assert after[later].priority > after[first].priority

    # Without the SiteFactor the older job would start first (same size, same partition).
    slurm_cluster.run("scancel", str(fillers[0]))
    started = wait_until("one of the two to start",
                         lambda: {j for j in (first, later) if slurm_jobs.state(j) == "RUNNING"}, 30, 0.3)
    assert started == {later}
    assert slurm_jobs.state(first) == "PENDING"


def test_an_array_with_a_finished_task_is_updated_with_the_rest_of_its_batch(gateway, slurm_cluster, slurm_jobs):
    """Addressed by its id, an array whose task 0 has finished makes scontrol answer per
    part (``A_0: Job has already finished``, ``A_[2-3]: No error``) and exit 1: every job of
    the batch was reported failed although Slurm updated them all."""
    array = slurm_jobs.submit("--array=0-3%1", "-t", "5", name="array",
                              wrap="[ $SLURM_ARRAY_TASK_ID = 0 ] || sleep 300")
    held = slurm_jobs.submit("-H", "-t", "5", name="held", wrap="true")
    wait_until("task 0 to finish and task 1 to run", lambda: slurm_cluster.run(
        "squeue", "-h", "-r", "--states=all", "-j", f"{array}_0,{array}_1", "-o", "%T", check=False
    ).stdout.split() == ["COMPLETED", "RUNNING"], 30, 0.3)
    outcomes = gateway.apply([SetSiteFactor(array, 9), SetSiteFactor(held, 9), SetFeatures(array, "a100")])
    assert [(o.ok, o.message) for o in outcomes] == [(True, ""), (True, ""), (True, "")]
    assert "Features=a100 " in slurm_cluster.run("scontrol", "-o", "show", "job", f"{array}_3").stdout


def test_constraints_round_trip(gateway, slurm_jobs):
    job = slurm_jobs.submit("-H", "--gres=gpu:1", "-N2", "-t", "5", name="held", wrap="sleep 10")
    outcomes = gateway.apply([SetSwitches(job, 1, 600), SetFeatures(job, "nosuchfeature"),
                              SetFeatures(job, "a100")])
    assert [o.ok for o in outcomes] == [True, False, True]
    assert outcomes[1].message == "Invalid feature specification"
    record = live_job(gateway, job)
    assert record.features == "a100"
    shown = slurm_jobs.cluster.run("scontrol", "show", "job", str(job)).stdout
    assert "Switches=1@00:10:00" in shown  # 22.05's JSON has no switch fields

    outcomes = gateway.apply([SetSwitches(job, 0), SetFeatures(job, "")])
    assert all(o.ok for o in outcomes), outcomes
    assert live_job(gateway, job).features == ""
    assert "Switches=" not in slurm_jobs.cluster.run("scontrol", "show", "job", str(job)).stdout


def test_hostile_name_survives_submit_snapshot_and_apply(gateway, slurm_cluster, slurm_jobs):
    assert len(HOSTILE_NAME.encode()) <= 1024 - len(slurm_jobs.prefix.encode())
    job = slurm_jobs.submit("-H", "-t", "5", name=HOSTILE_NAME, wrap="sleep 10")
    name = accounting_name(slurm_jobs.prefix + HOSTILE_NAME)  # its '"' as accounting stores it: '`'
    assert '"' in HOSTILE_NAME and live_job(gateway, job).name == name
    outcomes = gateway.apply([SetSiteFactor(job, 77), SetFeatures(job, "a100")])
    assert all(o.ok for o in outcomes), outcomes
    record = live_job(gateway, job)
    assert record.name == name and record.features == "a100"
    env = {**slurm_cluster.env, "SLURMSCHED_CONFIG": os.devnull}
    table = subprocess.run([sys.executable, "-m", "slurmsched", "queue"], env=env, capture_output=True,
                           text=True, check=True, timeout=60).stdout
    lines = table.splitlines()
    assert sum(line.startswith(f"{job} ") for line in lines) == 1
    assert not any(line.startswith(('$(reboot)', "ü✓")) for line in lines)  # newlines never split a row
    # Slurm itself refuses names over 1024 bytes (so "2 KB of unicode" cannot be a job name).
    too_long = slurm_cluster.run("sbatch", "--parsable", "-H", "-o", "/dev/null",
                                 f"--job-name={HOSTILE_NAME * 2}", "--wrap=true", check=False)
    assert too_long.returncode != 0 and "too long" in too_long.stderr


def test_finished_jobs_appear_in_finished_since(gateway, slurm_cluster, slurm_jobs):
    since = time.time() - 1
    done = slurm_jobs.submit("--gres=gpu:a100:2", "-t", "5", name="done", wrap="sleep 1")
    failed = slurm_jobs.submit("-t", "5", name="failed", wrap="exit 3")
    requeued = slurm_jobs.submit("-t", "5", "--gres=gpu:v100:1", name="requeued", wrap="sleep 120")
    slurm_jobs.wait_state(requeued, {"RUNNING"})
    slurm_cluster.run("scontrol", "requeue", str(requeued))
    slurm_jobs.wait_state(requeued, {"PENDING"})
    never_ran = slurm_jobs.submit("-H", "-t", "5", name="never-ran", wrap="true")
    slurm_cluster.run("scancel", str(requeued), str(never_ran))

    def records():
        found = [r for r in gateway.finished_since(since) if r.job_id in (done, failed, requeued, never_ran)]
        states = {(r.job_id, r.state) for r in found}
        wanted = {(done, JobState.COMPLETED), (failed, JobState.FAILED), (requeued, JobState.CANCELLED),
                  (requeued, JobState.REQUEUED), (never_ran, JobState.CANCELLED)}
        return found if wanted <= states else None

    found = wait_until("accounting to record the jobs", records, timeout=60, interval=1)
    by_key = {(r.job_id, r.state): r for r in found}
    ok = by_key[(done, JobState.COMPLETED)]
    assert (ok.gpus, ok.gpu_type, ok.exit_code, ok.time_limit_s) == (2, "a100", 0, 300)
    assert ok.name == slurm_jobs.prefix + "done" and ok.end_time >= ok.start_time >= ok.submit_time
    assert by_key[(failed, JobState.FAILED)].gpus == 0
    assert by_key[(requeued, JobState.REQUEUED)].restart_count == 0
    assert by_key[(requeued, JobState.CANCELLED)].restart_count == 1
    assert all(r.end_time >= int(since) for r in found)
    # cancelled while held: 22.05's sacct gives it start = end; it never ran, and no predictor may learn a 0 s run
    cancelled = by_key[(never_ran, JobState.CANCELLED)]
    assert (cancelled.start_time, cancelled.runtime_s, cancelled.node_list) == (None, None, "")
    assert gateway.finished_since(time.time() + 3600) == []


def test_a_job_is_the_same_kind_pending_and_finished(gateway, slurm_cluster, slurm_jobs):
    """The predictor keys a job's history on its name and memory per CPU (``kind``): squeue's
    view of a pending job and sacct's of the finished one must give the same key, whichever
    way the memory was asked for (or taken from DefMemPerCPU), or not asked for (``--mem=0``:
    a whole node's)."""
    since = time.time() - 1
    asks = {"none": (), "per-node": ("--mem=700",), "per-cpu": ("--mem-per-cpu=300", "-n", "3"),
            "two-nodes": ("-N", "2", "--mem=500"), "gpus": ("--gres=gpu:a100:2", "-c", "4", "--mem=6G"),
            "whole-node": ("--mem=0",)}
    ids = {slurm_jobs.submit("-H", "-t", "5", *args, name=label, wrap="true"): label for label, args in asks.items()}
    for job_id in ids:
        slurm_jobs.wait_state(job_id, {"PENDING"})
    pending = {j.job_id: j for j in gateway.snapshot().jobs if j.job_id in ids}
    slurm_cluster.run("scontrol", "release", *map(str, ids))

    def finished():
        done = {r.job_id: r for r in gateway.finished_since(since)
                if r.job_id in ids and r.state is JobState.COMPLETED}
        return done if len(done) == len(ids) else None

    done = wait_until("accounting to record the jobs", finished, timeout=60, interval=1)
    assert {ids[i]: kind(pending[i]) for i in ids} == {ids[i]: kind(done[i]) for i in ids}
    per_cpu = {ids[i]: kind(done[i])[1] for i in ids}
    assert (per_cpu["per-node"], per_cpu["per-cpu"], per_cpu["two-nodes"], per_cpu["gpus"]) == (700, 300, 500, 1536)
    assert per_cpu["none"] > 0  # the dev cluster's DefMemPerCPU
    assert per_cpu["whole-node"] == 0  # not the node's memory, which sacct's TRES holds


def test_missing_squeue_is_command_not_found(slurm_cluster, tmp_path: Path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("scontrol", "sprio", "sinfo", "sacct"):
        real = subprocess.run(["which", name], capture_output=True, text=True, check=True).stdout.strip()
        (bin_dir / name).symlink_to(real)
    gateway = CliGateway(bin_dir=str(bin_dir), env=slurm_cluster.env)
    with pytest.raises(SlurmCommandNotFound) as err:
        gateway.snapshot()
    assert str(err.value) == f"squeue not found in {bin_dir} (is slurm-client installed?)"
    assert gateway.scheduler_config().priority_type == "priority/multifactor"


def test_queue_command_json(slurm_cluster, slurm_jobs):
    """A versioned document of the cluster's jobs and nodes, in ASCII: it reads the same
    under any locale (a latin-1 terminal used to end it in an internal error)."""
    job = slurm_jobs.submit("-H", "--gres=gpu:a100:1", "-t", "7", name="jsön ✓", wrap="true")
    env = {**slurm_cluster.env, "SLURMSCHED_CONFIG": os.devnull, "PYTHONIOENCODING": "latin-1"}
    out = subprocess.run([sys.executable, "-m", "slurmsched", "queue", "--json"], env=env, capture_output=True,
                         check=True, timeout=60).stdout
    doc = json.loads(out.decode("ascii"))
    assert set(doc) == {"format", "taken_at", "cluster", "jobs", "nodes", "config"} and doc["format"] == 1
    mine = next(j for j in doc["jobs"] if j["job_id"] == job)
    assert (mine["state"], mine["gpus"], mine["gpu_type"], mine["time_limit_s"]) == ("PENDING", 1, "a100", 420)
    assert mine["name"].endswith("jsön ✓")
    assert {n["name"] for n in doc["nodes"]} == {"gpu01", "gpu02", "gpu03", "gpu04"}


def test_queue_and_predict_tables_under_a_latin1_locale(slurm_cluster, slurm_jobs, tmp_path: Path):
    """A job name with an emoji used to end ``queue`` and ``predict JOBID`` in an internal
    error (exit 3) on a latin-1 terminal; the name now shows what latin-1 can, '?' for the
    rest, and the columns after it still line up."""
    name = f"é😀x-{slurm_jobs.prefix}"  # the emoji first: the table cuts a long name
    job = int(slurm_cluster.run("sbatch", "--parsable", "-H", "-t", "7", "-o", "/dev/null", f"--job-name={name}",
                                "--wrap=true").stdout.split(";")[0])
    slurm_jobs.ids.append(job)  # cancelled at teardown
    env = {**slurm_cluster.env, "SLURMSCHED_CONFIG": os.devnull, "PYTHONIOENCODING": "latin-1",
           "SLURMSCHED_DB_URL": f"sqlite:///{tmp_path / 'h.db'}"}  # predict reads the daemon's last prediction
    subprocess.run([sys.executable, "-m", "slurmsched", "db", "upgrade"], env=env, capture_output=True, check=True,
                   timeout=60)
    queue = subprocess.run([sys.executable, "-m", "slurmsched", "queue"], env=env, capture_output=True,
                           timeout=60)
    assert queue.returncode == 0, queue.stderr
    lines = queue.stdout.decode("latin-1").splitlines()
    header = next(line for line in lines if line.startswith("JOBID"))
    (row,) = [line for line in lines if line.startswith(f"{job} ")]
    assert "  é?x-sst-" in row
    assert row.index(" PENDING") == header.index(" STATE")
    predict = subprocess.run([sys.executable, "-m", "slurmsched", "predict", str(job)], env=env,
                             capture_output=True, timeout=60)
    assert predict.returncode == 0, predict.stderr
    assert predict.stdout.decode("latin-1").startswith(f"job {job} (") and f"é?x-{slurm_jobs.prefix}, PENDING" in \
        predict.stdout.decode("latin-1")


@needs_pyslurm
def test_pyslurm_backend_agrees_with_the_cli_backend(gateway, slurm_cluster, slurm_jobs):
    py = PyslurmGateway(slurm_conf=str(slurm_cluster.conf), env=slurm_cluster.env)
    job = slurm_jobs.submit("-H", "--gres=gpu:a100:2", "-N2", "-t", "5", name="pyslurm", wrap="true")
    via_cli, via_py = live_job(gateway, job), next(j for j in py.snapshot().jobs if j.job_id == job)
    for field in ("name", "user", "state", "partition", "gpus", "gpu_type", "gres_per_node", "time_limit_s",
                  "nodes", "submit_time"):
        assert getattr(via_py, field) == getattr(via_cli, field), field
    outcomes = py.apply([SetSiteFactor(job, 300), SetSiteFactor(job, 0), SetFeatures(job, "nosuchfeature"),
                         SetFeatures(job, "a100")])
    assert [o.ok for o in outcomes] == [True, True, False, True]
    assert live_job(gateway, job).features == "a100"
    assert {n.name for n in py.snapshot().nodes} == {n.name for n in gateway.snapshot().nodes}
