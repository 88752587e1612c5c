"""history stats' summary on hand-made job attempts (no database needed)."""

from __future__ import annotations

import pytest

from slurmsched.model import JobRecord, JobState
from slurmsched.store.stats import summarize


def job(user: str, partition: str, run: float | None, limit: int | None) -> JobRecord:
    start = None if run is None else 100.0
    return JobRecord(job_id=1, user=user, submit_time=0.0, partition=partition, state=JobState.COMPLETED,
                     start_time=start, end_time=None if run is None else start + run, time_limit_s=limit)


def test_counts_percentiles_and_overshoot() -> None:
    jobs = [job("a", "gpu", 100, 1000), job("a", "gpu", 200, 400), job("a", "short", 300, 300),
            job("b", "gpu", 400, 8000), job("b", "gpu", None, 3600), job("c", "short", 0, None)]
    s = summarize(jobs)
    assert (s.jobs, s.with_runtime) == (6, 5)
    assert s.runtime_s.p50 == pytest.approx(200)
    assert s.runtime_s.p10 == pytest.approx(40)
    o = s.limit_overshoot
    assert o.jobs == 4
    assert o.median_ratio == pytest.approx((2 + 10) / 2)  # ratios 10, 2, 1, 20
    assert o.median_excess_s == pytest.approx((200 + 900) / 2)  # excesses 900, 200, 0, 7600
    assert (o.share_over_2x, o.share_over_10x, o.share_at_limit) == (0.5, 0.25, 0.25)
    assert [(g.name, g.jobs) for g in s.users] == [("a", 3), ("b", 2), ("c", 1)]
    assert s.users[1].runtime_p50_s == 400 and s.users[1].median_limit_ratio == 20
    assert s.users[2].median_limit_ratio is None
    assert [(g.name, g.jobs) for g in s.partitions] == [("gpu", 4), ("short", 2)]
    assert [g.name for g in summarize(jobs, top=1).users] == ["a"]


def test_zero_second_jobs_count_as_one_second() -> None:
    s = summarize([job("a", "p", 0, 60)])
    assert s.limit_overshoot.median_ratio == 60


def test_empty_history() -> None:
    s = summarize([])
    assert (s.jobs, s.runtime_s, s.limit_overshoot, s.users) == (0, None, None, ())
