"""Submit-time features of a job, from online history statistics.

:class:`FeatureState` holds per-user, per-(user, name) and finer statistics of finished
runs (:mod:`slurmsched.predict.history`) and answers three questions about a job
using only what a Slurm site knows at submit time plus the jobs that already ended:

* the **experts**: the candidate estimates history offers (:data:`EXPERTS`: the last
  run of the same user+name+mem at the same size, of the same user+name+mem, of the
  same user with the same time limit, of the same user), capped at the job's time
  limit. "name+mem" is the job's :func:`kind`: its name and the memory it asks for
  per CPU, so a script run with ``--mem=4G`` and the same script with ``--mem=64G``
  (another input) keep separate histories;
* which expert to **trust** for this user: each user carries an exponentially weighted
  record of every expert's recent log2 error (new users start from the site-wide
  record), and the expert with the smallest one is chosen (:meth:`FeatureState.choose`);
* the numeric **row** (:data:`COLUMNS`) the learned quantile models see.

:func:`replay` rebuilds what every past job looked like *at its own submit time*
(rows, experts, choice) for training; no run time leaks into its own features.
"""

from __future__ import annotations

import math
import re
import zlib
from collections import Counter
from operator import itemgetter
from typing import Any, NamedTuple, Sequence

from slurmsched.model import JobRecord
from slurmsched.predict.common import limit_of, units
from slurmsched.predict.history import EMPTY_SUMMARY, SUMMARY_NAMES, Run, RunStats, StatsTable, run_of

_NAN = float("nan")
#: Category code for values not among the most frequent ones.
OTHER_CODE = 254
#: Buckets for the hashed first word of the job name.
NAME_HASH_BUCKETS = 251
_TOKEN = re.compile(r"[A-Za-z]+")

#: Candidate estimates from history, in order of preference on ties.
EXPERTS = ("user+name+mem, same size: last run", "user+name+mem: last run", "user, same time limit: last run",
           "user: last run")
#: Weight of the past in each user's expert error record (per finished job).
USER_DECAY = 0.8
#: Weight of the past in the site-wide expert error record.
SITE_DECAY = 0.99
#: Largest log2 error an expert is charged for one job (and the charge when it had no value).
MAX_CHARGE = 2.0

_JOB_COLUMNS = ("log2_limit", "log2_units", "log2_nodes", "log2_gpus", "log2_memory_per_cpu")
_SHORT = ("count", "last", "median")
CATEGORICAL = ("account", "partition", "qos", "name_token")
#: Every column of a feature row, in order.
COLUMNS = (
    _JOB_COLUMNS
    + tuple(f"user_{n}" for n in SUMMARY_NAMES)
    + tuple(f"pair_{n}" for n in SUMMARY_NAMES)
    + tuple(f"pair_units_{n}" for n in _SHORT)
    + tuple(f"user_units_{n}" for n in _SHORT)
    + tuple(f"user_limit_{n}" for n in _SHORT)
    + ("limit_x_user_ratio",)
    + tuple(f"expert{i}_error" for i in range(len(EXPERTS)))
    + ("anchor", "anchor_kind")
    + CATEGORICAL
    + ("hour", "weekday")  # the only columns that depend on the submit time
)
_short = itemgetter(*(SUMMARY_NAMES.index(n) for n in _SHORT))
_RATIO = SUMMARY_NAMES.index("ratio")
_MEDIAN = SUMMARY_NAMES.index("median")


def kind(job: JobRecord) -> tuple[str, int]:
    """What kind of work a job is, beside its user and size: its name and memory per CPU.

    The memory is the job's requested memory (``memory_mb``) per CPU, in whole MB, 0
    when it asks for none (or for a negative amount, which is no request). Per CPU,
    because ``squeue`` and ``sacct`` can count a job's CPUs differently (allocated vs
    requested) while agreeing on its memory per CPU, and a job must be the same kind
    pending and finished. The memory per CPU is also a
    column of the feature row. Measured on HPC2N's trace, whose jobs carry no name but
    a memory request: 78.3% -> 79.2% of the FIFO -> oracle-SJF avg-JCT gain, mean of
    seven cycle intervals (``docs/simulator.md``, "Results on the public traces").
    """
    memory = job.memory_mb
    return job.name, round(memory / max(1, job.cpus)) if memory is not None and memory > 0 else 0


def _first_token_code(name: str) -> float:
    match = _TOKEN.search(name)
    if not match:
        return _NAN
    return float(zlib.crc32(match.group(0).lower().encode()) % NAME_HASH_BUCKETS)


class CategoryCodes:
    """Integer codes for the most frequent accounts, partitions and QOS.

    The :data:`OTHER_CODE` most frequent values of each field get codes ``0..253``;
    anything else (including values first seen after the fit) gets :data:`OTHER_CODE`;
    an empty value is missing (NaN).
    """

    FIELDS = ("account", "partition", "qos")

    def __init__(self, jobs: Sequence[JobRecord] = ()) -> None:
        self.codes: dict[str, dict[str, int]] = {}
        for field in self.FIELDS:
            counts = Counter(getattr(job, field) for job in jobs)
            counts.pop("", None)
            self.codes[field] = {value: i for i, (value, _) in enumerate(counts.most_common(OTHER_CODE))}

    def row(self, job: JobRecord) -> tuple[float, ...]:
        """Codes of the job's account, partition and QOS."""
        out = []
        for field in self.FIELDS:
            value = getattr(job, field)
            out.append(float(self.codes[field].get(value, OTHER_CODE)) if value else _NAN)
        return tuple(out)


class Snapshot(NamedTuple):
    """Everything known about a job at one moment (what :meth:`FeatureState.snapshot` returns).

    Attributes:
        experts: log2 estimate of each of :data:`EXPERTS` (NaN when it has none).
        chosen: index of the trusted expert, ``-1`` when none has a value.
        anchor: log2 estimate the learned models correct: the chosen expert's value, else
            log2 of the time limit, else the site's median run time, else one hour.
        runs: runs behind the chosen expert (0 for none).
        row: feature row (:data:`COLUMNS`).
    """

    experts: tuple[float, ...]
    chosen: int
    anchor: float
    runs: int
    row: tuple[float, ...]


#: :meth:`FeatureState.snapshot`'s cache: per set of jobs alike, the snapshot without time columns and the
#: snapshots by submit hour.
SnapshotCache = dict[tuple[Any, ...], tuple[Snapshot, dict[int | None, Snapshot]]]


class FeatureState:
    """History statistics and per-user expert records; updated run by run."""

    def __init__(self, codes: CategoryCodes | None = None) -> None:
        self.codes = codes or CategoryCodes()
        self.overall = RunStats()
        self.users = StatsTable()
        self.pairs = StatsTable()
        self.pair_units = StatsTable()
        self.user_units = StatsTable()
        self.user_limits = StatsTable()
        self.expert_errors: dict[str, list[float]] = {}
        self.site_errors = [0.0] * len(EXPERTS)

    def add(self, job: JobRecord, run: Run) -> None:
        """Fold one finished run into every statistics table."""
        user, work, size = job.user, kind(job), units(job)
        self.overall.add(run)
        self.users.add((user,), run)
        self.pairs.add((user, work), run)
        self.pair_units.add((user, work, size), run)
        self.user_units.add((user, size), run)
        self.user_limits.add((user, job.time_limit_s), run)

    def score(self, user: str, experts: Sequence[float], log_runtime: float) -> None:
        """Charge each expert its log2 error on a finished run of ``user`` (values as of its submit)."""
        charges = [MAX_CHARGE if v != v else min(abs(v - log_runtime), MAX_CHARGE) for v in experts]
        record = self.expert_errors.get(user)
        if record is None:
            record = list(self.site_errors)
        self.expert_errors[user] = [USER_DECAY * r + (1 - USER_DECAY) * c for r, c in zip(record, charges)]
        self.site_errors = [SITE_DECAY * r + (1 - SITE_DECAY) * c for r, c in zip(self.site_errors, charges)]

    def _expert_stats(self, job: JobRecord, work: tuple[str, int], size: int) -> tuple[RunStats | None, ...]:
        """Statistics behind each expert, for ``job`` of ``kind`` ``work`` and ``units`` ``size``."""
        user = job.user
        return (self.pair_units.get((user, work, size)), self.pairs.get((user, work)),
                self.user_limits.get((user, job.time_limit_s)), self.users.get((user,)))

    @staticmethod
    def _expert_values(stats: Sequence[RunStats | None], log_limit: float) -> tuple[float, ...]:
        values = [_NAN if s is None else math.log2(s.recent[-1]) for s in stats]
        if log_limit == log_limit:
            values = [min(v, log_limit) for v in values]  # min(nan, x) stays nan
        return tuple(values)

    def experts(self, job: JobRecord) -> tuple[float, ...]:
        """Each expert's log2 estimate for the job now (NaN where it has none), capped at the limit."""
        limit = limit_of(job)
        return self._expert_values(self._expert_stats(job, kind(job), units(job)),
                                   math.log2(limit) if limit is not None else _NAN)

    def snapshot(self, job: JobRecord, cache: SnapshotCache | None = None) -> Snapshot:
        """The job's experts, trusted expert, anchor and feature row from the statistics now.

        Args:
            job: the job.
            cache: a dict shared by calls made while the statistics do not change (one
                batch of pending jobs). Everything but the submit hour and weekday is
                worked out once per set of jobs alike in all that the snapshot reads (a
                user's resubmissions, array tasks), and jobs alike submitted in the same
                hour share one snapshot (and one row object).
        """
        # hours since the epoch (None for a submit time that is no time): the time columns depend on nothing else
        hour = int(job.submit_time // 3600) if math.isfinite(job.submit_time) else None
        if cache is None:
            return self._at(self._compute(job), hour)
        key = (job.user, kind(job), units(job), job.time_limit_s, job.nodes, job.gpus, job.account, job.partition,
               job.qos)
        entry = cache.get(key)
        if entry is None:
            entry = cache[key] = (self._compute(job), {})
        base, by_hour = entry
        snapshot = by_hour.get(hour)
        if snapshot is None:
            snapshot = by_hour[hour] = self._at(base, hour)
        return snapshot

    @staticmethod
    def _at(base: Snapshot, hour: int | None) -> Snapshot:
        """``base`` (whose row lacks the time columns) for a job submitted in ``hour`` (hours since the epoch).

        The time columns are the hour of day and the weekday (0 = Monday; the epoch was a Thursday),
        both missing (NaN) when ``hour`` is ``None`` (a submit time that is NaN or infinite).
        """
        if hour is None:
            return Snapshot(base.experts, base.chosen, base.anchor, base.runs, base.row + (_NAN, _NAN))
        return Snapshot(base.experts, base.chosen, base.anchor, base.runs,
                        base.row + (float(hour % 24), float((hour // 24 + 3) % 7)))

    def _compute(self, job: JobRecord) -> Snapshot:
        """The job's snapshot without the time columns (hour of day, weekday) at the row's end."""
        user, work, size = job.user, kind(job), units(job)
        limit = limit_of(job)
        log_limit = math.log2(limit) if limit is not None else _NAN
        stats = self._expert_stats(job, work, size)
        experts = self._expert_values(stats, log_limit)
        errors = self.expert_errors.get(user, self.site_errors)
        chosen, best = -1, math.inf
        for i, value in enumerate(experts):
            if value == value and errors[i] < best:
                chosen, best = i, errors[i]
        if chosen >= 0:
            anchor, runs = experts[chosen], stats[chosen].count  # type: ignore[union-attr]
        elif limit is not None:
            anchor, runs = log_limit, 0
        elif self.overall.count:
            anchor, runs = self.overall.summary()[_MEDIAN], 0
        else:
            anchor, runs = math.log2(3600.0), 0
        user_stats = stats[3]
        user_summary = user_stats.summary() if user_stats is not None else EMPTY_SUMMARY
        pair_summary = stats[1].summary() if stats[1] is not None else EMPTY_SUMMARY
        pair_units = stats[0].summary() if stats[0] is not None else EMPTY_SUMMARY
        user_units = self.user_units.summary((user, size))
        user_limit = stats[2].summary() if stats[2] is not None else EMPTY_SUMMARY
        row = (
            log_limit,
            math.log2(size),
            math.log2(max(1, job.nodes)),
            math.log2(1 + max(0, job.gpus)),
            math.log2(work[1]) if work[1] else _NAN,
            *user_summary,
            *pair_summary,
            *_short(pair_units),
            *_short(user_units),
            *_short(user_limit),
            log_limit + user_summary[_RATIO],
            *errors,
            anchor,
            float(chosen),
            *self.codes.row(job),
            _first_token_code(job.name),
        )
        return Snapshot(experts, chosen, anchor, runs, row)


def replay(history: Sequence[JobRecord], codes: CategoryCodes,
           rows_for_last: int) -> tuple[FeatureState, list[Snapshot], list[float]]:
    """Rebuild the statistics and expert records from finished jobs, with training rows.

    Jobs are visited in submit order; before each, the runs that ended at or before its
    submit time are folded into the statistics and their experts scored with the values
    they offered at their own submit time, so every run sees exactly what a prediction
    at that moment would have seen. A run that ends before its own submit time (an odd
    record) counts as ending at its submit time.

    Args:
        history: finished jobs (jobs that never ran are skipped).
        codes: category codes for the rows.
        rows_for_last: full snapshots (feature rows) are taken for this many of the
            latest-submitted runs only; the others need just their experts.

    Returns:
        (state, snapshots, targets): the statistics after every run (what ``update``
        would have built), and the snapshots and log2 run times of the last
        ``rows_for_last`` runs in submit order.
    """
    runs = [(job, run) for job in history if (run := run_of(job)) is not None]
    order = sorted(range(len(runs)), key=lambda i: (runs[i][0].submit_time, runs[i][0].job_id))
    # when each run is known to have ended: never before it was submitted (and offered its experts)
    by_end = sorted(range(len(runs)), key=lambda i: max(runs[i][1].end, runs[i][0].submit_time))
    first_row = len(order) - rows_for_last
    state = FeatureState(codes)
    offered: dict[int, tuple[float, ...]] = {}
    snapshots: list[Snapshot] = []
    targets: list[float] = []
    done = 0

    def finish(i: int) -> None:
        job, run = runs[i]
        state.add(job, run)
        state.score(job.user, offered.pop(i), run.log_runtime)

    for position, i in enumerate(order):
        job, run = runs[i]
        while done < len(by_end) and runs[by_end[done]][1].end <= job.submit_time and by_end[done] in offered:
            finish(by_end[done])
            done += 1
        if position >= first_row:
            snap = state.snapshot(job)
            offered[i] = snap.experts
            snapshots.append(snap)
            targets.append(run.log_runtime)
        else:
            offered[i] = state.experts(job)
    for i in by_end[done:]:
        finish(i)
    return state, snapshots, targets
