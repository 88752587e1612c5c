"""SqlJobRepository against SQLite and PostgreSQL: every test runs on both (see conftest)."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from slurmsched.errors import DatabaseOfAnotherCluster, StoreError
from slurmsched.model import (ClusterSnapshot, Decision, GresRequest, JobRecord, JobState,
                              Prediction)
from slurmsched.store.memory import MemoryJobRepository
from slurmsched.store.protocol import CycleKind
from slurmsched.store.repository import GONE, SqlJobRepository
from slurmsched.store.schema import Cycle, DecisionRow, Job, PredictionRow, Transition


def finished(job_id: int, submit: float = 1_700_000_000.0, run: float = 600.0, **kw) -> JobRecord:
    values = dict(job_id=job_id, user="alice", submit_time=submit, cluster="c1", state=JobState.COMPLETED,
                  start_time=submit + 10, end_time=submit + 10 + run, time_limit_s=3600, partition="gpu")
    values.update(kw)
    return JobRecord(**values)


def count(repo: SqlJobRepository, table) -> int:
    with repo.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table)).scalar_one()


def test_every_field_round_trips(repo: SqlJobRepository) -> None:
    job = JobRecord(
        job_id=4242, user="bob", submit_time=1_700_000_000.5, name="train 'x'; rm -rf / #\n\u00e9\u6f22",
        cluster="c1", array_job_id=4240, array_task_id=2, account="ml", partition="gpu", qos="high",
        state=JobState.TIMEOUT, eligible_time=1_700_000_001.0, start_time=1_700_000_100.0,
        end_time=1_700_003_700.0, time_limit_s=3600, nodes=2, cpus=64, memory_mb=256_000, gpus=16,
        gpu_type="a100", gres_per_node=(GresRequest("gpu", "a100", 8), GresRequest("shard", None, 2)),
        features="a100&leaf1", node_list="gpu[01-02]", restart_count=1, exit_code=0)
    assert repo.ingest_finished([job]) == 1
    (back,) = repo.history()
    assert back == job


def test_same_window_twice_keeps_one_row_per_attempt(repo: SqlJobRepository) -> None:
    window = [finished(i, submit=1_700_000_000.0 + i) for i in range(1, 51)]
    assert repo.ingest_finished(window) == 50
    assert repo.ingest_finished(window) == 50
    assert repo.count_jobs() == 50
    # A re-read record with new facts (e.g. a later exit code) updates its row in place.
    repo.ingest_finished([dataclasses.replace(window[0], exit_code=3)])
    assert repo.count_jobs() == 50
    assert [j.exit_code for j in repo.history() if j.job_id == 1] == [3]
    # A job cancelled while pending, stored by an earlier version as a 0 s run and read again
    # now (no start time), is no longer a run (admin guide: history import --from-sacct).
    cancelled = finished(51, state=JobState.CANCELLED, run=0.0, node_list="")
    repo.ingest_finished([cancelled])
    repo.ingest_finished([dataclasses.replace(cancelled, start_time=None)])
    assert [(j.start_time, j.runtime_s) for j in repo.history() if j.job_id == 51] == [(None, None)]


def test_requeued_attempts_are_separate_rows(repo: SqlJobRepository) -> None:
    first = finished(77, submit=1_700_000_000.0, run=5, state=JobState.REQUEUED)
    second = finished(77, submit=1_700_000_020.0, run=30, restart_count=1)
    repo.ingest_finished([first])
    repo.ingest_finished([first, second])
    repo.ingest_finished([second])
    attempts = sorted((j.submit_time, j.state) for j in repo.history() if j.job_id == 77)
    assert attempts == [(1_700_000_000.0, JobState.REQUEUED), (1_700_000_020.0, JobState.COMPLETED)]


def test_same_job_id_on_two_clusters_is_two_rows(repo: SqlJobRepository) -> None:
    repo.ingest_finished([finished(5, cluster="a"), finished(5, cluster="b")])
    assert repo.count_jobs() == 2


def test_duplicates_inside_one_batch_collapse_to_the_last(repo: SqlJobRepository) -> None:
    job = finished(9)
    assert repo.ingest_finished([job, dataclasses.replace(job, exit_code=1)]) == 1
    assert [j.exit_code for j in repo.history()] == [1]


def test_default_cluster_fills_only_records_without_one(repo: SqlJobRepository) -> None:
    repo.ingest_finished([finished(1, cluster=""), finished(2, cluster="real")], cluster="trace")
    assert sorted((j.job_id, j.cluster) for j in repo.history()) == [(1, "trace"), (2, "real")]


def test_failed_batch_leaves_nothing(repo: SqlJobRepository) -> None:
    repo.ingest_finished([finished(1)])
    with pytest.raises(StoreError) as err:
        repo.ingest_finished([finished(2), finished(3), finished(10**20)])
    assert "\n" not in str(err.value)
    assert repo.count_jobs() == 1


def test_transaction_rolls_back_every_call_inside(repo: SqlJobRepository) -> None:
    with pytest.raises(RuntimeError):
        with repo.transaction():
            repo.ingest_finished([finished(1)])
            repo.set_cursor("sacct", 123.0)
            raise RuntimeError("boom")
    assert repo.count_jobs() == 0
    assert repo.get_cursor("sacct") is None
    with repo.transaction():
        repo.ingest_finished([finished(1)])
        with repo.transaction():  # nested: joins the outer one
            repo.set_cursor("sacct", 5.0)
    assert repo.count_jobs() == 1 and repo.get_cursor("sacct") == 5.0


def test_history_order_since_and_limit(repo: SqlJobRepository) -> None:
    jobs = [finished(i, submit=1_700_000_000.0 + 100 * (5 - i)) for i in range(5)]  # ends in reverse id order
    repo.ingest_finished(jobs + [finished(99, start_time=None, end_time=None, state=JobState.CANCELLED)])
    ends = [j.end_time for j in repo.history()]
    assert ends == sorted(ends) and len(ends) == 5
    assert [j.job_id for j in repo.history(limit=2)] == [1, 0]
    cutoff = jobs[2].end_time
    assert {j.job_id for j in repo.history(since=cutoff)} == {1, 0}
    assert repo.count_jobs() == 6
    assert {j.job_id for j in repo.iter_jobs(batch=2)} == {0, 1, 2, 3, 4, 99}


def test_observe_records_transitions_and_costs_nothing_when_stable(repo: SqlJobRepository) -> None:
    def snap(at: float, *jobs: JobRecord) -> ClusterSnapshot:
        return ClusterSnapshot(taken_at=at, cluster="c1", jobs=jobs, nodes=())

    a = JobRecord(job_id=1, user="u", submit_time=0.0, state=JobState.PENDING, reason="Priority")
    b = JobRecord(job_id=2, user="u", submit_time=0.0, state=JobState.RUNNING)
    repo.observe(snap(10.0, a, b))
    repo.observe(snap(20.0, dataclasses.replace(a, reason="Resources"), b))  # reason only: no row
    assert count(repo, Transition) == 2
    repo.observe(snap(30.0, dataclasses.replace(a, state=JobState.RUNNING, reason="")))
    assert repo.transitions(1) == [(10.0, None, "PENDING", "Priority"), (30.0, "PENDING", "RUNNING", "")]
    assert repo.transitions(2, cluster="c1") == [(10.0, None, "RUNNING", ""), (30.0, "RUNNING", GONE, "")]
    repo.observe(snap(40.0, dataclasses.replace(a, state=JobState.PENDING, restart_count=1, reason="BeginTime")))
    assert repo.transitions(1)[-1] == (40.0, "RUNNING", "PENDING", "BeginTime")
    # Another cluster's snapshot does not disturb this one's live jobs.
    repo.observe(ClusterSnapshot(taken_at=50.0, cluster="other", jobs=(), nodes=()))
    assert repo.transitions(1)[-1][0] == 40.0


def test_records_of_an_earlier_job_with_a_reused_id_are_told_apart(repo: SqlJobRepository) -> None:
    """Job 1 leaves the queue and a new job 1 arrives (slurmctld lost its state): records
    of cycles after the first one left are the new job's. Job 2 finishes, leaves, and is
    requeued (restart count 1): the same job, so its id was not reused."""
    def seen(at: float, **restarts: int) -> None:
        jobs = tuple(JobRecord(job_id=int(j[1:]), user="u", submit_time=at, state=JobState.PENDING,
                               restart_count=n) for j, n in restarts.items())
        repo.observe(ClusterSnapshot(taken_at=at, cluster="c1", jobs=jobs, nodes=()))

    def cycle(at: float, estimate_s: float) -> None:
        cycle_id = repo.start_cycle(at, CycleKind.LIVE)
        repo.record_predictions(cycle_id, [Prediction(1, estimate_s, estimate_s, estimate_s, "x")])
        repo.record_decisions(cycle_id, [Decision(1, "rank", "ranked", f"{estimate_s:g}", score=estimate_s, rank=1)])

    seen(10.0, j1=0, j2=0)
    cycle(10.0, 600.0)
    seen(20.0, j2=0)
    seen(30.0)
    assert repo.id_reused_at(1) is None  # left, nothing came back yet
    seen(40.0, j1=0, j2=1)
    cycle(40.0, 60.0)
    assert repo.id_reused_at(1) == 20.0 and repo.id_reused_at(2) is None and repo.id_reused_at(3) is None
    assert repo.latest_prediction(1, since=20.0).estimate_s == 60.0
    assert [d.reason for _, d in repo.decisions_for(1, since=20.0)] == ["60"]
    assert [d.reason for _, d in repo.decisions_for(1)] == ["600", "60"]
    assert repo.latest_prediction(1, since=40.0) is None and repo.decisions_for(1, since=40.0) == []
    assert repo.latest_prediction(1, before=30.0).estimate_s == 600.0  # the first job 1, ended at 30
    # Another cluster's transitions do not count once the database is claimed.
    repo.observe(ClusterSnapshot(taken_at=50.0, cluster="other", jobs=(), nodes=()))
    repo.observe(ClusterSnapshot(taken_at=60.0, cluster="other", jobs=(
        JobRecord(job_id=2, user="u", submit_time=60.0, state=JobState.PENDING),), nodes=()))
    repo.observe(ClusterSnapshot(taken_at=70.0, cluster="other", jobs=(), nodes=()))
    repo.observe(ClusterSnapshot(taken_at=80.0, cluster="other", jobs=(
        JobRecord(job_id=2, user="u", submit_time=80.0, state=JobState.PENDING),), nodes=()))
    assert repo.id_reused_at(2) == 70.0
    repo.claim("c1")
    assert repo.id_reused_at(2) is None


def test_cursor_and_pause_flag(repo: SqlJobRepository) -> None:
    assert repo.get_cursor("sacct") is None and repo.is_paused() is False
    repo.set_cursor("sacct", 1.5)
    repo.set_cursor("sacct", 2.5)
    repo.set_paused(True)
    assert repo.get_cursor("sacct") == 2.5 and repo.is_paused() is True
    repo.set_paused(False)
    assert repo.is_paused() is False


def test_the_first_cluster_to_claim_the_database_keeps_it(repo: SqlJobRepository) -> None:
    repo.claim("")  # Slurm named no cluster: nothing claimed
    assert repo.owner() is None
    repo.set_paused(True)  # the control row exists before any claim, as on a database of 0003
    repo.claim("alpha")
    repo.claim("alpha")
    repo.set_paused(False)  # the pause flag leaves the owner alone
    assert (repo.owner(), repo.is_paused()) == ("alpha", False)
    repo.check_cluster("alpha")
    repo.check_cluster("")
    for refused in (lambda: repo.claim("beta"), lambda: repo.check_cluster("beta")):
        with pytest.raises(DatabaseOfAnotherCluster) as err:
            refused()
        assert str(err.value) == (f"{repo.url} keeps the state of cluster 'alpha''s daemon, and this Slurm is cluster"
                                  " 'beta': give each cluster's daemon a database of its own ([db] url); if the"
                                  " cluster was renamed, 'slurmsched db release' lets the next cycle claim it")
    assert repo.owner() == "alpha"
    assert repo.release() == "alpha" and repo.release() is None
    repo.claim("beta")
    assert repo.owner() == "beta"


def test_daemons_claiming_a_new_database_at_once_leave_it_to_one(repo: SqlJobRepository, db_url: str) -> None:
    """Eight clusters' repositories claim the same fresh database from eight threads, all at once:
    one gets it, every other is refused, and all agree which."""
    repos = [SqlJobRepository.from_url(db_url) for _ in range(8)]
    start = threading.Barrier(len(repos))

    def claim(index: int) -> str | None:
        start.wait()
        try:
            repos[index].claim(f"c{index}")
        except DatabaseOfAnotherCluster as exc:
            return str(exc)
        return None

    try:
        with ThreadPoolExecutor(len(repos)) as pool:
            refusals = list(pool.map(claim, range(len(repos))))
    finally:
        for other in repos:
            other.close()
    owner = repo.owner()
    assert owner is not None and refusals.count(None) == 1 and refusals[int(owner[1:])] is None, refusals
    assert all(f"keeps the state of cluster {owner!r}'s daemon" in r for r in refusals if r is not None)


def test_a_memory_repository_is_claimed_alike() -> None:
    memory = MemoryJobRepository(cluster="sim")
    memory.claim("")
    memory.claim("alpha")
    memory.claim("alpha")
    with pytest.raises(DatabaseOfAnotherCluster, match=r"^the in-memory store keeps the state of cluster 'alpha''s"):
        memory.claim("beta")


def test_db_release_command(db_url: str, cli) -> None:
    repo = SqlJobRepository.from_url(db_url, create=True)
    try:
        repo.upgrade()
        repo.claim("alpha")
    finally:
        repo.close()
    released = cli("db", "release", "--db", db_url)
    assert released.returncode == 0, released.stderr
    assert released.stdout == f"{repo.url}: released by cluster 'alpha'; the next daemon cycle claims it\n"
    again = cli("db", "release", "--db", db_url)
    assert again.stdout == f"{repo.url}: no cluster's daemon had claimed it\n"


def test_cycles_predictions_and_decisions(repo: SqlJobRepository) -> None:
    first = repo.start_cycle(1000.0, CycleKind.DRY_RUN)
    preds = [Prediction(job_id=1, estimate_s=60, low_s=30, high_s=120, source="user+name history, 3 runs"),
             Prediction(job_id=2, estimate_s=600, low_s=300, high_s=900, source="model v1", model_version="v1")]
    rank = Decision(job_id=1, kind="rank", outcome="ok", reason="shortest", score=60.0, rank=1)
    act = Decision(job_id=1, kind="SetSiteFactor", outcome="dry-run", previous="0", new="500")
    repo.record_predictions(first, preds)
    repo.record_decisions(first, [rank, act])
    repo.finish_cycle(first, pending=2, running=0, actions=1, failed=0, timings={"predict": 0.1, "total": 0.25})

    second = repo.start_cycle(1060.0, CycleKind.LIVE)
    changed = dataclasses.replace(preds[1], estimate_s=650)
    repo.record_predictions(second, [preds[0], changed])  # job 1 unchanged: not stored again
    repo.record_decisions(second, [rank, dataclasses.replace(act, outcome="ok")])
    repo.finish_cycle(second, pending=2, running=0, actions=1, failed=0, timings={"predict": 0.2, "apply": 0.1})

    assert count(repo, PredictionRow) == 3 and count(repo, DecisionRow) == 3
    assert repo.latest_prediction(1) == preds[0]
    assert repo.latest_prediction(2) == changed
    assert repo.latest_prediction(3) is None
    assert repo.decisions_for(1) == [(1000.0, rank), (1000.0, act), (1060.0, dataclasses.replace(act, outcome="ok"))]
    cycles = repo.recent_cycles(limit=5)
    assert [(c.cycle_id, c.kind) for c in cycles] == [(second, CycleKind.LIVE), (first, CycleKind.DRY_RUN)]
    assert cycles[1].duration_s == pytest.approx(0.25)
    assert cycles[0].duration_s == pytest.approx(0.3) and cycles[0].timings == {"predict": 0.2, "apply": 0.1}
    with pytest.raises(StoreError):
        repo.finish_cycle(999_999, pending=0, running=0, actions=0, failed=0, timings={})


def test_every_cycle_kind_round_trips_as_in_the_memory_repository(repo: SqlJobRepository) -> None:
    memory = MemoryJobRepository()
    for store in (repo, memory):
        for at, kind in enumerate(CycleKind):
            cycle = store.start_cycle(float(at), kind)
            store.finish_cycle(cycle, pending=at, running=1, actions=2, failed=0, timings={"total": 0.5})
    assert [c.kind for c in repo.recent_cycles()] == list(reversed(CycleKind))
    assert repo.recent_cycles() == memory.recent_cycles()
    with repo.engine.connect() as conn:  # dry_run, which kind supersedes, is kept in step
        assert dict(conn.execute(select(Cycle.kind, Cycle.dry_run)).all()) == {
            "live": False, "dry-run": True, "paused": False, "revert": False}


def test_rolled_back_predictions_are_written_again(repo: SqlJobRepository) -> None:
    cycle = repo.start_cycle(1.0, CycleKind.LIVE)
    pred = Prediction(job_id=1, estimate_s=60, low_s=30, high_s=120, source="s")
    with pytest.raises(RuntimeError):
        with repo.transaction():
            repo.record_predictions(cycle, [pred])
            raise RuntimeError("cycle failed")
    repo.record_predictions(cycle, [pred])
    assert repo.latest_prediction(1) == pred


def test_applied_changes_keep_the_first_original(repo: SqlJobRepository) -> None:
    repo.record_applied(7, "SetSiteFactor", "0", "500")
    repo.record_applied(7, "SetSiteFactor", "500", "700")
    repo.record_applied(8, "SetFeatures", None, "a100")
    changes = repo.applied_changes()
    assert [(c.job_id, c.kind, c.original, c.current) for c in changes] == [
        (7, "SetSiteFactor", "0", "700"), (8, "SetFeatures", None, "a100")]
    repo.forget_applied(7, "SetSiteFactor")
    assert [c.job_id for c in repo.applied_changes()] == [8]


def test_model_registry_returns_the_newest(repo: SqlJobRepository) -> None:
    assert repo.load_model("gbm") is None
    repo.save_model("gbm", "v1", b"\x00one", {"rows": 10})
    repo.save_model("gbm", "v2", b"\x00two", {"rows": 20, "features": ["user"]})
    repo.save_model("other", "v9", b"x", {})
    assert repo.load_model("gbm") == ("v2", b"\x00two", {"rows": 20, "features": ["user"]})
    repo.save_model("gbm", "v1", b"\x00one again", {})  # re-saving a version makes it the newest
    assert repo.load_model("gbm") == ("v1", b"\x00one again", {})
    with repo.engine.connect() as conn:  # the earlier versions are gone, not kept as dead megabytes
        assert conn.execute(text("SELECT name, version FROM models ORDER BY name")).all() == [
            ("gbm", "v1"), ("other", "v9")]


DAY = 86400.0
NOW = time.time()  # purge refuses a cut-off in the future: the records are dated from now


def fill(repo: SqlJobRepository, days_ago: float, job_id: int) -> None:
    """One cycle ``days_ago`` days ago with a prediction and two decisions for ``job_id``,
    the job's arrival in the queue then (and the previous one's leaving), and a finished
    attempt that ended then."""
    at = NOW - days_ago * DAY
    with repo.transaction():
        cycle = repo.start_cycle(at, CycleKind.LIVE)
        repo.record_predictions(cycle, [Prediction(job_id, 600.0, 300.0, 900.0, "model")])
        repo.record_decisions(cycle, [Decision(job_id, "rank", "ok", "shortest first"),
                                      Decision(job_id, "SetSiteFactor", "ok", "rank 1", "0", "400")])
        repo.finish_cycle(cycle, pending=1, running=0, actions=1, failed=0, timings={})
        repo.observe(ClusterSnapshot(taken_at=at, cluster="c1", nodes=(), jobs=(
            JobRecord(job_id=job_id, user="u", submit_time=at, state=JobState.PENDING),)))
    repo.ingest_finished([finished(job_id + 1000, submit=at - 700)])


def test_purge_deletes_what_is_older_and_keeps_what_the_daemon_acts_on(repo: SqlJobRepository) -> None:
    for job_id, days_ago in ((1, 400), (2, 200), (3, 10)):
        fill(repo, days_ago, job_id)
    repo.record_applied(1, "SetSiteFactor", "0", "400")  # an old job's change in force: revert needs it
    repo.save_model("slurmsched", "v1", b"blob", {})
    repo.set_cursor("sacct", NOW - 500 * DAY)
    unfinished = finished(9, submit=NOW - 900 * DAY, end_time=None, start_time=None, state=JobState.PENDING)
    repo.ingest_finished([unfinished])

    dry = repo.purge(NOW - 100 * DAY, history=True, dry_run=True)
    assert (dry.cycles, dry.predictions, dry.decisions, dry.transitions, dry.jobs) == (2, 2, 4, 3, 2)
    assert count(repo, Cycle) == 3 and count(repo, Job) == 4  # a dry run deletes nothing

    kept_history = repo.purge(NOW - 300 * DAY, batch=1)
    assert (kept_history.cycles, kept_history.predictions, kept_history.decisions, kept_history.transitions,
            kept_history.jobs, kept_history.dry_run) == (1, 1, 2, 1, None, False)
    assert count(repo, Job) == 4
    report = repo.purge(NOW - 100 * DAY, history=True, batch=1)  # one row a transaction: the loop ends
    assert (report.cycles, report.predictions, report.decisions, report.transitions, report.jobs) == (1, 1, 2, 2, 2)
    assert [c.started_at for c in repo.recent_cycles()] == [pytest.approx(NOW - 10 * DAY)]
    assert (count(repo, PredictionRow), count(repo, DecisionRow), count(repo, Transition)) == (1, 2, 2)
    assert [j.job_id for j in repo.history()] == [1003] and repo.count_jobs() == 2  # and the unfinished one
    assert [(c.job_id, c.current) for c in repo.applied_changes()] == [(1, "400")]
    assert repo.load_model("slurmsched") is not None and repo.get_cursor("sacct") == pytest.approx(NOW - 500 * DAY)
    assert repo.purge(NOW - 100 * DAY, history=True).cycles == 0  # nothing left to delete


def test_purge_command(tmp_path: Path, cli) -> None:
    db = f"sqlite:///{tmp_path / 'x.db'}"
    repo = SqlJobRepository.from_url(db, create=True)
    try:
        repo.upgrade()
        for job_id, days_ago in ((1, 400), (2, 10)):
            fill(repo, days_ago, job_id)
    finally:
        repo.close()
    dry = cli("history", "purge", "--before", "180d", "--jobs", "--dry-run", "--db", db,
              env={"SLURMSCHED_DAEMON_FIT_HISTORY_JOBS": "1"})
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("would delete 1 cycle (with 1 prediction and 2 decisions) and 1 queue transition, "
                                 "1 finished job from before ")
    done = cli("history", "purge", "--before", "180d", "--json", "--db", db)
    assert done.returncode == 0, done.stderr
    assert {k: v for k, v in json.loads(done.stdout).items() if k != "before"} == {
        "cycles": 1, "predictions": 1, "decisions": 2, "transitions": 1, "jobs": None, "dry_run": False}
    fewer = cli("history", "purge", "--before", "180d", "--jobs", "--db", db)  # 2 jobs, the fit takes 500,000
    assert fewer.returncode == 2 and fewer.stderr.endswith(
        "--jobs: a fit learns from the newest 500,000 finished jobs (daemon.fit_history_jobs), and the history "
        "holds fewer: none may go\n")
    both = cli("history", "purge", "--before", "5d", "--jobs", "--db", db,
               env={"SLURMSCHED_DAEMON_FIT_HISTORY_JOBS": "2"})
    assert both.returncode == 2 and "which ended since " in both.stderr and "give that --before or an" in both.stderr
    every = cli("history", "purge", "--before", "180d", "--jobs", "--db", db,
                env={"SLURMSCHED_DAEMON_FIT_HISTORY_JOBS": "0"})
    assert every.returncode == 2 and "daemon.fit_history_jobs is 0" in every.stderr
    repo = SqlJobRepository.from_url(db)
    try:
        assert repo.count_jobs() == 2  # every refusal deleted nothing
    finally:
        repo.close()
    future = cli("history", "purge", "--before", "2999-01-01", "--db", db)
    assert future.returncode == 2 and "is in the future" in future.stderr
    missing = cli("history", "purge", "--before", "1d", "--db", f"sqlite:///{tmp_path / 'none.db'}")
    assert missing.returncode == 2 and "no database at" in missing.stderr and not (tmp_path / "none.db").exists()
