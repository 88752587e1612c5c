"""The event loop with the real daemon beside the simulated Slurm, and the policy comparison."""

from __future__ import annotations

import dataclasses
import re

import pytest

from slurmsched.config import Config
from slurmsched.daemon import Daemon
from slurmsched.model import JobRecord, JobState, SchedulerConfig
from slurmsched.planner import Planner
from slurmsched.policy import make_policy
from slurmsched.predict.registry import make_predictor
from slurmsched.sim.cluster import ClusterSpec
from slurmsched.sim.experiment import compare
from slurmsched.sim.policies import SimPolicy, configured, engine_factory, parse_policies
from slurmsched.sim.runner import SimSettings, simulate
from slurmsched.sim.workload import workload_from_records
from slurmsched.store.memory import MemoryJobRepository
from slurmsched.workload import WorkloadSpec, generate_workload
from slurmsched.errors import ConfigError

FIFO_CONFIG = SchedulerConfig(weight_age=10000, weight_fairshare=10000, priority_max_age_s=86400)


def trace_job(job_id: int, submit: float, run: float, gpus: int = 1, user: str = "u") -> JobRecord:
    return JobRecord(job_id=job_id, user=user, name="n", submit_time=submit, start_time=submit,
                     end_time=submit + run, gpus=gpus, state=JobState.COMPLETED, time_limit_s=int(run) * 2)


def test_cycles_run_on_ticks_only_when_something_could_change() -> None:
    jobs = workload_from_records([trace_job(1, 1000.0, 500.0), trace_job(2, 1010.0, 100.0),
                                  trace_job(3, 5000.0, 10.0)], "t").jobs
    repositories: list[MemoryJobRepository] = []

    def factory(slurm, clock):
        repo = MemoryJobRepository(track_live=False)
        repositories.append(repo)
        config = Config()
        return Daemon(dataclasses.replace(config, daemon=dataclasses.replace(config.daemon, submit_cache_entries=0)),
                      slurm, repo, make_predictor("user_limit"), make_policy("qssf"), Planner(config), clock=clock)

    result = simulate(jobs, ClusterSpec.uniform(1, 1), FIFO_CONFIG, factory, SimSettings(interval_s=60.0))
    # Job 2 waits from 1010 to 1500: the first tick after its arrival (1020) sets its
    # SiteFactor and the next (1080) finds it in place; its score changes next at the first
    # aging tick (3 h), after it started. With nothing pending, no cycle runs.
    assert [c.started_at for c in reversed(repositories[0].recent_cycles())] == [1020.0, 1080.0]
    assert result.cycles == 2
    assert [(o.job_id, o.start, o.end) for o in result.outcomes] == [
        (1, 1000.0, 1500.0), (2, 1500.0, 1600.0), (3, 5000.0, 5010.0)]


def test_skipped_ticks_change_nothing() -> None:
    """Cycling only after events and at the daemon's next change gives the run of a daemon
    that cycles at every tick, with aging ticks falling between events."""
    workload = small_workload(jobs=150, seed=4)
    spec = ClusterSpec.uniform(2, 4)
    config = Config()
    aging = {**config.policy.qssf, "aging_step_h": 0.1, "halflife_h": 0.2, "max_wait_h": 1.0}
    config = dataclasses.replace(config, policy=dataclasses.replace(config.policy, qssf=aging))
    build = engine_factory(parse_policies("qssf")[0], config, {})
    assert build is not None

    def every_tick(slurm, clock):
        daemon = build(slurm, clock)
        daemon.next_change = lambda: float("-inf")  # type: ignore[method-assign]
        return daemon

    skipping = simulate(workload.jobs, spec, FIFO_CONFIG, build)
    ticking = simulate(workload.jobs, spec, FIFO_CONFIG, every_tick)
    assert skipping.cycles < ticking.cycles // 2
    assert skipping.rpcs > 0
    assert (skipping.outcomes, skipping.rpcs) == (ticking.outcomes, ticking.rpcs)


def small_workload(jobs: int = 240, seed: int = 3):
    spec = WorkloadSpec(jobs=jobs, users=6, mean_interarrival_s=90.0, median_duration_s=1200.0,
                        gpu_nodes=((None, 4, 4),), typed_share=0.0, seed=seed)
    return workload_from_records(generate_workload(spec, start=1_600_000_000.0), "generated")


def test_fifo_through_the_daemon_is_slurm_alone() -> None:
    """The daemon running ``fifo`` sends nothing, so the starts are Slurm's own."""
    workload = small_workload()
    spec = ClusterSpec.uniform(4, 4)
    config = Config()
    daemon = engine_factory(SimPolicy("fifo-daemon", "", "fifo", "user_limit"), config, {})
    alone = simulate(workload.jobs, spec, FIFO_CONFIG)
    beside = simulate(workload.jobs, spec, FIFO_CONFIG, daemon)
    assert beside.cycles > 0 and beside.rpcs == 0
    assert beside.outcomes == alone.outcomes


def test_duration_ordering_beats_fifo_and_the_oracle_bounds_it() -> None:
    workload = small_workload()
    comparison = compare(workload, ClusterSpec.uniform(4, 4), "given",
                         parse_policies("fifo,sjf,qssf-helios,multifactor"), Config())
    fifo, sjf, helios = (comparison.run(n).metrics for n in ("fifo", "sjf", "qssf-helios"))
    assert comparison.jobs == len(workload.jobs)
    assert sjf.avg_jct_s < 0.8 * fifo.avg_jct_s
    assert helios.avg_jct_s < fifo.avg_jct_s
    assert comparison.gain_share("sjf") == pytest.approx(1.0)
    assert comparison.gain_share("fifo") == pytest.approx(0.0)
    assert comparison.run("sjf").result.rpcs > 0
    assert comparison.run("multifactor").result.cycles == 0


def test_the_oracle_predictor_is_a_variant_too() -> None:
    """``qssf-noaging:predictor=oracle`` is ``sjf`` by another name: the same daemon on the true run times."""
    comparison = compare(small_workload(jobs=120, seed=6), ClusterSpec.uniform(2, 4), "given",
                         parse_policies("sjf,qssf-noaging:predictor=oracle,qssf-noaging"), Config())
    sjf, named, learned = (comparison.run(n) for n in ("sjf", "qssf-noaging:predictor=oracle", "qssf-noaging"))
    assert (named.result.outcomes, named.result.rpcs) == (sjf.result.outcomes, sjf.result.rpcs)
    assert learned.result.outcomes != sjf.result.outcomes


def test_policy_names_are_checked() -> None:
    assert [p.name for p in parse_policies("fifo, sjf,fifo")] == ["fifo", "sjf"]
    with pytest.raises(ConfigError, match="unknown policy 'lifo'"):
        parse_policies("fifo,lifo")
    with pytest.raises(ConfigError):
        parse_policies(" , ")


def test_a_list_setting_is_written_in_brackets() -> None:
    """Commas inside ``[...]`` belong to the value, not to the list of policies."""
    fifo, listed, single = parse_policies(
        "fifo,qssf:planner.protected_qos=[urgent, admin]:max_wait_h=48,qssf:planner.protected_partitions=debug")
    assert (fifo.name, listed.name) == ("fifo", "qssf:planner.protected_qos=[urgent, admin]:max_wait_h=48")
    config = configured(listed, Config())
    assert config.planner.protected_qos == ("urgent", "admin") and config.policy.args_for("qssf") == {"max_wait_h": "48"}
    assert configured(single, Config()).planner.protected_partitions == ("debug",)


def test_policy_variants_are_parsed_and_checked() -> None:
    """``NAME:KEY=VALUE[:KEY=VALUE]`` changes a policy argument or a planner setting; bad ones name the key."""
    qssf, variant, planner = parse_policies("qssf, qssf: max_wait_h = 48 :halflife_h=6,qssf:planner.level_ratio=1.5")
    assert (variant.name, variant.settings) == ("qssf:max_wait_h=48:halflife_h=6",
                                                (("max_wait_h", "48"), ("halflife_h", "6")))
    assert (variant.engine_policy, variant.predictor) == (qssf.engine_policy, qssf.predictor)
    config = Config()
    changed = configured(variant, config)
    assert make_policy("qssf", changed.policy.args_for("qssf")).guard_s == 48 * 3600
    assert configured(qssf, config) is config
    assert configured(planner, config).planner.level_ratio == 1.5
    assert configured(planner, config).policy == config.policy
    (simple,) = parse_policies("qssf:predictor=last2")
    assert simple.predictor == "last2" and configured(simple, config) == config
    (perfect,) = parse_policies("qssf:predictor=oracle")
    assert perfect.predictor == "oracle" and perfect.engine_policy == "qssf"
    for text, message in [
        ("qssf:max_wait_h=abc", "--policy qssf:max_wait_h=abc: policy.qssf.max_wait_h must be a number"),
        ("qssf:maxwait=1", "unknown key policy.qssf.maxwait"),
        ("qssf:planner.levels=3", "unknown key planner.levels"),
        ("qssf:daemon.interval_s=30", "daemon.interval_s cannot differ between compared policies"),
        ("qssf:max_wait_h", "'max_wait_h' is not KEY=VALUE"),
        ("qssf:max_wait_h=1:max_wait_h=2", "max_wait_h is given twice"),
        ("qssf:aging_step_h=200", "aging_step_h must be > 0 and <= max_wait_h"),
        ("multifactor:max_wait_h=1", "multifactor runs no slurmsched daemon"),
        ("qssf:predictor=psychic",
         "--policy qssf:predictor=psychic: predictor must be one of slurmsched, helios, last2, user_limit "
         "(got 'psychic')"),
        ("sjf:predictor=last2", "sjf predicts with the true run times; give qssf-noaging:predictor=NAME"),
        ("qssf:planner.protected_qos=[a,b", "a '[' has no ']'"),
        ("fifo,qssf:planner.protected_qos=a,b]", "a ']' has no '['"),
        ("qssf:planner.protected_qos=[[a]]", "brackets do not nest"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            parse_policies(text)


def test_queue_deltas_give_the_same_run_as_comparing_every_job() -> None:
    """The engine reads the simulated Slurm's QueueDelta; without it, it compares the jobs: same starts, same RPCs."""
    workload = small_workload(jobs=300, seed=5)
    spec = ClusterSpec.uniform(4, 4)
    config = Config()
    build = engine_factory(parse_policies("qssf")[0], config, {})
    assert build is not None

    def without_deltas(slurm, clock):
        # The same daemon over a view of the simulated Slurm whose snapshots carry no delta.
        class NoDelta:
            def __getattr__(self, name):
                return getattr(slurm, name)

            def snapshot(self):
                return dataclasses.replace(slurm.snapshot(), delta=None)

        return build(NoDelta(), clock)

    with_delta = simulate(workload.jobs, spec, FIFO_CONFIG, build)
    compared = simulate(workload.jobs, spec, FIFO_CONFIG, without_deltas)
    assert with_delta.rpcs > 0
    assert (with_delta.outcomes, with_delta.rpcs, with_delta.cycles) == (
        compared.outcomes, compared.rpcs, compared.cycles)
