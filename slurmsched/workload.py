"""A synthetic GPU workload with the shape of real deep-learning clusters.

Used by the demo (``contrib/demo.sh``) and the tests when a site has no history and
no public trace is at hand. The shape follows what the Helios/Philly studies report:

* durations are heavy-tailed (log-normal across projects, a few jobs run 100x the median);
* users resubmit similar jobs: each user owns a few projects (job names) whose runs
  have similar durations and sizes, so history predicts well;
* GPU requests are mixed: mostly 1 GPU, some whole nodes, a few multi-node jobs,
  typed (``a100``/``v100``) or untyped;
* time limits are over-asked: users round their request up to a habitual value
  (1 h, 4 h, 1 day ...) several times the true run time;
* a share of jobs fail or are cancelled early, far below their project's duration.

Generated jobs are :class:`~slurmsched.model.JobRecord` values in ``COMPLETED`` state
whose ``start_time`` equals ``submit_time`` and ``end_time - start_time`` is the job's
intrinsic run time: what a trace reader yields, minus the queueing that a replay adds.
:func:`sbatch_argv` turns one such record into the ``sbatch`` command that replays it.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from slurmsched.errors import ConfigError
from slurmsched.model import GresRequest, JobRecord, JobState

#: Time limits users habitually ask for (seconds), smallest first.
HABITUAL_LIMITS_S = (15 * 60, 30 * 60, 3600, 2 * 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400)


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """Parameters of a generated workload (all times in seconds).

    Attributes:
        jobs: number of jobs.
        users: number of distinct users (activity is Zipf-distributed over them).
        projects_per_user: job names each user cycles through.
        median_duration_s: median of the per-project median run time.
        duration_sigma: log-normal sigma across projects (heavy tail; 1.5-2 is realistic).
        run_sigma: log-normal sigma of one run around its project's median.
        mean_interarrival_s: mean gap between submissions (Poisson arrivals).
        gpu_nodes: (gpu type, GPUs per node, nodes) of the target cluster; sizes and
            types are drawn so that every job fits it.
        typed_share: share of projects that ask for a specific GPU type.
        early_exit_share: share of runs that fail or are cancelled early.
        min_duration_s: floor of any run time.
        seed: random seed; the same spec always yields the same jobs.
    """

    jobs: int = 100
    users: int = 8
    projects_per_user: int = 3
    median_duration_s: float = 1800.0
    duration_sigma: float = 1.6
    run_sigma: float = 0.25
    mean_interarrival_s: float = 120.0
    gpu_nodes: tuple[tuple[str, int, int], ...] = (("a100", 8, 2), ("v100", 4, 2))
    typed_share: float = 0.3
    early_exit_share: float = 0.1
    min_duration_s: float = 10.0
    seed: int = 1

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first invalid field."""
        for key in ("jobs", "users", "projects_per_user"):
            if getattr(self, key) < 1:
                raise ConfigError(f"workload.{key} must be >= 1 (got {getattr(self, key)})")
        for key in ("median_duration_s", "mean_interarrival_s", "min_duration_s"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"workload.{key} must be > 0 (got {getattr(self, key)})")
        for key in ("duration_sigma", "run_sigma"):
            if getattr(self, key) < 0:
                raise ConfigError(f"workload.{key} must be >= 0 (got {getattr(self, key)})")
        for key in ("typed_share", "early_exit_share"):
            if not 0 <= getattr(self, key) <= 1:
                raise ConfigError(f"workload.{key} must be between 0 and 1 (got {getattr(self, key)})")
        if not self.gpu_nodes or any(per <= 0 or n <= 0 for _, per, n in self.gpu_nodes):
            raise ConfigError(f"workload.gpu_nodes must list (type, gpus per node > 0, nodes > 0) (got {self.gpu_nodes})")


@dataclass(frozen=True, slots=True)
class _Project:
    user: str
    name: str
    median_s: float
    gpus: int
    nodes: int
    gpu_type: str | None
    limit_s: int


def _zipf_weights(n: int, s: float = 1.1) -> list[float]:
    return [1.0 / (rank ** s) for rank in range(1, n + 1)]


def _habitual_limit(duration_s: float, rng: random.Random) -> int:
    """A limit 2-10x the typical run time, rounded up to a value users habitually ask for."""
    wanted = duration_s * rng.uniform(2.0, 10.0)
    for limit in HABITUAL_LIMITS_S:
        if limit >= wanted:
            return limit
    return int(math.ceil(wanted / 86400.0)) * 86400


def _size(spec: WorkloadSpec, rng: random.Random) -> tuple[int, int, str | None]:
    """(total GPUs, nodes, type or None) that fit the cluster in ``spec.gpu_nodes``."""
    gpu_type, per_node, nodes = rng.choice(spec.gpu_nodes)
    sizes = [s for s in (1, 2, 4, 8, 16, 32) if s <= per_node * nodes]
    weights = [0.55, 0.15, 0.12, 0.1, 0.05, 0.03][:len(sizes)]
    gpus = rng.choices(sizes, weights=weights)[0]
    need_nodes = max(1, math.ceil(gpus / per_node))
    typed = gpu_type if (rng.random() < spec.typed_share or gpus > min(p for _, p, _ in spec.gpu_nodes)) else None
    return gpus, need_nodes, typed


def _projects(spec: WorkloadSpec, rng: random.Random) -> list[list[_Project]]:
    kinds = ("train", "finetune", "eval", "sweep", "pretrain", "debug")
    per_user = []
    for u in range(spec.users):
        user = f"user{u + 1:02d}"
        projects = []
        for p in range(spec.projects_per_user):
            kind = rng.choice(kinds)
            median = max(spec.min_duration_s,
                          spec.median_duration_s * math.exp(rng.gauss(0.0, spec.duration_sigma)))
            gpus, nodes, gpu_type = _size(spec, rng)
            projects.append(_Project(user, f"{kind}-{p + 1}", median, gpus, nodes, gpu_type,
                                     _habitual_limit(median, rng)))
        per_user.append(projects)
    return per_user


def generate_workload(spec: WorkloadSpec, start: float = 0.0) -> list[JobRecord]:
    """Generate ``spec.jobs`` jobs, submitted from ``start`` on, ordered by submit time.

    Job ids run from 1; ``end_time - start_time`` is each job's true run time, never
    longer than its time limit (a job that would run longer is killed at the limit,
    as Slurm would).

    Raises:
        ConfigError: a field of ``spec`` is invalid.
    """
    spec.validate()
    rng = random.Random(spec.seed)
    projects = _projects(spec, rng)
    user_weights = _zipf_weights(spec.users)
    jobs: list[JobRecord] = []
    now = start
    for job_id in range(1, spec.jobs + 1):
        now += rng.expovariate(1.0 / spec.mean_interarrival_s)
        project = rng.choice(projects[rng.choices(range(spec.users), weights=user_weights)[0]])
        run = project.median_s * math.exp(rng.gauss(0.0, spec.run_sigma))
        state = JobState.COMPLETED
        if rng.random() < spec.early_exit_share:
            run *= rng.uniform(0.01, 0.2)
            state = rng.choice((JobState.FAILED, JobState.CANCELLED))
        run = float(round(min(max(spec.min_duration_s, run), project.limit_s)))
        if run >= project.limit_s:
            state = JobState.TIMEOUT
        per_node = project.gpus // project.nodes
        jobs.append(JobRecord(
            job_id=job_id, user=project.user, name=project.name, submit_time=round(now, 3),
            state=state, start_time=round(now, 3), end_time=round(now, 3) + run,
            time_limit_s=project.limit_s, nodes=project.nodes, gpus=project.gpus,
            gpu_type=project.gpu_type, cpus=max(1, 4 * project.gpus),
            gres_per_node=(GresRequest("gpu", project.gpu_type, per_node),)))
    return jobs


def sbatch_argv(job: JobRecord, *, tag: str, partition: str | None = None,
                sbatch: str = "sbatch") -> list[str]:
    """The ``sbatch`` argument list that replays ``job`` on a live cluster.

    The job sleeps for its run time; it asks for the job's GPUs per node (typed when the
    record is typed), its node count and its time limit (whole minutes, rounded up;
    none when the record has none). ``tag`` goes into ``--comment`` so a replay can find
    and cancel exactly its own jobs. The job name is ``<user>.<name>`` so that history
    keyed by name still separates users when everything is submitted by one account.
    """
    run = job.runtime_s
    if run is None:
        raise ConfigError(f"job {job.job_id} has no run time to replay")
    argv = [sbatch, "--parsable", "-J", f"{job.user}.{job.name}" if job.user else job.name,
            "--comment", tag, "-o", "/dev/null", "-e", "/dev/null", "-N", str(max(1, job.nodes))]
    if partition:
        argv += ["-p", partition]
    if job.gpus > 0:
        per_node = max(1, math.ceil(job.gpus / max(1, job.nodes)))
        argv.append(f"--gres=gpu:{job.gpu_type}:{per_node}" if job.gpu_type else f"--gres=gpu:{per_node}")
    if job.time_limit_s is not None:
        argv += ["-t", str(max(1, math.ceil(job.time_limit_s / 60.0)))]
    argv += ["--wrap", f"sleep {max(1, round(run))}"]
    return argv
