"""Fitted gradient-boosted trees as flat arrays, evaluated with numpy.

``HistGradientBoostingRegressor.predict`` costs 1-2 ms per call whatever the number
of rows (input validation, thread pools, one Cython call per tree), and the daemon and
the simulator predict a handful of new jobs per cycle. :class:`CompiledTrees` copies the
fitted trees of one or more regressors into flat node arrays once, after the fit, and
walks every tree of every model for every row at once: one numpy step per tree level (for
a few rows, one row at a time by pointer jumping: a few numpy steps whatever the depth).
The result equals ``model.predict(X)`` (the tests compare them); the trees must be
numeric-only (no native categorical splits), which is how slurmsched fits them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor

#: Most rows :meth:`CompiledTrees.predict` finds leaves for row by row by pointer jumping
#: rather than by the level walk. Measured on the Philly run's trees (75 trees, 2,175 nodes,
#: depth 11): 1 row 16 vs 69 us, 4 rows 65-100 vs 130 us, 8 rows 199 vs 153 us.
JUMP_MAX_ROWS = 4


@dataclass(frozen=True, eq=False)
class CompiledTrees:
    """The trees of several fitted regressors, in one set of node arrays.

    A walk step for node ``n`` reads column ``column[n]`` of the row widened by
    :meth:`_widen` (the row with missing values as -inf, then as +inf: the copy that
    sends a missing value the way the fit chose) and moves to
    ``children[2n + (x > threshold[n])]``. Leaves point at themselves.

    Attributes:
        column, threshold, children: the walk tables (one entry per node; two children).
        value: each node's value (read at leaves).
        roots: the root node of every tree, model after model.
        starts: index into ``roots`` of each model's first tree.
        baselines: each model's constant baseline prediction.
        width: columns the models were fitted on.
        depth: the deepest tree's depth (the most steps a walk takes).
    """

    column: np.ndarray
    threshold: np.ndarray
    children: np.ndarray
    value: np.ndarray
    roots: np.ndarray
    starts: np.ndarray
    baselines: np.ndarray
    width: int
    depth: int

    @classmethod
    def from_models(cls, models: Sequence[HistGradientBoostingRegressor]) -> "CompiledTrees":
        """Copy the trees of fitted single-output regressors (scikit-learn's ``_predictors``).

        Raises:
            ValueError: no model, a model without trees, with several outputs or with
                native categorical splits.
        """
        tables: list[np.ndarray] = []
        roots: list[int] = []
        starts: list[int] = []
        baselines: list[float] = []
        offset = 0
        for model in models:
            if not model._predictors:
                raise ValueError("a model without trees cannot be compiled")
            starts.append(len(roots))
            baselines.append(float(np.ravel(model._baseline_prediction)[0]))
            for iteration in model._predictors:
                if len(iteration) != 1:
                    raise ValueError("only single-output regressors can be compiled")
                nodes = iteration[0].nodes
                if nodes["is_categorical"].any():
                    raise ValueError("trees with native categorical splits cannot be compiled")
                tables.append(nodes)
                roots.append(offset)
                offset += len(nodes)
        if not tables:
            raise ValueError("no model to compile")
        nodes = np.concatenate(tables)
        width = int(models[0].n_features_in_)
        shift = np.repeat(np.asarray(roots, dtype=np.intp), [len(t) for t in tables])
        leaf = nodes["is_leaf"].astype(bool)
        here = np.arange(len(nodes), dtype=np.intp)
        left = np.where(leaf, here, nodes["left"].astype(np.intp) + shift)
        right = np.where(leaf, here, nodes["right"].astype(np.intp) + shift)
        missing_right = ~nodes["missing_go_to_left"].astype(bool)
        column = np.where(leaf, 0, nodes["feature_idx"] + width * missing_right).astype(np.intp)
        # x > threshold sends right; +inf (missing, sent right) must pass even an infinite threshold
        threshold = np.where(leaf, np.inf, np.minimum(nodes["num_threshold"], np.finfo(float).max))
        return cls(column=column, threshold=threshold, children=np.column_stack([left, right]).ravel(),
                   value=nodes["value"].astype(float), roots=np.asarray(roots, dtype=np.intp),
                   starts=np.asarray(starts, dtype=np.intp), baselines=np.asarray(baselines, dtype=float),
                   width=width, depth=int(nodes["depth"].max()))

    def _widen(self, X: np.ndarray) -> np.ndarray:
        """``X`` twice side by side, missing values as -inf (go left), then as +inf (go right)."""
        missing = np.isnan(X)
        return np.concatenate((np.where(missing, -np.inf, X), np.where(missing, np.inf, X)), axis=1)

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Every model's prediction for every row of ``X``: shape ``(rows, models)``.

        ``X`` holds the columns the models were fitted on (float, NaN for missing). Up to
        :data:`JUMP_MAX_ROWS` rows the leaves are found by :meth:`_jump`, beyond by
        :meth:`_walk`; both reach the same leaves, and the leaf values are summed the same way.
        """
        rows = X.shape[0]
        wide = self._widen(np.asarray(X, dtype=float).reshape(rows, self.width))
        node = np.array([self._jump(row) for row in wide]) if rows <= JUMP_MAX_ROWS else self._walk(wide)
        return np.add.reduceat(self.value[node], self.starts, axis=1) + self.baselines

    def _walk(self, wide: np.ndarray) -> np.ndarray:
        """Each row's leaf in every tree, shape ``(rows, trees)``: all trees one level down per step."""
        rows = wide.shape[0]
        flat = wide.ravel()
        base = (np.arange(rows, dtype=np.intp) * (2 * self.width))[:, None]
        node = np.broadcast_to(self.roots, (rows, len(self.roots)))
        column, threshold, children = self.column, self.threshold, self.children
        for _ in range(self.depth):
            step = children[2 * node + (flat[base + column[node]] > threshold[node])]
            if np.array_equal(step, node):
                break
            node = step
        return node

    def _jump(self, row: np.ndarray) -> np.ndarray:
        """One widened row's leaf in every tree (what :meth:`_walk` finds for it), by pointer
        jumping: every node's next step at once (one comparison per node; a leaf's is
        itself), then that map composed with itself until it spans :attr:`depth` steps.
        About ten numpy calls whatever the depth, each over every node."""
        step = np.where(row[self.column] > self.threshold, self.children[1::2], self.children[0::2])
        for _ in range(max(self.depth - 1, 0).bit_length()):  # 2**k >= depth steps
            step = step[step]
        return step[self.roots]
