"""The shared-binning, fast-percentile quantile fit is scikit-learn's stock fit, bit for bit."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn._loss.loss import PinballLoss
from sklearn.ensemble import HistGradientBoostingRegressor

from slurmsched.predict.boosting import QuantileBoosting, _Bins, _Pinball, fit_quantiles, linear_percentile
from slurmsched.predict.gbm import QUANTILES, _tree_params
from slurmsched.predict.trees import CompiledTrees


def _data(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns of every awkward kind: NaNs, heavy ties, constant, >255 distinct values (no all-NaN
    column: scikit-learn 1.9 cannot bin one, and slurmsched drops them before fitting)."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([
        rng.normal(size=rows),                                   # continuous: > 255 distinct values
        np.round(rng.normal(size=rows), 1),                      # ties
        rng.integers(0, 5, rows).astype(float),                  # few values
        np.full(rows, 3.0),                                      # constant
        np.where(rng.random(rows) < 0.5, np.nan, rng.integers(0, 4, rows)),  # half missing
        rng.lognormal(size=rows) * 1e6,                          # wide range
    ])
    X[rng.random(X.shape) < 0.1] = np.nan
    y = np.nansum(X[:, :3], axis=1) + 2.0 * np.isnan(X[:, 4]) + rng.normal(size=rows)
    y[rng.random(rows) < 0.3] = 1.0  # tied targets: many leaf percentiles fall between equal values
    return X, y


def _fitted(model: HistGradientBoostingRegressor) -> list[bytes]:
    """Everything a fit decides, as bytes: baseline, bin thresholds, every tree's node array."""
    out = [np.asarray(model._baseline_prediction).tobytes()]
    out += [t.tobytes() for t in model._bin_mapper.bin_thresholds_]
    for trees in model._predictors:
        for tree in trees:
            out += [tree.nodes.tobytes(), tree.binned_left_cat_bitsets.tobytes(), tree.raw_left_cat_bitsets.tobytes()]
    return out


def _stock(X: np.ndarray, y: np.ndarray, quantile: float, **params: object) -> HistGradientBoostingRegressor:
    return HistGradientBoostingRegressor(loss="quantile", quantile=quantile, **params).fit(X, y)


@pytest.mark.parametrize(("rows", "seed"), [(300, 0), (2000, 1), (5000, 2)])
def test_fit_quantiles_fits_the_stock_trees(rows: int, seed: int) -> None:
    X, y = _data(rows, seed)
    models = fit_quantiles(X, y, QUANTILES, _tree_params())
    assert [m.quantile for m in models] == list(QUANTILES)
    assert models[1]._bin_mapper is models[0]._bin_mapper is models[2]._bin_mapper  # binned once
    stock = [_stock(X, y, q, **_tree_params()) for q in QUANTILES]
    for model, alike in zip(models, stock):
        assert _fitted(model) == _fitted(alike)
        assert "_bins" not in vars(model)  # the binned matrix is not kept (nor pickled)
    probe, _ = _data(50, seed + 10)
    np.testing.assert_array_equal(CompiledTrees.from_models(models).predict(probe),
                                  CompiledTrees.from_models(stock).predict(probe))
    restored = pickle.loads(pickle.dumps(models))
    np.testing.assert_array_equal(np.column_stack([m.predict(probe) for m in restored]),
                                  np.column_stack([m.predict(probe) for m in stock]))


def test_plain_fit_is_the_stock_fit() -> None:
    X, y = _data(1000, 3)
    for quantile in (0.1, 0.5, 0.9, 0.37):
        model = QuantileBoosting(loss="quantile", quantile=quantile, **_tree_params()).fit(X, y)
        assert _fitted(model) == _fitted(_stock(X, y, quantile, **_tree_params()))
    other = QuantileBoosting(loss="absolute_error", max_iter=5).fit(X, y)  # not the pinball loss: untouched
    assert _fitted(other) == _fitted(HistGradientBoostingRegressor(loss="absolute_error", max_iter=5).fit(X, y))


def test_a_binning_made_otherwise_is_not_reused() -> None:
    X, y = _data(1000, 4)
    bins = _Bins()
    first = QuantileBoosting(loss="quantile", quantile=0.5, max_bins=255, max_iter=5)._fit_sharing(X, y, bins)
    other = QuantileBoosting(loss="quantile", quantile=0.5, max_bins=31, max_iter=5)._fit_sharing(X, y, bins)
    copy = QuantileBoosting(loss="quantile", quantile=0.5, max_bins=255, max_iter=5)._fit_sharing(X.copy(), y, bins)
    assert other._bin_mapper is not first._bin_mapper and copy._bin_mapper is not first._bin_mapper
    assert _fitted(other) == _fitted(_stock(X, y, 0.5, max_bins=31, max_iter=5))
    assert _fitted(copy) == _fitted(_stock(X, y, 0.5, max_bins=255, max_iter=5))
    C = np.column_stack([np.arange(1000) % 4, X[:, 0]])  # native categorical: never shared
    cat = [QuantileBoosting(loss="quantile", quantile=0.5, max_iter=5, categorical_features=[0])._fit_sharing(C, y, bins)
           for _ in range(2)]
    assert cat[1]._bin_mapper is not cat[0]._bin_mapper
    assert _fitted(cat[1]) == _fitted(_stock(C, y, 0.5, max_iter=5, categorical_features=[0]))


def _bits(value: object) -> tuple[type, bytes]:
    return type(value), np.asarray(value).tobytes()


def _arrays() -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    arrays = [np.array([2.5]), np.array([-1.0, 3.0]), np.array([3.0, -1.0]), np.array([0.0, -0.0]),
              np.array([-0.0, 0.0, -0.0]), np.array([1e308, -1e308, 5.0]), np.array([-np.inf, 1.0, np.inf])]
    for size in list(range(1, 60)) + [99, 100, 101, 257, 1000, 4001]:
        arrays.append(rng.normal(size=size) * 10.0 ** rng.integers(-5, 6))
        arrays.append(rng.integers(-3, 4, size).astype(float))  # ties
        arrays.append(np.round(rng.lognormal(size=size), 2) - 1.0)
    return arrays


@pytest.mark.parametrize("percent", [100 * q for q in QUANTILES] + [0.0, 100.0, 1e-9, 25.0, 33.3, 99.99])
def test_linear_percentile_is_numpys_to_the_bit(percent: float) -> None:
    for a in _arrays():
        before = a.copy()
        with np.errstate(invalid="ignore"):  # inf - inf, as in numpy
            expected = np.percentile(a, percent, axis=0)
            got = linear_percentile(a, percent)
        assert _bits(got) == _bits(expected), (a, percent)
        np.testing.assert_array_equal(a, before)


def test_linear_percentile_leaves_nans_to_numpy() -> None:
    assert linear_percentile(np.array([1.0, np.nan, 2.0]), 50.0) is None
    loss = _Pinball(sample_weight=None, quantile=0.9)
    assert np.isnan(loss.fit_intercept_only(np.array([1.0, np.nan, 2.0])))


@pytest.mark.parametrize("quantile", QUANTILES)
def test_pinball_intercept_is_sklearns(quantile: float) -> None:
    fast, stock = _Pinball(sample_weight=None, quantile=quantile), PinballLoss(sample_weight=None, quantile=quantile)
    rng = np.random.default_rng(6)
    for size in (1, 2, 3, 40, 41, 1000):
        y = np.round(rng.normal(size=size), 1)
        assert _bits(fast.fit_intercept_only(y)) == _bits(stock.fit_intercept_only(y))
        w = rng.random(size)
        assert _bits(fast.fit_intercept_only(y, w)) == _bits(stock.fit_intercept_only(y, w))
        y32 = y.astype(np.float32)
        assert _bits(fast.fit_intercept_only(y32)) == _bits(stock.fit_intercept_only(y32))
