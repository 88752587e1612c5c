"""The gateway reads Slurm 24.11's live JSON, from the daemon container (``slurmsched queue --json``).

Checked against what the controller itself says (``scontrol``/``squeue`` in its container):
GPU counts and types, multi-node and array jobs, jobs without GPUs, unlimited and set time
limits, a hostile name, and the nodes' GRES; and a job's memory request, the same pending
(``squeue``) and finished (``sacct``).
"""

from __future__ import annotations

import json

import pytest

from slurmsched.gateway.parse import accounting_name, parse_sacct, parse_squeue
from slurmsched.model import JobState
from slurmsched.predict.features import kind
from slurmsched.gateway.show_partition import parse_partitions

pytestmark = pytest.mark.compose

HOSTILE = "x'; rm -rf / #\n\"$(id)\" ÄÖ 名前 🚀"


def test_queue_json_matches_the_controller(compose, compose_jobs):
    jobs = compose_jobs
    compose.slurmsched("pause")          # SiteFactors below are set by hand and must stay put
    blocker = jobs.submit("-w", "gpu02", "--exclusive", "--gres=gpu:a100:8", "-t", "10", name="blocker")
    multi = jobs.submit("-N", "2", "--gres=gpu:v100:4", "--switches=1", "-t", "30", name="multi")
    cpu = jobs.submit("-n", "2", "-p", "short", "-t", "7", name="cpu")
    hostile = jobs.submit("--gres=gpu:1", "-p", "short", "-t", "5", name=HOSTILE)
    array = jobs.submit("--array=0-2", "-w", "gpu02", "--gres=gpu:a100:8", name="array")
    compose.wait("the blocker to run", lambda: jobs.states().get(blocker) == "RUNNING", timeout=60)
    compose.slurm("scontrol", "update", f"JobId={array}", "SiteFactor=123")
    # sprio lists a job only once the controller has computed its priority factors
    compose.wait("sprio to show the array's SiteFactor", lambda: 123 in compose.site_factors().values(), timeout=60)

    snap = json.loads(compose.slurmsched("queue", "--json").stdout)
    mine = {job["job_id"]: job for job in snap["jobs"] if job["name"].startswith(jobs.prefix)}
    missing = {blocker, multi, cpu, hostile, array} - set(mine)
    assert not missing, (missing, compose.slurm("squeue", "-h", "-o", "%A|%i|%T|%R").stdout)
    # byte for byte, but for its '"', shown as accounting stores it ('`'): one name live and in history
    assert '"' in HOSTILE and mine[hostile]["name"] == accounting_name(jobs.prefix + HOSTILE)
    assert (mine[hostile]["gpus"], mine[hostile]["partition"], mine[hostile]["time_limit_s"]) == (1, "short", 300)
    assert (mine[multi]["nodes"], mine[multi]["gpus"], mine[multi]["gpu_type"]) == (2, 8, "v100")
    assert mine[multi]["time_limit_s"] == 1800
    assert (mine[cpu]["gpus"], mine[cpu]["gpu_type"], mine[cpu]["cpus"], mine[cpu]["time_limit_s"]) == (0, None, 2, 420)
    assert mine[blocker]["state"] == "RUNNING" and mine[blocker]["gpus"] == 8
    assert mine[blocker]["time_limit_s"] == 600
    # a pending array whose tasks have not split off yet is one record, as in squeue
    assert [j["job_id"] for j in mine.values() if j["array_job_id"] == array] == [array]
    task = mine[array]
    assert (task["array_task_id"], task["state"], task["gpus"], task["gpu_type"]) == (None, "PENDING", 8, "a100")
    assert task["time_limit_s"] is None                                       # gpu partition: UNLIMITED

    assert task["site_factor"] == 123                                         # from sprio
    # sprio agrees; by then the controller may have split a task off the array record
    # (a start attempt does), which sprio lists under the task's own job id
    ids = {int(i) for i in compose.slurm("squeue", "-h", "-r", "-j", str(array), "-o", "%A").stdout.split()}
    factors = compose.site_factors()
    assert {factors[i] for i in ids if i in factors} == {123}, (ids, factors)

    nodes = {n["name"]: n for n in snap["nodes"]}
    assert sorted(nodes) == ["gpu01", "gpu02", "gpu03", "gpu04"]
    for name, gpu_type, count in (("gpu01", "a100", 8), ("gpu02", "a100", 8), ("gpu03", "v100", 4),
                                  ("gpu04", "v100", 4)):
        assert [(g["name"], g["type"], g["count"]) for g in nodes[name]["gres"]] == [("gpu", gpu_type, count)]
        assert sorted(nodes[name]["partitions"]) == ["gpu", "short"]
    used = {(g["type"], g["count"]) for g in nodes["gpu02"]["gres_used"]}
    assert used == {("a100", 8)}


def test_partitions_parse_from_2411(compose):
    """``scontrol -a -o show partition`` (what ``simulate --nodes-from-slurm`` reads) on 24.11."""
    compose.slurm("scontrol", "update", "PartitionName=short", "PriorityJobFactor=4", "PriorityTier=2")
    try:
        text = compose.slurm("scontrol", "-a", "-o", "show", "partition").stdout
    finally:
        compose.slurm("scontrol", "update", "PartitionName=short", "PriorityJobFactor=1", "PriorityTier=1")
    assert [(p.name, p.tier, p.default, p.priority_factor) for p in parse_partitions(text)] == [
        ("gpu", 1, True, 0.25), ("short", 2, False, 1.0)]


def test_a_job_is_the_same_kind_pending_and_finished_on_2411(compose, compose_jobs):
    """24.11's sacct writes the memory request as ``memory_per_cpu``/``memory_per_node``
    (22.05: ``memory``), and its requested ``mem`` TRES as a whole node's for ``--mem=0``:
    the predictor's key for a job (:func:`kind`) must read the same from both commands."""
    asks = {"none": (), "per-node": ("--mem=700",), "per-cpu": ("--mem-per-cpu=300", "-n", "3"),
            "whole-node": ("--mem=0",)}
    ids = {compose_jobs.submit("-H", "-p", "short", "-t", "5", *args, name=label, wrap="true"): label
           for label, args in asks.items()}
    pending = {j.job_id: j for j in parse_squeue(compose.slurm("squeue", "--json").stdout) if j.job_id in ids}
    assert set(pending) == set(ids)
    compose.slurm("scontrol", "release", *map(str, ids))

    def finished():
        doc = compose.slurm("sacct", "--json", "-j", ",".join(map(str, ids))).stdout
        done = {r.job_id: r for r in parse_sacct(doc) if r.state is JobState.COMPLETED}
        return done if set(done) == set(ids) else None

    done = compose.wait("accounting to record the jobs", finished, timeout=90)
    assert {ids[i]: kind(pending[i]) for i in ids} == {ids[i]: kind(done[i]) for i in ids}
    per_cpu = {ids[i]: kind(done[i])[1] for i in ids}
    assert (per_cpu["per-node"], per_cpu["per-cpu"], per_cpu["whole-node"]) == (700, 300, 0)
    assert per_cpu["none"] > 0  # the cluster's DefMemPerCPU
