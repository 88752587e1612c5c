"""Predictors by name: ``make_predictor("slurmsched")``."""

from __future__ import annotations

from typing import Callable

from slurmsched.errors import ConfigError
from slurmsched.predict.baselines import HeliosPredictor, Last2Predictor, UserLimitPredictor
from slurmsched.predict.gbm import SlurmschedPredictor
from slurmsched.predict.protocol import StagedPredictor

#: Registry name -> factory of a fresh (unfitted) predictor.
PREDICTORS: dict[str, Callable[[], StagedPredictor]] = {
    "slurmsched": SlurmschedPredictor,
    "helios": HeliosPredictor,
    "last2": Last2Predictor,
    "user_limit": UserLimitPredictor,
}
#: The daemon's default predictor.
DEFAULT_PREDICTOR = "slurmsched"


def make_predictor(name: str = DEFAULT_PREDICTOR) -> StagedPredictor:
    """A fresh predictor registered under ``name``.

    Raises:
        ConfigError: no predictor has that name.
    """
    factory = PREDICTORS.get(name)
    if factory is None:
        raise ConfigError(f"unknown predictor {name!r} (expected one of {', '.join(PREDICTORS)})")
    return factory()
