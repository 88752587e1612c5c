#!/usr/bin/env python3
"""Live replay: a slice of a real trace on the local Slurm cluster, stock multifactor vs slurmsched.

Self-contained: starts the dev cluster with ``contrib/dev-cluster/up.sh`` (its own state
directory and ports unless ``SLURMSCHED_DEV_STATE``/``SLURMSCHED_DEV_PORT`` say
otherwise), replays the same jobs twice on it and compares. A cluster this run started is
stopped at the end (``contrib/dev-cluster/down.sh``, with ``--purge`` when its state
directory did not exist before); one that was already up is left running, and so is
every cluster with ``--keep-cluster``.

The replay:

* **slice**: ``--jobs`` consecutive jobs (by submit time) starting at ``--start`` (a
  fraction of the trace); every job of the trace that *finished before the slice's
  first submission* is history, the rest is never shown to the predictor.
* **time**: run times shrink by ``--speedup`` and are clipped to [1, ``--max-run``]
  seconds (jobs become ``sleep`` s; the trace's heavy tail would otherwise hold the
  cluster for hours). The trace has no requested limits, so every job asks for the same
  limit (``--max-run`` + 30 s, in whole minutes): no information for either arm.
* **congestion**: the slice's arrivals keep their order and relative spacing but are
  squeezed so that the offered load while jobs arrive is ``--load`` times the
  cluster's GPUs. Queue order only matters when jobs wait.
* **GPUs**: each request is multiplied by ``--gpu-scale`` (default 0.5: a job that
  filled an 8-GPU trace node fills a 4-GPU v100 node or half an a100 node here), at
  least 1 and at most 16 (the local cluster's largest job); up to 8 GPUs on one node,
  more on two. Jobs are untyped and run in partition ``gpu``.
* **names**: everything is submitted by this user; the job name is the trace's user
  id, so per-user history still separates users. History uses the same mapping.

``--generated`` replays a workload from :mod:`slurmsched.workload` instead (for machines
without the traces, e.g. ``contrib/demo.sh``): ``--history`` jobs before the slice are
the history; jobs keep their GPU shape and their own over-asked time limits (compressed).

Arm 1 (baseline): Slurm's stock multifactor priority (age + fair-share), no daemon, no
submit cache. Arm 2 (slurmsched): a fresh database seeded with the history, then
``slurmsched run`` (policy ``qssf``, predictor ``slurmsched``, 2 s interval) with its
submit cache linked where ``job_submit.lua`` reads it, so arrivals get their SiteFactor
at submit. The planner's service bounds are scaled by the speedup like every other time.

Prints avg JCT, avg wait and max wait of both arms, their ratio, and ends with one JSON
line: ``{"jobs", "baseline_avg_jct_s", "slurmsched_avg_jct_s", "avg_jct_ratio",
"baseline_max_wait_s", "slurmsched_max_wait_s"}`` (seconds as measured, compressed).

Usage: bench/live_replay.py [--trace PATH] [--format helios] [--jobs 200] [--speedup 100] [--max-run 20]
       [--keep-cluster]
       bench/live_replay.py --generated [--history 300] [--seed 1] [--jobs N] ...
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # model fits share 2 cores with a live Slurm

import argparse
import json
import math
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Iterator, Sequence

from tqdm import tqdm

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.support.dev_cluster import start_cluster, stop_cluster  # noqa: E402
from slurmsched.config import load_config  # noqa: E402
from slurmsched.gateway import CliGateway  # noqa: E402
from slurmsched.model import JobRecord  # noqa: E402
from slurmsched.store.repository import open_repository  # noqa: E402
from slurmsched.submit_cache import CACHE_FILE_NAME  # noqa: E402
from slurmsched.traces import BadLine, iter_trace  # noqa: E402
from slurmsched.workload import WorkloadSpec, generate_workload, sbatch_argv  # noqa: E402

LOCAL_GPUS = 24          # contrib/cluster/cluster.toml: 2 x 8 a100 + 2 x 4 v100
MAX_JOB_GPUS = 16
TRACES = Path(os.environ.get("SLURMSCHED_TRACES", REPO.parent / "shared" / "traces"))


@dataclass(frozen=True)
class Arm:
    """The measured outcome of one replay."""

    name: str
    jobs: int
    avg_jct_s: float
    avg_wait_s: float
    p90_wait_s: float
    max_wait_s: float
    makespan_s: float


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=TRACES / "helios_venus_2vc_sept.csv")
    parser.add_argument("--generated", action="store_true",
                        help="replay a generated workload (slurmsched.workload) instead of a trace")
    parser.add_argument("--history", type=int, default=300, help="with --generated: jobs before the slice")
    parser.add_argument("--seed", type=int, default=1, help="with --generated: the workload's seed")
    parser.add_argument("--format", default="helios", help="trace format (see slurmsched.traces)")
    parser.add_argument("--jobs", type=int, default=200, help="jobs in the slice")
    parser.add_argument("--start", type=float, default=0.7, help="slice start, as a fraction of the trace's jobs")
    parser.add_argument("--speedup", type=float, default=100.0, help="run times are divided by this")
    parser.add_argument("--max-run", type=float, default=20.0, help="longest sleep, seconds (clips the tail)")
    parser.add_argument("--load", type=float, default=3.0, help="offered load while jobs arrive (x GPUs)")
    parser.add_argument("--gpu-scale", type=float, default=0.5, help="GPU requests are multiplied by this")
    parser.add_argument("--interval", type=float, default=2.0, help="daemon cycle interval, seconds")
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="keep the daemon's config, database and log here (default: a temporary directory)")
    parser.add_argument("--keep-cluster", action="store_true",
                        help="leave the dev cluster running even if this run started it")
    args = parser.parse_args(argv)
    for key in ("jobs", "speedup", "max_run", "load", "gpu_scale", "interval"):
        if getattr(args, key) <= 0:
            parser.error(f"--{key.replace('_', '-')} must be > 0")
    if not 0 <= args.start < 1:
        parser.error("--start must be in [0, 1)")
    if not args.generated and not args.trace.exists():
        parser.error(f"trace {args.trace} not found (set SLURMSCHED_TRACES or --trace)")
    return args


# --- the workload --------------------------------------------------------------------------

def read_trace(path: Path, fmt: str) -> list[JobRecord]:
    """Jobs with a run time, by submit time."""
    jobs = [j for j in tqdm(iter_trace(path, fmt), desc="reading trace", unit=" jobs", leave=False)
            if not isinstance(j, BadLine) and j.runtime_s]
    return sorted(jobs, key=lambda j: (j.submit_time, j.job_id))


def map_job(job: JobRecord, *, user: str, speedup: float, max_run: float, gpu_scale: float | None,
            limit_s: int | None, origin: float, arrival: float) -> JobRecord:
    """``job`` as it runs here: local GPUs, compressed and clipped run time, rebased times.

    Submit times become ``origin + submit * arrival`` (``submit`` relative to the slice's
    start, ``arrival`` the compression of arrivals); run times ``clip(runtime / speedup,
    1, max_run)``. With ``gpu_scale`` the GPU count is scaled and the request untyped;
    without, the job keeps its shape (a generated job already fits this cluster).
    ``limit_s`` replaces every time limit; without, the job's own limit is compressed.
    The job name is ``<user>.<name>`` (parts that are empty left out), its user ``user``.
    """
    run = float(min(max_run, max(1, round(job.runtime_s / speedup))))
    submit = origin + job.submit_time * arrival
    shape: dict = {}
    if gpu_scale is not None:
        gpus = min(MAX_JOB_GPUS, max(1, round(max(job.gpus, 1) * gpu_scale)))
        nodes = 1 if gpus <= 8 else 2
        shape = dict(gpus=math.ceil(gpus / nodes) * nodes, nodes=nodes, gpu_type=None, gres_per_node=())
    if limit_s is None and job.time_limit_s is not None:
        limit_s = max(60, math.ceil(job.time_limit_s / speedup / 60.0) * 60)
    return replace(job, user=user, name=".".join(p for p in (job.user, job.name) if p), submit_time=submit,
                   start_time=submit, end_time=submit + run, time_limit_s=limit_s, partition="gpu", cluster="",
                   account="", qos="", **shape)


def source_jobs(args: argparse.Namespace) -> tuple[list[JobRecord], int, str]:
    """(all jobs by submit time, index of the slice's first job, a description)."""
    if args.generated:
        spec = WorkloadSpec(jobs=args.history + args.jobs, seed=args.seed)
        return generate_workload(spec), args.history, f"generated workload (slurmsched.workload, seed {args.seed})"
    trace = read_trace(args.trace, args.format)
    return trace, int(len(trace) * args.start), f"trace {args.trace.name} ({len(trace)} jobs)"


def build_workload(args: argparse.Namespace, user: str, now: float) -> tuple[list[JobRecord], list[JobRecord], dict]:
    """(history, slice) in local terms, history ending before ``now`` and the slice arriving from ``now`` on."""
    source, first, described = source_jobs(args)
    chosen = source[first:first + args.jobs]
    if len(chosen) < args.jobs:
        raise SystemExit(f"only {len(chosen)} jobs from job {first} of the {described}")
    t0 = chosen[0].submit_time
    history_src = [j for j in source if j.end_time is not None and j.end_time < t0]
    # a generated job keeps its GPUs and its own (compressed) limit; a trace job is scaled and
    # gets the common limit, as the traces hold no requests
    limit_s = None if args.generated else int(math.ceil((args.max_run + 30) / 60.0)) * 60
    common = dict(user=user, speedup=args.speedup, max_run=args.max_run,
                  gpu_scale=None if args.generated else args.gpu_scale, limit_s=limit_s)
    # arrivals: keep the slice's relative spacing, squeeze it to the wanted offered load
    rebased = [replace(j, submit_time=j.submit_time - t0) for j in chosen]
    probe = [map_job(j, origin=0.0, arrival=1.0, **common) for j in rebased]
    work = sum(j.gpus * j.runtime_s for j in probe)
    span = max(j.submit_time for j in rebased) or 1.0
    arrival = work / (LOCAL_GPUS * args.load) / span
    jobs = [map_job(j, origin=now, arrival=arrival, **common) for j in rebased]
    # history: the same mapping on the source's own clock, shifted to end before now
    history = [map_job(replace(j, submit_time=j.submit_time - t0), origin=now, arrival=1.0 / args.speedup,
                       **common) for j in history_src]
    history = [replace(h, start_time=h.submit_time, end_time=min(now - 1.0, h.submit_time + h.runtime_s),
                       state=src.state)
               for h, src in zip(history, history_src)]
    info = {"source": described, "first": first, "history": len(history), "arrival_span_s": span * arrival,
            "work_gpu_s": work, "limits": f"{limit_s // 60} min each" if limit_s else "the jobs' own, compressed"}
    return history, jobs, info


# --- the cluster ---------------------------------------------------------------------------

def queue_of(env: dict[str, str], tag: str) -> list[str]:
    """Ids of this replay's jobs that are still pending or running."""
    out = subprocess.run(["squeue", "-h", "-t", "PD,R,CG", "-o", "%i|%k"], env=env, capture_output=True,
                         text=True, check=True).stdout
    return [line.split("|", 1)[0] for line in out.splitlines() if line.endswith("|" + tag)]


def wait_idle(env: dict[str, str], timeout: float = 120) -> None:
    """Wait until no job at all runs or waits (a fair start for an arm)."""
    deadline = time.monotonic() + timeout
    while subprocess.run(["squeue", "-h", "-t", "PD,R,CG", "-o", "%i"], env=env, capture_output=True,
                         text=True, check=True).stdout.strip():
        if time.monotonic() > deadline:
            raise SystemExit("the cluster is busy with other jobs; run the bench on an idle cluster")
        time.sleep(1)


def replay(jobs: list[JobRecord], env: dict[str, str], label: str,
           halfway: Callable[[], None] | None = None) -> list[int]:
    """Submit every job at its submit time (relative to the first); wait until all have finished.

    ``halfway`` is called once half of the jobs are submitted (to look at the queue).
    """
    tag = f"live-replay-{label}-{uuid.uuid4().hex[:6]}"
    start = time.time()
    origin = min(j.submit_time for j in jobs)
    ids: list[int] = []
    with tqdm(total=2 * len(jobs), desc=f"{label}: submitted+finished", unit=" jobs") as bar:
        for job in jobs:
            delay = start + (job.submit_time - origin) - time.time()
            if delay > 0:
                time.sleep(delay)
            out = subprocess.run(sbatch_argv(replace(job, user=""), tag=tag, partition="gpu"), env=env,
                                 capture_output=True, text=True, check=True).stdout
            ids.append(int(out.strip().split(";")[0]))
            bar.update(1)
            if halfway is not None and len(ids) == len(jobs) // 2:
                halfway()
        left = len(ids)
        while left:
            time.sleep(1)
            now_left = len(queue_of(env, tag))
            bar.update(left - now_left)
            left = now_left
    return ids


def collect(ids: list[int], env: dict[str, str], since: float, label: str) -> tuple[Arm, dict[int, JobRecord]]:
    """Every job's record from accounting (submit, start, end), and the arm's figures."""
    gateway = CliGateway(slurm_conf=env["SLURM_CONF"])
    wanted = set(ids)
    deadline = time.monotonic() + 60
    while True:
        records = {j.job_id: j for j in gateway.finished_since(since - 5) if j.job_id in wanted}
        if len(records) == len(wanted) or time.monotonic() > deadline:
            break
        time.sleep(2)
    missing = wanted - set(records)
    if missing:
        raise SystemExit(f"{label}: accounting never showed {len(missing)} jobs (e.g. {sorted(missing)[:3]})")
    done = [j for j in records.values() if j.start_time is not None and j.end_time is not None]
    waits = sorted(j.wait_s for j in done)
    jcts = [j.end_time - j.submit_time for j in done]
    arm = Arm(label, len(done), statistics.fmean(jcts), statistics.fmean(waits), waits[int(0.9 * (len(waits) - 1))],
              waits[-1], max(j.end_time for j in done) - min(j.submit_time for j in done))
    return arm, records


@contextmanager
def slurmsched_daemon(env: dict[str, str], history: list[JobRecord], args: argparse.Namespace,
                      workdir: Path) -> Iterator[Path]:
    """A seeded database and ``slurmsched run`` against the cluster; stopped with SIGTERM."""
    conf = Path(env["SLURM_CONF"])
    cache = conf.parent / CACHE_FILE_NAME
    scale = args.speedup
    config_path = workdir / "slurmsched.toml"
    config_path.write_text(f"""[slurm]
conf = "{conf}"
[daemon]
state_dir = "{workdir / 'state'}"
interval_s = {args.interval}
predictor = "slurmsched"
submit_cache = "{cache}"
submit_cache_max_age_s = 600
[policy]
name = "qssf"
[planner]
mode = "dominate"
level_ratio = 1.5
min_service_gpu_h = {180 / scale / 3600:.9f}
max_service_gpu_h = {180000 / scale / 3600:.9f}
""")
    config = load_config(config_path, environ={})
    cluster, _ = CliGateway(slurm_conf=str(conf)).read_config()  # history of this cluster, as the daemon records
    with closing(open_repository(config, create=True)) as repo:
        repo.ingest_finished([replace(job, cluster=cluster) for job in history])
        repo.set_cursor("sacct", time.time())      # never read the baseline arm's jobs as history
    log = (workdir / "daemon.log").open("w")
    daemon_env = {k: v for k, v in env.items() if not k.startswith("SLURMSCHED_") or k.startswith("SLURMSCHED_DEV")}
    proc = subprocess.Popen([sys.executable, "-m", "slurmsched", "-v", "--config", str(config_path), "run"],
                            env=daemon_env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    try:
        deadline = time.monotonic() + 300
        while not cache.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"slurmsched run did not start; see {workdir / 'daemon.log'}")
            time.sleep(0.5)
        yield config_path
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        cache.unlink(missing_ok=True)


def what_changed(config_path: Path, records: dict[int, JobRecord]) -> tuple[list[str], int | None]:
    """What the daemon did to this arm's jobs and how close its predictions were; a job worth explaining."""
    sent = adopted = 0
    errors = []
    touched: list[tuple[int, int, int]] = []
    with closing(open_repository(load_config(config_path, environ={}))) as repo:
        for job_id, job in sorted(records.items()):
            decisions = [d for _, d in repo.decisions_for(job_id)]
            sent += sum(d.kind == "SetSiteFactor" and d.outcome == "ok" for d in decisions)
            adopted += sum(d.outcome.startswith("adopted") for d in decisions)
            values = sum(d.kind == "SetSiteFactor" for d in decisions)
            if values:
                touched.append((len(decisions), job_id, values))
            prediction = repo.latest_prediction(job_id)
            if prediction is not None and job.runtime_s:
                errors.append(abs(math.log2(max(prediction.estimate_s, 1.0) / max(job.runtime_s, 1.0))))
    lines = [f"{sent} SiteFactor updates sent by the daemon, {adopted} values given at submit by "
             "job_submit.lua (and adopted by the daemon)"]
    if errors:
        lines.append(f"predicted run times of the {len(errors)} jobs that waited for a cycle: median "
                     f"{2 ** statistics.median(errors):.2f}x off, "
                     f"{sum(e <= 1 for e in errors) / len(errors):.0%} within 2x")
    if touched:
        lines.append(f"{len(touched)} of {len(records)} jobs got a SiteFactor; "
                     f"{sum(v > 1 for _, _, v in touched)} of them more than once (predictions change as jobs finish)")
    # a typical touched job to explain: the median by number of decisions
    example = sorted(touched)[len(touched) // 2][1] if touched else None
    return lines, example


def explain(config_path: Path, job_id: int) -> list[str]:
    """``slurmsched explain JOB`` against the arm's database."""
    proc = subprocess.run([sys.executable, "-m", "slurmsched", "--config", str(config_path), "explain", str(job_id)],
                          capture_output=True, text=True, cwd=REPO)
    lines = (proc.stdout or proc.stderr).splitlines()
    return lines if len(lines) <= 14 else lines[:13] + [f"... ({len(lines) - 13} more lines)"]


def sprio_summary(env: dict[str, str]) -> list[str]:
    """The pending queue as sprio shows it: jobs per SiteFactor, and the head of the queue."""
    out = subprocess.run(["sprio", "-h", "-o", "%i|%Y|%A|%F|%S"], env=env, capture_output=True, text=True).stdout
    rows = sorted((tuple(int(x) for x in line.split("|")) for line in out.split()), key=lambda r: -r[1])
    if not rows:
        return ["(no job pending)"]
    counts: dict[int, int] = {}
    for row in rows:
        counts[row[4]] = counts.get(row[4], 0) + 1
    lines = [f"{len(rows)} pending; jobs per SITE value: "
             + ", ".join(f"{v}: {n}" for v, n in sorted(counts.items(), reverse=True))]
    lines.append(f"{'job':>8} {'priority':>10} {'age':>6} {'fairshare':>9} {'SITE':>8}")
    lines += [f"{r[0]:>8} {r[1]:>10} {r[2]:>6} {r[3]:>9} {r[4]:>8}" for r in rows[:4] + rows[-2:]]
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    print("starting the dev cluster (contrib/dev-cluster/up.sh) ...", flush=True)
    env = dict(os.environ)
    env.setdefault("SLURMSCHED_DEV_STATE", "/var/lib/slurmsched-bench")  # its own instance by default
    env.setdefault("SLURMSCHED_DEV_PORT", "17500")
    env, before = start_cluster(env)
    try:
        figures = compare_arms(args, env)
    finally:
        if not args.keep_cluster:
            stop_cluster(env, before)
    print(json.dumps(figures))


def compare_arms(args: argparse.Namespace, env: dict[str, str]) -> dict[str, float]:
    """Replay the slice on stock Slurm, then with slurmsched; print both and return the figures."""
    user = subprocess.run(["id", "-un"], capture_output=True, text=True, check=True).stdout.strip()
    wait_idle(env)
    history, jobs, info = build_workload(args, user, time.time())
    runs = sorted(j.runtime_s for j in jobs)
    print(f"{info['source']}: slice = jobs {info['first']}...{info['first'] + len(jobs) - 1}; "
          f"predictor history = {info['history']} jobs that ended before it")
    print(f"replay: {len(jobs)} jobs, run times {runs[0]:.0f}-{runs[-1]:.0f} s (median {statistics.median(runs):.0f}),"
          f" GPUs {sorted({j.gpus for j in jobs})}, time limits {info['limits']};"
          f" {info['work_gpu_s'] / LOCAL_GPUS:.0f} s of work for {LOCAL_GPUS} GPUs arriving over"
          f" {info['arrival_span_s']:.0f} s (offered load {args.load:g}x)")
    results: dict[str, Arm] = {}
    shifted = [replace(j, submit_time=j.submit_time - jobs[0].submit_time) for j in jobs]
    sample: list[str] = []
    (Path(env["SLURM_CONF"]).parent / CACHE_FILE_NAME).unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="live-replay-") as tmp:
        state = (args.state_dir or Path(tmp)).resolve()
        for old in ("slurmsched.db", "slurmsched.db-wal", "slurmsched.db-shm"):
            (state / "state" / old).unlink(missing_ok=True)     # a fresh database for every run
        state.mkdir(parents=True, exist_ok=True)
        print("\n== arm 1: stock multifactor (no daemon, no submit cache)", flush=True)
        since = time.time()
        ids = replay(shifted, env, "baseline")
        results["baseline"], _ = collect(ids, env, since, "baseline")
        wait_idle(env)
        print(f"\n== arm 2: slurmsched qssf (daemon every {args.interval:g} s, job_submit.lua values "
              "arrivals at submit)", flush=True)
        with slurmsched_daemon(env, history, args, state) as config_path:
            since = time.time()
            ids = replay(shifted, env, "slurmsched", halfway=lambda: sample.extend(sprio_summary(env)))
            results["slurmsched"], records = collect(ids, env, since, "slurmsched")
        changed, example = what_changed(config_path, records)
        explained = explain(config_path, example) if example is not None else []
    base, ours = results["baseline"], results["slurmsched"]
    print("\nwhat slurmsched changed:")
    for line in changed:
        print("   " + line)
    print("sprio halfway through arm 2's submissions:")
    for line in sample:
        print("   " + line)
    if explained:
        print(f"slurmsched explain {example}:")
        for line in explained:
            print("   " + line)
    if args.state_dir:
        print(f"the daemon's config, database and log are in {args.state_dir} "
              f"(slurmsched --config {args.state_dir / 'slurmsched.toml'} status)")
    print(f"\n{'':12}{'avg JCT':>10}{'avg wait':>10}{'p90 wait':>10}{'max wait':>10}{'makespan':>10}   (seconds)")
    for arm in (base, ours):
        print(f"{arm.name:12}{arm.avg_jct_s:>10.1f}{arm.avg_wait_s:>10.1f}{arm.p90_wait_s:>10.1f}"
              f"{arm.max_wait_s:>10.1f}{arm.makespan_s:>10.1f}")
    ratio = base.avg_jct_s / ours.avg_jct_s
    print(f"avg JCT ratio (baseline / slurmsched): {ratio:.2f}; avg wait ratio: "
          f"{base.avg_wait_s / max(ours.avg_wait_s, 1e-9):.2f}")
    return {"jobs": len(jobs), "baseline_avg_jct_s": round(base.avg_jct_s, 2),
            "slurmsched_avg_jct_s": round(ours.avg_jct_s, 2), "avg_jct_ratio": round(ratio, 3),
            "baseline_max_wait_s": round(base.max_wait_s, 2), "slurmsched_max_wait_s": round(ours.max_wait_s, 2)}


if __name__ == "__main__":
    main()
