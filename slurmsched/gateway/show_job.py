"""``scontrol -a -o show job``: the switch requests that Slurm 22.05's ``squeue --json`` leaves out.

22.05's JSON (openapi v0.0.37/38) has no ``required_switches`` or
``maximum_switch_wait_time``, so a user's own ``--switches`` request is invisible there
(24.11+ JSON carries both). scontrol's one-line-per-job text shows it: a job with a
request has ``Switches=N@[D-]HH:MM:SS`` (the wait already capped at ``max_switch_wait``),
a job without one has no such field. 22.05's ``scontrol show job`` takes one job id or
none (``show job 5,6`` is "Invalid job id specified"), so the gateway lists every job
in one call, one job-table RPC like ``squeue``'s, and reads only the lines of the jobs
it asks about.

Trust: a job's own free-text fields (name, comment, paths, mail user) could imitate a
``Switches=`` field, which only misleads about that same job; the well-formed field
that ``Power=`` follows is taken, else the last well-formed one. A job name holding a
newline can make a line that starts ``JobId=<another job>``; for an id found on several
lines the largest request among them is reported. That errs only towards "has a
request", which makes the planner leave the job alone: a forged line can keep
slurmsched from tuning a job, never make it override a request.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from typing import Callable, Container, Sequence

from slurmsched.gateway.slurm_config import parse_duration
from slurmsched.model import JobRecord, JobState

log = logging.getLogger(__name__)

#: scontrol arguments listing every job (``-a``: hidden partitions too), one line each.
SHOW_JOBS_ARGS = ("-a", "-o", "show", "job")

#: ``Switches=N@wait``; Slurm 22.05 prints ``Power=`` right after the real one.
_SWITCHES = re.compile(r" Switches=(\d+)@((?:\d+-)?\d+(?::\d+){0,2}|UNLIMITED|INFINITE)(?= |$)( Power=)?",
                       re.ASCII)

#: A job's switch request: leaf-switch count (0 for none) and the most it may wait (seconds).
SwitchRequest = tuple[int, int | None]


def parse_switch_requests(text: str, wanted: Container[int]) -> dict[int, SwitchRequest]:
    """Switch requests of the ``wanted`` jobs in ``scontrol -a -o show job`` output.

    Args:
        text: the command's stdout (one job per line; "No jobs in the system" is fine).
        wanted: ids of the jobs to report.

    Returns:
        job id -> ``(switches, wait_s)`` for each wanted job listed, ``(0, None)`` when
        it has no request; for an id on several lines, the largest. Wanted jobs not
        listed (gone meanwhile) are left out. Malformed lines never raise.
    """
    requests: dict[int, SwitchRequest] = {}
    for line in text.split("\n"):
        if not line.startswith("JobId="):
            continue
        end = line.find(" ", 6)
        head = line[6:end] if end >= 0 else line[6:].rstrip()
        if not (head.isascii() and head.isdigit()):
            continue
        job_id = int(head)
        if job_id not in wanted:
            continue
        request = _switch_request(line)
        seen = requests.get(job_id)
        requests[job_id] = request if seen is None else max(seen, request, key=_order)
    return requests


def _order(request: SwitchRequest) -> tuple[int, int]:
    count, wait = request
    return count, -1 if wait is None else wait


def _switch_request(line: str) -> SwitchRequest:
    fields = _SWITCHES.findall(line)
    if not fields:
        return 0, None
    count, wait, _ = ([f for f in fields if f[2]] or fields)[-1]
    return int(count), parse_duration(wait)


def with_switch_requests(jobs: Sequence[JobRecord], list_jobs: Callable[[], str]) -> list[JobRecord]:
    """``jobs`` with the switch request filled in where the JSON lacked it.

    Pending multi-node jobs whose ``switches`` is ``None`` (22.05's JSON has no such
    field; 24.11 and 25.11 JSON give 0 or the request) get ``switches`` (0: no request) and
    ``switch_wait_s`` from their line of ``list_jobs()``, which is not called when no
    job needs it. Jobs that left the queue meanwhile keep ``None``.

    Args:
        jobs: the parsed queue.
        list_jobs: runs ``scontrol -a -o show job`` (:data:`SHOW_JOBS_ARGS`), returns stdout.
    """
    wanted = {j.job_id for j in jobs if j.switches is None and j.nodes > 1 and j.state is JobState.PENDING}
    if not wanted:
        return list(jobs)
    requests = parse_switch_requests(list_jobs(), wanted)
    log.debug("switch requests: %d jobs asked, %d listed", len(wanted), len(requests))
    out = []
    for job in jobs:
        request = requests.get(job.job_id) if job.job_id in wanted else None
        if request is not None:
            job = replace(job, switches=request[0], switch_wait_s=request[1])
        out.append(job)
    return out
