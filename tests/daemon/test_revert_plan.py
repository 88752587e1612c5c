"""What ``revert`` restores: only values a job still holds from slurmsched (pure planning, no Slurm)."""

from __future__ import annotations

import dataclasses

from slurmsched.config import Config
from slurmsched.daemon import plan_revert
from slurmsched.model import (ClusterSnapshot, JobRecord, JobState, SchedulerConfig, SetFeatures, SetSiteFactor,
                              SetSwitches)
from slurmsched.planner import Planner
from slurmsched.planner.plan import Step
from slurmsched.store.protocol import AppliedChange

PLANNER = Planner(Config())
WEIGHTS = SchedulerConfig(weight_age=1000)
LEVEL = PLANNER.scale(WEIGHTS).value(3)  # a value job_submit.lua could have given


def job(job_id: int, *, site_factor: int | None = 0, features: str = "", admin_comment: str = "") -> JobRecord:
    return JobRecord(job_id=job_id, user="u", name="n", submit_time=0.0, state=JobState.PENDING, gpus=1,
                     partition="gpu", site_factor=site_factor, features=features, admin_comment=admin_comment)


def snapshot(*jobs: JobRecord) -> ClusterSnapshot:
    return ClusterSnapshot(100.0, "c", jobs, (), WEIGHTS)


def test_only_values_the_job_still_holds_from_slurmsched_are_restored() -> None:
    changes = [AppliedChange(1, "SetSiteFactor", "0", "400"),      # still slurmsched's value
               AppliedChange(2, "SetSiteFactor", "0", "400"),      # an admin set 31337 since
               AppliedChange(3, "SetSiteFactor", "0", "400"),      # the update failed: never made
               AppliedChange(4, "SetSiteFactor", "0", "400"),      # sprio does not list it: the record counts
               AppliedChange(5, "SetFeatures", "a100", "a100|v100"),  # the user asked for v100 since
               AppliedChange(6, "SetFeatures", "a100", "a100|v100")]
    plan = plan_revert(snapshot(job(1, site_factor=400), job(2, site_factor=31337), job(3, site_factor=0),
                                job(4, site_factor=None), job(5, features="v100"), job(6, features="a100|v100")),
                       changes)
    assert [(type(a).__name__, a.job_id) for a in plan.actions] == [
        ("SetSiteFactor", 1), ("SetSiteFactor", 4), ("SetFeatures", 6)]
    assert [(c.job_id, live) for c, live in plan.left] == [(2, "31337"), (5, "v100")]
    assert [c.job_id for c in plan.unmade] == [3]
    assert plan.actions[2] == SetFeatures(6, "a100", "a100|v100", "revert: restore the value before slurmsched")


def test_switches_are_compared_with_the_request_and_wait_the_queue_shows() -> None:
    """A multi-node job's Switches as the gateway reads them (22.05: ``scontrol show job``;
    ``None`` where it did not read them, which leaves the record to decide)."""
    def multi(job_id: int, switches: int | None, wait: int | None) -> JobRecord:
        return dataclasses.replace(job(job_id), nodes=2, gpus=8, switches=switches, switch_wait_s=wait)

    changes = [AppliedChange(11, "SetSwitches", "0", "1@600"),    # still slurmsched's request
               AppliedChange(12, "SetSwitches", "0", "1@600"),    # the user asked for 2@300 since
               AppliedChange(13, "SetSwitches", "0", "1@600"),    # the update failed: never made
               AppliedChange(14, "SetSwitches", "0", "1@600"),    # not read: the record counts
               AppliedChange(15, "SetSwitches", "0", "1@600")]    # the same count, a longer wait since
    plan = plan_revert(snapshot(multi(11, 1, 600), multi(12, 2, 300), multi(13, 0, None), multi(14, None, None),
                                multi(15, 1, 900)), changes)
    assert plan.actions == (SetSwitches(11, 0, None, 1, 600, "revert: restore the value before slurmsched"),
                            SetSwitches(14, 0, None, 1, 600, "revert: restore the value before slurmsched"))
    assert [(c.job_id, live) for c, live in plan.left] == [(12, "2@300"), (15, "1@900")]
    assert [c.job_id for c in plan.unmade] == [13]


def test_a_value_without_a_record_is_restored_only_when_job_submit_lua_stamped_it() -> None:
    """A level value alone may be an admin's (or the stamp may name an older value)."""
    plan = plan_revert(snapshot(job(7, site_factor=LEVEL, admin_comment=f"slurmsched:site_factor={LEVEL}"),
                                job(8, site_factor=LEVEL),
                                job(9, site_factor=LEVEL, admin_comment="slurmsched:site_factor=1")), [])
    assert plan.actions == (SetSiteFactor(7, 0, LEVEL, "revert: SiteFactor set at submit by job_submit.lua"),)


def test_a_stamped_job_sprio_does_not_list_is_restored_by_its_stamp() -> None:
    """Held, or its begin time put ahead, since job_submit.lua valued it: sprio does not list
    it, so the stamp names the value (as a record names it for a job slurmsched changed)."""
    plan = plan_revert(snapshot(job(7, site_factor=None, admin_comment=f"slurmsched:site_factor={LEVEL}"),
                                job(8, site_factor=None, admin_comment="slurmsched:site_factor=0"),
                                job(9, site_factor=None, admin_comment="slurmsched:site_factor=x1"),
                                job(10, site_factor=None, admin_comment="urgent, ask bob")), [])
    assert plan.actions == (SetSiteFactor(7, 0, LEVEL, "revert: SiteFactor set at submit by job_submit.lua"),)
    assert plan_revert(snapshot(job(7, site_factor=None, admin_comment=f"slurmsched:site_factor={LEVEL}")), [],
                       restored={7}).actions == ()  # the stamp stays: a later pass of the same revert skips it


def test_only_a_stamped_value_is_adopted_as_job_submit_luas() -> None:
    """Adopting records 0 as the original: right for the script's value, wrong for an admin's."""
    scale = PLANNER.scale(WEIGHTS)
    step, target, _ = PLANNER.site_factor_step(job(7), 3600.0, True, None, scale)
    assert step is Step.SEND and target > 0
    stamped = job(7, site_factor=target, admin_comment=f"slurmsched:site_factor={target}")
    assert PLANNER.site_factor_step(stamped, 3600.0, True, None, scale)[0] is Step.ADOPT
    by_hand = dataclasses.replace(stamped, admin_comment="")
    assert PLANNER.site_factor_step(by_hand, 3600.0, True, None, scale)[0] is Step.KEEP


def test_a_job_sprio_does_not_list_is_left_alone_until_it_does() -> None:
    """A job whose begin time is ahead: its SiteFactor is unknown, so it is neither changed
    nor recorded (a record would keep 0 as the original and revert would lose an admin's value)."""
    scale = PLANNER.scale(WEIGHTS)
    assert PLANNER.site_factor_step(job(9, site_factor=None), 100.0, True, None, scale)[0] is Step.KEEP
    assert PLANNER.site_factor_step(job(9, site_factor=0), 100.0, True, None, scale)[0] is Step.SEND


def test_a_running_jobs_site_factor_and_switches_are_restored_and_its_features_kept() -> None:
    """A requeue brings a running job back pending with the values it had: 22.05 takes
    SiteFactor and Switches on a running job (restored by the record: sprio does not list
    it), not Features (kept for when the job is pending again). Only records of jobs that
    left the queue are dropped."""
    running = dataclasses.replace(job(21, site_factor=None, features="a100|v100"), state=JobState.RUNNING,
                                  nodes=2, gpus=8)
    changes = [AppliedChange(21, "SetSiteFactor", "0", "400"),
               AppliedChange(21, "SetSwitches", "0", "1@600"),
               AppliedChange(21, "SetFeatures", "a100", "a100|v100"),
               AppliedChange(22, "SetSiteFactor", "0", "400")]   # finished: no longer in the queue
    plan = plan_revert(snapshot(running), changes)
    assert plan.actions == (SetSiteFactor(21, 0, 400, "revert: restore the value before slurmsched"),
                            SetSwitches(21, 0, None, 1, 600, "revert: restore the value before slurmsched"))
    assert plan.kept == ((changes[2], JobState.RUNNING),)
    assert plan.gone == (changes[3],)
    assert (plan.left, plan.unmade) == ((), ())


def test_a_running_jobs_features_changed_since_are_left_and_never_kept() -> None:
    """The queue shows a running job's Features: a value that is no longer slurmsched's is
    left (record dropped), one that is the original again was never made (record dropped)."""
    changed = dataclasses.replace(job(23, site_factor=None, features="h100"), state=JobState.RUNNING)
    never = dataclasses.replace(job(24, site_factor=None, features="a100"), state=JobState.RUNNING)
    changes = [AppliedChange(23, "SetFeatures", "a100", "a100|v100"),
               AppliedChange(24, "SetFeatures", "a100", "a100|v100")]
    plan = plan_revert(snapshot(changed, never), changes)
    assert (plan.actions, plan.kept) == ((), ())
    assert plan.left == ((changes[0], "h100"),) and plan.unmade == (changes[1],)


def task(job_id: int, array: int, **fields) -> JobRecord:
    """A task split off job array ``array`` (its own job id, the array's ArrayJobId)."""
    return dataclasses.replace(job(job_id, **fields), array_job_id=array, array_task_id=job_id)


def test_a_task_split_off_an_array_is_restored_by_its_arrays_record() -> None:
    """Slurm gives a split-off task the array's values; without a record of its own, the
    array's speaks for it, original included. A task holding a value of its own (an
    admin's, or the original) gets nothing; one with its own record goes by that."""
    array = dataclasses.replace(job(2, site_factor=400), array_job_id=2)
    changes = [AppliedChange(2, "SetSiteFactor", "5", "400"), AppliedChange(9, "SetSiteFactor", "0", "800")]
    plan = plan_revert(snapshot(array, task(7, 2, site_factor=400), task(8, 2, site_factor=31337),
                                task(9, 2, site_factor=800), task(10, 2, site_factor=5)), changes)
    assert plan.actions == (SetSiteFactor(2, 5, 400, "revert: restore the value before slurmsched"),
                            SetSiteFactor(9, 0, 800, "revert: restore the value before slurmsched"),
                            SetSiteFactor(7, 5, 400, "revert: restore the value before slurmsched"
                                                     " (inherited from job array 2)"))
    assert plan.inherited == (AppliedChange(7, "SetSiteFactor", "5", "400"),)
    assert (plan.gone, plan.left, plan.unmade) == ((), (), ())


def test_an_arrays_record_outlives_its_job_while_a_task_holds_its_value() -> None:
    """The array's own job left the queue (its last task ran): its record is dropped only
    once no task split off it holds its value; a running task's Features are kept."""
    changes = [AppliedChange(2, "SetSiteFactor", "0", "400"), AppliedChange(2, "SetFeatures", "a100", "a100|v100")]
    running = dataclasses.replace(task(7, 2, site_factor=None, features="a100|v100"), state=JobState.RUNNING)
    plan = plan_revert(snapshot(running), changes)
    assert plan.actions == (SetSiteFactor(7, 0, 400, "revert: restore the value before slurmsched"
                                                     " (inherited from job array 2)"),)
    assert plan.kept == ((AppliedChange(7, "SetFeatures", "a100", "a100|v100"), JobState.RUNNING),)
    assert plan.gone == ()
    # the next pass of the same revert: the task's Features record is its own now (revert_all)
    copy = plan.inherited[1]
    later = plan_revert(snapshot(running), [*changes, copy], restored={7})
    assert (later.actions, later.kept, later.gone) == ((), ((copy, JobState.RUNNING),), tuple(changes))
    settled = plan_revert(snapshot(task(7, 2, site_factor=0, features="a100")), changes)
    assert (settled.actions, settled.gone) == ((), tuple(changes))


def test_the_planner_takes_a_split_off_tasks_inherited_value_for_slurmscheds() -> None:
    """A value that is no level (the scale changed since) and no stamp is an admin's on a
    job without a record; on a task whose array has the record it is slurmsched's."""
    from slurmsched.policy.base import JobScore, Ranking
    off_level = LEVEL + 1
    array_record = {(2, "SetSiteFactor"): AppliedChange(2, "SetSiteFactor", "0", str(off_level))}
    ranking = Ranking("qssf", True, (JobScore(7, 3600.0, 1, "short"),), None)
    plan = PLANNER.plan(ranking, snapshot(task(7, 2, site_factor=off_level)), array_record)
    assert [(a.job_id, a.previous) for a in plan.actions] == [(7, off_level)]
    assert PLANNER.plan(ranking, snapshot(job(7, site_factor=off_level)), array_record).actions == ()
