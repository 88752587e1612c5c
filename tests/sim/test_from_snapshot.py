"""A simulated twin of a recorded live snapshot (Slurm 22.05 JSON fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmsched.config import Config
from slurmsched.engine import Engine
from slurmsched.errors import ConfigError
from slurmsched.gateway.parse import parse_sinfo, parse_squeue
from slurmsched.gateway.slurm_config import parse_show_config, scheduler_config
from slurmsched.gateway.sprio import parse_sprio
from slurmsched.model import ClusterSnapshot, JobState, NodeRecord, PartitionRecord, SchedulerConfig, SetSiteFactor
from slurmsched.planner import Planner
from slurmsched.policy import make_policy
from slurmsched.predict.registry import make_predictor
from slurmsched.sim.clock import SimClock
from slurmsched.sim.cluster import ClusterSpec, NodeSpec, PartitionSpec, cluster_from_nodes, expand_hostlist
from slurmsched.sim.slurm import SimulatedSlurm
from slurmsched.store.memory import MemoryJobRepository

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm-json" / "22.05"


def recorded() -> ClusterSnapshot:
    # sprio.txt was recorded with another queue: job 62, pending here, is listed as sprio
    # lists a job nobody changed (a job sprio does not list is left alone by the planner)
    factors = {**parse_sprio((FIXTURES / "sprio.txt").read_text()), 62: 0}
    jobs = parse_squeue((FIXTURES / "squeue.json").read_text(), factors)
    config = scheduler_config(parse_show_config((FIXTURES / "scontrol_show_config.txt").read_text()))
    taken = max(j.submit_time for j in jobs) + 30.0
    return ClusterSnapshot(taken, "slurmsched", tuple(jobs), tuple(parse_sinfo((FIXTURES / "sinfo.json").read_text())),
                           config)


def test_host_lists_expand_like_slurm() -> None:
    assert expand_hostlist("gpu[01-02,04],cpu1") == ["gpu01", "gpu02", "gpu04", "cpu1"]
    assert expand_hostlist("n[8-10]") == ["n8", "n9", "n10"]
    with pytest.raises(ValueError):
        expand_hostlist("gpu[01-")


def test_overlapping_partitions_share_a_pool() -> None:
    spec = cluster_from_nodes("c", recorded().nodes)
    assert {n.pool for n in spec.nodes} == {spec.default_partition.pool}
    assert [(p.name, spec.partition_gpus(p)) for p in spec.partitions] == [("gpu", 24), ("a100", 16)]
    with pytest.raises(ConfigError):
        cluster_from_nodes("c", [NodeRecord("cpu1", ("IDLE",))])


def test_partition_tiers_and_the_default_come_from_scontrol() -> None:
    nodes = recorded().nodes
    described = [PartitionRecord("cpu", 5), PartitionRecord("a100", 2, priority_factor=0.5),
                 PartitionRecord("gpu", 1, default=True)]
    spec = cluster_from_nodes("c", nodes, described)
    # the default first, then scontrol's order; "cpu" has no GPU node and is left out
    assert [(p.name, p.tier, p.priority_factor) for p in spec.partitions] == [("gpu", 1, 1.0), ("a100", 2, 0.5)]
    assert spec.partition("extra").priority_factor == 1.0  # a partition the nodes lack: the default's
    assert spec.default_partition.name == "gpu"
    # a partition scontrol does not describe keeps tier 1
    assert [(p.name, p.tier) for p in cluster_from_nodes("c", nodes, described[1:2]).partitions] == [
        ("a100", 2), ("gpu", 1)]


def test_the_twin_of_a_simulated_cluster_is_that_cluster() -> None:
    spec = ClusterSpec(name="c", nodes=(NodeSpec("a1", 8, "a100", "p", ("gpu", "urgent")),
                                        NodeSpec("v1", 4, "v100", "p", ("gpu",))),
                       partitions=(PartitionSpec("gpu", "p", priority_factor=0.5),
                                   PartitionSpec("urgent", "p", tier=3)))
    slurm = SimulatedSlurm(spec, SchedulerConfig(), SimClock(0.0))
    twin = cluster_from_nodes("c", slurm.snapshot().nodes, slurm.partitions())
    assert [(p.name, p.tier, p.priority_factor) for p in twin.partitions] == [("gpu", 1, 0.5), ("urgent", 3, 1.0)]
    assert [(n.name, n.gpus, n.gpu_type, n.partitions) for n in twin.nodes] == [
        (n.name, n.gpus, n.gpu_type, n.partitions) for n in spec.nodes]


def test_the_twin_shows_the_recorded_queue_and_holds_running_jobs_gpus() -> None:
    snap = recorded()
    clock = SimClock(snap.taken_at)
    slurm = SimulatedSlurm.from_snapshot(snap, clock)
    twin = slurm.snapshot()
    assert twin.jobs == snap.jobs and all(a is b for a, b in zip(twin.jobs, snap.jobs))
    assert twin.nodes == snap.nodes and twin.config == snap.config
    assert slurm.pending_count == 1 and slurm.running_count == 2
    started = slurm.schedule()                    # gpu01 is held by job 58: job 62 goes to gpu02
    assert [(j.job_id, j.alloc) for j in started] == [(62, ((1, 4),))]
    nodes = slurm.snapshot().nodes
    assert nodes[1].gpus_used() == 4 and nodes[1].state == ("MIXED",)   # rebuilt once touched
    assert nodes[0] is snap.nodes[0]                                     # the others as recorded


def test_the_engine_acts_on_the_twin_as_on_slurm() -> None:
    snap = recorded()
    slurm = SimulatedSlurm.from_snapshot(snap, SimClock(snap.taken_at))
    engine = Engine(slurm, MemoryJobRepository(), make_predictor("user_limit"), make_policy("qssf"),
                    Planner(Config()))
    report = engine.run_cycle(snap.taken_at)
    assert [type(a) for a in report.plan.actions] == [SetSiteFactor]
    assert all(o.ok for o in report.outcomes)
    pending = slurm.snapshot().pending[0]
    assert pending.site_factor == report.plan.actions[0].value and pending.state is JobState.PENDING
    assert engine.run_cycle(snap.taken_at + 60).plan.actions == ()
