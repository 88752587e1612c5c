#!/usr/bin/env python3
"""Benchmark of the Slurm gateway: parse cost at 10,000 jobs and scontrol update latency.

1. Parse: synthesises a ``squeue --json`` document of ``--jobs`` (default 10,000) jobs from
   the recorded fixtures, once in the 22.05 shape and once in the 23.11+ shape (25.11),
   and times :func:`slurmsched.gateway.parse.parse_squeue` on it (JSON decode included;
   best of ``--repeat``), with its peak Python memory.
2. Live: starts the project's dev cluster (``contrib/dev-cluster/up.sh``, honouring
   ``SLURMSCHED_DEV_STATE``/``SLURMSCHED_DEV_PORT``), submits ``--live-jobs`` pending jobs
   (``--begin=now+1hour``, so they never run), and times ``scontrol update`` of SiteFactor
   one job per call and batched through ``CliGateway.apply`` (one call per value), plus
   a whole ``snapshot()`` and ``squeue --json`` alone (seconds and the client's peak RSS).
   Its jobs are cancelled at the end, and a cluster this run started is stopped again
   (``contrib/dev-cluster/down.sh``; with ``--purge`` when its state directory did not exist
   before): one that was already up is left running, and so is every cluster with
   ``--keep-cluster``.

The last line printed is one JSON object: ``parse_10k_jobs_s`` (the slower shape),
``update_rpc_ms`` (one job per ``scontrol update``), and further figures.

Usage: ``python3 bench/gateway.py [--jobs 10000] [--live-jobs 300] [--repeat 3] [--keep-cluster]``
(``--live-jobs`` must stay below slurmctld's ``MaxJobCount``, 10,000 by default, minus the
finished jobs it still remembers.)
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.support.dev_cluster import start_cluster, stop_cluster  # noqa: E402
from slurmsched.gateway import CliGateway  # noqa: E402
from slurmsched.gateway.parse import parse_squeue  # noqa: E402
from slurmsched.model import SetSiteFactor  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "slurm-json"


def synthesize(version: str, count: int) -> bytes:
    """A ``squeue --json`` document of ``count`` live jobs cloned from a fixture's jobs."""
    doc = json.loads((FIXTURES / version / "squeue.json").read_bytes())
    templates = [j for j in doc["jobs"] if _live(j["job_state"])]
    wrapped = isinstance(templates[0]["submit_time"], dict)
    jobs = []
    for i in range(count):
        job = copy.deepcopy(templates[i % len(templates)])
        job["job_id"] = 100_000 + i
        job["name"] = f"{job['name']}-{i % 997}"
        job["user_name"] = f"user{i % 113}"
        submit = 1_795_000_000 + i
        job["submit_time"] = {"set": True, "infinite": False, "number": submit} if wrapped else submit
        jobs.append(job)
    doc["jobs"] = jobs
    return json.dumps(doc).encode()


def _live(state: object) -> bool:
    states = state if isinstance(state, list) else [state]
    return bool({"PENDING", "RUNNING"} & set(states))


def time_parse(raw: bytes, repeat: int) -> tuple[float, float, float, int]:
    """Best wall and CPU time of ``parse_squeue(raw)``, its peak traced memory (MB), records made.

    CPU time is reported too because a shared machine's load stretches wall time.
    """
    walls, cpus = [], []
    records = 0
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        records = len(parse_squeue(raw, {}))
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    tracemalloc.start()
    parse_squeue(raw, {})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return min(walls), min(cpus), peak / 1e6, records


#: Runs argv[1:] from a small interpreter and prints "seconds peak_rss_kb stdout_bytes": a child
#: forked straight from this (large) process would report this process's pages as its peak RSS.
_MEASURE = """
import os, subprocess, sys, time
started = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
size = len(proc.stdout.read())
_, status, usage = os.wait4(proc.pid, 0)
print(time.perf_counter() - started, usage.ru_maxrss, size, os.waitstatus_to_exitcode(status))
"""


def run_measured(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Run a command; return (seconds, its peak RSS in MB, bytes it printed)."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, *argv], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    seconds, rss_kb, size, status = float(out[0]), int(out[1]), int(out[2]), int(out[3])
    if status != 0:
        sys.exit(f"bench/gateway.py: {argv[0]} exited {status}")
    return seconds, rss_kb / 1024, size


def live_figures(env: dict[str, str], count: int) -> dict[str, float]:
    """Submit ``count`` never-starting jobs and time updates and reads against them."""
    tag = f"bench-gw-{uuid.uuid4().hex[:6]}"
    ids: list[int] = []
    try:
        started = time.perf_counter()
        for i in range(count):
            proc = subprocess.run(["sbatch", "--parsable", f"--job-name={tag}-{i}", "--begin=now+1hour",
                                   "--output=/dev/null", "--gres=gpu:1", "-t", "10", "--wrap=true"],
                                  env=env, capture_output=True, text=True, check=False)
            if proc.returncode != 0:  # e.g. MaxJobCount (10,000 by default) reached
                sys.exit(f"bench/gateway.py: sbatch failed after {len(ids)} jobs: {proc.stderr.strip()}")
            ids.append(int(proc.stdout.strip().split(";")[0]))
        submit_s = time.perf_counter() - started
        gateway = CliGateway(env=env)
        single = ids[: min(50, len(ids))]
        started = time.perf_counter()
        for n, job_id in enumerate(single):
            subprocess.run(["scontrol", "update", f"JobId={job_id}", f"SiteFactor={100 + n}"], env=env,
                           check=True, capture_output=True)
        single_ms = (time.perf_counter() - started) * 1000 / len(single)
        batched = []
        for value in (300, 400, 500):
            started = time.perf_counter()
            outcomes = gateway.apply([SetSiteFactor(job_id, value) for job_id in ids])
            batched.append((time.perf_counter() - started) * 1000 / len(ids))
            assert all(o.ok for o in outcomes), [o for o in outcomes if not o.ok][:3]
        snapshot_times = []
        for _ in range(3):
            started = time.perf_counter()
            snap = gateway.snapshot()
            snapshot_times.append(time.perf_counter() - started)
        assert sum(1 for j in snap.jobs if j.job_id in set(ids)) == len(ids)
        squeue_s, squeue_rss_mb, squeue_bytes = run_measured(["squeue", "--json", "-a"], env)
        return {
            "live_jobs": len(ids),
            "queue_jobs": len(snap.jobs),
            "sbatch_ms": round(submit_s * 1000 / len(ids), 2),
            "update_rpc_ms": round(single_ms, 2),
            "update_batched_ms_per_job": round(statistics.median(batched), 3),
            "snapshot_s": round(min(snapshot_times), 3),
            "squeue_json_s": round(squeue_s, 3),
            "squeue_json_rss_mb": round(squeue_rss_mb, 1),
            "squeue_json_mb": round(squeue_bytes / 1e6, 2),
        }
    finally:
        for start in range(0, len(ids), 1000):
            subprocess.run(["scancel", *map(str, ids[start:start + 1000])], env=env, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs in the synthetic document")
    parser.add_argument("--live-jobs", type=int, default=300, help="pending jobs submitted to the dev cluster")
    parser.add_argument("--repeat", type=int, default=3, help="parse repetitions (best is reported)")
    parser.add_argument("--keep-cluster", action="store_true",
                        help="leave the dev cluster running even if this run started it")
    args = parser.parse_args()

    figures: dict[str, float] = {}
    for version, key in (("22.05", "2205"), ("25.11", "2511")):
        raw = synthesize(version, args.jobs)
        seconds, cpu, peak_mb, records = time_parse(raw, args.repeat)
        print(f"parse {version} shape: {records} jobs, {len(raw) / 1e6:.1f} MB of JSON in {seconds:.3f} s "
              f"({cpu:.3f} s CPU, {seconds / records * 1e6:.1f} us/job), peak {peak_mb:.0f} MB traced")
        figures[f"parse_s_{key}"] = round(seconds, 4)
        figures[f"parse_cpu_s_{key}"] = round(cpu, 4)
        figures[f"parse_peak_mb_{key}"] = round(peak_mb, 1)
        figures[f"doc_mb_{key}"] = round(len(raw) / 1e6, 2)
    figures["parse_10k_jobs_s"] = max(figures["parse_s_2205"], figures["parse_s_2511"]) * 10_000 / args.jobs

    env, before = start_cluster(dict(os.environ))
    try:
        live = live_figures(env, args.live_jobs)
        print(f"live cluster: {live['live_jobs']} pending jobs submitted at {live['sbatch_ms']} ms each")
        print(f"scontrol update SiteFactor, one job per call: {live['update_rpc_ms']} ms per job")
        print(f"CliGateway.apply, one call per value:          {live['update_batched_ms_per_job']} ms per job")
        print(f"snapshot() of {live['queue_jobs']} jobs: {live['snapshot_s']} s; squeue --json alone "
              f"{live['squeue_json_s']} s, {live['squeue_json_mb']} MB, client peak RSS "
              f"{live['squeue_json_rss_mb']} MB", flush=True)
    finally:
        if not args.keep_cluster:
            stop_cluster(env, before)
    figures.update(live)
    figures["load_avg_1m"] = round(os.getloadavg()[0], 2)
    print(f"load average (1 min) at the end: {figures['load_avg_1m']} on {os.cpu_count()} CPUs")
    print(json.dumps({"parse_10k_jobs_s": round(figures.pop("parse_10k_jobs_s"), 4),
                      "update_rpc_ms": figures.pop("update_rpc_ms"), **figures}))


if __name__ == "__main__":
    main()
