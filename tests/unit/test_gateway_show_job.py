"""``scontrol -a -o show job`` text -> switch requests (what 22.05's squeue JSON leaves out).

The fixture is real output of Slurm 22.05.8 (dev cluster, ``max_switch_wait=3600``): jobs
submitted with ``--switches=1@10:00``, none, ``--switches=2``, ``--switches=1`` (wait
defaults to ``max_switch_wait``), ``--switches=1@2-00:00:00`` (capped to 1 h) with
``--mail-user='x Switches=9@1'``, a pending array with ``--switches=1@5:00``, and two
jobs whose names hold a newline forging a line for job 3 and job 10 ("Switches=0").
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from slurmsched.gateway.parse import parse_squeue
from slurmsched.gateway.show_job import SHOW_JOBS_ARGS, parse_switch_requests, with_switch_requests
from slurmsched.model import JobRecord, JobState

TEXT = (Path(__file__).resolve().parents[1] / "fixtures" / "slurm-json" / "22.05"
        / "scontrol_show_job.txt").read_text()


def test_requests_of_the_wanted_jobs_from_real_output():
    assert parse_switch_requests(TEXT, {1, 2, 5, 7, 8, 9}) == {
        1: (1, 600),   # --switches=1@10:00
        2: (0, None),  # no request: scontrol prints no Switches= at all
        5: (1, 3600),  # --switches=1: the wait is max_switch_wait
        7: (1, 300),   # a pending array job, by its id
        8: (1, 600),
        9: (0, None),
    }


def test_only_wanted_jobs_are_reported():
    assert parse_switch_requests(TEXT, {8}) == {8: (1, 600)}
    assert parse_switch_requests(TEXT, set()) == {}


def test_a_line_forged_by_a_job_name_can_only_add_a_request():
    # job 11's name is "h5sw\nJobId=10 Switches=0": job 10 (Switches=2@01:00:00) shows on two lines
    requests = parse_switch_requests(TEXT, {3, 4, 10, 11})
    assert requests[10] == (2, 3600) and requests[3] == (2, 3600)  # the real request wins over "none"
    assert requests[11] == (0, None) and requests[4] == (0, None)  # the forgers' own truncated lines
    forged = "JobId=12 JobName=a Switches=3@00:01:00 Power= \nJobId=12 JobName=b Power= \n"
    assert parse_switch_requests(forged, {12}) == {12: (3, 60)}  # a forged request is believed: harmless


def test_free_text_imitating_the_field_does_not_beat_the_real_one():
    # job 6: Switches=1@01:00:00 Power= ... MailUser=x Switches=9@1
    assert parse_switch_requests(TEXT, {6}) == {6: (1, 3600)}
    # job 4's comment "Switches=7@1:00 x" comes before its (absent) real field and has no Power= after it
    assert parse_switch_requests(TEXT, {4}) == {4: (0, None)}


def test_waits_in_days_unlimited_and_odd_lines():
    text = "\n".join([
        "JobId=21 JobName=a Switches=3@1-02:00:00 Power= TresPerNode=gres:gpu:8 ",
        "JobId=22 JobName=b Switches=1@UNLIMITED Power= ",
        "JobId=23 JobName=c Switches=x@soon Power= ",
        "JobId=abc JobName=d Switches=1@00:01:00 Power= ",
        "JobId=\u00b2 JobName=e",  # a superscript two: isdigit() but not int()
        "   JobId=24 is not at the start of a line",
        "JobId=25",
        "No jobs in the system",
        "",
    ])
    assert parse_switch_requests(text, {21, 22, 23, 24, 25}) == {21: (3, 93600), 22: (1, None), 23: (0, None),
                                                                 25: (0, None)}


def test_arguments():
    assert SHOW_JOBS_ARGS == ("-a", "-o", "show", "job")


def _job(job_id: int, nodes: int = 2, state: JobState = JobState.PENDING, switches: int | None = None) -> JobRecord:
    return JobRecord(job_id=job_id, user="u", submit_time=1.0, state=state, nodes=nodes, gpus=8, switches=switches)


def test_with_switch_requests_asks_only_for_pending_multi_node_jobs_without_the_field():
    calls: list[str] = []

    def list_jobs() -> str:
        calls.append("scontrol -a -o show job")
        return TEXT

    jobs = [_job(8), _job(9), _job(10), _job(5, nodes=1), _job(6, state=JobState.RUNNING), _job(7, switches=0),
            _job(404)]
    out = {j.job_id: (j.switches, j.switch_wait_s) for j in with_switch_requests(jobs, list_jobs)}
    assert calls == ["scontrol -a -o show job"]  # one listing for all of them
    assert out == {8: (1, 600), 9: (0, None), 10: (2, 3600),
                   5: (None, None), 6: (None, None), 7: (0, None),  # single-node, running, known: not asked
                   404: (None, None)}  # gone from the listing: still unknown


def test_no_call_when_the_json_carries_switch_fields():
    jobs = parse_squeue((Path(__file__).resolve().parents[1] / "fixtures" / "slurm-json" / "25.11"
                         / "squeue.json").read_bytes())
    assert all(j.switches is not None for j in jobs)  # 0 or the request, never unknown
    jobs = [replace(j, state=JobState.PENDING) if j.nodes > 1 else j for j in jobs]  # as if all waited

    def fail() -> str:
        raise AssertionError("scontrol must not run")

    assert with_switch_requests(jobs, fail) == jobs
