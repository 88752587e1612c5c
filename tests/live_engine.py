"""The engine as the live tests run it over the real cluster."""

from __future__ import annotations

from slurmsched.config import Config
from slurmsched.engine import Engine
from slurmsched.planner import Planner
from slurmsched.policy import make_policy
from slurmsched.predict.registry import make_predictor


def engine_for(gateway, repository, policy: str = "qssf", **kwargs) -> Engine:
    """An engine with ``policy``, the default planner (switch tuning on: the dev cluster
    runs ``topology/tree``) and predictions from the time limits (a known order)."""
    predictor = make_predictor("user_limit")
    predictor.fit([])
    return Engine(gateway, repository, predictor, make_policy(policy), Planner(Config()), **kwargs)
