"""slurmsched's duration model: trusted history experts plus gradient-boosted quantiles.

How a job is predicted (all in log2 seconds):

1. **Point estimate.** History offers a few candidate estimates (the *experts* of
   :mod:`slurmsched.predict.features`: the last run of the same user+name at the same
   size, of the same user+name, of the same user with the same time limit, of the
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

Estimates and spreads are capped at the job's time limit. History statistics and
expert records are updated on every :meth:`update` (each cycle); the trees are rebuilt
only by :meth:`fit`, which the caller runs on a schedule
(:class:`~slurmsched.predict.schedule.RefitSchedule`). Before the first fit (or with too
little history) the experts still answer, with a fixed 4x band, and ``source`` says so.
The whole state round-trips through :meth:`to_bytes` / :meth:`from_bytes`.
"""

from __future__ import annotations

import hashlib
import logging
import math
import pickle
from collections import OrderedDict
from typing import NamedTuple, Sequence

import numpy as np
import sklearn
from sklearn.ensemble import HistGradientBoostingRegressor

from slurmsched.errors import SlurmschedError
from slurmsched.model import JobRecord, Prediction
from slurmsched.predict.common import clamp, limit_of
from slurmsched.predict.features import (CATEGORICAL_INDEX, EXPERTS, CategoryCodes, FeatureState, Snapshot,
                                         replay)
from slurmsched.predict.history import run_of

log = logging.getLogger(__name__)

#: Version of the :meth:`SlurmschedPredictor.to_bytes` layout.
FORMAT = 1
#: Fewest finished runs the trees are trained on; below that the experts answer alone.
MIN_TRAIN_JOBS = 200
#: Most recent runs (by submit time) the trees are trained on.
MAX_TRAIN_JOBS = 60_000
#: Pending jobs whose expert values are remembered until they finish (scored on update).
MAX_REMEMBERED = 200_000
#: Quantiles of the three models: spread low, median (cold start), spread high.
QUANTILES = (0.1, 0.5, 0.9)
#: Spread (log2) before any model exists: a factor of 4 either way.
DEFAULT_BAND = 2.0


class ModelFormatError(SlurmschedError):
    """A saved model cannot be loaded (other format version, corrupt blob)."""


class _Prepared(NamedTuple):
    job_id: int
    snapshot: Snapshot
    limit: float | None


def _tree_params() -> dict[str, object]:
    return {"learning_rate": 0.1, "max_iter": 100, "max_leaf_nodes": 31, "min_samples_leaf": 40,
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
        self.columns: np.ndarray | None = None
        self.fitted_jobs = 0
        self.seen_until = float("-inf")
        self._pending: OrderedDict[tuple[str, int], tuple[float, ...]] = OrderedDict()

    # --- learning --------------------------------------------------------------------

    def fit(self, history: Sequence[JobRecord]) -> None:
        """Rebuild statistics and expert records from finished jobs; retrain the quantile trees.

        Trains on the submit-time features of the last :data:`MAX_TRAIN_JOBS` runs; with
        fewer than :data:`MIN_TRAIN_JOBS` runs only the statistics are rebuilt.
        """
        state, jobs, snapshots, targets = replay(history, CategoryCodes(history))
        self.state = state
        self.seen_until = max((j.end_time for j in jobs if j.end_time is not None), default=self.seen_until)
        if len(snapshots) < MIN_TRAIN_JOBS:
            log.info("%d runs in history: too few to train, experts answer alone", len(snapshots))
            return
        recent = snapshots[-MAX_TRAIN_JOBS:]
        X = np.asarray([s.row for s in recent], dtype=float)
        residual = np.asarray(targets[-MAX_TRAIN_JOBS:], dtype=float) - np.asarray([s.anchor for s in recent])
        columns = ~np.all(np.isnan(X), axis=0)
        X = X[:, columns]
        categorical = np.zeros(len(columns), dtype=bool)
        categorical[list(CATEGORICAL_INDEX)] = True
        models = []
        for quantile in QUANTILES:
            model = HistGradientBoostingRegressor(loss="quantile", quantile=quantile,
                                                  categorical_features=categorical[columns], **_tree_params())
            models.append(model.fit(X, residual))
        self.models = tuple(models)
        self.columns = columns
        self.fitted_jobs = len(snapshots)
        self.version = "gbm-" + hashlib.sha1(X.tobytes() + residual.tobytes()).hexdigest()[:10]
        log.info("trained %s on %d runs", self.version, len(residual))

    def update(self, finished: Sequence[JobRecord]) -> None:
        """Fold newly finished jobs (each once, in end-time order) into the statistics.

        A job this predictor predicted while it was pending also scores the experts with
        the values they offered then.
        """
        for job in finished:
            run = run_of(job)
            if run is None:
                continue
            self.state.add(job, run)
            experts = self._pending.pop((job.cluster, job.job_id), None)
            if experts is not None:
                self.state.score(job.user, experts, run.log_runtime)
            if run.end > self.seen_until:
                self.seen_until = run.end

    # --- predicting ------------------------------------------------------------------

    def prepare(self, jobs: Sequence[JobRecord]) -> list[object]:
        """Snapshot each job's experts and features from the statistics now."""
        out: list[object] = []
        for job in jobs:
            snapshot = self.state.snapshot(job)
            key = (job.cluster, job.job_id)
            self._pending[key] = snapshot.experts
            self._pending.move_to_end(key)
            if len(self._pending) > MAX_REMEMBERED:
                self._pending.popitem(last=False)
            out.append(_Prepared(job.job_id, snapshot, limit_of(job)))
        return out

    def finish(self, prepared: Sequence[object]) -> list[Prediction]:
        """Estimates and spreads for prepared jobs, running each tree model once over all of them."""
        items: list[_Prepared] = list(prepared)  # type: ignore[arg-type]
        if not items:
            return []
        if self.models and self.columns is not None:
            X = np.asarray([p.snapshot.row for p in items], dtype=float)[:, self.columns]
            low, middle, high = (m.predict(X) for m in self.models)
        else:
            low = np.full(len(items), -DEFAULT_BAND)
            middle = np.zeros(len(items))
            high = np.full(len(items), DEFAULT_BAND)
        out = []
        for i, item in enumerate(items):
            snap = item.snapshot
            if snap.chosen >= 0:
                estimate = snap.anchor
                source = f"{EXPERTS[snap.chosen]} ({snap.runs} runs)"
            else:
                estimate = snap.anchor + float(middle[i]) if self.models else snap.anchor
                source = "cold start: " + ("learned from size, limit and partition" if self.models
                                           else "time limit" if item.limit is not None
                                           else "site median" if self.state.overall.count else "default 1 h")
            if self.models:
                source = f"model {self.version}: {source}"
            offset = estimate - snap.anchor
            out.append(self._bounded(item.job_id, estimate, snap.anchor + float(low[i]) - offset,
                                     snap.anchor + float(high[i]) - offset, item.limit, source))
        return out

    def predict(self, jobs: Sequence[JobRecord]) -> list[Prediction]:
        """One prediction per job, in order; never raises for odd or missing fields."""
        return self.finish(self.prepare(jobs))

    def _bounded(self, job_id: int, log_estimate: float, log_low: float, log_high: float,
                 limit: float | None, source: str) -> Prediction:
        """Back to seconds (rounded to ms, so an exact earlier run time stays exact), capped at the limit."""
        estimate = round(clamp(2.0 ** min(log_estimate, 40.0), limit), 3)
        log_estimate = math.log2(estimate)
        low = round(clamp(2.0 ** min(log_low, log_estimate), limit), 3)
        high = round(clamp(2.0 ** max(min(log_high, 40.0), log_estimate), limit), 3)
        return Prediction(job_id, estimate, min(low, estimate), max(high, estimate), source, self.version)

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
                written by another scikit-learn version (refit instead).
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
        predictor = cls.__new__(cls)
        predictor.__dict__.update(saved["state"])
        return predictor
