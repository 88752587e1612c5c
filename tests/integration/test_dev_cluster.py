"""The dev cluster itself (contrib/dev-cluster): the Slurm facts every other part relies on."""

from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm

DEV_CLUSTER = Path(__file__).resolve().parents[2] / "contrib" / "dev-cluster"
UP_SH, DOWN_SH = DEV_CLUSTER / "up.sh", DEV_CLUSTER / "down.sh"
EXPECTED_GRES = {"gpu01": ("a100", 8), "gpu02": ("a100", 8), "gpu03": ("v100", 4), "gpu04": ("v100", 4)}


def _sacct_line(cluster, job_id: int, name: str, timeout: float = 15) -> list[str]:
    """Poll sacct until the job is recorded finished under its name; return its -P fields.

    slurmdbd on 22.05 first records a batch job under the name "allocation" and gets the
    real name a second or so later (also after the job has completed).
    """
    deadline = time.monotonic() + timeout
    while True:
        out = cluster.run("sacct", "-X", "-n", "-P", "-j", str(job_id),
                          "-o", "JobID,JobName,State,AllocTRES,NodeList", check=False).stdout
        fields = out.strip().split("|") if out.strip() else []
        if fields and fields[1] == name and fields[2] == "COMPLETED":
            return fields
        assert time.monotonic() < deadline, f"sacct has no finished record of job {job_id} after {timeout}s: {out!r}"
        time.sleep(0.5)


def test_nodes_up_with_two_gpu_types(slurm_cluster) -> None:
    out = slurm_cluster.run("sinfo", "-h", "-N", "-o", "%N|%G|%t|%P").stdout
    seen: dict[str, tuple[str, int]] = {}
    partitions: set[str] = set()
    for line in out.splitlines():
        node, gres, state, partition = line.split("|")
        gpu, gpu_type, count = gres.split(":")
        assert gpu == "gpu"
        seen[node] = (gpu_type, int(count))
        partitions.add(partition.rstrip("*"))
        assert state in {"idle", "mix", "alloc", "comp"}, f"{node} is {state}"
    assert seen == EXPECTED_GRES
    assert partitions == {"gpu", "short"}


def test_topology_has_two_leaves_under_a_spine(slurm_cluster) -> None:
    out = slurm_cluster.run("scontrol", "show", "topology").stdout
    switches = dict(re.findall(r"SwitchName=(\S+) (.*)", out))
    assert "Nodes=gpu01,gpu02" in switches["leaf1"] and "Level=0" in switches["leaf1"]
    assert "Nodes=gpu03,gpu04" in switches["leaf2"] and "Level=0" in switches["leaf2"]
    assert "Switches=leaf1,leaf2" in switches["spine"] and "Level=1" in switches["spine"]


def test_switches_keep_two_node_job_on_one_leaf(slurm_cluster, slurm_jobs,
                                                tmp_path: Path) -> None:
    out = tmp_path / "nodes.out"
    job = slurm_jobs.submit("-N2", "--switches=1", f"--output={out}", name="switch",
                            wrap="echo $SLURM_JOB_NODELIST")
    slurm_jobs.wait_state(job, {"COMPLETED"}, timeout=60)
    assert out.read_text().strip() in {"gpu[01-02]", "gpu[03-04]"}


@pytest.mark.parametrize(("gpu_type", "count", "nodes"), [("a100", 3, {"gpu01", "gpu02"}),
                                                          ("v100", 2, {"gpu03", "gpu04"})])
def test_gpu_job_gets_devices_and_is_accounted(slurm_cluster, slurm_jobs,
                                               tmp_path: Path, gpu_type: str, count: int,
                                               nodes: set[str]) -> None:
    out = tmp_path / "job.out"
    job = slurm_jobs.submit(f"--gres=gpu:{gpu_type}:{count}", f"--output={out}", name=f"gpu-{gpu_type}",
                            wrap='echo "$CUDA_VISIBLE_DEVICES|$SLURMD_NODENAME"')
    slurm_jobs.wait_state(job, {"COMPLETED"}, timeout=60)
    devices, node = out.read_text().strip().split("|")
    assert len(devices.split(",")) == count and all(d.isdigit() for d in devices.split(","))
    assert node in nodes
    started = time.monotonic()
    job_id, _, _, tres, node_list = _sacct_line(slurm_cluster, job, f"{slurm_jobs.prefix}gpu-{gpu_type}")
    assert time.monotonic() - started < 15
    assert (int(job_id), node_list) == (job, node)
    assert f"gres/gpu:{gpu_type}={count}" in tres.split(",")


def test_site_factor_update_shows_in_sprio(slurm_cluster, slurm_jobs) -> None:
    blocker = slurm_jobs.submit("-w", "gpu03", "--gres=gpu:v100:4", name="blocker", wrap="sleep 120")
    slurm_jobs.wait_state(blocker, {"RUNNING"})
    waiting = slurm_jobs.submit("-w", "gpu03", "--gres=gpu:v100:1", name="waiting", wrap="true")
    slurm_jobs.wait_state(waiting, {"PENDING"})
    slurm_cluster.run("scontrol", "update", f"JobId={waiting}", "SiteFactor=4321")
    rows = dict(line.split("|", 1) for line in
                slurm_cluster.run("sprio", "-h", "-o", "%i|%S").stdout.split())
    assert rows[str(waiting)] == "4321"


def test_up_again_is_a_fast_no_op(slurm_cluster) -> None:
    run_dir = slurm_cluster.state_dir / "run"
    pids_before = {p.name: p.read_text() for p in run_dir.glob("*.pid")}
    started = time.monotonic()
    proc = subprocess.run(["bash", str(UP_SH)], env=slurm_cluster.env, capture_output=True, text=True,
                          check=True, timeout=60)
    elapsed = time.monotonic() - started
    assert f"export SLURM_CONF={slurm_cluster.conf}" in proc.stdout.splitlines()
    assert (slurm_cluster.state_dir / "env.sh").read_text() == proc.stdout
    assert {p.name: p.read_text() for p in run_dir.glob("*.pid")} == pids_before
    assert elapsed < 10, f"up.sh took {elapsed:.1f}s on a running cluster"


@pytest.mark.slow
def test_second_instance_runs_beside_and_stops_cleanly(slurm_cluster, tmp_path: Path) -> None:
    """A second instance on other ports works, and down.sh --purge stops only that one."""
    state = tmp_path / "second"
    port = int(slurm_cluster.env["SLURMSCHED_DEV_PORT"]) + 50
    env = {**os.environ, "SLURMSCHED_DEV_STATE": str(state), "SLURMSCHED_DEV_PORT": str(port)}
    env.pop("SLURM_CONF", None)
    main_pids = {p.name: p.read_text() for p in (slurm_cluster.state_dir / "run").glob("*.pid")}
    try:
        up = subprocess.run(["bash", str(UP_SH)], env=env, capture_output=True, text=True, timeout=300)
        assert up.returncode == 0, up.stderr
        env["SLURM_CONF"] = str(state / "etc" / "slurm.conf")
        name = f"sst-second-{uuid.uuid4().hex[:8]}"
        job = subprocess.run(["sbatch", "--parsable", "-o", "/dev/null", "-J", name, "--gres=gpu:a100:1",
                              "--wrap", "sleep 300"], env=env, capture_output=True, text=True,
                             check=True).stdout.strip()
        theirs = subprocess.run(["squeue", "-h", "-o", "%i|%j"], env=env, capture_output=True, text=True,
                                check=True).stdout.split()
        assert theirs == [f"{job}|{name}"]
        assert name not in slurm_cluster.run("squeue", "-h", "-o", "%j").stdout.split()
        wait_running = time.monotonic() + 30
        while subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], env=env, capture_output=True,
                             text=True).stdout.strip() != "RUNNING":
            assert time.monotonic() < wait_running, "second instance's job never started"
            time.sleep(0.2)
    finally:
        down = subprocess.run(["bash", str(DOWN_SH), "--purge"], env=env, capture_output=True, text=True,
                              timeout=120)
    assert down.returncode == 0, down.stderr
    assert not state.exists()
    leftovers = [p for p in os.listdir("/proc") if p.isdigit() and _environ_has(p, f"SLURMSCHED_DEV_STATE={state}")]
    assert leftovers == []
    assert {p.name: p.read_text() for p in (slurm_cluster.state_dir / "run").glob("*.pid")} == main_pids
    assert slurm_cluster.run("scontrol", "ping").returncode == 0


def test_an_instance_whose_ports_overlap_a_running_one_stops_before_starting_anything(
        slurm_cluster, tmp_path: Path) -> None:
    state = tmp_path / "overlapping"
    main_port = int(slurm_cluster.env["SLURMSCHED_DEV_PORT"])
    env = {**os.environ, "SLURMSCHED_DEV_STATE": str(state), "SLURMSCHED_DEV_PORT": str(main_port + 1)}
    env.pop("SLURM_CONF", None)
    up = subprocess.run(["bash", str(UP_SH)], env=env, capture_output=True, text=True, timeout=120)
    assert up.returncode != 0
    # slurmdbd (PORT+1) and MariaDB (PORT+2) of the running instance are named.
    assert re.search(rf"port\(s\) {main_port + 1} {main_port + 2}\b.* already in use", up.stderr), up.stderr
    assert list((state / "run").glob("*.pid")) == []
    assert [p for p in os.listdir("/proc") if p.isdigit() and _environ_has(p, f"SLURMSCHED_DEV_STATE={state}")] == []
    assert slurm_cluster.run("scontrol", "ping").returncode == 0


def _environ_has(pid: str, entry: str) -> bool:
    try:
        return entry.encode() in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
