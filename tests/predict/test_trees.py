"""The numpy walk of fitted trees gives scikit-learn's own predictions."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor

from slurmsched.predict.gbm import QUANTILES, _tree_params
from slurmsched.predict.trees import JUMP_MAX_ROWS, CompiledTrees


def _data(rows: int, seed: int) -> np.ndarray:
    """Rows with missing values scattered and one mostly-missing column (splits on missingness)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, 8))
    X[rng.random(X.shape) < 0.15] = np.nan
    X[:, 3] = np.where(rng.random(rows) < 0.5, np.nan, rng.integers(0, 4, rows))
    return X


@pytest.fixture(scope="module")
def models() -> list[HistGradientBoostingRegressor]:
    X = _data(4000, 0)
    rng = np.random.default_rng(1)
    y = np.nansum(X[:, :3], axis=1) + 2.0 * np.isnan(X[:, 3]) + np.nan_to_num(X[:, 3]) + rng.normal(size=len(X))
    return [HistGradientBoostingRegressor(loss="quantile", quantile=q, **_tree_params()).fit(X, y)
            for q in QUANTILES]


@pytest.mark.parametrize("rows", [1, 3, 500])
def test_compiled_trees_predict_what_sklearn_predicts(models: list[HistGradientBoostingRegressor], rows: int) -> None:
    trees = CompiledTrees.from_models(models)
    X = _data(rows, 2)
    X[0] = np.nan  # every value missing
    expected = np.column_stack([m.predict(X) for m in models])
    np.testing.assert_allclose(trees.predict(X), expected, rtol=0, atol=1e-9)  # shape (rows, 3) too


def test_split_on_missingness_sends_missing_values_the_fitted_way() -> None:
    X = np.array([[np.nan]] * 200 + [[1.0]] * 200)
    y = np.array([10.0] * 200 + [0.0] * 200)
    model = HistGradientBoostingRegressor(max_iter=5, min_samples_leaf=20).fit(X, y)
    trees = CompiledTrees.from_models([model])
    probe = np.array([[np.nan], [1.0], [1e300], [-1e300]])
    np.testing.assert_allclose(trees.predict(probe)[:, 0], model.predict(probe), atol=1e-9)


def _probes(trees: CompiledTrees, rows: int, seed: int) -> np.ndarray:
    """Rows mixing ordinary values, the trees' own thresholds (ties), NaN and +-inf."""
    rng = np.random.default_rng(seed)
    thresholds = trees.threshold[np.isfinite(trees.threshold)]
    X = rng.normal(size=(rows, trees.width)) * 3
    pick = rng.random(X.shape)
    X = np.where(pick < 0.3, rng.choice(thresholds, size=X.shape), X)
    X[pick > 0.8] = np.nan
    X[(pick > 0.75) & (pick <= 0.77)] = np.inf
    X[(pick > 0.77) & (pick <= 0.79)] = -np.inf
    return X


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_pointer_jumping_finds_the_walks_leaves(models: list[HistGradientBoostingRegressor], seed: int) -> None:
    trees = CompiledTrees.from_models(models)
    wide = trees._widen(_probes(trees, 3000, seed))
    assert np.array_equal(np.array([trees._jump(row) for row in wide]), trees._walk(wide))


def test_small_batches_predict_the_large_batches_bits(models: list[HistGradientBoostingRegressor]) -> None:
    """A batch of up to JUMP_MAX_ROWS rows (pointer jumping) gives each row the very floats a
    large batch (the level walk) gives it."""
    for trees in (CompiledTrees.from_models(models), CompiledTrees.from_models(models[1:2])):
        X = _probes(trees, 400, 6)
        whole = trees.predict(X)
        for rows in range(1, JUMP_MAX_ROWS + 1):
            for start in range(0, len(X) - rows, rows):
                assert trees.predict(X[start:start + rows]).tobytes() == whole[start:start + rows].tobytes()


def test_pointer_jumping_follows_missingness_splits() -> None:
    """Thresholds at +inf (a split of missing from present values) and missing values either way."""
    X = np.array([[np.nan, 1.0]] * 200 + [[1.0, np.nan]] * 200 + [[2.0, 3.0]] * 200)
    y = np.array([10.0] * 200 + [0.0] * 200 + [5.0] * 200)
    model = HistGradientBoostingRegressor(max_iter=5, min_samples_leaf=20).fit(X, y)
    trees = CompiledTrees.from_models([model])
    assert np.isinf(model._predictors[0][0].nodes["num_threshold"]).any()
    probe = np.array([[np.nan, np.nan], [1.0, np.nan], [np.nan, 1.0], [np.inf, -np.inf], [-np.inf, np.inf],
                      [2.0, 3.0], [1e308, -1e308]])
    wide = trees._widen(probe)
    assert np.array_equal(np.array([trees._jump(row) for row in wide]), trees._walk(wide))
    for row in probe:
        assert trees.predict(row[None, :]).tobytes() == trees.predict(np.vstack([row] * 9))[:1].tobytes()
    np.testing.assert_allclose(trees.predict(probe[:3])[:, 0], model.predict(probe[:3]), atol=1e-9)


def test_categorical_trees_are_refused() -> None:
    X = np.array([[0.0], [1.0], [2.0]] * 100)
    y = X[:, 0] * 3
    model = HistGradientBoostingRegressor(max_iter=3, categorical_features=[0], min_samples_leaf=5).fit(X, y)
    with pytest.raises(ValueError, match="categorical"):
        CompiledTrees.from_models([model])
