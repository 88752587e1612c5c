"""``slurmsched revert`` leaves no job with a SiteFactor set by slurmsched and says how many."""

from __future__ import annotations

import json
import re
import time

import pytest
from polling import wait_until

pytestmark = pytest.mark.slurm


def test_revert_restores_every_job_and_reports_the_count(daemon_env, busy, lua_cache):
    daemon_env.write(submit_cache=str(lua_cache))
    daemon_env.seed_history("short", [60, 70, 50])
    daemon_env.seed_history("long", [5000, 5200])
    ids = [busy.submit("--gres=gpu:1", "-t", "120", name="short"),
           busy.submit("--gres=gpu:2", "-t", "120", name="long")]
    daemon = daemon_env.daemon()
    daemon.cycle(time.time())
    # a job valued by job_submit.lua after the last cycle: no record of it yet
    ids.append(busy.submit("--gres=gpu:1", "-t", "120", name="short"))
    before = daemon_env.site_factors(ids)
    assert all(v > 0 for v in before.values()), before
    with daemon_env.repo() as repo:
        assert ids[2] not in {c.job_id for c in repo.applied_changes()}

    result = daemon_env.cli("revert")
    assert result.exit_code == 0, result.output
    assert re.search(r"^reverted 3 changes on 3 jobs \(3 SetSiteFactor\)", result.stdout, re.M), result.stdout
    assert "slurmsched is paused" in result.stdout
    assert daemon_env.site_factors(ids) == {i: 0 for i in ids}
    assert not lua_cache.exists()
    with daemon_env.repo() as repo:
        assert repo.applied_changes() == [] and repo.is_paused()
        reverts = [d for _, d in repo.decisions_for(ids[0]) if d.kind == "revert"]
        assert [(d.outcome, d.previous, d.new) for d in reverts] == [("ok", str(before[ids[0]]), "0")]
    # the paused daemon does not put the values back
    daemon.cycle(time.time())
    assert daemon_env.site_factors(ids) == {i: 0 for i in ids}
    again = daemon_env.cli("revert")
    assert again.exit_code == 0 and again.stdout.startswith("reverted 0 changes on 0 jobs")
    # status tells the revert pass (3 restores) and the paused cycle from a live cycle; the
    # second revert found nothing to do and recorded no cycle
    status = daemon_env.cli("status").stdout
    rows = re.findall(r"^ +\d+ \d{4}-\S+ \S+ +\S+ +\d+ +\d+ +(\d+) +\d+  (\S+)$", status, re.M)
    assert rows == [("0", "paused"), ("3", "revert"), ("2", "live")], status


def test_revert_restores_a_value_job_submit_lua_gave_a_job_held_since(daemon_env, busy, lua_cache):
    """sprio does not list a held job: the script's stamp names the value to undo."""
    daemon_env.write(submit_cache=str(lua_cache))
    daemon_env.seed_history("short", [60, 70, 50])
    daemon_env.daemon().cycle(time.time())  # writes the cache
    job = busy.submit("--gres=gpu:1", "-t", "120", name="short")
    valued = daemon_env.site_factors([job])[job]
    assert valued > 0
    busy.cluster.run("scontrol", "hold", str(job))
    assert daemon_env.site_factors([job]) == {job: None}
    result = daemon_env.cli("revert")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("reverted 1 change on 1 job (1 SetSiteFactor)"), result.stdout
    busy.cluster.run("scontrol", "release", str(job))
    assert wait_until("sprio to list the released job", lambda: daemon_env.site_factors([job])[job] is not None,
                      timeout=60)
    assert daemon_env.site_factors([job]) == {job: 0}


def test_revert_drops_records_of_jobs_that_left_the_queue(daemon_env, busy):
    daemon_env.seed_history("short", [60])
    job = busy.submit("--gres=gpu:1", "-t", "120", name="short")
    daemon_env.daemon().cycle(time.time())
    busy.cluster.run("scancel", str(job))
    busy.wait_state(job, {"CANCELLED", ""}, timeout=30)
    result = daemon_env.cli("revert")
    assert result.exit_code == 0, result.output
    assert "reverted 0 changes on 0 jobs; 1 record of jobs that left the queue dropped" in result.stdout
    with daemon_env.repo() as repo:
        assert repo.applied_changes() == []


def test_revert_dry_run_lists_the_changes_and_sends_nothing(daemon_env, busy):
    daemon_env.seed_history("short", [60, 70, 50])
    job = busy.submit("--gres=gpu:1", "-t", "120", name="short")
    daemon_env.daemon().cycle(time.time())
    before = daemon_env.site_factors([job])
    assert before[job] > 0
    result = daemon_env.cli("revert", "--dry-run")
    assert result.exit_code == 0, result.output
    assert (f"job {job}: SetSiteFactor {before[job]} -> 0  (revert: restore the value before slurmsched)\n"
            "would restore 1 change on 1 job. Dry run: nothing sent, not paused.\n") in result.stdout
    assert daemon_env.site_factors([job]) == before
    with daemon_env.repo() as repo:
        assert not repo.is_paused() and [c.job_id for c in repo.applied_changes()] == [job]


def test_revert_restores_a_running_job_and_keeps_the_features_slurm_refuses_it(daemon_env, slurm_jobs):
    """A requeue brings a running job back pending with the values it had. Slurm 22.05
    takes SiteFactor and Switches on a running job but answers ``Features=`` with "Job is
    no longer pending execution": revert restores the first two, keeps the Features record
    and says so, and restores Features once the requeued job is pending."""
    with daemon_env.path.open("a") as config:
        config.write('[constraints]\ngpu_equivalence = [["a100", "v100"]]\n')
    a100 = slurm_jobs.submit("-w", "gpu[01-02]", "-N", "2", "--exclusive", "--gres=gpu:a100:8", name="a100",
                             wrap="sleep 300")
    slurm_jobs.wait_state(a100, {"RUNNING"}, timeout=90)
    daemon_env.seed_history("short", [60, 70, 50])
    job = slurm_jobs.submit("-N", "2", "--exclusive", "--gres=gpu:1", "--constraint=a100", "-t", "120", name="short")
    slurm_jobs.wait_state(job, {"PENDING"})
    actions = {type(a).__name__ for a in daemon_env.daemon().cycle(time.time()).plan.actions}
    assert actions == {"SetSiteFactor", "SetSwitches", "SetFeatures"}, actions  # widened to the idle v100s
    slurm_jobs.wait_state(job, {"RUNNING"}, timeout=60)
    assert switches_field(daemon_env, job) == "1@00:10:00"
    preview = daemon_env.cli("revert", "--dry-run")
    assert f"would keep: job {job} SetFeatures a100|v100 (before slurmsched: a100)" in preview.stdout, preview.stdout
    assert "would restore 2 changes on 1 job. Dry run" in preview.stdout
    assert switches_field(daemon_env, job) == "1@00:10:00"

    result = daemon_env.cli("revert")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("reverted 2 changes on 1 job (1 SetSiteFactor, 1 SetSwitches)\n"), result.stdout
    assert (f"kept: job {job} SetFeatures a100|v100 (before slurmsched: a100): the job is RUNNING and Slurm changes"
            " Features only on a pending job; the record is kept") in result.stdout
    assert switches_field(daemon_env, job) == ""
    with daemon_env.repo() as repo:
        assert [(c.job_id, c.kind) for c in repo.applied_changes()] == [(job, "SetFeatures")]

    # requeued, and kept pending: the v100s busy too, its begin time (a requeue defers it) now
    daemon_env.cluster.run("scontrol", "requeue", str(job))
    v100 = slurm_jobs.submit("-w", "gpu[03-04]", "-N", "2", "--exclusive", name="v100", wrap="sleep 300")
    slurm_jobs.wait_state(v100, {"RUNNING"}, timeout=90)
    daemon_env.cluster.run("scontrol", "update", f"JobId={job}", "StartTime=now")
    assert wait_until("sprio to list the requeued job", lambda: daemon_env.site_factors([job])[job] is not None,
                      timeout=30)
    assert daemon_env.site_factors([job]) == {job: 0}
    assert switches_field(daemon_env, job) == ""
    again = daemon_env.cli("revert")
    assert again.exit_code == 0, again.output
    assert again.stdout.startswith("reverted 1 change on 1 job (1 SetFeatures)\n"), again.stdout
    assert features_field(daemon_env, job) == "a100"
    with daemon_env.repo() as repo:
        assert repo.applied_changes() == []


def test_revert_restores_a_task_split_off_a_pending_array(daemon_env, busy):
    """Slurm 22.05 gives a task split off a pending array (by an update of that task alone,
    or by its start) its own job id, the array's id as ArrayJobId, and the array's
    SiteFactor. slurmsched's record is the array's: the daemon took the task's value for
    the original when it next changed the task, and revert put that value back on it."""
    daemon_env.seed_history("sweep", [60, 70, 50])
    array = busy.submit("--array=0-5", "--gres=gpu:1", "-t", "120", name="sweep")
    assert wait_until("sprio to list the array", lambda: daemon_env.site_factors([array])[array] is not None,
                      timeout=30)
    daemon = daemon_env.daemon()
    daemon.cycle(time.time())
    given = daemon_env.site_factors([array])[array]
    assert given and given > 0
    busy.cluster.run("scontrol", "update", f"JobId={array}_5", "Comment=alone")
    tasks = {(j["array_job_id"], j["array_task_id"]): j["job_id"] for j in
             json.loads(busy.cluster.run("squeue", "--json").stdout)["jobs"] if j["job_state"] == "PENDING"}
    task = tasks[array, 5]
    assert task != array and daemon_env.site_factors([task]) == {task: given}
    daemon.cycle(time.time() + 100 * 3600)  # past the 96 h guard: the array and the task move
    moved = daemon_env.site_factors([array, task])
    assert moved[task] != given, moved
    with daemon_env.repo() as repo:
        assert {c.job_id: c.original for c in repo.applied_changes()} == {array: "0", task: "0"}
    result = daemon_env.cli("revert")
    assert result.exit_code == 0, result.output
    assert daemon_env.site_factors([array, task]) == {array: 0, task: 0}


def switches_field(daemon_env, job_id: int) -> str:
    """The job's ``Switches=`` as ``scontrol show job`` prints it ('' when it has no request)."""
    line = daemon_env.cluster.run("scontrol", "-o", "show", "job", str(job_id)).stdout
    return next((t.split("=", 1)[1] for t in line.split() if t.startswith("Switches=")), "")


def features_field(daemon_env, job_id: int) -> str:
    """The job's ``Features=`` as ``scontrol show job`` prints it."""
    line = daemon_env.cluster.run("scontrol", "-o", "show", "job", str(job_id)).stdout
    return next(t.split("=", 1)[1] for t in line.split() if t.startswith("Features="))


def test_revert_with_slurm_unreachable_says_it_paused_and_restored_nothing(daemon_env, busy, tmp_path):
    daemon_env.seed_history("short", [60])
    job = busy.submit("--gres=gpu:1", "-t", "120", name="short")
    daemon_env.daemon().cycle(time.time())
    daemon_env.point_at_closed_slurm()
    result = daemon_env.cli("revert")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: slurmsched is paused, but the revert stopped: "), result.stderr
    assert "Run 'slurmsched revert' again once Slurm answers: it restores what is left" in result.stderr
    with daemon_env.repo() as repo:
        assert repo.is_paused() and [c.job_id for c in repo.applied_changes()] == [job]


def test_revert_leaves_a_value_an_admin_set_since(daemon_env, busy):
    daemon_env.seed_history("short", [60, 70, 50])
    ours, theirs = (busy.submit("--gres=gpu:1", "-t", "120", name="short") for _ in range(2))
    daemon = daemon_env.daemon()
    daemon.cycle(time.time())
    set_by_us = daemon_env.site_factors([ours, theirs])
    assert all(v > 0 for v in set_by_us.values()), set_by_us
    busy.cluster.run("scontrol", "update", f"JobId={theirs}", "SiteFactor=31337")
    daemon.cycle(time.time() + 7200)  # an aging tick later the daemon leaves the admin's value too
    assert daemon_env.site_factors([theirs]) == {theirs: 31337}
    preview = daemon_env.cli("revert", "--dry-run")
    assert (f"job {theirs}: SetSiteFactor is 31337, not slurmsched's {set_by_us[theirs]}: would be left as it is"
            in preview.stdout), preview.stdout
    result = daemon_env.cli("revert")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("reverted 1 change on 1 job (1 SetSiteFactor)")
    assert (f"left alone: job {theirs} SetSiteFactor is 31337, not slurmsched's {set_by_us[theirs]}: changed since,"
            " left as it is") in result.stdout
    assert daemon_env.site_factors([ours, theirs]) == {ours: 0, theirs: 31337}
    with daemon_env.repo() as repo:
        assert repo.applied_changes() == []


def test_revert_keeps_a_level_value_an_admin_set_by_hand(daemon_env, busy):
    """A SiteFactor that happens to be one of slurmsched's level values is job_submit.lua's
    only when the script stamped the job's AdminComment with it."""
    daemon = daemon_env.daemon()
    level = daemon.planner.scale(daemon.gateway.snapshot().config).value(3)
    job = busy.submit("--gres=gpu:1", "-t", "120", name="by-hand")
    busy.cluster.run("scontrol", "update", f"JobId={job}", f"SiteFactor={level}")
    result = daemon_env.cli("revert")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("reverted 0 changes on 0 jobs")
    assert daemon_env.site_factors([job]) == {job: level}


def test_revert_warns_of_a_submit_cache_it_cannot_remove(daemon_env, tmp_path):
    """``pause`` says so in its line; ``revert`` said nothing, though job_submit.lua may go
    on valuing new jobs until the paused daemon's next cycle removes the cache."""
    cache = tmp_path / "cache-dir"
    cache.mkdir()
    daemon_env.write(submit_cache=str(cache))
    result = daemon_env.cli("revert")
    assert result.exit_code == 0, result.output
    assert result.stderr == (f"warning: submit cache {cache} NOT removed (Is a directory): the daemon removes it "
                             "at its next cycle\n")
    assert result.stdout.startswith("reverted 0 changes on 0 jobs")


def test_a_revert_run_while_a_cycle_sends_its_updates_leaves_them_recorded(daemon_env, busy):
    """A cycle records each change before sending it: a revert run in between finds the job
    still at its original value and drops that record as never made. The cycle records the
    change again once Slurm answered, so the update that landed after the revert is known."""
    daemon_env.seed_history("short", [60, 70, 50])
    job = busy.submit("--gres=gpu:1", "-t", "120", name="short")
    busy.wait_state(job, {"PENDING"})
    daemon = daemon_env.daemon()
    apply = daemon.engine.gateway.apply
    reverts = []

    def revert_first(actions):
        reverts.append(daemon_env.cli("revert"))
        return apply(actions)

    daemon.engine.gateway.apply = revert_first
    daemon.cycle(time.time())
    assert reverts[0].exit_code == 0 and "reverted 0 changes" in reverts[0].output, reverts[0].output
    value = daemon_env.site_factors([job])[job]
    assert value > 0
    with daemon_env.repo() as repo:
        assert [(c.job_id, c.original, c.current) for c in repo.applied_changes()] == [(job, "0", str(value))]
    result = daemon_env.cli("revert")
    assert "reverted 1 change on 1 job" in result.output, result.output
    assert daemon_env.site_factors([job])[job] == 0
