"""The planner: scores -> SiteFactor levels and constraint changes, with guard rails."""

from slurmsched.planner.bound import WaitBound, guaranteed_wait_bound
from slurmsched.planner.changes import describe, revert_action, revert_actions
from slurmsched.planner.plan import Plan, Planner, count_rpcs
from slurmsched.planner.scale import SiteFactorScale

__all__ = ["Plan", "Planner", "SiteFactorScale", "WaitBound", "count_rpcs", "describe",
           "guaranteed_wait_bound", "revert_action", "revert_actions"]
