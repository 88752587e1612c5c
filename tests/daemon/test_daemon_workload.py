"""The synthetic workload has the shape the demo and the replay rely on."""

from __future__ import annotations

import statistics
from collections import Counter

import pytest

from slurmsched.errors import ConfigError
from slurmsched.model import JobState
from slurmsched.workload import WorkloadSpec, generate_workload, sbatch_argv


def test_same_seed_same_jobs_other_seed_other_jobs():
    assert generate_workload(WorkloadSpec(jobs=50, seed=3)) == generate_workload(WorkloadSpec(jobs=50, seed=3))
    assert generate_workload(WorkloadSpec(jobs=50, seed=3)) != generate_workload(WorkloadSpec(jobs=50, seed=4))


def test_shape_heavy_tail_resubmissions_mixed_sizes_overasked_limits():
    jobs = generate_workload(WorkloadSpec(jobs=400, seed=7))
    runs = [j.runtime_s for j in jobs]
    assert max(runs) > 20 * statistics.median(runs)          # heavy tail
    keys = Counter((j.user, j.name) for j in jobs)
    assert sum(n - 1 for n in keys.values()) > 0.8 * len(jobs)  # mostly resubmissions of known projects
    assert len({j.gpus for j in jobs}) >= 4 and {None, "a100", "v100"} <= {j.gpu_type for j in jobs}
    assert all(j.time_limit_s >= j.runtime_s for j in jobs)
    assert statistics.median(j.time_limit_s / j.runtime_s for j in jobs) >= 2
    assert any(j.state is not JobState.COMPLETED for j in jobs)
    assert [j.submit_time for j in jobs] == sorted(j.submit_time for j in jobs)


def test_every_job_fits_the_cluster():
    spec = WorkloadSpec(jobs=300, seed=11)
    per_node = {t: p for t, p, _ in spec.gpu_nodes}
    for job in generate_workload(spec):
        if job.gpu_type:
            assert job.gpus <= per_node[job.gpu_type] * job.nodes
            assert job.nodes <= dict((t, n) for t, _, n in spec.gpu_nodes)[job.gpu_type]
        else:
            assert job.nodes == 1 and job.gpus <= min(per_node.values())


def test_sbatch_argv_replays_size_type_limit_and_tag():
    job = next(j for j in generate_workload(WorkloadSpec(jobs=200, seed=5)) if j.gpu_type and j.nodes > 1)
    argv = sbatch_argv(job, tag="demo-1", partition="gpu")
    assert argv[0] == "sbatch" and argv[argv.index("--comment") + 1] == "demo-1"
    assert argv[argv.index("-N") + 1] == str(job.nodes)
    assert f"--gres=gpu:{job.gpu_type}:{job.gpus // job.nodes}" in argv
    assert argv[argv.index("-t") + 1] == str(-(-job.time_limit_s // 60))
    assert argv[-1] == f"sleep {round(job.runtime_s)}"
    assert argv[argv.index("-J") + 1] == f"{job.user}.{job.name}"


def test_bad_spec_names_the_field():
    with pytest.raises(ConfigError, match="workload.jobs"):
        generate_workload(WorkloadSpec(jobs=0))
    with pytest.raises(ConfigError, match="workload.typed_share"):
        generate_workload(WorkloadSpec(typed_share=2.0))
