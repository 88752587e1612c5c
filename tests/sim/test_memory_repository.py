"""MemoryJobRepository: the JobRepository contract in memory, transactions included."""

from __future__ import annotations

import pytest

from slurmsched.model import ClusterSnapshot, Decision, JobRecord, JobState, Prediction
from slurmsched.store.memory import MemoryJobRepository
from slurmsched.store.protocol import CycleKind


def finished(job_id: int, end: float, *, submit: float = 0.0, user: str = "u", cluster: str = "") -> JobRecord:
    return JobRecord(job_id=job_id, user=user, submit_time=submit, cluster=cluster, state=JobState.COMPLETED,
                     start_time=submit, end_time=end)


def test_history_is_ordered_by_end_and_filters_strictly_after_since() -> None:
    repo = MemoryJobRepository()
    assert repo.ingest_finished([finished(3, 30.0), finished(1, 10.0), finished(2, 20.0)]) == 3
    assert [j.job_id for j in repo.history()] == [1, 2, 3]
    assert [j.job_id for j in repo.history(since=10.0)] == [2, 3]
    assert [j.job_id for j in repo.history(limit=2)] == [2, 3]
    assert repo.history(since=30.0) == []


def test_ingest_upserts_by_attempt_and_moves_a_changed_end_time() -> None:
    repo = MemoryJobRepository(cluster="c1")
    repo.ingest_finished([finished(1, 10.0), finished(2, 20.0)])
    repo.ingest_finished([finished(1, 25.0)])
    assert [(j.job_id, j.end_time) for j in repo.history()] == [(2, 20.0), (1, 25.0)]
    repo.ingest_finished([finished(1, 40.0, submit=5.0)])  # a requeued attempt: its own row
    assert repo.count_jobs() == 3


def test_a_failed_transaction_leaves_nothing_behind() -> None:
    repo = MemoryJobRepository()
    repo.ingest_finished([finished(1, 10.0)])
    repo.set_cursor("sacct", 10.0)
    repo.record_applied(7, "SetSiteFactor", "0", "100")
    with pytest.raises(RuntimeError):
        with repo.transaction():
            cycle = repo.start_cycle(50.0, CycleKind.LIVE)
            repo.ingest_finished([finished(1, 12.0), finished(2, 20.0)])
            repo.set_cursor("sacct", 20.0)
            repo.record_applied(7, "SetSiteFactor", "100", "200")
            repo.forget_applied(7, "SetSiteFactor")
            repo.record_decisions(cycle, [Decision(7, "rank", "ranked")])
            repo.record_predictions(cycle, [Prediction(7, 60.0, 30.0, 90.0, "test")])
            repo.set_paused(True)
            raise RuntimeError("boom")
    assert [(j.job_id, j.end_time) for j in repo.history()] == [(1, 10.0)]
    assert repo.get_cursor("sacct") == 10.0
    assert [(c.job_id, c.original, c.current) for c in repo.applied_changes()] == [(7, "0", "100")]
    assert repo.decisions_for(7) == [] and repo.latest_prediction(7) is None
    assert not repo.is_paused()
    assert repo.recent_cycles() == []


def test_cycles_decisions_predictions_and_applied_changes() -> None:
    repo = MemoryJobRepository()
    with repo.transaction():
        cycle = repo.start_cycle(100.0, CycleKind.DRY_RUN)
        repo.record_predictions(cycle, [Prediction(5, 60.0, 30.0, 90.0, "rules")])
        repo.record_decisions(cycle, [Decision(5, "rank", "ranked", "short", score=1.0, rank=1)])
        repo.record_applied(5, "SetSiteFactor", None, "300")
        repo.record_applied(5, "SetSiteFactor", "300", "400")
        repo.finish_cycle(cycle, pending=1, running=0, actions=1, failed=0, timings={"plan": 0.5, "total": 1.0})
    second = repo.start_cycle(160.0, CycleKind.LIVE)
    repo.record_decisions(second, [Decision(5, "rank", "ranked", "short", score=1.0, rank=1),
                                   Decision(5, "SetSiteFactor", "ok", "why", "300", "400")])
    repo.finish_cycle(second, pending=1, running=0, actions=0, failed=0, timings={"plan": 0.25})
    assert [(t, d.kind) for t, d in repo.decisions_for(5)] == [(100.0, "rank"), (160.0, "SetSiteFactor")]
    assert repo.latest_prediction(5).source == "rules"
    assert [(c.original, c.current) for c in repo.applied_changes()] == [(None, "400")]
    cycles = repo.recent_cycles()
    assert [(c.cycle_id, c.kind, c.duration_s) for c in cycles] == [
        (second, CycleKind.LIVE, 0.25), (cycle, CycleKind.DRY_RUN, 1.0)]
    repo.forget_applied(5, "SetSiteFactor")
    assert repo.applied_changes() == []


def test_observe_records_transitions_and_can_be_turned_off() -> None:
    repo = MemoryJobRepository()
    pending = JobRecord(job_id=1, user="u", submit_time=0.0)
    running = JobRecord(job_id=1, user="u", submit_time=0.0, state=JobState.RUNNING, start_time=5.0)
    repo.observe(ClusterSnapshot(1.0, "c", (pending,), ()))
    repo.observe(ClusterSnapshot(2.0, "c", (pending,), ()))
    repo.observe(ClusterSnapshot(5.0, "c", (running,), ()))
    assert repo.live_state(1, "c") is JobState.RUNNING
    repo.observe(ClusterSnapshot(9.0, "c", (), ()))
    assert [(at, a, b) for at, a, b, _ in repo.transitions(1)] == [
        (1.0, None, "PENDING"), (5.0, "PENDING", "RUNNING"), (9.0, "RUNNING", "GONE")]
    quiet = MemoryJobRepository(track_live=False)
    quiet.observe(ClusterSnapshot(1.0, "c", (pending,), ()))
    assert quiet.transitions(1) == [] and quiet.live_state(1, "c") is None


def test_models_and_pause_flag() -> None:
    repo = MemoryJobRepository()
    assert repo.load_model("slurmsched") is None
    repo.save_model("slurmsched", "v1", b"abc", {"jobs": 3})
    repo.save_model("slurmsched", "v2", b"def", {"jobs": 4})
    assert repo.load_model("slurmsched") == ("v2", b"def", {"jobs": 4})
    repo.set_paused(True)
    assert repo.is_paused()
