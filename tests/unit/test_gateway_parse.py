"""Parsers for Slurm's JSON of both shapes (22.05 plain numbers; 23.11+ wrapped numbers).

Fixtures are small extracts of real output (tests/fixtures/slurm-json/<version>/).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurmsched.errors import SlurmCommandFailed, SlurmParseError, SlurmUnavailable
from slurmsched.gateway.parse import parse_sacct, parse_sinfo, parse_squeue
from slurmsched.gateway.slurm_config import parse_duration, parse_show_config, scheduler_config
from slurmsched.gateway.sprio import parse_sprio
from slurmsched.model import GresRequest, JobState
from slurmsched.predict.features import kind

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm-json"


def raw(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def by_id(records):
    return {r.job_id: r for r in records}


# --- squeue: 22.05 ------------------------------------------------------------------

def test_squeue_2205_drops_finished_jobs_and_keeps_live_ones():
    jobs = by_id(parse_squeue(raw("22.05/squeue.json")))
    assert sorted(jobs) == [58, 60, 62]  # 5, 31, 33, 57 are CANCELLED/COMPLETED
    everything = parse_squeue(raw("22.05/squeue.json"), include_finished=True)
    assert {j.state for j in everything} >= {JobState.CANCELLED, JobState.COMPLETED}


def test_squeue_2205_pending_job_fields_and_site_factor():
    job = by_id(parse_squeue(raw("22.05/squeue.json"), {62: 4242, 58: 7}))[62]
    assert job.state is JobState.PENDING
    assert (job.name, job.user, job.partition, job.reason) == ("sample-pend", "root", "gpu", "Resources")
    assert job.submit_time == 1795347196.0 and isinstance(job.submit_time, float)
    assert job.start_time is None  # squeue's start_time of a pending job is only a forecast
    assert job.time_limit_s == 600
    assert (job.gpus, job.gpu_type) == (4, "a100")
    assert job.gres_per_node == (GresRequest("gpu", "a100", 4),)
    assert job.site_factor == 4242
    assert (job.nice, job.priority, job.memory_mb, job.cpus, job.features) == (10, 1040, 2048, 2, "a100")


def test_squeue_2205_running_job_unlimited_and_no_site_factor():
    job = by_id(parse_squeue(raw("22.05/squeue.json"), {58: 7}))[58]
    assert job.state is JobState.RUNNING
    assert job.time_limit_s is None  # time_limit null = unlimited
    assert job.start_time == 1795347196.0 and job.end_time is None
    assert job.site_factor is None  # only pending jobs carry one
    assert job.node_list == "gpu01"


def test_squeue_2205_arrays_multinode_cpu_only_requeued_gpus_per_job():
    jobs = by_id(parse_squeue(raw("22.05/squeue_scenarios.json")))
    requeued = jobs[11]
    assert requeued.state is JobState.PENDING and requeued.restart_count == 1
    assert requeued.reason == "BeginTime"
    multi = jobs[12]
    assert (multi.nodes, multi.gpus, multi.gpu_type) == (2, 16, "a100")  # 8 per node x 2
    assert multi.time_limit_s is None  # 365 days = slurmctld's INFINITE
    array = jobs[14]
    assert (array.array_job_id, array.array_task_id) == (14, None)  # the pending rest of 14_[0-2]
    assert (array.gpus, array.gpu_type) == (1, None)  # --gres=gpu:1 is untyped
    assert jobs[15].gres_per_node == (GresRequest("gpu", "a100", 4),) and jobs[15].gpus == 8
    cpu_only = jobs[16]
    assert (cpu_only.gpus, cpu_only.gpu_type, cpu_only.gres_per_node) == (0, None, ())
    gpus_per_job = jobs[17]  # --gpus=3 -> tres_per_job
    assert (gpus_per_job.gpus, gpus_per_job.partition) == (3, "short")
    assert 18 not in jobs  # FAILED


def test_squeue_2205_heterogeneous_job_components():
    jobs = by_id(parse_squeue(raw("22.05/squeue_hetjob.json"), {2489: 3, 2490: 3}))  # sbatch with "#SBATCH hetjob"
    assert sorted(jobs) == [2489, 2490]
    leader, other = jobs[2489], jobs[2490]
    assert (leader.het_job_id, leader.het_job_offset, leader.gpus) == (2489, 0, 1)
    assert (other.het_job_id, other.het_job_offset, other.gpus) == (2489, 1, 2)
    assert other.site_factor == 3 and other.state is JobState.PENDING
    plain = by_id(parse_squeue(raw("22.05/squeue.json")))[62]  # het_job_id 0: no heterogeneous job
    assert (plain.het_job_id, plain.het_job_offset) == (None, None)


# --- squeue: 25.11 ------------------------------------------------------------------

def test_squeue_2511_heterogeneous_job_numbers_are_wrapped():
    doc = json.loads(raw("25.11/squeue.json"))
    plain = doc["jobs"][1]
    assert plain["het_job_id"] == {"set": True, "infinite": False, "number": 0}
    assert by_id(parse_squeue(json.dumps(doc)))[plain["job_id"]].het_job_id is None
    for offset, job in enumerate(doc["jobs"][1:3]):  # the same two jobs as components of one
        job["het_job_id"] = {"set": True, "infinite": False, "number": 72}
        job["het_job_offset"] = {"set": True, "infinite": False, "number": offset}
    jobs = by_id(parse_squeue(json.dumps(doc)))
    assert [(jobs[i].het_job_id, jobs[i].het_job_offset) for i in (72, 73)] == [(72, 0), (72, 1)]


def test_squeue_2511_wrapped_numbers_and_state_lists():
    jobs = by_id(parse_squeue(raw("25.11/squeue.json"), {72: 500}))
    assert sorted(jobs) == list(range(71, 82))
    vit = jobs[72]
    assert vit.state is JobState.PENDING and vit.site_factor == 500
    assert vit.time_limit_s == 90 * 60 and vit.submit_time == 1795347329.0
    assert (vit.gpus, vit.gpu_type, vit.priority) == (4, "a100", 1649)
    assert jobs[73].switches == 1 and jobs[73].switch_wait_s == 300
    two_node = jobs[74]
    assert two_node.state is JobState.RUNNING and (two_node.nodes, two_node.gpus) == (2, 8)
    assert two_node.gres_per_node == (GresRequest("gpu", "a100", 4),)
    assert two_node.node_list == "n[2-3]" and two_node.start_time == 1795347330.0
    untyped = jobs[77]  # --gpus=3 got 1 a100 + 2 v100
    assert untyped.gpus == 3 and untyped.gpu_type == "v100" and untyped.gres_per_node == ()
    sweep = jobs[79]
    assert (sweep.array_job_id, sweep.array_task_id, sweep.gpus, sweep.gpu_type) == (79, None, 1, None)
    assert jobs[81].gpus == 0 and jobs[81].reason == ""


def test_both_shapes_give_the_same_kind_of_record():
    old = by_id(parse_squeue(raw("22.05/squeue.json")))[62]
    new = by_id(parse_squeue(raw("25.11/squeue.json")))[72]
    for field in ("job_id", "submit_time", "time_limit_s", "gpus", "priority", "nodes", "cpus"):
        assert type(getattr(old, field)) is type(getattr(new, field)), field


def test_squeue_2411_hostile_name_split_array_and_requeued_job():
    jobs = by_id(parse_squeue(raw("24.11/squeue.json"), {7: 250}))
    assert jobs[3].name.startswith("x'; rm -rf / #")
    tasks = {j.array_task_id: j for j in jobs.values() if j.array_job_id == 4}
    assert sorted(tasks) == [0, 1, 2] and tasks[1].job_id == 7 and tasks[1].site_factor == 250
    assert tasks[0].state is JobState.RUNNING and tasks[2].state is JobState.PENDING
    assert all(t.gpus == 8 and t.gpu_type == "a100" and t.time_limit_s is None for t in tasks.values())
    requeued = jobs[5]  # job_state ["PENDING", "REQUEUED"] in the live queue is pending
    assert requeued.state is JobState.PENDING and requeued.restart_count == 1 and requeued.gpus == 0


@pytest.mark.parametrize("version", ["22.05", "24.11", "25.11"])
def test_squeue_names_are_given_as_accounting_stores_them(version):
    # slurmdbd stores '"' in a job name as '`' (sacct shows quote`s for quote"s): live names follow
    document = json.loads(raw(f"{version}/squeue.json"))
    document["jobs"][0]["name"] = 'quote"s'
    assert parse_squeue(json.dumps(document), include_finished=True)[0].name == "quote`s"


# --- sinfo --------------------------------------------------------------------------

def test_sinfo_2205_nodes():
    nodes = {n.name: n for n in parse_sinfo(raw("22.05/sinfo.json"))}
    assert sorted(nodes) == ["gpu01", "gpu02", "gpu03", "gpu04"]
    a100 = nodes["gpu01"]
    assert a100.state == ("IDLE",) and a100.partitions == ("gpu", "a100")
    assert (a100.gpus(), a100.gpus("a100"), a100.gpus("v100"), a100.gpus_used()) == (8, 8, 0, 0)
    assert a100.features == ("a100", "leaf1") and a100.cpus == 16 and a100.memory_mb == 64000
    assert nodes["gpu03"].gres == (GresRequest("gpu", "v100", 4),)


def test_sinfo_2511_aggregated_rows_become_one_record_per_node():
    nodes = {n.name: n for n in parse_sinfo(raw("25.11/sinfo.json"))}
    assert sorted(nodes) == ["n1", "n2", "n3", "n4"]
    assert nodes["n1"].partitions == ("gpu", "hi")  # listed in two rows
    assert nodes["n3"].partitions == ("gpu",)
    assert nodes["n4"].gpus("v100") == 2 and nodes["n4"].gpus_used("v100") == 2
    assert nodes["n2"].state == ("MIXED", "PLANNED") and nodes["n2"].cpus == 8


# --- sacct --------------------------------------------------------------------------

def test_sacct_2205_records():
    jobs = by_id(parse_sacct(raw("22.05/sacct.json")))
    done = jobs[62]
    assert done.state is JobState.COMPLETED
    assert (done.start_time, done.end_time, done.runtime_s) == (1795347201.0, 1795347206.0, 5.0)
    assert (done.gpus, done.gpu_type, done.time_limit_s, done.exit_code) == (4, "a100", 600, 0)
    assert done.node_list == "gpu01" and done.features == "a100" and done.memory_mb == 2048


def test_a_job_that_asked_for_no_memory_has_none_in_accounting_as_in_the_queue():
    """Under ``CR_Core`` with no ``DefMemPerCPU`` (recorded on 22.05), sacct's requested
    ``mem`` is a whole node's (128000 MB) for a job that asked for none, while squeue shows
    it none: the predictor's key for the job (:func:`kind`) must be the same in both."""
    pending = by_id(parse_squeue(raw("22.05/squeue_cr_core.json")))
    done = by_id(parse_sacct(raw("22.05/sacct_cr_core.json")))
    assert [(r.job_id, r.memory_mb) for r in done.values()] == [(9, None), (10, 900)]
    assert {i: kind(j) for i, j in pending.items()} == {i: kind(r) for i, r in done.items()}
    assert kind(done[9]) == ("none", 0) and kind(done[10]) == ("per-cpu", 300)


def test_sacct_2205_requeued_attempts_and_unreliable_exit_codes():
    records = parse_sacct(raw("22.05/sacct_requeued.json"))
    attempts = [r for r in records if r.job_id == 2]
    assert [(r.state, r.restart_count) for r in attempts] == [(JobState.REQUEUED, 0), (JobState.CANCELLED, 1)]
    assert attempts[1].start_time is None  # the second attempt never started
    failed = by_id(records)[18]
    assert failed.state is JobState.FAILED and failed.exit_code is None  # 22.05 JSON says 0: not believed
    task = by_id(records)[8]
    assert (task.array_job_id, task.array_task_id, task.gpus, task.gpu_type) == (3, 0, 1, "v100")


def test_sacct_2205_job_cancelled_while_pending_never_started():
    """22.05 gives a job cancelled before it got nodes start = end (here 2 s after submit)."""
    doc = json.loads(raw("22.05/sacct_cancelled_pending.json"))
    assert doc["jobs"][0]["time"]["start"] == doc["jobs"][0]["time"]["end"]
    (job,) = parse_sacct(raw("22.05/sacct_cancelled_pending.json"))
    assert job.state is JobState.CANCELLED and job.end_time == doc["jobs"][0]["time"]["end"]
    assert (job.start_time, job.runtime_s, job.wait_s, job.node_list) == (None, None, None, "")


def test_sacct_2511_records():
    jobs = by_id(parse_sacct(raw("25.11/sacct.json")))
    assert jobs[34].restart_count == 1
    assert jobs[3].exit_code == 128 + 15  # SIGTERM
    assert jobs[56].state is JobState.COMPLETED and jobs[56].exit_code == 0
    assert (jobs[12].array_job_id, jobs[12].array_task_id) == (9, 0)
    untyped = jobs[66]  # requested gres/gpu=3, got 1 a100 + 2 v100
    assert (untyped.gpus, untyped.gpu_type, untyped.nodes) == (3, "v100", 2)
    assert jobs[11].gpus == 0
    pending = jobs[79]
    assert pending.state is JobState.PENDING and pending.start_time is None and pending.end_time is None


def test_sacct_2411_records():
    jobs = by_id(parse_sacct(raw("24.11/sacct.json")))
    assert jobs[1].state is JobState.COMPLETED and (jobs[1].gpus, jobs[1].gpu_type) == (2, "a100")
    assert jobs[1].time_limit_s is None  # {"set": false, "infinite": true}
    assert jobs[5].state is JobState.REQUEUED  # ["PENDING", "REQUEUED"]: this attempt ended in a requeue
    assert jobs[8].state is JobState.FAILED and jobs[8].exit_code == 3 and jobs[8].time_limit_s == 300


def test_sacct_stub_records_are_left_out():
    """Right after a job ends, 22.05 shows it named "allocation" with limit 0 for a second or two."""
    doc = json.loads(raw("22.05/sacct_placeholder.json"))
    assert doc["jobs"][0]["name"] == "allocation" and doc["jobs"][0]["time"]["limit"] == 0
    assert parse_sacct(raw("22.05/sacct_placeholder.json")) == []


def test_sacct_nothing_found_is_empty():
    assert parse_sacct(raw("22.05/sacct_nothing_found.json")) == []


# --- strictness ---------------------------------------------------------------------

def test_malformed_json_is_a_one_line_parse_error():
    with pytest.raises(SlurmParseError) as err:
        parse_squeue(raw("22.05/squeue_truncated.json"))
    message = str(err.value)
    assert message.startswith("squeue --json: output is not valid JSON") and "\n" not in message


@pytest.mark.parametrize("document, fragment", [
    (b"{}", "no top-level 'jobs' list"),
    (b'{"jobs": {}}', "no top-level 'jobs' list"),
    (b"[]", "expected a JSON object"),
    (b"", "not valid JSON"),
    (b'{"jobs": [{"job_id": 1, "job_state": 7}]}', "job 1: job_state must be a string or list"),
    (b'{"jobs": [{"job_state": "PENDING", "submit_time": 1}]}', "missing field 'job_id'"),
    (b'{"jobs": [{"job_id": 5, "job_state": "PENDING", "submit_time": "soon"}]}', "job 5: expected a number"),
    (b'{"jobs": [{"job_id": 5, "job_state": "PENDING", "submit_time": 1, "name": 3}]}', "expected a string"),
])
def test_wrong_shapes_raise_parse_errors_naming_the_problem(document, fragment):
    with pytest.raises(SlurmParseError) as err:
        parse_squeue(document)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_in_band_errors_from_slurm():
    with pytest.raises(SlurmUnavailable, match="Failed while looking for jobs"):
        parse_squeue(raw("22.05/squeue_unreachable.json"))
    doc = {"errors": [{"error_number": 1234, "description": "Access/permission denied"}], "jobs": []}
    with pytest.raises(SlurmCommandFailed, match="Access/permission denied"):
        parse_squeue(json.dumps(doc).encode())


def test_invalid_utf8_in_names_is_replaced_not_fatal():
    doc = raw("22.05/squeue.json").replace(b'"sample-pend"', b'"bad\xff\xfename"')
    job = by_id(parse_squeue(doc))[62]
    assert job.name == "bad\ufffd\ufffdname"


# --- sprio and scontrol show config -------------------------------------------------

def test_sprio_lines():
    assert parse_sprio((FIXTURES / "22.05/sprio.txt").read_text()) == {14: 0, 15: 0, 17: 0}
    assert parse_sprio("  72|500|1649\n73|-20|1131\n\n") == {72: 500, 73: -20}
    with pytest.raises(SlurmParseError, match="line 1"):
        parse_sprio("JOBID PARTITION PRIORITY\n")


def test_scheduler_config_from_scontrol_show_config():
    values = parse_show_config((FIXTURES / "22.05/scontrol_show_config.txt").read_text())
    assert values["ClusterName"] == "slurmsched"
    config = scheduler_config(values)
    assert config.priority_type == "priority/multifactor"
    assert (config.weight_age, config.weight_fairshare, config.weight_qos) == (10000, 10000, 0)
    assert config.priority_max_age_s == 86400 and config.weight_tres == ""
    assert config.topology_plugin == "topology/tree" and config.max_switch_wait_s == 3600
    assert (config.scheduler_type, config.select_type) == ("sched/backfill", "select/cons_tres")


def test_scheduler_config_defaults_and_errors():
    config = scheduler_config({"SchedulerParameters": "(null)", "TopologyPlugin": "(null)"})
    assert config.max_switch_wait_s == 300 and config.topology_plugin == ""
    with pytest.raises(SlurmParseError, match="scontrol show config"):
        scheduler_config({"PriorityWeightAge": "lots"})


@pytest.mark.parametrize("text, seconds", [
    ("7-00:00:00", 7 * 86400), ("00:05:00", 300), ("1:30", 90), ("15", 900), ("UNLIMITED", None),
])
def test_durations(text, seconds):
    assert parse_duration(text) == seconds
