"""A database keeps one cluster's daemon state: the daemon and ``revert`` of another cluster refuse it."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slurm

REFUSAL = "keeps the state of cluster 'elsewhere''s daemon, and this Slurm is cluster 'slurmsched'"


def test_a_database_claimed_by_another_cluster_changes_nothing(any_db_env, busy):
    env = any_db_env
    env.seed_history("short", [60, 70, 50])
    job = busy.submit("--gres=gpu:1", "-t", "120", name="short")
    with env.repo() as repo:
        repo.claim("elsewhere")  # another cluster's daemon cycled here first
    before = env.site_factors([job])

    ran = env.cli("run", "--once")
    assert ran.exit_code == 2 and REFUSAL in ran.stderr, ran.output
    assert "'slurmsched db release'" in ran.stderr
    dry = env.cli("revert", "--dry-run")
    assert dry.exit_code == 2 and REFUSAL in dry.stderr, dry.output
    revert = env.cli("revert")
    assert revert.exit_code == 2 and REFUSAL in revert.stderr, revert.output
    check = env.cli("config", "check")
    assert check.exit_code == 1, check.stdout
    assert any(line.startswith("FAIL database: ") and REFUSAL in line for line in check.stdout.splitlines())
    assert env.site_factors([job]) == before
    with env.repo() as repo:  # no cycle recorded, nothing applied, the other daemon not paused
        assert (repo.recent_cycles(), repo.applied_changes(), repo.is_paused()) == ([], [], False)

    released = env.cli("db", "release")
    assert released.exit_code == 0 and "released by cluster 'elsewhere'" in released.stdout, released.output
    assert env.cli("run", "--once").exit_code == 0
    assert env.site_factors([job])[job] != before[job]
    with env.repo() as repo:
        assert repo.owner() == "slurmsched"
    check = env.cli("config", "check")
    assert "the state of cluster 'slurmsched''s daemon" in check.stdout, check.stdout
    status = env.cli("status")
    assert status.stdout.startswith("database: ") and status.stdout.splitlines()[0].endswith(
        " (the state of cluster 'slurmsched''s daemon)"), status.stdout
    assert json.loads(env.cli("status", "--json").stdout)["cluster"] == "slurmsched"
