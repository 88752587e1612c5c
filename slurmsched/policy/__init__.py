"""Queue-ordering policies: pure functions of the pending queue, registered by name.

Policies import only :mod:`slurmsched.model`, the typed config helpers and the
standard library; never the gateway, store, simulator, daemon, engine or CLI.
"""

from slurmsched.policy.base import JobScore, Policy, PolicyContext, Ranking
from slurmsched.policy.registry import POLICIES, make_policy

__all__ = ["JobScore", "Policy", "PolicyContext", "Ranking", "POLICIES", "make_policy"]
