"""job_submit.lua modelled in the simulator: the daemon's cache, read as the script reads the file."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from slurmsched.cli import main
from slurmsched.config import Config, PlannerSection
from slurmsched.model import JobRecord, JobState, SchedulerConfig
from slurmsched.planner import SiteFactorScale
from slurmsched.sim import runner
from slurmsched.sim.clock import SimClock
from slurmsched.sim.cluster import ClusterSpec
from slurmsched.sim.experiment import compare
from slurmsched.sim.policies import engine_factory, parse_policies
from slurmsched.sim.runner import SimSettings, simulate
from slurmsched.sim.slurm import SimulatedSlurm
from slurmsched.sim.submit_plugin import SubmitPlugin
from slurmsched.sim.workload import workload_from_records
from slurmsched.submit_cache import SubmitCache, SubmitEstimate, levels_for, submit_site_factor
from slurmsched.workload import WorkloadSpec, generate_workload

SCHEDULER = SchedulerConfig(weight_age=10000, weight_fairshare=10000, priority_max_age_s=86400)
LEVELS = levels_for(SiteFactorScale.build(PlannerSection(), SCHEDULER))
WRITTEN = 1_700_000_000


def record(job_id: int, name: str, *, limit: int | None = None, user: str = "alice") -> JobRecord:
    return JobRecord(job_id=job_id, user=user, name=name, submit_time=WRITTEN, cluster="c", cpus=2,
                     state=JobState.PENDING, time_limit_s=limit)


def cache(*estimates: SubmitEstimate, written: int = WRITTEN) -> SubmitCache:
    return SubmitCache(written_at=written, max_age_s=900, cpu_weight=0.25, levels=LEVELS, estimates=estimates)


def test_the_plugin_values_jobs_as_the_script_does() -> None:
    plugin = SubmitPlugin()
    assert plugin.site_factor(record(1, "short"), 2, WRITTEN, "gpu") is None and not plugin.exists()  # no cache yet
    first = cache(SubmitEstimate("alice", "short", 120), SubmitEstimate("alice", "long", 50000),
                  SubmitEstimate("alice", "tab\tname", 120))
    plugin.write(first)
    assert plugin.exists()
    short = plugin.site_factor(record(1, "short"), 2, WRITTEN + 10, "gpu")
    assert short == submit_site_factor(first, 120, time_limit_s=None, gpus=2, cpus=2)
    capped = plugin.site_factor(record(2, "long", limit=600), 2, WRITTEN + 10, "gpu")
    assert capped == submit_site_factor(first, 600, time_limit_s=None, gpus=2, cpus=2)  # at most the limit
    assert short > plugin.site_factor(record(3, "long"), 2, WRITTEN + 10, "gpu") > 0
    assert plugin.site_factor(record(4, "unknown"), 2, WRITTEN + 10, "gpu") is None
    assert plugin.site_factor(record(5, "short", user="bob"), 2, WRITTEN + 10, "gpu") is None
    assert plugin.site_factor(record(6, "short"), 2, WRITTEN + 901, "gpu") is None  # older than max_age: ignored
    assert plugin.site_factor(record(7, "tab\tname"), 2, WRITTEN + 10, "gpu") is None  # a name the file cannot hold
    # a rewritten cache is read again
    plugin.write(cache(SubmitEstimate("alice", "short", 50000), written=WRITTEN + 300))
    assert plugin.site_factor(record(8, "short"), 2, WRITTEN + 310, "gpu") < short
    assert plugin.remove() and not plugin.remove()  # paused: the daemon takes it away
    assert plugin.site_factor(record(9, "short"), 2, WRITTEN + 310, "gpu") is None


def test_a_job_that_names_no_partition_is_protected_when_slurmctlds_default_partition_is() -> None:
    plugin = SubmitPlugin()
    plugin.write(dataclasses.replace(cache(SubmitEstimate("alice", "short", 120)), protected_partitions=("debug",)))
    assert plugin.site_factor(record(1, "short"), 2, WRITTEN + 10, "debug") is None
    assert plugin.site_factor(record(2, "short"), 2, WRITTEN + 10, "gpu") is not None


def test_beside_the_oracle_the_plugin_values_each_job_by_its_true_run_time() -> None:
    """The cache's estimates are the previous jobs' run times; the sjf bound knows the new job's."""
    plugin = SubmitPlugin()
    plugin.use_truth({1: 120.0, 2: 50000.0})
    assert plugin.site_factor(record(1, "short"), 2, WRITTEN, "gpu") is None  # no cache: the script does nothing
    values = cache(SubmitEstimate("alice", "short", 50000))
    plugin.write(values)
    assert plugin.site_factor(record(1, "short"), 2, WRITTEN, "gpu") == submit_site_factor(
        values, 120, time_limit_s=None, gpus=2, cpus=2)
    assert plugin.site_factor(record(2, "new"), 2, WRITTEN, "gpu") == submit_site_factor(
        values, 50000, time_limit_s=None, gpus=2, cpus=2)
    assert plugin.site_factor(record(3, "short"), 2, WRITTEN, "gpu") is None  # not in the workload


def test_the_simulated_slurmctld_queues_a_new_job_with_the_plugins_value() -> None:
    values = cache(SubmitEstimate("alice", "short", 120))
    plugin = SubmitPlugin()
    plugin.write(values)
    clock = SimClock(float(WRITTEN))
    slurm = SimulatedSlurm(ClusterSpec.uniform(1, 4), SCHEDULER, clock, submit_plugin=plugin)
    jobs = workload_from_records([JobRecord(job_id=i, user="alice", name=name, submit_time=WRITTEN, cluster="c",
                                            state=JobState.COMPLETED, start_time=WRITTEN, end_time=WRITTEN + 60,
                                            gpus=4) for i, name in ((1, "busy"), (2, "short"), (3, "other"))],
                                 "t").jobs
    busy, short, other = (runner._to_sim_job(job, slurm) for job in jobs)
    slurm.submit(busy)
    assert [j.job_id for j in slurm.schedule()] == [1]  # job 1 takes the node
    slurm.submit(other)
    slurm.submit(short)
    assert slurm.schedule() == []
    pending = {j.job_id: j.site_factor for j in slurm.snapshot().pending}
    assert pending == {2: submit_site_factor(values, 120, time_limit_s=None, gpus=4, cpus=1), 3: 0}
    assert pending[2] > 0 and slurm.rpcs == 0  # no scontrol update: it ran inside slurmctld
    stamps = {j.job_id: j.admin_comment for j in slurm.snapshot().pending}
    assert stamps == {2: f"slurmsched:site_factor={pending[2]}", 3: ""}  # as the script stamps, for the daemon
    slurm.finish(busy)
    assert [j.job_id for j in slurm.schedule()] == [2]  # submitted last, valued first


def trace_job(job_id: int, submit: float, run: float) -> JobRecord:
    return JobRecord(job_id=job_id, user="u", name="n", submit_time=submit, start_time=submit,
                     end_time=submit + run, gpus=1, state=JobState.COMPLETED, time_limit_s=int(run) * 2)


def test_after_an_idle_stretch_the_cache_is_as_fresh_as_a_live_daemon_keeps_it(monkeypatch) -> None:
    """Nothing is pending between 1600 and 5000; a live daemon cycles anyway, so job 3
    finds a fresh cache. So do the simulated cycles before an arrival."""
    seen: dict[int, int | None] = {}

    class Recording(SubmitPlugin):
        def site_factor(self, job: JobRecord, gpus: int, now: float, default_partition: str) -> int | None:
            seen[job.job_id] = value = super().site_factor(job, gpus, now, default_partition)
            return value

    monkeypatch.setattr(runner, "SubmitPlugin", Recording)
    jobs = workload_from_records([trace_job(1, 1000.0, 500.0), trace_job(2, 1010.0, 100.0),
                                  trace_job(3, 5000.0, 10.0)], "t").jobs
    config = Config()
    factory = engine_factory(parse_policies("qssf", config)[0], config, {})
    plain = simulate(jobs, ClusterSpec.uniform(1, 1), SCHEDULER, factory, SimSettings())
    assert seen == {}  # not modelled: no plugin at all
    modelled = simulate(jobs, ClusterSpec.uniform(1, 1), SCHEDULER, factory, SimSettings(submit_plugin=True))
    assert seen[1] is None and seen[3] is not None  # nothing known at the start; u's "n" by job 3
    assert modelled.cycles > plain.cycles  # the idle stretch's cycles
    assert [o.start for o in modelled.outcomes] == [o.start for o in plain.outcomes]


@pytest.fixture(scope="module")
def generated():
    spec = WorkloadSpec(jobs=300, users=6, mean_interarrival_s=60.0, median_duration_s=1200.0,
                        gpu_nodes=((None, 4, 4),), typed_share=0.0, seed=5)
    return workload_from_records(generate_workload(spec, start=1_600_000_000.0), "generated")


def test_with_the_plugin_the_daemon_sends_fewer_updates(generated) -> None:
    config = Config()
    plain = compare(generated, ClusterSpec.uniform(4, 4), "given", parse_policies("qssf", config), config)
    config = config.with_overrides("sim", submit_plugin=True)
    modelled = compare(generated, ClusterSpec.uniform(4, 4), "given", parse_policies("qssf", config), config)
    assert modelled.slurmctld.submit_plugin and not plain.slurmctld.submit_plugin
    assert modelled.runs[0].result.rpcs < plain.runs[0].result.rpcs


def test_simulate_submit_plugin_is_named_in_the_table_and_results(tmp_path: Path) -> None:
    trace = tmp_path / "t.swf"
    trace.write_text("".join(f"{i} {i * 100} 0 {300 + i} 4 -1 -1 4 1200 -1 1 {i % 3} -1 -1 -1 -1 -1 -1\n"
                             for i in range(1, 60)))
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["simulate", "--trace", str(trace), "--format", "swf", "--gpus", "8",
                                       "--policy", "fifo,qssf", "--out", str(out), "--no-progress"],
                                env={"SLURMSCHED_SIM_SUBMIT_PLUGIN": "true"})
    assert result.exit_code == 0, result.output
    assert "job_submit.lua modelled" in result.output.splitlines()[0]
    assert json.loads((out / "results.json").read_text())["slurmctld"]["submit_plugin"] is True


def test_the_plugin_needs_a_daemon_that_writes_a_cache(tmp_path: Path) -> None:
    trace = tmp_path / "t.swf"
    trace.write_text("".join(f"{i} {i * 100} 0 300 4 -1 -1 4 1200 -1 1 1 -1 -1 -1 -1 -1 -1\n" for i in range(1, 9)))
    result = CliRunner().invoke(main, ["simulate", "--trace", str(trace), "--format", "swf", "--gpus", "8",
                                       "--policy", "qssf", "--submit-plugin", "--no-progress"],
                                env={"SLURMSCHED_DAEMON_SUBMIT_CACHE_ENTRIES": "0"})
    assert result.exit_code == 2
    assert "daemon.submit_cache_entries = 0 writes none" in result.output
