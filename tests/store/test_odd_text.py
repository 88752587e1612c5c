"""Text PostgreSQL refuses (NUL characters, values longer than their column) stored alike on both databases."""

from __future__ import annotations

from slurmsched.model import JobRecord, JobState
from slurmsched.store.repository import SqlJobRepository


def finished(job_id: int, **kw) -> JobRecord:
    values = dict(job_id=job_id, user="alice", submit_time=1_700_000_000.0 + job_id, cluster="c1",
                  state=JobState.COMPLETED, start_time=1_700_000_100.0 + job_id, end_time=1_700_000_700.0 + job_id)
    values.update(kw)
    return JobRecord(**values)


def test_nul_characters_are_dropped_and_the_batch_is_kept(repo: SqlJobRepository) -> None:
    jobs = [finished(1, name="nul\x00byte", user="al\x00ice", features="a\x00b"), finished(2, name="plain")]
    assert repo.ingest_finished(jobs) == 2
    first, second = repo.history()
    assert (first.name, first.user, first.features) == ("nulbyte", "alice", "ab")
    assert second.name == "plain"


def test_values_longer_than_their_column_keep_its_first_characters(repo: SqlJobRepository) -> None:
    long_name = "\u00fc\u20ac\U0001d11e" * 700  # 2,100 characters: the name column is unbounded
    jobs = [finished(1, user="u" * 200, partition="p" * 200, name=long_name), finished(5_000_000_000)]
    assert repo.ingest_finished(jobs, cluster="") == 2
    first, second = repo.history()
    assert (first.user, first.partition, first.name) == ("u" * 128, "p" * 128, long_name)
    assert second.job_id == 5_000_000_000


def test_a_clipped_cluster_name_is_still_one_attempt_on_import_again(repo: SqlJobRepository) -> None:
    job = finished(1, cluster="")
    long_cluster = "c" * 100
    assert repo.ingest_finished([job], cluster=long_cluster) == 1
    with repo.transaction():
        assert repo.stored_attempts([job], cluster=long_cluster) == 1
        repo.ingest_finished([job], cluster=long_cluster)
    assert repo.count_jobs() == 1
    (back,) = repo.history()
    assert back.cluster == "c" * 64
