"""The oracle predictor of the ``sjf`` baseline: it knows every job's true run time.

Only the simulator knows the truth, so the oracle lives here; it is fed to the same
engine, policy and planner as slurmsched's own predictor, which makes ``sjf`` the
limit a duration-ordered policy can reach through SiteFactor.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from slurmsched.model import JobRecord, Prediction
from slurmsched.predict.common import DEFAULT_ESTIMATE_S

#: Shortest estimate handed out (a prediction must be positive).
MIN_ESTIMATE_S = 1.0


class OraclePredictor:
    """Predicts each job's true run time; learns nothing from history.

    Args:
        durations: job id -> true run time in seconds.
    """

    name = "oracle"
    version = "truth"
    learns = False

    def __init__(self, durations: Mapping[int, float]) -> None:
        self._durations = durations

    def fit(self, history: Sequence[JobRecord]) -> None:
        """Nothing to fit: the truth is known."""

    def update(self, finished: Sequence[JobRecord]) -> None:
        """Nothing to learn: the truth is known."""

    def predict(self, jobs: Sequence[JobRecord], *, remember: bool = True) -> list[Prediction]:
        """The true run time of each job (a job the oracle does not know gets the default
        estimate); the oracle remembers nothing either way."""
        predictions = []
        for job in jobs:
            known = self._durations.get(job.job_id)
            estimate = max(MIN_ESTIMATE_S, known) if known is not None else DEFAULT_ESTIMATE_S
            source = "oracle: true run time" if known is not None else "oracle: unknown job"
            predictions.append(Prediction(job.job_id, estimate, estimate, estimate, source))
        return predictions
