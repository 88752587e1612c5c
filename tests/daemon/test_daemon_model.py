"""The learned predictor is fitted at start when history allows, saved in the database, reloaded."""

from __future__ import annotations

import time

import pytest

from slurmsched.model import JobRecord

pytestmark = pytest.mark.slurm


def test_model_is_saved_and_a_restart_reloads_it(daemon_env):
    daemon_env.write(predictor="slurmsched")
    for k in range(8):
        daemon_env.seed_history(f"proj{k}", [30.0 * (k + 1) + i for i in range(30)])
    first = daemon_env.daemon()
    version = first.engine.predictor.version
    assert version
    with daemon_env.repo() as repo:
        saved_version, blob, meta = repo.load_model("slurmsched")
    assert saved_version == version and blob and meta["jobs"] == 240
    probe = JobRecord(job_id=1, user=daemon_env.user, name=daemon_env.jobs.prefix + "proj3", submit_time=time.time(),
                      time_limit_s=3600, gpus=1)
    second = daemon_env.daemon()
    assert second.engine.predictor is not first.engine.predictor
    assert second.engine.predictor.version == version
    assert second.engine.predictor.predict([probe]) == first.engine.predictor.predict([probe])
    with daemon_env.repo() as repo:
        assert repo.load_model("slurmsched")[0] == version      # reloaded, not refitted and saved again
