"""Predictors by name: ``make_predictor("slurmsched")``.

Light to import (the config's validation checks ``daemon.predictor`` here): scikit-learn
is imported only when slurmsched's own predictor is made."""

from __future__ import annotations

from typing import Callable

from slurmsched.errors import ConfigError
from slurmsched.predict.baselines import HeliosPredictor, Last2Predictor, UserLimitPredictor
from slurmsched.predict.protocol import StagedPredictor


def _slurmsched() -> StagedPredictor:
    from slurmsched.predict.gbm import SlurmschedPredictor

    return SlurmschedPredictor()


#: Registry name -> factory of a fresh (unfitted) predictor.
PREDICTORS: dict[str, Callable[[], StagedPredictor]] = {
    "slurmsched": _slurmsched,
    "helios": HeliosPredictor,
    "last2": Last2Predictor,
    "user_limit": UserLimitPredictor,
}
#: The daemon's default predictor.
DEFAULT_PREDICTOR = "slurmsched"


def check_predictor(name: str, key: str = "daemon.predictor") -> None:
    """Raise :class:`ConfigError` naming ``key`` unless a predictor is registered under ``name``."""
    if name not in PREDICTORS:
        raise ConfigError(f"{key} must be one of {', '.join(PREDICTORS)} (got {name!r})")


def make_predictor(name: str = DEFAULT_PREDICTOR) -> StagedPredictor:
    """A fresh predictor registered under ``name`` (``daemon.predictor``).

    Raises:
        ConfigError: no predictor has that name.
    """
    check_predictor(name)
    return PREDICTORS[name]()
