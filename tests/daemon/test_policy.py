"""Queue-ordering policies: registry, typed arguments, QSSF order, aging guard, purity."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import pytest

from slurmsched.config import load_config
from slurmsched.errors import ConfigError
from slurmsched.model import GresRequest, JobRecord, NodeRecord, Prediction
from slurmsched.policy import POLICIES, PolicyContext, make_policy
from slurmsched.policy.base import backlog_waits

HOUR = 3600.0
NOW = 1_800_000_000.0  # a whole number of hours, so aging ticks line up with submit times below


def job(job_id: int, *, gpus: int = 1, cpus: int = 1, submitted_h_ago: float = 0.0, limit_s: int | None = 86400,
        user: str = "alice", name: str = "train") -> JobRecord:
    return JobRecord(job_id=job_id, user=user, name=name, submit_time=NOW - submitted_h_ago * HOUR,
                     gpus=gpus, cpus=cpus, time_limit_s=limit_s)


def predicted(job_id: int, hours: float, source: str = "user+name history, 12 runs", *,
              spread: float = 1.0) -> Prediction:
    """A prediction whose 10th and 90th percentiles are ``spread`` times off either way (1: a sure one)."""
    return Prediction(job_id, hours * HOUR, hours * HOUR / spread, hours * HOUR * spread, source)


def rank_ids(policy_name: str, jobs: list[JobRecord], predictions: list[Prediction], now: float = NOW,
             **args: object) -> list[int]:
    ranking = make_policy(policy_name, args).rank(
        PolicyContext(now, tuple(jobs), {p.job_id: p for p in predictions}))
    return [s.job_id for s in ranking.scores]


def test_registry_names_and_unknown_policy() -> None:
    assert set(POLICIES) == {"fifo", "qssf", "qssf-noaging"}
    with pytest.raises(ConfigError, match=r"policy.name must be one of fifo, qssf, qssf-noaging \(got 'sjf'\)"):
        make_policy("sjf")


@pytest.mark.parametrize(("args", "message"), [
    ({"cpu_gpu_weight": 0}, r"policy\.qssf\.cpu_gpu_weight must be > 0 \(got 0\.0\)"),
    ({"max_wait_h": -1}, r"policy\.qssf\.max_wait_h must be > 0"),
    ({"halflife_h": 0}, r"policy\.qssf\.halflife_h must be > 0"),
    ({"aging_step_h": 100}, r"policy\.qssf\.aging_step_h must be > 0 and <= max_wait_h"),
    ({"max_wait_h": "soon"}, r"policy\.qssf\.max_wait_h must be a number \(got 'soon'\)"),
    ({"typo": 1}, r"unknown key policy\.qssf\.typo"),
    ({"estimate": "p90"}, r"policy\.qssf\.estimate must be median or mean \(got 'p90'\)"),
    ({"backlog_factor": -1}, r"policy\.qssf\.backlog_factor must be >= 0 \(got -1\.0\)"),
    ({"slowdown_factor": -2}, r"policy\.qssf\.slowdown_factor must be >= 0 \(got -2\.0\)"),
])
def test_qssf_args_are_validated_naming_the_key(args: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_policy("qssf", args)


def test_policy_section_of_config_file_is_validated(tmp_path) -> None:
    path = tmp_path / "slurmsched.toml"
    path.write_text('[policy]\nname = "qssf"\n[policy.qssf]\ncpu_gpu_weight = -2\n')
    with pytest.raises(ConfigError, match=r"policy\.qssf\.cpu_gpu_weight must be > 0"):
        load_config(path, environ={})
    path.write_text('[policy]\nname = "qssf-noaging"\n[policy.qssf]\nmax_wait_h = 12\n')
    assert load_config(path, environ={}).policy.args_for("qssf-noaging") == {"max_wait_h": 12}


def test_qssf_orders_by_predicted_gpu_time() -> None:
    jobs = [job(1, gpus=8), job(2, gpus=1), job(3, gpus=2), job(4, gpus=4)]
    # GPU-hours: 1 -> 8 x 1 h = 8, 2 -> 1 x 10 h = 10, 3 -> 2 x 2 h = 4, 4 -> 4 x 0.5 h = 2
    predictions = [predicted(1, 1), predicted(2, 10), predicted(3, 2), predicted(4, 0.5)]
    assert rank_ids("qssf", jobs, predictions) == [4, 3, 1, 2]
    assert rank_ids("qssf-noaging", jobs, predictions) == [4, 3, 1, 2]


def test_cpu_only_jobs_count_cpus_times_weight() -> None:
    jobs = [job(1, gpus=0, cpus=32), job(2, gpus=1)]
    predictions = [predicted(1, 1), predicted(2, 2)]
    # 32 CPUs x 0.125 = 4 GPU-h against 2 GPU-h; with weight 0.01, 0.32 GPU-h.
    assert rank_ids("qssf", jobs, predictions) == [2, 1]
    assert rank_ids("qssf", jobs, predictions, cpu_gpu_weight=0.01) == [1, 2]


def test_missing_prediction_falls_back_to_time_limit() -> None:
    jobs = [job(1, gpus=1, limit_s=7200), job(2, gpus=1, limit_s=None)]
    policy = make_policy("qssf")
    assert policy.score(jobs[0], None, NOW) == 7200.0
    assert policy.score(jobs[1], None, NOW) == 3600.0
    assert "no prediction: time limit" in policy.explain(jobs[0], None, NOW)


def test_ties_break_by_submit_time_then_job_id() -> None:
    jobs = [job(7, submitted_h_ago=0.5), job(5, submitted_h_ago=0.5), job(6, submitted_h_ago=0.8)]
    predictions = [predicted(i, 1) for i in (5, 6, 7)]
    for name in ("qssf-noaging", "fifo"):
        assert rank_ids(name, jobs, predictions) == [6, 5, 7]
        assert rank_ids(name, list(reversed(jobs)), predictions) == [6, 5, 7]


def test_aging_guard_puts_a_job_that_waited_max_wait_ahead_of_later_jobs() -> None:
    guard = {"max_wait_h": 24, "halflife_h": 6}
    big = job(1, gpus=64, submitted_h_ago=25)  # 64 GPUs x 5 h, waited 25 h > 24 h guard (> 4 x 5 h)
    small = [job(i, gpus=1, submitted_h_ago=0.5 * i) for i in range(2, 30)]
    predictions = [predicted(1, 5)] + [predicted(j.job_id, 0.1) for j in small]
    assert rank_ids("qssf", [big, *small], predictions, **guard)[0] == 1
    assert rank_ids("qssf-noaging", [big, *small], predictions)[-1] == 1
    # Before the guard expires the big job is not yet first, but its score has halved per tick.
    policy = make_policy("qssf", guard)
    young = job(1, gpus=64, submitted_h_ago=12)
    assert policy.score(young, predictions[0], NOW) == policy.score(young, predictions[0], young.submit_time) / 4
    # Among expired jobs the earlier submission goes first.
    older = job(9, gpus=1, submitted_h_ago=30)
    assert rank_ids("qssf", [big, older], [predictions[0], predicted(9, 0.01)], **guard) == [9, 1]


def test_aging_counts_from_when_the_job_became_eligible() -> None:
    """A job held for days and released (Slurm sets its eligible time then), or one that
    waited for its ``--begin``, banks no waiting: it does not jump to the guard."""
    guard = {"max_wait_h": 24, "halflife_h": 6}
    policy = make_policy("qssf", guard)
    released = dataclasses.replace(job(1, gpus=8, submitted_h_ago=48), eligible_time=NOW - 6 * HOUR)
    waited = job(2, gpus=8, submitted_h_ago=48)
    p = predicted(1, 2)
    assert policy.score(waited, p, NOW) == 0.0  # 48 h waited: past the 24 h guard
    assert policy.score(released, p, NOW) == policy.score(job(1, gpus=8, submitted_h_ago=6), p, NOW) > 0
    assert "waiting 6 h of 24 h guard" in policy.explain(released, p, NOW)
    held = dataclasses.replace(released, eligible_time=None)  # Slurm shows none while it is held
    assert policy.score(held, p, NOW) == 0.0  # its submission stands in; the planner leaves held jobs alone
    begins = dataclasses.replace(job(3, gpus=8, submitted_h_ago=30), eligible_time=NOW + 5 * HOUR)
    assert policy.score(begins, p, NOW) == policy.score(begins, p, NOW + 5 * HOUR) > 0  # not aged before it


def test_scores_change_only_at_aging_ticks_and_the_guard() -> None:
    policy = make_policy("qssf", {"halflife_h": 2, "aging_step_h": 1, "max_wait_h": 5.5})
    waiting = job(1, gpus=4, submitted_h_ago=3)
    p = predicted(1, 1)
    within = [NOW + 60 * k for k in range(60)]
    assert {policy.score(waiting, p, t) for t in within} == {policy.score(waiting, p, NOW)}
    assert {policy.changes_at(waiting, p, t) for t in within} == {NOW + HOUR}
    # One halving per 2 h of waiting, in 1 h steps.
    assert policy.score(waiting, p, NOW + HOUR) == pytest.approx(policy.score(waiting, p, NOW) / 2 ** 0.5)
    assert policy.score(waiting, p, NOW) == pytest.approx(4 * 1 * HOUR / 2 ** 1.5)
    # The guard counts whole ticks too: 5.5 h is reached at the 6th tick, and then nothing changes any more.
    assert policy.score(waiting, p, waiting.submit_time + 5.5 * HOUR) > 0
    assert policy.score(waiting, p, waiting.submit_time + 6 * HOUR) == 0.0
    assert policy.changes_at(waiting, p, waiting.submit_time + 6 * HOUR) == math.inf
    assert make_policy("qssf-noaging").changes_at(waiting, p, NOW) == math.inf
    assert make_policy("fifo").changes_at(waiting, p, NOW) == math.inf


def test_a_new_arrival_changes_no_other_score() -> None:
    jobs = [job(i, gpus=1 + i % 4, submitted_h_ago=i) for i in range(1, 20)]
    predictions = [predicted(j.job_id, 0.5 + j.job_id) for j in jobs]
    policy = make_policy("qssf")
    before = {s.job_id: s.score for s in policy.rank(PolicyContext(NOW, tuple(jobs), {p.job_id: p for p in predictions})).scores}
    arrival = job(99, gpus=1)
    context = PolicyContext(NOW, (*jobs, arrival), {p.job_id: p for p in [*predictions, predicted(99, 0.1)]})
    after = {s.job_id: s.score for s in policy.rank(context).scores}
    assert {k: after[k] for k in before} == before
    assert [s.rank for s in policy.rank(context).scores] == list(range(1, 21))


def test_reasons_say_what_the_score_is_made_of() -> None:
    policy = make_policy("qssf", {"max_wait_h": 24, "halflife_h": 3})
    j = job(1, gpus=4, submitted_h_ago=3)
    reason = policy.explain(j, predicted(1, 2.1), NOW)
    assert reason.startswith("predicted 2.1 h x 4 GPUs = 8.4 GPU-h (user+name history, 12 runs)")
    assert "waiting 3 h of 24 h guard, score halved 1x -> 4.20 GPU-h" in reason
    cpu = policy.explain(job(2, gpus=0, cpus=16), predicted(2, 1), NOW)
    assert "16 CPUs x 0.125 GPU/CPU = 2.0 GPU-h" in cpu
    expired = policy.explain(job(3, submitted_h_ago=30), predicted(3, 1), NOW)
    assert "24 h guard reached" in expired
    assert "guard" not in make_policy("qssf-noaging").explain(j, predicted(1, 2.1), NOW)
    assert make_policy("fifo").explain(j, None, NOW) == "fifo: Slurm's own order, unchanged"


def test_fifo_does_not_reorder() -> None:
    ranking = make_policy("fifo").rank(PolicyContext(NOW, (job(2, submitted_h_ago=1), job(1, submitted_h_ago=2)), {}))
    assert ranking.reorders is False
    assert [s.job_id for s in ranking.scores] == [1, 2]
    assert ranking.guard_s is None
    assert make_policy("qssf", {"max_wait_h": 24}).rank(PolicyContext(NOW, (), {})).guard_s == 24 * HOUR


def test_policies_import_nothing_impure() -> None:
    code = ("import sys, slurmsched.policy; "
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('slurmsched'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    forbidden = ("slurmsched.gateway", "slurmsched.store", "slurmsched.sim", "slurmsched.daemon",
                 "slurmsched.engine", "slurmsched.cli", "slurmsched.planner")
    assert [m for m in loaded if m.startswith(forbidden)] == []


def test_an_uncertain_prediction_counts_its_expected_run_time() -> None:
    sure, unsure = job(1), job(2)
    predictions = [predicted(1, 2.0), predicted(2, 1.8, "cold start: learned from size, limit and partition",
                                                       spread=8.0)]
    # spread 8x either way: sigma = ln(64) / 2.563 = 1.62, expected = 1.8 h x exp(1.62^2 / 2) = 6.7 h
    assert rank_ids("qssf-noaging", [sure, unsure], predictions) == [1, 2]
    assert rank_ids("qssf-noaging", [sure, unsure], predictions, estimate="median") == [2, 1]
    policy = make_policy("qssf", {})
    assert policy.duration(unsure, predictions[1]) == pytest.approx(1.8 * HOUR * math.exp((math.log(64) / 2.5631) ** 2 / 2))
    assert policy.duration(sure, predictions[0]) == 2.0 * HOUR
    text = policy.explain(unsure, predictions[1], NOW)
    assert text.startswith("expected 6.7 h (median 1.8 h, 10-90% 0.2 h to 14.4 h) x 1 GPU = 6.7 GPU-h (cold start"), text


def test_sub_hour_guards_and_waits_are_explained_in_fractions_of_an_hour() -> None:
    policy = make_policy("qssf", {"max_wait_h": 0.05, "aging_step_h": 0.005, "halflife_h": 0.01,
                                  "backlog_factor": 0, "slowdown_factor": 0})
    text = policy.explain(job(1, gpus=4, submitted_h_ago=0.02), predicted(1, 2.0), NOW)
    assert "; waiting 0.02 h of 0.05 h guard, score halved" in text, text  # not "waiting 0 h of 0 h guard"
    expired = policy.explain(job(1, gpus=4, submitted_h_ago=0.25), predicted(1, 2.0), NOW)
    assert "; waited 0.25 h: 0.05 h guard reached" in expired, expired


def test_short_runs_are_explained_in_minutes_and_seconds() -> None:
    short = job(1, gpus=8)
    text = make_policy("qssf", {}).explain(short, Prediction(1, 20.0, 14.0, 20.0, "user+name history"), NOW)
    assert text.startswith("expected 20 s (median 20 s, 10-90% 14 s to 20 s) x 8 GPUs = 162 GPU-s"), text
    assert text.endswith("waiting 0 h of 96 h guard, not aged yet"), text  # not "score halved 0x"
    text = make_policy("qssf", {}).explain(short, Prediction(1, 300.0, 300.0, 300.0, "user+name history"), NOW)
    assert text.startswith("predicted 5 min x 8 GPUs = 0.7 GPU-h"), text


def test_the_expected_run_time_never_exceeds_the_time_limit() -> None:
    capped = job(1, limit_s=3 * 3600)
    policy = make_policy("qssf", {})
    assert policy.duration(capped, predicted(1, 2.0, spread=10.0)) == 3 * HOUR
    assert policy.duration(job(2, limit_s=None), predicted(2, 2.0, spread=10.0)) > 3 * HOUR


def test_a_long_backlog_stretches_the_guard_and_the_half_life() -> None:
    policy = make_policy("qssf", {"max_wait_h": 48, "halflife_h": 6, "backlog_factor": 2})
    p = predicted(1, 10)
    waiting = job(1, submitted_h_ago=60)
    # A backlog of at most 24 h changes nothing: 2 x 24 h is not longer than the 48 h guard.
    assert policy.score(waiting, p, NOW, 24 * HOUR) == policy.score(waiting, p, NOW) == 0.0
    # 50 h of work queued ahead: a 100 h guard, and the half-life stretched by 100/48.
    assert policy.patience_s(50 * HOUR) == 100 * HOUR
    assert policy.score(waiting, p, NOW, 50 * HOUR) == pytest.approx(10 * HOUR * 2 ** -(60 / 6 * 48 / 100))
    assert policy.changes_at(waiting, p, NOW, 50 * HOUR) == NOW + HOUR
    assert policy.score(waiting, p, waiting.submit_time + 99 * HOUR, 50 * HOUR) > 0
    assert policy.score(waiting, p, waiting.submit_time + 100 * HOUR, 50 * HOUR) == 0.0
    assert policy.changes_at(waiting, p, waiting.submit_time + 100 * HOUR, 50 * HOUR) == math.inf
    reason = policy.explain(waiting, p, NOW, 50 * HOUR)
    assert "waiting 60 h of 100 h guard (2 x 50 h backlog at arrival), score halved 4.8x -> 0.36 GPU-h" in reason
    # By default the guard is half the backlog wait when longer; backlog_factor = 0 keeps
    # the fixed guard; qssf-noaging has none to stretch.
    assert make_policy("qssf").patience_s(260 * HOUR) == 130 * HOUR
    assert make_policy("qssf", {"max_wait_h": 48, "backlog_factor": 0}).score(waiting, p, NOW, 50 * HOUR) == 0.0
    assert make_policy("qssf-noaging").score(waiting, p, NOW, 50 * HOUR) == 10 * HOUR


def test_a_long_expected_run_stretches_the_guard_and_the_half_life() -> None:
    policy = make_policy("qssf", {"max_wait_h": 24, "halflife_h": 6, "slowdown_factor": 4})
    p = predicted(1, 10)
    waiting = job(1, submitted_h_ago=30)
    # 4 x 10 h expected run: a 40 h guard instead of 24 h, halving every 6 h x 40 / 24 = 10 h.
    assert policy.patience_s(0.0, 10 * HOUR) == 40 * HOUR
    assert policy.score(waiting, p, NOW) == pytest.approx(10 * HOUR * 2 ** -3)
    assert policy.changes_at(waiting, p, NOW) == NOW + HOUR
    assert policy.score(waiting, p, waiting.submit_time + 39 * HOUR) > 0
    assert policy.score(waiting, p, waiting.submit_time + 40 * HOUR) == 0.0
    assert policy.changes_at(waiting, p, waiting.submit_time + 40 * HOUR) == math.inf
    reason = policy.explain(waiting, p, NOW)
    assert "waiting 30 h of 40 h guard (4 x 10.0 h expected run), score halved 3x -> 1.25 GPU-h" in reason
    # A 1 h run keeps the 24 h guard; a longer backlog guard wins and is named; 0 turns it off.
    assert policy.score(job(2, submitted_h_ago=30), predicted(2, 1), NOW) == 0.0
    backlogged = make_policy("qssf", {"max_wait_h": 24, "halflife_h": 6}).explain(waiting, p, NOW, 100 * HOUR)
    assert "waiting 30 h of 50 h guard (0.5 x 100 h backlog at arrival)" in backlogged
    assert make_policy("qssf", {"max_wait_h": 24, "slowdown_factor": 0}).score(waiting, p, NOW) == 0.0
    assert make_policy("qssf-noaging").patience_s(0.0, 10 * HOUR) == math.inf
    # Without a time limit nothing caps the expected run (a wide spread could make it weeks):
    # the run time does not stretch that job's guard.
    unlimited = job(3, submitted_h_ago=30, limit_s=None)
    assert policy.score(unlimited, predicted(3, 10), NOW) == 0.0
    assert "24 h guard reached" in policy.explain(unlimited, predicted(3, 10), NOW)


def test_backlog_waits_count_the_work_queued_before_each_arrival() -> None:
    early, late, same = job(1, submitted_h_ago=2), job(3, submitted_h_ago=1), job(2, submitted_h_ago=1)
    # Taken in submit order then job id, whatever order they come in; 8 GPUs of capacity.
    waits = backlog_waits([(late, 8 * HOUR), (early, 16 * HOUR), (same, 4 * HOUR)], 8.0, queued=8 * HOUR)
    assert waits == {1: 1 * HOUR, 2: 3 * HOUR, 3: 3.5 * HOUR}
    assert backlog_waits([(early, 16 * HOUR)], 0.0, queued=8 * HOUR) == {1: 0.0}


def test_capacity_is_the_gpus_or_on_a_cpu_cluster_the_weighted_cpus() -> None:
    policy = make_policy("qssf")
    gpu_nodes = [NodeRecord(f"g{i}", ("IDLE",), cpus=64, gres=(GresRequest("gpu", "a100", 8),)) for i in range(3)]
    cpu_nodes = [NodeRecord(f"c{i}", ("IDLE",), cpus=128) for i in range(2)]
    assert policy.capacity(gpu_nodes + cpu_nodes) == 24.0
    assert policy.capacity(cpu_nodes) == 256 * 0.125
    assert policy.work(job(1, gpus=4), predicted(1, 2)) == 8 * HOUR
    assert make_policy("fifo").capacity(gpu_nodes) == 0.0 and make_policy("fifo").work(job(1), None) == 0.0


@pytest.mark.parametrize("name", ["qssf", "qssf-noaging", "fifo"])
def test_a_scorer_gives_score_and_changes_at_at_every_time(name: str) -> None:
    policy = make_policy(name, {"max_wait_h": 24, "halflife_h": 6, "aging_step_h": 1} if name == "qssf" else {})
    for backlog in (0.0, 50 * HOUR):
        for waiting, p in ((job(1, gpus=4, submitted_h_ago=3.5), predicted(1, 10, spread=3.0)),
                           (job(2, cpus=16, gpus=0, limit_s=None), None)):
            scorer = policy.scorer(waiting, p, backlog)  # made once, called at many times
            for now in [waiting.submit_time - HOUR] + [NOW + 1200 * k for k in range(0, 200, 7)]:
                assert scorer(now) == (policy.score(waiting, p, now, backlog),
                                       policy.changes_at(waiting, p, now, backlog))


def test_a_qssf_scorer_is_the_documented_aging_bit_for_bit() -> None:
    args = {"max_wait_h": 24.0, "halflife_h": 6.0, "aging_step_h": 3.0, "slowdown_factor": 4.0}
    scorer = make_policy("qssf", args).scorer(job(1, gpus=4, submitted_h_ago=7.3), predicted(1, 10.3), 31.7 * HOUR)
    step, service = 3 * HOUR, 4 * 10.3 * HOUR
    patience = max(24 * HOUR, 31.7 * HOUR, 4 * 10.3 * HOUR)
    for now in (NOW + 977.0 * k for k in range(400)):
        ticks = max(0, math.floor(now / step) - math.floor((NOW - 7.3 * HOUR) / step))
        expected = ((0.0, math.inf) if ticks * step >= patience else
                    (service * 2.0 ** -(ticks * (3.0 / 6.0) * (24 * HOUR) / patience),
                     (math.floor(now / step) + 1) * step))
        assert scorer(now) == expected
