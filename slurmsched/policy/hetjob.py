"""Heterogeneous jobs ordered as one job.

A heterogeneous job (``sbatch --gpus=1 : --gpus=2 script``, or ``#SBATCH hetjob``) has
one job id per component, and each component has a priority of its own, SiteFactor
included (``scontrol update JobId=<component>``). Slurm starts none of the components
until all of them can start. Scored one by one, the components of one job would get
the SiteFactor of their own size each and sit apart in the order: the interleaving
that Slurm's ``bf_hetjob_prio`` exists to avoid, where components of different jobs
hold resources that none of their siblings further back can join.

So a policy scores the pending components of a heterogeneous job together: each gets
the score of the whole job (:func:`whole`), predicted and waiting as its leader (the
leader's allocation runs the batch script, and every component's allocation lasts as
long); the components then get one SiteFactor and sit side by side (the order's
tie-breaks, submit time then job id, keep them in offset order). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Sequence

from slurmsched.model import JobRecord


def component_order(job: JobRecord) -> tuple[int, int]:
    """Sort key of a heterogeneous job's components: offset, then job id (the leader first)."""
    return (job.het_job_offset or 0, job.job_id)


def het_groups(jobs: Iterable[JobRecord]) -> dict[int, list[JobRecord]]:
    """The components among ``jobs`` of each heterogeneous job with more than one of them,
    by ``het_job_id``, in :func:`component_order`. A job that is no component, or the one
    component of its job among ``jobs``, is in no group: it is scored as itself."""
    groups: dict[int, list[JobRecord]] = {}
    for job in jobs:
        if job.het_job_id is not None:
            groups.setdefault(job.het_job_id, []).append(job)
    return {het: sorted(members, key=component_order) for het, members in groups.items() if len(members) > 1}


def whole(components: Sequence[JobRecord]) -> JobRecord:
    """The heterogeneous job as one job: the first component's record (the leader, by
    :func:`component_order`) with the GPUs, CPUs and nodes of every component summed.

    Args:
        components: the job's pending components in :func:`component_order`.
    """
    first = components[0]
    return replace(first, gpus=sum(c.gpus for c in components), cpus=sum(c.cpus for c in components),
                   nodes=sum(c.nodes for c in components))


def as_one(reason: str, components: Sequence[JobRecord]) -> str:
    """A reason given for the whole job (:func:`whole`), saying what it is of."""
    return f"heterogeneous job {components[0].het_job_id} ({len(components)} components, scored as one): {reason}"
