"""What the command line prints of other people's text."""

from __future__ import annotations

import dataclasses

from slurmsched.cli.cluster import render_snapshot
from slurmsched.cli.daemon import jobs_ahead
from slurmsched.cli.output import columns, fit, printable
from slurmsched.model import ClusterSnapshot, JobRecord, JobState


def test_control_characters_in_a_name_reach_no_terminal():
    assert printable("train\x1b]0;pwned\x07\nnext\tline") == "train?]0;pwned??next?line"
    assert printable("名前 🚀 x'; rm -rf / #") == "名前 🚀 x'; rm -rf / #"  # printable text stays as it is


def test_queue_columns_line_up_with_wide_names():
    """A CJK character takes two terminal columns: the cut and the padding count columns, not characters."""
    wide = JobRecord(job_id=1, user="u", name="ユニコード名前" * 20, submit_time=0.0, state=JobState.PENDING, gpus=1)
    plain = dataclasses.replace(wide, job_id=2, name="train")
    table = [line for line in render_snapshot(ClusterSnapshot(0.0, "c", (wide, plain), ())) if " PENDING" in line]
    assert len(table) == 2 and len({columns(line.split(" PENDING")[0]) for line in table}) == 1
    assert columns(fit("ユニコード名前", 6)) == 6 and fit("ユニコード名前", 6) == "ユニ~ "


def test_queue_shows_array_tasks_and_heterogeneous_components_as_squeue_does():
    plain = JobRecord(job_id=9, user="u", submit_time=0.0, state=JobState.PENDING)
    task = dataclasses.replace(plain, job_id=12, array_job_id=10, array_task_id=2)
    component = dataclasses.replace(plain, job_id=21, het_job_id=20, het_job_offset=1)
    lines = render_snapshot(ClusterSnapshot(0.0, "c", (plain, task, component), ()))
    assert sorted(line.split()[0] for line in lines if " PENDING" in line) == ["10_2", "20+1", "9"]


def test_queue_fits_a_terminal_by_cutting_user_name_and_reason():
    """On a narrow terminal the free-text columns give up room, the one with the most to spare first, down to 8 each."""
    job = JobRecord(job_id=7, user="a-rather-long-user", name="n" * 40, submit_time=0.0, state=JobState.PENDING,
                    gpus=2, time_limit_s=3600, reason="ReqNodeNotAvail, UnavailableNodes:gpu[01-12]")
    snap = ClusterSnapshot(0.0, "c", (job,), ())
    full = [line for line in render_snapshot(snap) if line.startswith(("JOBID", "7 "))]
    fitted = [line for line in render_snapshot(snap, 100) if line.startswith(("JOBID", "7 "))]
    assert max(map(columns, full)) > 120 and max(map(columns, fitted)) <= 100
    assert "a-rather~" in fitted[1] and "nnnnnnnnn~" in fitted[1] and fitted[1].endswith("ReqNodeNo~")
    tiny = [line for line in render_snapshot(snap, 20) if line.startswith("7 ")]
    assert "a-rathe~" in tiny[0] and "gpu[01-12]" not in tiny[0]  # never below 8 columns: wider than 20


def test_jobs_ahead_follow_slurms_order_and_a_held_job_is_in_no_line() -> None:
    """Equal priorities go by submit time (then job id); another partition's jobs, held jobs
    (priority 0) and jobs not eligible before a later --begin are ahead of nobody."""
    def job(job_id: int, priority: int, submit: float, partition: str = "gpu",
            eligible: float | None = None) -> JobRecord:
        return JobRecord(job_id=job_id, user="u", name="n", submit_time=submit, state=JobState.PENDING,
                         partition=partition, priority=priority, eligible_time=eligible)

    pending = [job(1, 500, 10.0), job(2, 500, 20.0), job(3, 500, 20.0), job(4, 900, 30.0), job(5, 0, 0.0),
               job(6, 999, 0.0, partition="short"), job(7, 2000, 5.0, eligible=7200.0),
               job(8, 100, 5.0, eligible=50.0)]
    assert [jobs_ahead(j, pending, now=100.0) for j in pending] == [1, 2, 3, 0, None, 0, None, 4]
