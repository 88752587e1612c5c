"""Policies by name: a dict of factories, each with a typed, validated argument class."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from slurmsched.config import parse_table
from slurmsched.errors import ConfigError
from slurmsched.policy.base import Policy
from slurmsched.policy.fifo import FifoArgs, FifoPolicy
from slurmsched.policy.qssf import QssfArgs, QssfPolicy


@dataclass(frozen=True)
class PolicySpec:
    """How to build one policy.

    Attributes:
        args_type: dataclass of the policy's arguments (defaults + ``validate(prefix)``).
        table: the config table holding the arguments (``policy.<table>``).
        factory: builds the policy from validated arguments.
    """

    args_type: type
    table: str
    factory: Callable[[Any], Policy]


POLICIES: dict[str, PolicySpec] = {
    "fifo": PolicySpec(FifoArgs, "fifo", FifoPolicy),
    "qssf": PolicySpec(QssfArgs, "qssf", lambda args: QssfPolicy(args, aging=True)),
    "qssf-noaging": PolicySpec(QssfArgs, "qssf", lambda args: QssfPolicy(args, aging=False)),
}


def make_policy(name: str, args: Mapping[str, Any] | None = None, *, key: str = "policy.name") -> Policy:
    """Build a registered policy.

    Args:
        name: ``fifo``, ``qssf`` or ``qssf-noaging``.
        args: the policy's argument table (TOML types; missing keys take defaults).
        key: config key to name when ``name`` is unknown.

    Raises:
        ConfigError: unknown policy, unknown argument or invalid value; the message
            names the key (``policy.qssf.cpu_gpu_weight must be > 0 (got -1.0)``).
    """
    spec = POLICIES.get(name)
    if spec is None:
        raise ConfigError(f"{key} must be one of {', '.join(POLICIES)} (got {name!r})")
    return spec.factory(parse_table(spec.args_type, dict(args or {}), f"policy.{spec.table}"))
