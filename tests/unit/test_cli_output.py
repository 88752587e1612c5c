"""What the command line prints of other people's text."""

from __future__ import annotations

import dataclasses

from slurmsched.cli.cluster import render_snapshot
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
