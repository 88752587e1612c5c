"""A user's own ``--switches`` request survives a daemon cycle on the live 22.05 cluster.

Slurm 22.05's ``squeue --json`` does not carry switch requests, so the CLI gateway reads
them from ``scontrol -a -o show job``. A blocker holds every node, so the two multi-node
GPU jobs stay pending while one engine cycle (real CliGateway, SQLite repository, qssf,
default planner: switch tuning on, the dev cluster runs ``topology/tree``) plans them;
``revert``, reading them the same way, restores only a request that is still slurmsched's.
"""

from __future__ import annotations

import time

import pytest
from live_engine import engine_for

from slurmsched.daemon import revert_all
from slurmsched.gateway import CliGateway
from slurmsched.model import SetSwitches

pytestmark = pytest.mark.slurm


def switches_field(cluster, job_id: int) -> str:
    """The job's ``Switches=`` value as scontrol prints it ('' when it has no request)."""
    line = cluster.run("scontrol", "-o", "show", "job", str(job_id)).stdout
    return next((t.split("=", 1)[1] for t in line.split() if t.startswith("Switches=")), "")


@pytest.fixture
def gateway(slurm_cluster, slurm_jobs):
    """The CLI gateway, once a blocker holds every node (multi-node jobs then stay pending)."""
    blocker = slurm_jobs.submit("-N", "4", "--exclusive", "-t", "30", name="blocker", wrap="sleep 600")
    slurm_jobs.wait_state(blocker, {"RUNNING"})
    return CliGateway(slurm_conf=str(slurm_cluster.conf), env=slurm_cluster.env)


def one_cycle(gateway, repository):
    """One qssf engine cycle over the live queue."""
    return engine_for(gateway, repository).run_cycle(time.time())


def test_users_own_switch_request_is_left_untouched_by_a_cycle(slurm_cluster, slurm_jobs, gateway, repository):
    own = slurm_jobs.submit("-N", "2", "-t", "30", "--gres=gpu:4", "--switches=2@10:00", name="own")
    bare = slurm_jobs.submit("-N", "2", "-t", "30", "--gres=gpu:4", name="bare")
    for job_id in (own, bare):
        slurm_jobs.wait_state(job_id, {"PENDING"})
    assert switches_field(slurm_cluster, own) == "2@00:10:00"

    jobs = {j.job_id: j for j in gateway.snapshot().jobs}
    assert (jobs[own].switches, jobs[own].switch_wait_s) == (2, 600)
    assert (jobs[bare].switches, jobs[bare].switch_wait_s) == (0, None)

    report = one_cycle(gateway, repository)
    tuned = [a.job_id for a in report.plan.actions if isinstance(a, SetSwitches)]
    assert own not in tuned and bare in tuned  # the planner did tune switches, just not the user's
    assert switches_field(slurm_cluster, own) == "2@00:10:00"
    assert switches_field(slurm_cluster, bare) == "1@00:10:00"


def test_revert_restores_slurmscheds_switches_and_leaves_a_users_later_request(slurm_cluster, slurm_jobs, gateway,
                                                                               repository):
    """``revert`` reads each job's Switches as the cycle did (22.05: ``scontrol show job``):
    a job still holding slurmsched's ``1@10:00`` gets its original back, one whose user
    asked for ``3@05:00`` since keeps it and is reported."""
    kept = slurm_jobs.submit("-N", "2", "-t", "30", "--gres=gpu:4", name="kept")
    changed = slurm_jobs.submit("-N", "2", "-t", "30", "--gres=gpu:4", name="changed")
    for job_id in (kept, changed):
        slurm_jobs.wait_state(job_id, {"PENDING"})

    one_cycle(gateway, repository)
    assert switches_field(slurm_cluster, kept) == switches_field(slurm_cluster, changed) == "1@00:10:00"
    slurm_cluster.run("scontrol", "update", f"JobId={changed}", "Switches=3@00:05:00")

    report = revert_all(gateway, repository)
    left = [c for c in repository.applied_changes() if c.kind == "SetSwitches"]
    assert report.kinds.get("SetSwitches") == 1 and report.failures == ()
    assert [line.split(" SetSwitches is ")[0] for line in report.left] == [f"job {changed}"]
    assert "SetSwitches is 3@300, not slurmsched's 1@600" in report.left[0]
    assert left == []  # both records are settled: one restored, one left to its user
    jobs = {j.job_id: j for j in gateway.snapshot().jobs}
    assert (jobs[kept].switches, jobs[changed].switches, jobs[changed].switch_wait_s) == (0, 3, 300)
    assert switches_field(slurm_cluster, changed) == "3@00:05:00"
