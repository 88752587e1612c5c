"""A user's own ``--switches`` request survives a daemon cycle on the live 22.05 cluster.

Slurm 22.05's ``squeue --json`` does not carry switch requests, so the CLI gateway reads
them from ``scontrol -a -o show job``. A blocker holds every node, so the two multi-node
GPU jobs stay pending while one engine cycle (real CliGateway, SQLite repository, qssf,
default planner: switch tuning on, the dev cluster runs ``topology/tree``) plans them.
"""

from __future__ import annotations

import time

import pytest

from slurmsched.config import Config
from slurmsched.engine import Engine
from slurmsched.gateway import CliGateway
from slurmsched.model import SetSwitches
from slurmsched.planner import Planner
from slurmsched.policy import make_policy
from slurmsched.predict.registry import make_predictor
from slurmsched.store.repository import SqlJobRepository

pytestmark = pytest.mark.slurm


def switches_field(cluster, job_id: int) -> str:
    """The job's ``Switches=`` value as scontrol prints it ('' when it has no request)."""
    line = cluster.run("scontrol", "-o", "show", "job", str(job_id)).stdout
    return next((t.split("=", 1)[1] for t in line.split() if t.startswith("Switches=")), "")


def test_users_own_switch_request_is_left_untouched_by_a_cycle(slurm_cluster, slurm_jobs, tmp_path):
    gateway = CliGateway(slurm_conf=str(slurm_cluster.conf), env=slurm_cluster.env)
    blocker = slurm_jobs.submit("-N", "4", "--exclusive", "-t", "30", name="blocker", wrap="sleep 600")
    slurm_jobs.wait_state(blocker, {"RUNNING"})
    own = slurm_jobs.submit("-N", "2", "-t", "30", "--gres=gpu:4", "--switches=2@10:00", name="own")
    bare = slurm_jobs.submit("-N", "2", "-t", "30", "--gres=gpu:4", name="bare")
    for job_id in (own, bare):
        slurm_jobs.wait_state(job_id, {"PENDING"})
    assert switches_field(slurm_cluster, own) == "2@00:10:00"

    jobs = {j.job_id: j for j in gateway.snapshot().jobs}
    assert (jobs[own].switches, jobs[own].switch_wait_s) == (2, 600)
    assert (jobs[bare].switches, jobs[bare].switch_wait_s) == (0, None)

    repository = SqlJobRepository.from_url(f"sqlite:///{tmp_path / 'slurmsched.db'}", create=True)
    repository.upgrade()
    try:
        predictor = make_predictor("user_limit")
        predictor.fit([])
        engine = Engine(gateway, repository, predictor, make_policy("qssf"), Planner(Config()))
        report = engine.run_cycle(time.time())
    finally:
        repository.close()

    tuned = [a.job_id for a in report.plan.actions if isinstance(a, SetSwitches)]
    assert own not in tuned and bare in tuned  # the planner did tune switches, just not the user's
    assert switches_field(slurm_cluster, own) == "2@00:10:00"
    assert switches_field(slurm_cluster, bare) == "1@00:10:00"
