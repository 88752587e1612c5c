"""The :class:`Predictor` protocol every duration predictor implements."""

from __future__ import annotations

from typing import Protocol, Sequence

from slurmsched.model import JobRecord, Prediction


class Predictor(Protocol):
    """Predicts run times of jobs from the history of finished jobs.

    Implementations are pure: they see only :class:`JobRecord` values and never import
    the gateway, store, simulator or daemon. ``version`` identifies the fitted state
    (recorded with every prediction and in the model registry).
    """

    name: str
    version: str

    def fit(self, history: Sequence[JobRecord]) -> None:
        """(Re)build the model from finished jobs (ordered by end time)."""
        ...

    def update(self, finished: Sequence[JobRecord]) -> None:
        """Fold newly finished jobs into the cheap per-user/per-name statistics (every cycle)."""
        ...

    def predict(self, jobs: Sequence[JobRecord]) -> list[Prediction]:
        """One prediction per job, in order; never raises for odd or missing fields."""
        ...
