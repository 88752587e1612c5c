"""Quantile gradient boosting as scikit-learn fits it, with less repeated work.

A refit trains three ``HistGradientBoostingRegressor`` models (pinball loss, one per
quantile) on the same matrix. Two parts of scikit-learn's fit are pure overhead there
(measured on 10,000 rows x 35 columns, one thread):

* **Binning** (``_BinMapper.fit_transform``, about 30% of a fit) is done once per model
  on identical input with identical settings. :func:`fit_quantiles` bins once and gives
  the same mapper and binned matrix to every model.
* **Leaf values.** The pinball loss is not differentiable, so after each tree scikit-learn
  sets every leaf to a percentile of its residuals with ``np.percentile`` (about 20% of a
  fit: some 1,200 calls per refit, mostly numpy's Python-level argument handling).
  :func:`linear_percentile` computes the same number with numpy's own steps and no
  wrapper.

Both go through private scikit-learn hooks (``BaseHistGradientBoosting._bin_data`` and
``_get_loss``), because the public API offers no way to pass pre-binned data or a loss
object with another ``fit_intercept_only``. The result is exactly scikit-learn's: the same
trees, thresholds, leaf values and baselines bit for bit, which
``tests/predict/test_boosting.py`` checks against the stock estimator and
``np.percentile`` (so a scikit-learn or numpy upgrade that changes either hook fails
there, not silently).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from sklearn._loss.loss import PinballLoss
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.ensemble._hist_gradient_boosting.binning import _BinMapper


def linear_percentile(values: np.ndarray, percent: float) -> np.float64 | None:
    """``np.percentile(values, percent, axis=0)`` (method ``"linear"``) of a 1-D float64 array.

    The steps are numpy's own (``numpy/lib/_function_base_impl.py``, ``_quantile`` for a
    scalar ``q``): the virtual index ``(n - 1) * q``, its floor and the next index (both
    the last element once the index reaches ``n - 1``), the same ``partition`` call on a
    copy, and ``_lerp``'s two formulas; so the result is the same float64, bit for bit.

    Args:
        values: a non-empty 1-D float64 array (left unchanged).
        percent: the percentile, in ``[0, 100]``.

    Returns:
        The percentile as ``np.float64`` (the type ``np.percentile`` returns), or ``None``
        when ``values`` holds a NaN (``np.percentile`` has its own rule for that).
    """
    n = values.shape[0]
    virtual = (n - 1) * (percent / 100)  # np.true_divide(q, 100), then the "linear" index
    if virtual >= n - 1:
        below = above = -1
    else:
        below = math.floor(virtual)
        above = below + 1
    arr = values.copy()
    arr.partition(sorted({0, -1, below, above}))  # numpy's kth: np.unique of these four
    if math.isnan(arr[-1]):  # NaNs sort last
        return None
    a, b = float(arr[below]), float(arr[above])
    t = virtual - below
    diff = b - a
    return np.float64(b - diff * (1 - t) if t >= 0.5 else a + diff * t)


class _Pinball(PinballLoss):
    """The pinball loss, with the unweighted intercept computed by :func:`linear_percentile`.

    Every other case (sample weights, another shape or dtype, NaNs) goes to scikit-learn.
    """

    def fit_intercept_only(self, y_true, sample_weight=None):  # noqa: ANN001, ANN201 - scikit-learn's signature
        """The ``100 * quantile``-th percentile of ``y_true``: scikit-learn's value."""
        if (sample_weight is None and type(y_true) is np.ndarray and y_true.ndim == 1
                and y_true.dtype == np.float64 and y_true.size):
            value = linear_percentile(y_true, 100 * self.closs.quantile)
            if value is not None:
                return value
        return super().fit_intercept_only(y_true, sample_weight)


class _Bins:
    """One training matrix's binning: filled by the first fit that bins it, read by the next.

    Attributes:
        source: the matrix scikit-learn handed to ``_bin_data`` (after its validation).
        settings: the ``_BinMapper`` settings it was binned with.
        mapper: the fitted ``_BinMapper``.
        binned: the binned matrix (read-only: shared by every model).
    """

    __slots__ = ("source", "settings", "mapper", "binned")

    def __init__(self) -> None:
        self.source: np.ndarray | None = None
        self.settings: dict[str, object] = {}
        self.mapper: _BinMapper | None = None
        self.binned: np.ndarray | None = None


class QuantileBoosting(HistGradientBoostingRegressor):
    """``HistGradientBoostingRegressor`` that can share one binning and has a faster pinball loss.

    Fitted with plain :meth:`fit` it is the stock estimator (plus :class:`_Pinball`); fitted
    by :func:`fit_quantiles` it bins the training matrix only when no earlier model of the
    same call has binned it with the same ``_BinMapper`` settings. Predicting, pickling and
    :class:`~slurmsched.predict.trees.CompiledTrees` see an ordinary fitted regressor.
    """

    _bins: _Bins | None = None  # set by _fit_sharing for the length of one fit

    def _get_loss(self, sample_weight):  # noqa: ANN001, ANN202 - scikit-learn's hook
        if self.loss == "quantile":
            return _Pinball(sample_weight=sample_weight, quantile=self.quantile)
        return super()._get_loss(sample_weight)

    def _bin_data(self, X, sample_weight, is_training_data):  # noqa: ANN001, ANN202 - scikit-learn's hook
        bins = self._bins
        if bins is None or not is_training_data:
            return super()._bin_data(X, sample_weight, is_training_data)
        # fit has just made self._bin_mapper, unfitted: reuse a fitted one only if made alike
        settings = self._bin_mapper.get_params()
        plain = settings["is_categorical"] is None and settings["known_categories"] is None
        if plain and X is bins.source and settings == bins.settings:
            self._bin_mapper = bins.mapper
            return bins.binned
        binned = super()._bin_data(X, sample_weight, is_training_data)
        if plain:
            binned.flags.writeable = False  # scikit-learn only reads it (const memoryviews)
            bins.source, bins.settings, bins.mapper, bins.binned = X, settings, self._bin_mapper, binned
        return binned

    def _fit_sharing(self, X: np.ndarray, y: np.ndarray, bins: _Bins) -> "QuantileBoosting":
        """:meth:`fit` (unweighted: weights would change the bins), binning through ``bins``;
        the fitted model keeps no reference to ``bins``."""
        self._bins = bins
        try:
            return self.fit(X, y)
        finally:
            del self._bins


def fit_quantiles(X: np.ndarray, y: np.ndarray, quantiles: Sequence[float],
                  params: dict[str, object]) -> list[QuantileBoosting]:
    """One pinball-loss regressor per quantile on ``X``, ``y``, binned once.

    Args:
        X: training matrix (float64; NaN for missing).
        y: targets.
        quantiles: one model per value, in order.
        params: the other ``HistGradientBoostingRegressor`` settings, the same for all.

    Returns:
        The fitted models: each is what ``HistGradientBoostingRegressor(loss="quantile",
        quantile=q, **params).fit(X, y)`` fits, to the bit.
    """
    bins = _Bins()
    return [QuantileBoosting(loss="quantile", quantile=q, **params)._fit_sharing(X, y, bins)
            for q in quantiles]
