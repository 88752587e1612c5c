"""Accuracy metrics of duration predictions against actual run times."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from slurmsched.predict.common import MIN_RUNTIME_S


@dataclass(frozen=True, slots=True)
class Accuracy:
    """How close one predictor came, over ``jobs`` jobs.

    Attributes:
        median_abs_log2_error: median of |log2(predicted / actual)|.
        within_50pct: share with |predicted - actual| <= 0.5 x actual.
        within_2x: share with actual / 2 <= predicted <= 2 x actual.
        mae_s: mean absolute error in seconds.
        under_rate: share predicted shorter than actual.
        spread_coverage: share whose actual run time lies within [low, high].
    """

    jobs: int
    median_abs_log2_error: float
    within_50pct: float
    within_2x: float
    mae_s: float
    under_rate: float
    spread_coverage: float

    def as_dict(self) -> dict[str, float]:
        """The metrics keyed as ``predict evaluate --json`` prints them."""
        return {
            "median_abs_log2_error": self.median_abs_log2_error,
            "within_50pct": self.within_50pct,
            "within_2x": self.within_2x,
            "mae_s": self.mae_s,
            "under_rate": self.under_rate,
            "spread_coverage": self.spread_coverage,
        }


def log2_errors(predicted: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """log2(predicted / actual) with both floored at 1 s (zero-second jobs count as 1 s)."""
    return np.log2(np.maximum(predicted, MIN_RUNTIME_S) / np.maximum(actual, MIN_RUNTIME_S))


def accuracy(predicted: np.ndarray, actual: np.ndarray, low: np.ndarray, high: np.ndarray) -> Accuracy:
    """Metrics for aligned arrays of estimates, actual run times and spreads (seconds).

    Raises:
        ValueError: the arrays are empty or of different lengths.
    """
    if len(predicted) == 0 or not len(predicted) == len(actual) == len(low) == len(high):
        raise ValueError("accuracy needs non-empty arrays of equal length")
    actual = np.maximum(actual, MIN_RUNTIME_S)
    predicted = np.maximum(predicted, MIN_RUNTIME_S)
    error = np.abs(predicted - actual)
    return Accuracy(
        jobs=len(actual),
        median_abs_log2_error=float(np.median(np.abs(log2_errors(predicted, actual)))),
        within_50pct=float(np.mean(error <= 0.5 * actual)),
        within_2x=float(np.mean((predicted >= actual / 2) & (predicted <= 2 * actual))),
        mae_s=float(np.mean(error)),
        under_rate=float(np.mean(predicted < actual)),
        spread_coverage=float(np.mean((low <= actual) & (actual <= high))),
    )
