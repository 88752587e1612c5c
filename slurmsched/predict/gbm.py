"""slurmsched's duration model: trusted history experts plus gradient-boosted quantiles.

How a job is predicted (all in log2 seconds):

1. **Point estimate.** History offers a few candidate estimates (the *experts* of
   :mod:`slurmsched.predict.features`: the last run of the same user+name+mem at the
   same size, of the same user+name+mem, of the same user with the same time limit, of the
   same user). Each user carries a running record of how far each expert has been off
   on their recent jobs; the expert with the best record is used. Users re-run the same
   work, so an exact earlier run time is very often right, and no smoothed regression
   hits it as often (measured: a gradient-boosted regressor alone is worse than the
   last-two-runs rule on these traces).
2. **When history has nothing** (new user; or no expert has a value), a
   ``HistGradientBoostingRegressor`` with the median (quantile 0.5) loss predicts the
   run time as a correction of the time limit (or the site's median) from the job's
   size, limit, partition/account/QOS, name word, submit hour and weekday.
3. **Spread.** Two more gradient-boosted quantile models (10th and 90th percentile)
   predict how far the actual run time falls from the estimate, from the same
   features plus the user's expert records: the spread is learned per job.

Estimates and spreads are capped at the job's time limit. The categorical columns
(frequency-ranked codes of account, partition, QOS and the hashed name word) reach the
trees as plain numbers: scikit-learn's native categorical support runs every predict
call through a column transformer that costs 2-5 ms, ten times the trees themselves,
and a daemon cycle or a simulated one predicts a handful of new jobs at a time. For the
same reason small batches are walked through a numpy copy of the fitted trees
(:class:`~slurmsched.predict.trees.CompiledTrees`, about 0.02 ms for one row instead of 1-2 ms a
call). The trees are small: they are trained and run on one thread (OpenMP threads
cost more than they save here and would
compete with slurmctld), and the three are fitted on one binning of the training rows
(:func:`~slurmsched.predict.boosting.fit_quantiles`: scikit-learn's trees, to the bit,
for two thirds of the cost). History statistics and
expert records are updated on every :meth:`update` (each cycle); the trees are rebuilt
only by :meth:`fit`, which the caller runs on a schedule
(:class:`~slurmsched.predict.schedule.RefitSchedule`). Training rows are the features
each job had when it was predicted, kept when it finishes (the last
:data:`MAX_TRAIN_JOBS`); so a refit over history that already went through
:meth:`update` costs only the tree training. Given history it has not seen that way
(a fresh start), :meth:`fit` replays it to rebuild submit-time features. Before the first fit (or with too
little history) the experts still answer, with a fixed 4x band, and ``source`` says so.
The whole state round-trips through :meth:`to_bytes` / :meth:`from_bytes`.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import pickle
from collections import OrderedDict
from typing import NamedTuple, Sequence

import numpy as np
import sklearn
from sklearn.ensemble import HistGradientBoostingRegressor
from threadpoolctl import ThreadpoolController

from slurmsched.errors import SlurmschedError
from slurmsched.model import JobRecord, Prediction
from slurmsched.predict.boosting import fit_quantiles
from slurmsched.predict.common import MIN_RUNTIME_S, limit_of
from slurmsched.predict.features import (COLUMNS, EXPERTS, CategoryCodes, FeatureState,
                                         Snapshot, SnapshotCache, replay)
from slurmsched.predict.history import run_of
from slurmsched.predict.trees import CompiledTrees
from slurmsched.text import plural

log = logging.getLogger(__name__)

#: Version of the :meth:`SlurmschedPredictor.to_bytes` layout.
FORMAT = 3
#: Largest batch of distinct feature rows run through the compiled trees; bigger batches
#: go through scikit-learn, whose per-row cost is lower once its 1-2 ms per call is paid
#: (measured: 1 row 0.12 vs 4 ms, 100 rows 2.4 vs 5.7 ms, 10,000 rows 308 vs 133 ms).
COMPILED_MAX_ROWS = 256
#: Most jobs :meth:`SlurmschedPredictor.finish` works out with Python floats rather than numpy
#: arrays (some twenty small numpy calls whatever the count). Measured on the Philly run's
#: batches (mostly 1-6 jobs): 19 vs 33 us a call besides the trees.
FEW_JOBS = 16
#: Fewest finished runs the trees are trained on; below that the experts answer alone.
MIN_TRAIN_JOBS = 200
#: Most recent runs the trees are trained on. 10,000 rather than 30,000 makes a refit a
#: third of the work; measured on CTC-SP2: median |log2 error| 0.535 vs 0.534, runs inside
#: the predicted 10-90% spread 69% vs 71%.
MAX_TRAIN_JOBS = 10_000
#: Predicted jobs whose snapshot is remembered until they finish (oldest dropped first).
MAX_REMEMBERED = 50_000
#: Quantiles of the three models: spread low, median (cold start), spread high.
QUANTILES = (0.1, 0.5, 0.9)
#: Spread (log2) before any model exists: a factor of 4 either way.
DEFAULT_BAND = 2.0
_ANCHOR = COLUMNS.index("anchor")


class ModelFormatError(SlurmschedError):
    """A saved model cannot be loaded (other format version, corrupt blob)."""


class _Prepared(NamedTuple):
    job_id: int
    snapshot: Snapshot
    limit: float | None


@functools.cache
def _threadpools() -> ThreadpoolController:
    return ThreadpoolController()  # scans the loaded libraries once (tens of ms)


def _one_thread():  # noqa: ANN202 - a context manager
    """Run the trees' OpenMP loops on one thread."""
    return _threadpools().limit(limits=1, user_api="openmp")


def _distinct_rows(items: Sequence[_Prepared]) -> tuple[list[tuple[float, ...]], np.ndarray]:
    """The distinct feature rows (jobs alike share one row object) and each job's index into them."""
    index: dict[int, int] = {}
    rows: list[tuple[float, ...]] = []
    where = np.empty(len(items), dtype=np.intp)
    for i, item in enumerate(items):
        row = item.snapshot.row
        j = index.get(id(row))
        if j is None:
            j = index[id(row)] = len(rows)
            rows.append(row)
        where[i] = j
    return rows, where


def _tree_params() -> dict[str, object]:
    """Each model's settings. 25 trees at learning rate 0.3 rather than 50 at 0.15 make a
    refit 40% cheaper (0.51 vs 0.86 s for the three models on 10,000 runs), with queues no
    worse in the simulator (``docs/simulator.md``)."""
    return {"learning_rate": 0.3, "max_iter": 25, "max_leaf_nodes": 15, "min_samples_leaf": 40,
            "l2_regularization": 1.0, "early_stopping": False, "random_state": 0}


class SlurmschedPredictor:
    """History experts chosen per user, with gradient-boosted quantile models.

    Attributes:
        name: ``"slurmsched"``.
        version: identifies the fitted trees (``""`` before the first fit).
        fitted_jobs: finished runs the last fit saw.
        seen_until: latest end time folded into the statistics (by fit or update).
    """

    name = "slurmsched"
    learns = True

    def __init__(self) -> None:
        self.version = ""
        self.state = FeatureState()
        self.models: tuple[HistGradientBoostingRegressor, ...] = ()
        self.trees: CompiledTrees | None = None
        self.columns: np.ndarray | None = None
        self.fitted_jobs = 0
        self.runs_seen = 0
        self.seen_until = float("-inf")
        # predicted jobs by (job id, submit time): the same in the queue and in accounting,
        # whatever cluster name each reports
        self._pending: OrderedDict[tuple[int, float], Snapshot] = OrderedDict()
        self._rows = np.empty((MAX_TRAIN_JOBS, len(COLUMNS)), dtype=np.float32)
        self._targets = np.empty(MAX_TRAIN_JOBS, dtype=np.float32)
        self._kept = 0
        self._next = 0

    # --- learning --------------------------------------------------------------------

    def fit(self, history: Sequence[JobRecord]) -> None:
        """Retrain the quantile trees on the most recent runs of ``history``.

        When every run of ``history`` already went through :meth:`update` (same count,
        same latest end), the rows kept then are used as they are; otherwise, or while
        no replay has coded the accounts, partitions and QOS (:class:`CategoryCodes`)
        that ``history`` holds, the statistics, expert records and rows are rebuilt by
        replaying ``history``. With fewer than :data:`MIN_TRAIN_JOBS` rows only the
        statistics are rebuilt.
        """
        # the end of every run (JobRecord.runtime_s is not None: started and ended), read
        # without the property: this pass over the whole history comes with every refit
        ends = [job.end_time for job in history if job.start_time is not None and job.end_time is not None]
        runs = len(ends)
        latest = max(ends, default=float("-inf"))
        if runs != self.runs_seen or latest != self.seen_until or self._uncoded(history):
            self._replay(history, runs, latest)
        if self._kept < MIN_TRAIN_JOBS:
            log.info("%s to learn from: too few to train, experts answer alone", plural(self._kept, "run"))
            return
        X = self._rows[: self._kept].astype(float)
        residual = self._targets[: self._kept].astype(float) - X[:, _ANCHOR]
        columns = ~np.all(np.isnan(X), axis=0)
        X = X[:, columns]
        with _one_thread():
            models = fit_quantiles(X, residual, QUANTILES, _tree_params())
        self.models = tuple(models)
        self.trees = CompiledTrees.from_models(models)
        self.columns = columns
        self.fitted_jobs = runs
        self.version = "gbm-" + hashlib.sha1(X.tobytes() + residual.tobytes()).hexdigest()[:10]
        log.info("trained %s on %d runs", self.version, len(residual))

    def _uncoded(self, history: Sequence[JobRecord]) -> bool:
        """True when the category codes are empty (statistics built by :meth:`update` alone: every
        account, partition and QOS reads as "other") though ``history`` names some."""
        return (not any(self.state.codes.codes.values())
                and any(job.account or job.partition or job.qos for job in history))

    def _replay(self, history: Sequence[JobRecord], runs: int, latest: float) -> None:
        """Rebuild statistics, expert records and training rows from ``history``."""
        state, snapshots, targets = replay(history, CategoryCodes(history), MAX_TRAIN_JOBS)
        self.state = state
        self.runs_seen, self.seen_until = runs, latest
        self._kept = self._next = 0
        for snap, target in zip(snapshots, targets):
            self._keep(snap.row, target)

    def _keep(self, row: tuple[float, ...], target: float) -> None:
        """Add one training row (ring buffer of the last :data:`MAX_TRAIN_JOBS`)."""
        self._rows[self._next] = row
        self._targets[self._next] = target
        self._next = (self._next + 1) % MAX_TRAIN_JOBS
        self._kept = min(self._kept + 1, MAX_TRAIN_JOBS)

    def update(self, finished: Sequence[JobRecord]) -> None:
        """Fold newly finished jobs (each once, in end-time order) into the statistics.

        A job this predictor predicted while it was pending also scores the experts with
        the values they offered then, and its features then become a training row.
        """
        for job in finished:
            run = run_of(job)
            if run is None:
                continue
            self.state.add(job, run)
            self.runs_seen += 1
            snap = self._pending.pop((job.job_id, job.submit_time), None)
            if snap is not None:
                self.state.score(job.user, snap.experts, run.log_runtime)
                self._keep(snap.row, run.log_runtime)
            if run.end > self.seen_until:
                self.seen_until = run.end

    # --- predicting ------------------------------------------------------------------

    def prepare(self, jobs: Sequence[JobRecord], *, remember: bool = True) -> list[object]:
        """Snapshot each job's experts and features from the statistics now; with
        ``remember`` (a queued job) the snapshot is kept until the job finishes, to score
        the experts and become a training row then."""
        out: list[object] = []
        cache: SnapshotCache = {}
        pending = self._pending
        for job in jobs:
            snapshot = self.state.snapshot(job, cache)
            if remember:
                key = (job.job_id, job.submit_time)
                pending[key] = snapshot
                pending.move_to_end(key)
            out.append(_Prepared(job.job_id, snapshot, limit_of(job)))
        while len(pending) > MAX_REMEMBERED:
            pending.popitem(last=False)
        return out

    def finish(self, prepared: Sequence[object]) -> list[Prediction]:
        """Estimates and spreads for prepared jobs, running each tree model once over all of them."""
        items: list[_Prepared] = list(prepared)  # type: ignore[arg-type]
        if not items:
            return []
        bounds = self._bounds_few(items) if len(items) <= FEW_JOBS else None
        seconds, low_s, high_s = bounds or self._bounds(items)
        prefix = f"model {self.version}: " if self.models else ""
        sources: dict[tuple[int, bool], str] = {}  # jobs sharing a snapshot share its source text
        out = []
        for item, e, lo, hi in zip(items, seconds, low_s, high_s):
            key = (id(item.snapshot), item.limit is None)
            source = sources.get(key)
            if source is None:
                source = sources[key] = prefix + self._source(item)
            out.append(Prediction(item.job_id, e, lo, hi, source, self.version))
        return out

    def _features(self, items: Sequence[_Prepared]) -> tuple[np.ndarray, np.ndarray]:
        """The distinct feature rows of ``items`` in the fitted columns (after a fit), and each
        item's index into them."""
        rows, where = _distinct_rows(items)
        return np.array(rows, dtype=float)[:, self.columns], where

    def _bounds(self, items: Sequence[_Prepared]) -> tuple[list[float], list[float], list[float]]:
        """Each item's estimate, low and high in seconds (rounded to ms), over numpy arrays."""
        n = len(items)
        anchor = np.fromiter((p.snapshot.anchor for p in items), dtype=float, count=n)
        chosen = np.fromiter((p.snapshot.chosen for p in items), dtype=int, count=n)
        limit = np.fromiter((math.inf if p.limit is None else p.limit for p in items), dtype=float, count=n)
        cold = chosen < 0
        estimate = anchor.copy()
        if self.models and self.trees is not None and self.columns is not None:
            X, where = self._features(items)
            if len(X) <= COMPILED_MAX_ROWS:
                low, middle, high = self.trees.predict(X)[where].T
                estimate[cold] += middle[cold]
            else:
                low_model, middle_model, high_model = self.models
                with _one_thread():
                    low, high = low_model.predict(X)[where], high_model.predict(X)[where]
                    if cold.any():  # the median model is needed only where no expert answers
                        estimate[cold] += middle_model.predict(X)[where[cold]]
            low, high = anchor + low, anchor + high
        else:
            low, high = anchor - DEFAULT_BAND, anchor + DEFAULT_BAND
        seconds = np.minimum(np.exp2(np.minimum(estimate, 40.0)), limit)
        seconds = np.round(np.maximum(seconds, MIN_RUNTIME_S), 3)
        shift = np.log2(seconds) - estimate  # a capped estimate moves its spread with it
        low_s = np.round(np.minimum(np.maximum(np.exp2(low + shift), MIN_RUNTIME_S), seconds), 3)
        high_s = np.round(np.minimum(np.maximum(np.exp2(np.minimum(high + shift, 40.0)), seconds), limit), 3)
        high_s = np.maximum(high_s, seconds)
        return seconds.tolist(), low_s.tolist(), high_s.tolist()

    def _bounds_few(self, items: Sequence[_Prepared]) -> tuple[list[float], list[float], list[float]] | None:
        """What :meth:`_bounds` returns, to the bit, with Python floats around four numpy calls
        (``exp2`` and ``log2`` stay numpy's, on arrays of the same values in the same order:
        Python's may differ in the last bit); ``None`` when an estimate or spread is not
        finite (:meth:`_bounds` then answers).

        The same operations in the same order: ``min``/``max`` of finite floats, sums, and
        numpy's rounding to 3 decimals (``rint(x * 1000) / 1000``) as ``round(x * 1000.0) / 1000.0``
        (half to even, exact: every rounded value is positive and at most ``2**40`` s).
        """
        anchor = [p.snapshot.anchor for p in items]
        if self.models and self.trees is not None and self.columns is not None:
            X, where = self._features(items)
            spread = self.trees.predict(X)[where].tolist()
            estimate = [a + s[1] if p.snapshot.chosen < 0 else a for p, a, s in zip(items, anchor, spread)]
            low = [a + s[0] for a, s in zip(anchor, spread)]
            high = [a + s[2] for a, s in zip(anchor, spread)]
        else:
            estimate = anchor
            low = [a - DEFAULT_BAND for a in anchor]
            high = [a + DEFAULT_BAND for a in anchor]
        if not all(-math.inf < v < math.inf for v in (*estimate, *low, *high)):
            return None
        limit = [math.inf if p.limit is None else p.limit for p in items]
        powers = np.exp2([min(e, 40.0) for e in estimate]).tolist()
        seconds = [round(max(min(v, c), MIN_RUNTIME_S) * 1000.0) / 1000.0 for v, c in zip(powers, limit)]
        shift = [v - e for v, e in zip(np.log2(seconds).tolist(), estimate)]
        powers = np.exp2([v + d for v, d in zip(low, shift)]).tolist()
        low_s = [round(min(max(v, MIN_RUNTIME_S), s) * 1000.0) / 1000.0 for v, s in zip(powers, seconds)]
        powers = np.exp2([min(v + d, 40.0) for v, d in zip(high, shift)]).tolist()
        high_s = [max(round(min(max(v, s), c) * 1000.0) / 1000.0, s) for v, s, c in zip(powers, seconds, limit)]
        return seconds, low_s, high_s

    def _source(self, item: _Prepared) -> str:
        snap = item.snapshot
        if snap.chosen >= 0:
            return f"{EXPERTS[snap.chosen]} ({plural(snap.runs, 'run')})"
        if self.models:
            return "cold start: learned from size, limit and partition"
        if item.limit is not None:
            return "cold start: time limit"
        return "cold start: site median" if self.state.overall.count else "cold start: default 1 h"

    def predict(self, jobs: Sequence[JobRecord], *, remember: bool = True) -> list[Prediction]:
        """One prediction per job, in order; never raises for odd or missing fields.
        ``remember=False``: hypothetical jobs, forgotten at once (:meth:`prepare`)."""
        return self.finish(self.prepare(jobs, remember=remember))

    # --- persistence -----------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The whole state (trees, statistics, expert records) as bytes for the model registry."""
        return pickle.dumps({"format": FORMAT, "sklearn": sklearn.__version__, "state": self.__dict__},
                            protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def from_bytes(cls, blob: bytes) -> "SlurmschedPredictor":
        """Restore a predictor saved by :meth:`to_bytes` (from this installation's own registry).

        Raises:
            ModelFormatError: the blob is corrupt, of another layout version, or was
                written by another scikit-learn version (refit instead), or its state
                lacks or adds attributes (a layout changed without a new :data:`FORMAT`).
        """
        try:
            saved = pickle.loads(blob)
        except Exception as exc:  # noqa: BLE001 - any unpickling failure means a corrupt blob
            raise ModelFormatError(f"saved slurmsched model is unreadable ({type(exc).__name__})") from None
        layout = saved.get("format") if isinstance(saved, dict) else None
        if layout != FORMAT:
            raise ModelFormatError(f"saved slurmsched model has layout {layout}, this version reads {FORMAT}: "
                                   "refit it")
        if saved.get("sklearn") != sklearn.__version__:
            raise ModelFormatError(f"saved slurmsched model was built with scikit-learn {saved.get('sklearn')}, "
                                   f"this is {sklearn.__version__}: refit it")
        predictor = cls()
        state = saved.get("state")
        if not isinstance(state, dict) or state.keys() != predictor.__dict__.keys():
            raise ModelFormatError("saved slurmsched model is incomplete (its state is not this version's): refit it")
        predictor.__dict__.update(state)
        return predictor
