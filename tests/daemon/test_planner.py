"""Planner: SiteFactor levels sized against PriorityWeight*, guard rails, revert, wait bound."""

from __future__ import annotations

import dataclasses
import math

import pytest

from slurmsched.config import Config, ConstraintsSection, PlannerSection, PolicySection, load_config
from slurmsched.errors import ConfigError
from slurmsched.gateway.argv import SITE_FACTOR_LIMIT, site_factor_argv
from slurmsched.model import (ClusterSnapshot, GresRequest, JobRecord, NodeRecord, Prediction, SchedulerConfig,
                              SetFeatures, SetSiteFactor, SetSwitches)
from slurmsched.planner import Planner, SiteFactorScale, count_rpcs, describe, guaranteed_wait_bound, revert_actions
from slurmsched.planner.scale import GUARD_LEVEL, other_weights
from slurmsched.policy import PolicyContext, make_policy
from slurmsched.store.protocol import AppliedChange

HOUR = 3600.0
NOW = 1_800_000_000.0
WEIGHTS = SchedulerConfig(weight_age=1000, weight_fairshare=10000, weight_job_size=500, weight_qos=2000,
                          weight_tres="CPU=100,GRES/gpu=400", priority_max_age_s=7 * 86400)


def config(**planner: object) -> Config:
    return dataclasses.replace(Config(), planner=PlannerSection(**planner))


def job(job_id: int, *, gpus: int = 1, hours_ago: float = 0.0, site_factor: int | None = 0, **fields: object) -> JobRecord:
    return JobRecord(job_id=job_id, user="alice", name=f"j{job_id}", submit_time=NOW - hours_ago * HOUR,
                     gpus=gpus, partition=str(fields.pop("partition", "gpu")), site_factor=site_factor,
                     priority=int(fields.pop("priority", 1000)), **fields)


def snapshot(jobs: list[JobRecord], nodes: tuple[NodeRecord, ...] = (), sched: SchedulerConfig = WEIGHTS) -> ClusterSnapshot:
    return ClusterSnapshot(NOW, "test", tuple(jobs), nodes, sched)


def ranked(jobs: list[JobRecord], hours: dict[int, float], policy: str = "qssf"):
    predictions = {i: Prediction(i, h * HOUR, h * HOUR, h * HOUR, "test") for i, h in hours.items()}
    return make_policy(policy).rank(PolicyContext(NOW, tuple(jobs), predictions))


def plan_for(planner: Planner, jobs: list[JobRecord], hours: dict[int, float], applied=None, policy: str = "qssf",
             nodes: tuple[NodeRecord, ...] = (), sched: SchedulerConfig = WEIGHTS):
    return planner.plan(ranked(jobs, hours, policy), snapshot(jobs, nodes, sched), applied or {})


def test_dominate_step_outweighs_every_other_factor() -> None:
    scale = SiteFactorScale.build(PlannerSection(), WEIGHTS)
    assert other_weights(WEIGHTS) == 1000 + 10000 + 500 + 2000 + 100 + 400
    assert scale.step == other_weights(WEIGHTS) + 1
    # 0.05 GPU-h .. 50000 GPU-h in doublings: 20 levels above level 0.
    assert scale.top == math.ceil(math.log2(50000 / 0.05))
    assert scale.value(scale.top) == 0
    assert scale.value(GUARD_LEVEL) == (scale.top + 1) * scale.step
    assert scale.site_factor(0.0) > scale.site_factor(1.0) >= scale.site_factor(3600.0) > scale.site_factor(1e12)
    assert scale.level_of_value(scale.value(7)) == 7
    assert scale.level_of_value(scale.value(7) + 1) is None


def test_blend_spreads_levels_over_the_largest_weight_or_blend_range() -> None:
    scale = SiteFactorScale.build(PlannerSection(mode="blend"), WEIGHTS)
    assert (scale.top + 1) * scale.step <= 10000
    assert scale.step == 10000 // (scale.top + 1)
    custom = SiteFactorScale.build(PlannerSection(mode="blend", blend_range=42000), WEIGHTS)
    assert custom.step == 42000 // (custom.top + 1)


def test_site_factor_depends_on_the_jobs_own_score_not_its_rank() -> None:
    planner = Planner(Config())
    jobs = [job(i, gpus=1 + i % 8, hours_ago=i * 0.3) for i in range(1, 40)]
    hours = {j.job_id: 0.2 * j.job_id for j in jobs}
    before = {a.job_id: a.value for a in plan_for(planner, jobs, hours).actions}
    arrival = job(100, gpus=1)
    after = {a.job_id: a.value for a in plan_for(planner, [*jobs, arrival], {**hours, 100: 0.01}).actions}
    assert after.pop(100) > 0
    assert after == before


def test_unchanged_queue_plans_nothing() -> None:
    planner = Planner(Config())
    jobs = [job(i, gpus=1 + i % 4, hours_ago=i) for i in range(1, 30)]
    hours = {j.job_id: 0.5 * j.job_id for j in jobs}
    first = plan_for(planner, jobs, hours)
    assert first.rpcs == count_rpcs(first.actions) > 0
    applied = {(a.job_id, "SetSiteFactor"): AppliedChange(a.job_id, "SetSiteFactor", "0", str(a.value))
               for a in first.actions}
    values = {a.job_id: a.value for a in first.actions}
    settled = [dataclasses.replace(j, site_factor=values.get(j.job_id, 0)) for j in jobs]
    second = plan_for(planner, settled, hours, applied)
    assert second.actions == () and second.rpcs == 0 and second.adopted == ()


def test_values_set_at_submit_are_adopted_for_revert() -> None:
    planner = Planner(Config())
    scale = planner.scale(WEIGHTS)
    j = job(1, gpus=2)
    target = scale.site_factor(2 * 1.0 * HOUR)
    stamped = dataclasses.replace(j, site_factor=target, admin_comment=f"slurmsched:site_factor={target}")
    plan = plan_for(planner, [stamped], {1: 1.0})
    assert plan.actions == ()
    assert [(a.job_id, a.value, a.previous) for a in plan.adopted] == [(1, target, 0)]
    # without job_submit.lua's stamp the same value may be an admin's: kept, not adopted (revert keeps it too)
    by_hand = plan_for(planner, [dataclasses.replace(j, site_factor=target)], {1: 1.0})
    assert by_hand.actions == () and by_hand.adopted == ()


def test_hysteresis_keeps_a_level_for_small_changes_but_not_the_guard() -> None:
    planner = Planner(config(hysteresis_levels=0.25))
    scale = planner.scale(WEIGHTS)
    level_value = scale.site_factor(4 * HOUR)  # 4 GPU-h
    # Level of 4 GPU-h covers [3.2, 6.4) GPU-h; 6.6 GPU-h is 0.04 levels past it: held.
    ours = {(1, "SetSiteFactor"): AppliedChange(1, "SetSiteFactor", "0", str(level_value))}
    held = plan_for(planner, [job(1, site_factor=level_value)], {1: 6.6}, ours)
    assert held.actions == () and held.held == 1
    # Without a record the held value is adopted when job_submit.lua stamped it.
    stamped = job(1, site_factor=level_value, admin_comment=f"slurmsched:site_factor={level_value}")
    assert [a.value for a in plan_for(planner, [stamped], {1: 6.6}).adopted] == [level_value]
    moved = plan_for(planner, [job(1, site_factor=level_value)], {1: 9.0})
    assert [a.value for a in moved.actions] == [scale.site_factor(9 * HOUR)]
    guard = plan_for(planner, [job(1, site_factor=level_value, hours_ago=100)], {1: 4.0})  # past the 96 h guard
    assert [a.value for a in guard.actions] == [scale.value(GUARD_LEVEL)]


def test_rpc_cap_sends_best_ranked_first_and_defers_the_rest() -> None:
    planner = Planner(config(max_rpcs_per_cycle=2))
    jobs = [job(i, gpus=1) for i in range(1, 6)]
    hours = {1: 0.1, 2: 1.0, 3: 10.0, 4: 100.0, 5: 1000.0}  # five different levels
    plan = plan_for(planner, jobs, hours)
    assert [a.job_id for a in plan.actions] == [1, 2]
    assert plan.deferred == 3 and plan.rpcs == 2
    many = [job(i, gpus=1) for i in range(1, 200)]
    same = plan_for(planner, many, {i: 1.0 for i in range(1, 200)})
    assert len(same.actions) == 199 and same.rpcs == 1  # one value: one batched call


def test_protected_partitions_qos_and_held_jobs_are_never_touched() -> None:
    planner = Planner(config(protected_partitions=("urgent",), protected_qos=("vip",)))
    jobs = [job(1, partition="urgent"), job(2, qos="vip"), job(3, priority=0), job(4, partition="gpu,urgent"),
            job(5)]
    plan = plan_for(planner, jobs, {i: 1.0 for i in range(1, 6)})
    assert [a.job_id for a in plan.actions] == [5]


def test_a_job_slurmsched_changed_before_it_was_protected_gets_its_original_back() -> None:
    """A new protected_* setting, or a job moved into a protected partition or QOS: the
    value slurmsched set is undone; a held job and an untouched one stay as they are."""
    planner = Planner(config(protected_partitions=("urgent",), protected_qos=("vip",)))
    level = planner.scale(WEIGHTS).site_factor(HOUR)
    jobs = [job(1, partition="gpu,urgent", site_factor=level), job(2, qos="vip", site_factor=level),
            job(3, qos="vip", site_factor=level, priority=0), job(4, qos="vip", site_factor=level),
            job(5, partition="urgent", site_factor=7)]
    applied = {(i, "SetSiteFactor"): AppliedChange(i, "SetSiteFactor", "7" if i == 5 else "0", str(level))
               for i in (1, 2, 3, 5)}
    plan = plan_for(planner, jobs, {i: 1.0 for i in range(1, 6)}, applied)
    reason = "protected partition or QOS: undo slurmsched's SiteFactor"
    assert plan.actions == (SetSiteFactor(1, 0, level, reason), SetSiteFactor(2, 0, level, reason))
    assert plan.settled == ((5, "SetSiteFactor"),)


def test_a_value_set_by_hand_since_stands_and_a_failed_level_change_is_sent_again() -> None:
    """An admin's ``scontrol update SiteFactor=`` after slurmsched's is left as it is (revert
    leaves it too); a level value other than the recorded one is an update that failed."""
    planner = Planner(config())
    scale = planner.scale(WEIGHTS)
    target, other = scale.site_factor(HOUR), scale.site_factor(100 * HOUR)
    by_hand = target + 1  # not a level value
    assert scale.level_of_value(by_hand) is None
    jobs = [job(1, site_factor=by_hand), job(2, site_factor=other), job(3, site_factor=0)]
    recorded = {i: AppliedChange(i, "SetSiteFactor", "0", str(target if i == 3 else other + scale.step))
                for i in (1, 2, 3)}
    recorded[1] = AppliedChange(1, "SetSiteFactor", "0", str(other))
    applied = {(i, "SetSiteFactor"): c for i, c in recorded.items()}
    plan = plan_for(planner, jobs, {1: 1.0, 2: 1.0, 3: 1.0}, applied)
    assert {a.job_id: (a.previous, a.value) for a in plan.actions} == {2: (other, target), 3: (0, target)}
    fifo = plan_for(planner, jobs, {}, applied, policy="fifo")
    assert {a.job_id: (a.previous, a.value) for a in fifo.actions} == {2: (other, 0)}
    assert fifo.settled == ((3, "SetSiteFactor"),)


def test_fifo_only_restores_values_slurmsched_set() -> None:
    planner = Planner(Config())
    jobs = [job(1, site_factor=5000), job(2, site_factor=777), job(3, site_factor=0)]
    applied = {(1, "SetSiteFactor"): AppliedChange(1, "SetSiteFactor", "0", "5000"),
               (3, "SetSiteFactor"): AppliedChange(3, "SetSiteFactor", "0", "9000")}
    plan = plan_for(planner, jobs, {}, applied, policy="fifo")
    assert plan.actions == (SetSiteFactor(1, 0, 5000, "fifo: undo slurmsched's SiteFactor"),)
    assert plan.settled == ((3, "SetSiteFactor"),)


def test_switches_for_multi_node_gpu_jobs_only_with_topology_tree() -> None:
    tree = dataclasses.replace(WEIGHTS, topology_plugin="topology/tree", max_switch_wait_s=300)
    jobs = [job(1, gpus=16, nodes=2), job(2, gpus=8), job(3, gpus=16, nodes=2, switches=1), job(4, gpus=0, nodes=2)]
    plan = plan_for(Planner(Config()), jobs, {i: 1.0 for i in range(1, 5)}, sched=tree)
    switches = [a for a in plan.actions if isinstance(a, SetSwitches)]
    assert switches == [SetSwitches(1, 1, 300, 0, None, switches[0].reason)]  # 600 s capped at max_switch_wait
    assert not [a for a in plan_for(Planner(Config()), jobs, {}, sched=WEIGHTS).actions if isinstance(a, SetSwitches)]
    off = dataclasses.replace(Config(), constraints=ConstraintsSection(switches=False))
    assert not [a for a in plan_for(Planner(off), jobs, {}, sched=tree).actions if isinstance(a, SetSwitches)]


def gpu_node(name: str, gpu_type: str, used: int, state: str = "MIXED") -> NodeRecord:
    return NodeRecord(name, (state,), ("gpu",), 64, 0, 512000, (gpu_type,), (GresRequest("gpu", gpu_type, 8),),
                      (GresRequest("gpu", gpu_type, used),))


def test_gpu_type_widening_to_an_idle_equivalent_type() -> None:
    equivalence = dataclasses.replace(Config(), constraints=ConstraintsSection(gpu_equivalence=(("a100", "h100"),)))
    planner = Planner(equivalence)
    saturated = (gpu_node("g1", "a100", 8), gpu_node("g2", "a100", 7), gpu_node("h1", "h100", 0, "IDLE"))
    jobs = [job(1, gpus=4, features="a100"), job(2, gpus=4, features="a100"), job(3, gpus=4, features="a100"),
            job(4, gpus=2, features="a100", gpu_type="a100"), job(5, gpus=2, features="v100")]
    plan = plan_for(planner, jobs, {1: 1.0, 2: 2.0, 3: 3.0, 4: 0.5, 5: 0.5}, nodes=saturated)
    widened = [a for a in plan.actions if isinstance(a, SetFeatures)]
    # 8 idle h100 GPUs: the two best-ranked 4-GPU jobs; typed GRES and unknown types untouched.
    assert [(a.job_id, a.features, a.previous) for a in widened] == [(1, "a100|h100", "a100"), (2, "a100|h100", "a100")]
    roomy = (gpu_node("g1", "a100", 0, "IDLE"), gpu_node("h1", "h100", 0, "IDLE"))
    assert not [a for a in plan_for(planner, jobs, {}, nodes=roomy).actions if isinstance(a, SetFeatures)]
    drained = (gpu_node("g1", "a100", 8), gpu_node("h1", "h100", 0, "DRAIN"))
    assert not [a for a in plan_for(planner, jobs, {}, nodes=drained).actions if isinstance(a, SetFeatures)]


def test_every_change_is_revertible() -> None:
    actions = [SetSiteFactor(1, 4242, 0), SetSwitches(2, 1, 600, 0, None), SetFeatures(3, "a100|h100", "a100")]
    changes = [AppliedChange(a.job_id, kind, previous, new) for a in actions for kind, previous, new in [describe(a)]]
    assert revert_actions(changes) == [SetSiteFactor(1, 0, 4242, revert_actions(changes)[0].reason),
                                       SetSwitches(2, 0, None, 1, 600, revert_actions(changes)[1].reason),
                                       SetFeatures(3, "a100", "a100|h100", revert_actions(changes)[2].reason)]


def test_guaranteed_wait_bound() -> None:
    bound = guaranteed_wait_bound(Config(), WEIGHTS)
    assert bound.seconds == 99 * HOUR + 60.0
    assert "no later job overtakes it" in bound.explanation
    assert ("after max_wait_h=96 h or 0.5 x its backlog wait or 4 x its expected run time (at most its time limit)"
            " if longer"
            " (+ aging_step_h=3 h") in bound.explanation
    fixed = dataclasses.replace(Config(), policy=PolicySection(qssf={"backlog_factor": 0, "slowdown_factor": 0}))
    assert "after max_wait_h=96 h (+ aging_step_h=3 h" in guaranteed_wait_bound(fixed, WEIGHTS).explanation
    blend = guaranteed_wait_bound(config(mode="blend"), WEIGHTS)
    assert blend.seconds is None and "fair-share" in blend.explanation
    # Blend still bounds when the level step beats every non-age weight.
    age_only = SchedulerConfig(weight_age=100000, weight_fairshare=10)
    assert guaranteed_wait_bound(config(mode="blend"), age_only).seconds == 99 * HOUR + 60.0
    noaging = dataclasses.replace(Config(), policy=dataclasses.replace(Config().policy, name="qssf-noaging"))
    assert guaranteed_wait_bound(noaging, WEIGHTS).seconds is None
    fifo = dataclasses.replace(Config(), policy=dataclasses.replace(Config().policy, name="fifo"))
    assert guaranteed_wait_bound(fifo, WEIGHTS).seconds == 0.0
    basic = dataclasses.replace(WEIGHTS, priority_type="priority/basic")
    assert guaranteed_wait_bound(Config(), basic).seconds == 0.0


@pytest.mark.parametrize(("toml", "message"), [
    ('[planner]\nmode = "rule"\n', r"planner\.mode must be dominate or blend"),
    ("[planner]\nlevel_ratio = 1\n", r"planner\.level_ratio must be > 1"),
    ("[planner]\nmax_rpcs_per_cycle = 0\n", r"planner\.max_rpcs_per_cycle must be >= 1"),
    ("[planner]\nhysteresis_levels = 1.5\n", r"planner\.hysteresis_levels must be >= 0 and < 1"),
    ("[planner]\nmax_service_gpu_h = 0.01\n", r"planner\.max_service_gpu_h must be > min_service_gpu_h"),
    ("[constraints]\nswitch_wait_s = -1\n", r"constraints\.switch_wait_s must be >= 0"),
    ("[sim]\nworkers = 0\n", r"sim\.workers must be >= 1"),
    ('[constraints]\ngpu_equivalence = [["a100"]]\n', r"constraints\.gpu_equivalence\[0\] must name at least two"),
    ('[constraints]\ngpu_equivalence = [["a100", "h100"], ["h100", "l40"]]\n', r"'h100' is in two classes"),
])
def test_planner_and_constraints_config_errors_name_the_key(tmp_path, toml: str, message: str) -> None:
    path = tmp_path / "slurmsched.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=message):
        load_config(path, environ={})


def test_config_sections_from_toml_and_environment(tmp_path) -> None:
    path = tmp_path / "slurmsched.toml"
    path.write_text('[planner]\nmode = "blend"\nprotected_qos = ["vip"]\n'
                    '[constraints]\ngpu_equivalence = [["a100", "h100"]]\n')
    loaded = load_config(path, environ={"SLURMSCHED_PLANNER_MAX_RPCS_PER_CYCLE": "7"})
    assert loaded.planner.mode == "blend" and loaded.planner.protected_qos == ("vip",)
    assert loaded.planner.max_rpcs_per_cycle == 7
    assert loaded.constraints.gpu_equivalence == (("a100", "h100"),)


def test_a_capped_step_is_reported_by_the_planner_not_by_building_the_scale(caplog) -> None:
    """Building the scale (as ``config check`` and the wait bound do) logs nothing; the
    planner logs the cap once per scheduler configuration."""
    section = PlannerSection(level_ratio=1.0000001)
    with caplog.at_level("WARNING"):
        scale = SiteFactorScale.build(section, WEIGHTS)
    assert not caplog.records
    assert scale.capped_from == other_weights(WEIGHTS) + 1 and (scale.top + 1) * scale.step <= SITE_FACTOR_LIMIT
    assert scale.cap_warning() == (f"PriorityWeight* sum too large for {scale.top + 2} SiteFactor levels; step "
                                   f"capped at {scale.step} (the mode asks for {scale.capped_from})")
    assert SiteFactorScale.build(PlannerSection(), WEIGHTS).cap_warning() is None
    planner = Planner(config(level_ratio=1.0000001))
    with caplog.at_level("WARNING", logger="slurmsched.planner.plan"):
        assert planner.scale(WEIGHTS) == planner.scale(WEIGHTS) == scale
    assert caplog.messages == [scale.cap_warning()]


def test_a_capped_scale_sends_only_values_scontrol_accepts() -> None:
    """scontrol refuses a SiteFactor beyond +/-(NICE_OFFSET - 3): a capped step must keep the
    guard level, its largest value, within that, or every job that reached the guard would
    be refused for ever."""
    huge = SchedulerConfig(weight_fairshare=200_000_000)
    scale = SiteFactorScale.build(PlannerSection(), huge)
    assert scale.capped_from is not None
    guard = scale.value(GUARD_LEVEL)
    assert guard <= SITE_FACTOR_LIMIT
    assert site_factor_argv([1], guard) == ["update", "JobId=1", f"SiteFactor={guard}"]


def test_a_value_an_admin_set_before_slurmsched_touched_the_job_stands() -> None:
    """``scontrol update SiteFactor=`` on a job slurmsched has not changed yet (a value that
    is neither a level nor job_submit.lua's): the admin's value is not overwritten."""
    planner = Planner(config())
    scale = planner.scale(WEIGHTS)
    boosted, lowered = scale.value(0) + 123, -500
    assert scale.level_of_value(boosted) is None and scale.level_of_value(lowered) is None
    jobs = [job(1, site_factor=boosted), job(2, site_factor=lowered), job(3, site_factor=0)]
    plan = plan_for(planner, jobs, {1: 1.0, 2: 1.0, 3: 1.0})
    assert [a.job_id for a in plan.actions] == [3] and plan.adopted == ()
    # job_submit.lua's stamp of a value that is no level any more (the weights changed): slurmsched's own
    stale = job(4, site_factor=boosted, admin_comment=f"slurmsched:site_factor={boosted}")
    assert [(a.job_id, a.previous) for a in plan_for(planner, [stale], {4: 1.0}).actions] == [(4, 0)]
