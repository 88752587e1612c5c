"""SlurmschedPredictor's two ways from log2 estimates to seconds give the same floats, bit for bit."""

from __future__ import annotations

import math
import random

import pytest

from slurmsched.predict.features import COLUMNS, Snapshot
from slurmsched.predict.gbm import FEW_JOBS, SlurmschedPredictor, _Prepared
from tests.predict.test_predictors import workload


def _bits(values: list[float]) -> list[str]:
    return [v.hex() for v in values]


def _items(rng: random.Random, n: int) -> list[_Prepared]:
    """Jobs with anchors far below and above the caps, limits that make millisecond ties (odd
    sixteenths), tiny, huge or no limits, rows with missing values, some sharing a row."""
    items = []
    row: tuple[float, ...] = ()
    for i in range(n):
        if not row or rng.random() < 0.7:
            row = tuple(math.nan if rng.random() < 0.2 else rng.uniform(-5, 20) for _ in COLUMNS)
        anchor = rng.choice([rng.uniform(-3, 25), rng.uniform(-1100, 1100), rng.uniform(38, 42)])
        limit = rng.choice([None, rng.uniform(0.0001, 2.0), rng.randrange(1, 2**20) / 16, rng.uniform(1, 1e6),
                            1e300, math.inf])
        snap = Snapshot(experts=(), chosen=rng.randrange(-1, 4), anchor=anchor, runs=0, row=row)
        items.append(_Prepared(i, snap, limit))
    return items


@pytest.fixture(scope="module")
def fitted() -> SlurmschedPredictor:
    predictor = SlurmschedPredictor()
    predictor.fit(workload(1500))
    assert predictor.trees is not None
    return predictor


@pytest.mark.parametrize("trained", [True, False])
def test_few_jobs_get_the_bounds_of_the_numpy_path(fitted: SlurmschedPredictor, trained: bool) -> None:
    predictor = fitted if trained else SlurmschedPredictor()
    rng = random.Random(7)
    checked = 0
    for _ in range(400):
        items = _items(rng, rng.randrange(1, FEW_JOBS + 1))
        few = predictor._bounds_few(items)
        assert few is not None
        assert [_bits(v) for v in few] == [_bits(v) for v in predictor._bounds(items)]
        checked += len(items)
    assert checked > 2000


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_non_finite_anchors_are_left_to_the_numpy_path(fitted: SlurmschedPredictor) -> None:
    for anchor in (math.inf, -math.inf, math.nan):
        items = _items(random.Random(3), 3)
        items[1] = items[1]._replace(snapshot=items[1].snapshot._replace(anchor=anchor))
        assert fitted._bounds_few(items) is None
        assert len(fitted.finish(items)) == 3
