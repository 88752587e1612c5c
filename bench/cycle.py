#!/usr/bin/env python3
"""Benchmark: one engine cycle over a 10,000-job pending queue, and RPCs on an unchanged queue.

What runs is the daemon's own ``Engine.run_cycle`` with the gateway's own parsers: the
queue is a synthesized ``squeue --json`` document of Slurm 22.05's shape (a recorded
job from ``tests/fixtures/slurm-json/22.05`` with its fields varied) plus ``sprio``
output and the ``scontrol -a -o show job`` listing 22.05 needs for switch requests
(a recorded line likewise varied), parsed on every snapshot exactly as ``CliGateway``
parses the real commands' output; nodes and ``scontrol show config`` come from the
recorded fixtures too. The
jobs come from the project's workload generator (heavy-tailed durations, users who
resubmit similar jobs, mixed GPU sizes, over-asked limits): its first ``--history``
jobs are finished history the predictor is fitted on, the next ``--pending`` jobs wait.
The repository is a real SqlJobRepository on a throw-away SQLite file.

Figures: parse (snapshot), predict, plan for the first cycle (``cycle_10k_s`` is their
sum: recording to the database is reported apart), cycles until every deferred change
is sent, then one more cycle a minute later with nothing changed and the
``scontrol update`` calls it would make (``rpcs_when_unchanged``, target 0).
The target is one core: everything runs single-threaded (``OMP_NUM_THREADS=1``) and
stages are timed in CPU seconds of this process (``time.process_time``), so other load
on a shared machine does not inflate them; wall seconds are printed beside them.

Usage: ``python bench/cycle.py [--pending 10000] [--history 20000]``; the last output
line is ``{"cycle_10k_s": ..., "rpcs_when_unchanged": ...}``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import copy  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Sequence  # noqa: E402

import click  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from slurmsched.config import Config  # noqa: E402
from slurmsched.engine import Engine  # noqa: E402
from slurmsched.gateway.parse import parse_sinfo, parse_squeue  # noqa: E402
from slurmsched.gateway.show_job import with_switch_requests  # noqa: E402
from slurmsched.gateway.slurm_config import parse_show_config, scheduler_config  # noqa: E402
from slurmsched.gateway.sprio import parse_sprio  # noqa: E402
from slurmsched.model import (Action, ActionOutcome, ClusterSnapshot, JobRecord, SchedulerConfig,  # noqa: E402
                              SetSiteFactor)
from slurmsched.planner import Planner, count_rpcs  # noqa: E402
from slurmsched.policy import make_policy  # noqa: E402
from slurmsched.predict.protocol import Predictor  # noqa: E402
from slurmsched.predict.registry import make_predictor  # noqa: E402
from slurmsched.store.repository import SqlJobRepository  # noqa: E402
from slurmsched.workload import WorkloadSpec, generate_workload  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "slurm-json" / "22.05"


class RecordedSlurm:
    """A SlurmGateway over Slurm output held in memory: ``squeue --json``, ``scontrol show job``, sprio state.

    ``snapshot()`` parses the held output with the gateway's parsers each time, as
    ``CliGateway.snapshot`` does (the cost of a real cycle minus the commands' own run
    time); ``apply()`` changes the sprio state as ``scontrol update`` would and counts
    the calls a CLI gateway makes.
    """

    def __init__(self, squeue_json: bytes, show_job: bytes, site_factors: dict[int, int], sinfo_json: bytes,
                 config: SchedulerConfig, cluster: str) -> None:
        self.squeue_json = squeue_json
        self.show_job = show_job
        self.site_factors = site_factors
        self.sinfo_json = sinfo_json
        self.config = config
        self.cluster = cluster
        self.rpcs = 0

    def snapshot(self) -> ClusterSnapshot:
        sprio = "\n".join(f"{job_id}|{value}|{10000 + value}" for job_id, value in self.site_factors.items())
        jobs = with_switch_requests(parse_squeue(self.squeue_json, parse_sprio(sprio)),
                                    lambda: self.show_job.decode("utf-8", "replace"))
        return ClusterSnapshot(time.time(), self.cluster, tuple(jobs), tuple(parse_sinfo(self.sinfo_json)),
                               self.config)

    def finished_since(self, since: float) -> list[JobRecord]:
        return []

    def scheduler_config(self) -> SchedulerConfig:
        return self.config

    def apply(self, actions: Sequence[Action]) -> list[ActionOutcome]:
        self.rpcs += count_rpcs(actions)
        for action in actions:
            if isinstance(action, SetSiteFactor):
                self.site_factors[action.job_id] = action.value
        return [ActionOutcome(action, True) for action in actions]


def squeue_document(pending: Sequence[JobRecord], offset: int) -> bytes:
    """``squeue --json`` (22.05 shape) listing ``pending``, job ids shifted by ``offset``."""
    recorded = json.loads((FIXTURES / "squeue.json").read_text())
    template = next(j for j in recorded["jobs"] if j["job_state"] == "PENDING")
    jobs = []
    for job in pending:
        item = copy.copy(template)
        per_node = job.gpus // job.nodes
        typed = f"{job.gpu_type}:" if job.gpu_type else ""
        item.update(job_id=job.job_id + offset, user_name=job.user, name=job.name, features="",
                    submit_time=int(job.submit_time), eligible_time=int(job.submit_time),
                    time_limit=(job.time_limit_s or 3600) // 60, node_count=job.nodes, cpus=job.cpus,
                    tres_per_node=f"gres:gpu:{typed}{per_node}",
                    tres_req_str=f"cpu={job.cpus},node={job.nodes},gres/gpu={job.gpus}",
                    priority=10000, nice=0, state_reason="Priority")
        jobs.append(item)
    return json.dumps({**recorded, "jobs": jobs}).encode()


def show_job_listing(pending: Sequence[JobRecord], offset: int) -> bytes:
    """``scontrol -a -o show job`` (22.05) listing ``pending``: a recorded pending job's line, id and name varied."""
    recorded = (FIXTURES / "scontrol_show_job.txt").read_text()
    template = next(line for line in recorded.splitlines() if line.startswith("JobId=9 "))
    rest = template.split(" UserId=", 1)[1]
    return "".join(f"JobId={job.job_id + offset} JobName={job.name} UserId={rest}\n" for job in pending).encode()


def prepare(pending: int, history: int, predictor: str) -> tuple[RecordedSlurm, Predictor, float]:
    """The recorded Slurm, the fitted predictor and the moment of the first cycle.

    The workload's job records stay in here: a daemon holds no history records
    between cycles (it refits from its database), so the cycles run without them.
    """
    spec = WorkloadSpec(jobs=history + pending, users=400, projects_per_user=5, mean_interarrival_s=30.0, seed=7)
    jobs = generate_workload(spec, start=1_790_000_000.0)
    past, queued = jobs[:history], jobs[history:]
    now = (queued[-1].submit_time // 3600 + 1) * 3600 + 600  # ten minutes into the next aging tick
    config_values = parse_show_config((FIXTURES / "scontrol_show_config.txt").read_text())
    document = squeue_document(queued, offset=1_000_000)
    listing = show_job_listing(queued, offset=1_000_000)
    print(f"queue: {len(queued)} pending jobs ({sum(j.nodes > 1 for j in queued)} multi-node), squeue --json "
          f"{len(document) / 1e6:.1f} MB, scontrol show job {len(listing) / 1e6:.1f} MB; "
          f"history: {len(past)} finished jobs of {spec.users} users")
    slurm = RecordedSlurm(document, listing, {j.job_id + 1_000_000: 0 for j in queued},
                          (FIXTURES / "sinfo.json").read_bytes(), scheduler_config(config_values),
                          config_values.get("ClusterName", "bench"))
    model = make_predictor(predictor)
    began = time.perf_counter()
    model.fit(past)
    print(f"predictor {model.name}: fitted on {len(past)} jobs in {time.perf_counter() - began:.2f} s")
    return slurm, model, now


@click.command()
@click.option("--pending", default=10_000, show_default=True, help="Pending jobs in the queue.")
@click.option("--history", default=20_000, show_default=True, help="Finished jobs the predictor learns from.")
@click.option("--predictor", default="slurmsched", show_default=True, help="Predictor name.")
def main(pending: int, history: int, predictor: str) -> None:
    """Time one engine cycle on a synthesized queue; count RPCs when nothing changed."""
    slurm, model, now = prepare(pending, history, predictor)
    with tempfile.TemporaryDirectory() as tmp:
        repository = SqlJobRepository.from_url(f"sqlite:///{tmp}/bench.db", create=True)
        repository.upgrade()
        engine = Engine(slurm, repository, model, make_policy("qssf"), Planner(Config()), history_lookback_s=0,
                        timer=time.process_time)
        wall = time.perf_counter()
        first = engine.run_cycle(now)
        wall = time.perf_counter() - wall
        t = first.timings
        cycle_s = t["snapshot"] + t["predict"] + t["plan"]
        print(f"cycle 1 (CPU s): parse {t['snapshot']:.3f} + predict {t['predict']:.3f} + plan {t['plan']:.3f}"
              f" = {cycle_s:.3f} s; record {t['store'] + t['record']:.3f} s; whole cycle {t['total']:.3f} s CPU,"
              f" {wall:.3f} s wall; {len(first.plan.actions)} actions in {first.plan.rpcs} RPCs,"
              f" {first.plan.deferred} deferred by the cap")
        cycles, moment = 1, now
        while engine.run_cycle(moment + cycles).plan.deferred:
            cycles += 1
        cycles += 1
        sent = slurm.rpcs
        print(f"every change sent after {cycles} cycles, {sent} RPCs in all")
        unchanged = engine.run_cycle(now + 60 + cycles)
        u = unchanged.timings
        rpcs = count_rpcs(unchanged.plan.actions)
        print(f"unchanged queue a minute later (CPU s): parse {u['snapshot']:.3f} + predict {u['predict']:.3f}"
              f" + plan {u['plan']:.3f}; {len(unchanged.plan.actions)} actions, {rpcs} RPCs")
        repository.close()
    print(json.dumps({"cycle_10k_s": round(cycle_s, 3), "rpcs_when_unchanged": rpcs}))


if __name__ == "__main__":
    main()
