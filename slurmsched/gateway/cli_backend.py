"""The JSON-CLI gateway: Slurm's own client commands, run as argument lists.

Works with every Slurm from 21.08 on (JSON output of both shapes, see
:mod:`slurmsched.gateway.parse`). What one daemon cycle costs slurmctld and this host:

``snapshot()`` runs four or five commands, one RPC each:
    1. ``scontrol show config`` (priority weights, topology; a few ms),
    2. ``sprio -h -o %i|%S|%Y`` (SiteFactor of pending jobs; only under
       ``priority/multifactor``; ~0.02 s at 10,000 jobs),
    3. ``squeue --json -a`` (every job; 22.05 ignores filters, so finished jobs are
       dropped here; the dominant cost: ~2 s and ~0.5 GB client RSS at 10,000 jobs),
    4. ``scontrol -a -o show job`` (only when pending multi-node jobs lack their
       ``--switches`` request, i.e. on 22.05: its JSON has no switch fields),
    5. ``sinfo --json -a`` (nodes; ~0.01 s).
``finished_since(t)`` runs one ``sacct --json -X -D -a -S <t> -E now -s <terminal states>``
(slurmdbd, not slurmctld; ~0.35 s).
``scheduler_config()`` runs ``scontrol show config``; ``partitions()`` runs
``scontrol -a -o show partition`` (not part of a cycle: the daemon calls them when it
rewrites the submit cache).
``apply(actions)`` runs one ``scontrol update JobId=a,b,... SiteFactor=V`` per distinct
value (at most :data:`SITE_FACTOR_BATCH` ids each; ~1.2 ms a job) and one ``scontrol
update`` per constraint action (~6 ms each). See ``docs/slurm-cost.md`` for measured figures.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Mapping, Sequence

from slurmsched.errors import InvalidAction, SlurmError
from slurmsched.gateway.argv import site_factor_argv, update_argv
from slurmsched.gateway.commands import CommandResult, SlurmCommands
from slurmsched.gateway.parse import parse_sacct, parse_sinfo, parse_squeue
from slurmsched.gateway.show_job import SHOW_JOBS_ARGS, with_switch_requests
from slurmsched.gateway.show_partition import SHOW_PARTITIONS_ARGS, parse_partitions
from slurmsched.gateway.slurm_config import parse_show_config, scheduler_config
from slurmsched.gateway.sprio import SPRIO_ARGS, parse_sprio
from slurmsched.model import (Action, ActionOutcome, ClusterSnapshot, JobRecord, PartitionRecord, SchedulerConfig,
                              SetSiteFactor)

log = logging.getLogger(__name__)

#: Most job ids in one ``scontrol update JobId=...`` (keeps argv far below Linux's 128 KiB per argument).
SITE_FACTOR_BATCH = 1000
#: ``sacct -s``: every terminal state, plus REQUEUED for the attempts before a requeue.
TERMINAL_STATES = "BF,CA,CD,DL,F,NF,OOM,PR,RQ,TO"
_PER_JOB_ERROR = re.compile(r"^(?P<message>.+?) for job (?P<job>\d+)\s*$")
#: scontrol's answer for one part of a job array (``41_[2-9]: No error``), see :func:`_outcomes`.
_ARRAY_PART = re.compile(r"^(?P<job>\d+)_[\d\[\],%-]+: (?P<message>.+?)\s*$")
_NO_ERROR = "No error"


class CliGateway:
    """:class:`~slurmsched.gateway.protocol.SlurmGateway` over Slurm's client commands.

    Args:
        slurm_conf: ``slurm.conf`` to use (exported as ``SLURM_CONF``); ``None`` keeps the
            environment's.
        bin_dir: directory of ``squeue``/``scontrol``...; ``None`` searches ``PATH``.
        timeout_s: seconds before a command counts as unreachable.
        env: extra environment for the commands (laid over this process's).
    """

    def __init__(self, slurm_conf: str | None = None, bin_dir: str | None = None,
                 timeout_s: float = 60, env: Mapping[str, str] | None = None) -> None:
        self.commands = SlurmCommands(bin_dir=bin_dir, slurm_conf=slurm_conf, timeout_s=timeout_s, env=env)

    # --- reads ----------------------------------------------------------------------

    def snapshot(self) -> ClusterSnapshot:
        """Pending and running jobs with their SiteFactor, nodes and scheduler config.

        Runs ``scontrol show config``, ``sprio``, ``squeue --json``, ``sinfo --json`` and,
        where the JSON lacks switch requests, ``scontrol -a -o show job``
        (:meth:`with_switch_requests`).

        Raises:
            SlurmCommandNotFound, SlurmUnavailable, SlurmCommandFailed, SlurmParseError.
        """
        taken_at = time.time()
        cluster, config = self.read_config()
        factors = self.site_factors(config)
        jobs = self.with_switch_requests(parse_squeue(self.commands.run("squeue", ("--json", "-a")).stdout, factors))
        nodes = parse_sinfo(self.commands.run("sinfo", ("--json", "-a")).stdout)
        return ClusterSnapshot(taken_at=taken_at, cluster=cluster, jobs=tuple(jobs), nodes=tuple(nodes),
                               config=config)

    def with_switch_requests(self, jobs: list[JobRecord]) -> list[JobRecord]:
        """Fill in the ``--switches`` request of pending multi-node jobs where the JSON lacks it.

        See :func:`~slurmsched.gateway.show_job.with_switch_requests`: nothing is run for
        JSON that carries switch fields (24.11, 25.11); on 22.05 one ``scontrol -a -o show
        job`` lists every job.

        Raises:
            SlurmCommandNotFound, SlurmUnavailable, SlurmCommandFailed: the listing failed.
        """
        return with_switch_requests(jobs, lambda: self.commands.run("scontrol", SHOW_JOBS_ARGS).text)

    def scheduler_config(self) -> SchedulerConfig:
        """Priority weights, ``PriorityMaxAge``, topology plugin, ``max_switch_wait``.

        Runs ``scontrol show config``.
        """
        return self.read_config()[1]

    def partitions(self) -> list[PartitionRecord]:
        """Every partition with its tier and priority factor; runs ``scontrol -a -o show partition``."""
        return parse_partitions(self.commands.run("scontrol", SHOW_PARTITIONS_ARGS).text)

    def read_config(self) -> tuple[str, SchedulerConfig]:
        """``ClusterName`` and the scheduler configuration, from ``scontrol show config``."""
        values = parse_show_config(self.commands.run("scontrol", ("show", "config")).text)
        return values.get("ClusterName", ""), scheduler_config(values)

    def site_factors(self, config: SchedulerConfig) -> dict[int, int]:
        """Job id -> SiteFactor of pending jobs, from ``sprio -h -o %i|%S|%Y``.

        Empty (and sprio is not run) unless ``PriorityType=priority/multifactor``.
        """
        if config.priority_type != "priority/multifactor":
            return {}
        return parse_sprio(self.commands.run("sprio", SPRIO_ARGS).text)

    def finished_since(self, since: float) -> list[JobRecord]:
        """Job attempts that ended at or after ``since``, from accounting.

        Runs ``sacct --json -X -D -a -S <since> -E now -s <terminal states>``: allocations
        only, one record per attempt of a requeued job (the earlier ones in state
        REQUEUED), every user. "Nothing found" (9003) is an empty list. ``since`` is
        rounded down to the second (sacct's resolution), so callers may see a record
        again; records that ended before ``since`` are dropped.

        Raises:
            SlurmCommandNotFound, SlurmUnavailable, SlurmCommandFailed, SlurmParseError.
        """
        if since > time.time():
            return []  # sacct refuses a start after its end ("now")
        start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(int(since)))
        args = ("--json", "-X", "-D", "-a", "-S", start, "-E", "now", "-s", TERMINAL_STATES)
        records = parse_sacct(self.commands.run("sacct", args).stdout)
        floor = float(int(since))
        return [r for r in records if r.end_time is not None and r.end_time >= floor]

    # --- writes ---------------------------------------------------------------------

    def apply(self, actions: Sequence[Action]) -> list[ActionOutcome]:
        """Apply actions; one outcome per action, in the order given. Never raises.

        SiteFactor actions that share a value go out as one ``scontrol update
        JobId=a,b,c SiteFactor=V`` (chunks of :data:`SITE_FACTOR_BATCH`); Slurm's
        per-job complaints (``Invalid job id specified for job N``, ``N_0: Job has
        already finished``) are attributed to their jobs and the rest of the batch
        counts as applied (:func:`_outcomes`). Every other action is one
        ``scontrol update``. An action with a value that must not be sent is refused
        without calling Slurm.
        """
        outcomes: list[ActionOutcome | None] = [None] * len(actions)
        groups: dict[int, list[tuple[int, SetSiteFactor]]] = {}
        for index, action in enumerate(actions):
            if isinstance(action, SetSiteFactor) and isinstance(action.value, int):
                groups.setdefault(action.value, []).append((index, action))
            else:
                outcomes[index] = self._apply_one(action)
        for value, members in groups.items():
            for start in range(0, len(members), SITE_FACTOR_BATCH):
                chunk = members[start:start + SITE_FACTOR_BATCH]
                for (index, _), outcome in zip(chunk, self._apply_site_factor([a for _, a in chunk], value)):
                    outcomes[index] = outcome
        done = [o for o in outcomes if o is not None]
        log.debug("apply: %d actions (%d SiteFactor values), %d failed", len(done), len(groups),
                  sum(not o.ok for o in done))
        return done

    def _apply_one(self, action: Action) -> ActionOutcome:
        try:
            result = self.commands.run("scontrol", update_argv(action), check=False)
        except (InvalidAction, SlurmError) as exc:
            return ActionOutcome(action, False, str(exc))
        if result.returncode == 0:
            return ActionOutcome(action, True, "")
        return _outcomes([action], result)[0]

    def _apply_site_factor(self, actions: list[SetSiteFactor], value: int) -> list[ActionOutcome]:
        try:
            argv = site_factor_argv([a.job_id for a in actions], value)
        except InvalidAction:
            return [self._apply_one(a) for a in actions]  # find and refuse the bad one(s)
        try:
            result = self.commands.run("scontrol", argv, check=False)
        except SlurmError as exc:
            return [ActionOutcome(a, False, str(exc)) for a in actions]
        if result.returncode == 0:
            return [ActionOutcome(a, True, "") for a in actions]
        return _outcomes(actions, result)


def _outcomes(actions: Sequence[Action], result: CommandResult) -> list[ActionOutcome]:
    """The outcome of each action of an ``scontrol update`` that exited non-zero.

    Slurm names the job of each complaint (``Invalid job id specified for job 7``); the
    other jobs were updated. A job array addressed by its id whose tasks are not all
    alike (one finished or running) is answered part by part, with exit status 1 even
    when nothing failed (``41_0: Job has already finished``, ``41_[2-9]: No error``):
    the array counts as updated when a part of it was (a finished task refuses every
    update, a running one what only pending jobs take). Without a line that names a
    job, every action fails with Slurm's first line.
    """
    failures: dict[int, str] = {}
    updated: set[int] = set()
    for line in result.stderr.splitlines():
        match = _PER_JOB_ERROR.match(line.strip()) or _ARRAY_PART.match(line.strip())
        if match is None:
            continue
        if match["message"] == _NO_ERROR:
            updated.add(int(match["job"]))
        else:
            failures.setdefault(int(match["job"]), match["message"])
    if not (failures or updated):
        return [ActionOutcome(a, False, result.first_error_line) for a in actions]
    failed = {job: message for job, message in failures.items() if job not in updated}
    return [ActionOutcome(a, a.job_id not in failed, failed.get(a.job_id, "")) for a in actions]
