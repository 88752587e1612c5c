"""The policies a simulation compares, and how each one is wired.

Each is a configuration of the simulated site, not a code path of its own:

=============== ============================ ==================================================
name            simulated slurmctld          slurmsched daemon beside it
=============== ============================ ==================================================
``fifo``        age priority only            none (same as the daemon running ``fifo``, which
                                             sends nothing)
``sjf``         age priority only            ``qssf-noaging`` fed the *true* run times by
                                             :class:`~slurmsched.sim.oracle.OraclePredictor`
``qssf``        age priority only            ``qssf`` with slurmsched's predictor: the daemon's
                                             defaults
``qssf-noaging`` age priority only           ``qssf-noaging`` with slurmsched's predictor
``qssf-helios`` age priority only            ``qssf`` with the Helios estimator
``multifactor`` age + job size               none: Slurm's own multifactor, for reference
=============== ============================ ==================================================

"Age priority only" means the simulated ``PriorityWeight*`` of ``[sim]`` (the shipped
slurm.conf snippet: age and fair-share, where fair-share is equal for every trace job),
so without SiteFactor jobs start first come, first served with EASY backfill. The daemon
runs through :class:`~slurmsched.daemon.Daemon` exactly as on a site: the engine's
cycle, the refit schedule, the model saved in the (in-memory) repository. Its
predictor starts empty and learns only from jobs the simulation has finished.
Unless ``job_submit.lua`` is modelled (``sim.submit_plugin``: the daemon keeps its cache
in :class:`~slurmsched.sim.submit_plugin.SubmitPlugin`), a new job gets its SiteFactor at
the next cycle, at most ``daemon.interval_s`` after it arrives.

A policy with a daemon can also be run with other settings, side by side with its
defaults: ``qssf:max_wait_h=48:halflife_h=6`` is ``qssf`` with those two arguments of
``[policy.qssf]`` changed, ``qssf:planner.level_ratio=1.5`` with a planner setting
changed (:func:`configured`), and ``qssf:predictor=last2`` with another predictor;
``qssf:predictor=oracle`` runs the daemon's policy, guard included, on the true run times:
what ordering and guard would reach with perfect predictions, so the distance from it to
``qssf`` is the predictor's.
This is how an admin compares candidate settings on the same workload before changing
the live daemon's configuration.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from slurmsched.config import Config
from slurmsched.errors import ConfigError
from slurmsched.model import SchedulerConfig
from slurmsched.policy.registry import POLICIES, make_policy
from slurmsched.predict.protocol import Predictor
from slurmsched.sim.clock import SimClock
from slurmsched.sim.oracle import OraclePredictor
from slurmsched.sim.runner import CycleRunner, EngineFactory
from slurmsched.sim.slurm import SimulatedSlurm


@dataclass(frozen=True, slots=True)
class SimPolicy:
    """One compared policy.

    Attributes:
        name: the name on the command line and in reports.
        description: one line for humans.
        engine_policy: the slurmsched policy the daemon runs, ``None`` for no daemon.
        predictor: ``"oracle"`` or a predictor registry name (with a daemon).
        job_size_weight: give the simulated slurmctld ``sim.multifactor_weight_job_size``.
        settings: ``(key, value)`` pairs a variant changes in the daemon's configuration
            (see :func:`configured`); empty for the policy as configured.
    """

    name: str
    description: str
    engine_policy: str | None = None
    predictor: str | None = None
    job_size_weight: bool = False
    settings: tuple[tuple[str, str], ...] = ()


SIM_POLICIES: dict[str, SimPolicy] = {p.name: p for p in (
    SimPolicy("fifo", "Slurm alone, age priority: first come, first served with EASY backfill"),
    SimPolicy("sjf", "oracle: qssf-noaging fed the true run times (the limit of duration ordering)",
              "qssf-noaging", OraclePredictor.name),
    SimPolicy("qssf", "slurmsched: qssf with its predictor and aging guard (the daemon's defaults)",
              "qssf", "slurmsched"),
    SimPolicy("qssf-noaging", "slurmsched's qssf without the aging guard", "qssf-noaging", "slurmsched"),
    SimPolicy("qssf-helios", "qssf with the Helios estimator instead of slurmsched's predictor",
              "qssf", "helios"),
    SimPolicy("multifactor", "Slurm alone, multifactor with age and job size (reference)", job_size_weight=True),
)}


#: Separates a policy from its settings and the settings from each other (``qssf:max_wait_h=48``).
SETTING_SEP = ":"
#: The setting that swaps a policy's predictor (``qssf:predictor=last2``), not a config key.
PREDICTOR_KEY = "predictor"


def parse_policies(text: str, config: Config | None = None) -> list[SimPolicy]:
    """``"fifo,sjf,qssf,qssf:max_wait_h=48"`` -> the policies, in order, without repeats.

    A list value is written in brackets, whose commas do not separate policies:
    ``qssf:planner.protected_qos=[urgent,admin]``.

    Args:
        config: the configuration the variants' settings are applied to and checked
            against (defaults when ``None``).

    Raises:
        ConfigError: an unknown name, none at all, or a variant's setting that is
            malformed, unknown or invalid (the message names the variant and the key).
    """
    config = config or Config()
    items = [n.strip() for n in _split_policies(text) if n.strip()]
    if not items:
        raise ConfigError("--policy needs at least one policy")
    policies = [_parse_one(item, config) for item in items]
    return list({p.name: p for p in policies}.values())  # the same policy twice runs once


def _split_policies(text: str) -> list[str]:
    """``--policy``'s items: split at the commas outside ``[...]`` (a list value).

    Raises:
        ConfigError: a ``[`` without its ``]`` or the other way round.
    """
    items, depth, start = [], 0, 0
    for at, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if depth < 0:
            raise ConfigError(f"--policy {text}: a ']' has no '['")
        if depth > 1:
            raise ConfigError(f"--policy {text}: brackets do not nest (a list value is [a,b])")
        if char == "," and depth == 0:
            items.append(text[start:at])
            start = at + 1
    if depth:
        raise ConfigError(f"--policy {text}: a '[' has no ']'")
    return items + [text[start:]]


def _list_value(value: str) -> str:
    """A setting's value for the config: ``[a,b]`` -> ``a,b`` (how a list is written there)."""
    return value[1:-1] if value.startswith("[") and value.endswith("]") else value


def _parse_one(item: str, config: Config) -> SimPolicy:
    """One ``NAME[:KEY=VALUE...]`` item of ``--policy``."""
    name, *pairs = [part.strip() for part in item.split(SETTING_SEP)]
    base = SIM_POLICIES.get(name)
    if base is None:
        raise ConfigError(f"unknown policy {name!r} (known: {', '.join(SIM_POLICIES)})")
    if not pairs:
        return base
    if base.engine_policy is None:
        raise ConfigError(f"--policy {item}: {name} runs no slurmsched daemon, so it has no settings to change")
    settings: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = (part.strip() for part in pair.partition("="))
        if not (sep and key and value):
            raise ConfigError(f"--policy {item}: {pair!r} is not KEY=VALUE")
        if key in settings:
            raise ConfigError(f"--policy {item}: {key} is given twice")
        settings[key] = value
    predictor = settings.get(PREDICTOR_KEY, base.predictor)
    if predictor is not None and predictor != base.predictor:
        from slurmsched.predict.registry import check_predictor

        if base.predictor == OraclePredictor.name:
            raise ConfigError(f"--policy {item}: {name} predicts with the true run times; "
                              f"give qssf-noaging:{PREDICTOR_KEY}=NAME for the same policy with a predictor")
        if predictor != OraclePredictor.name:
            check_predictor(predictor, f"--policy {item}: {PREDICTOR_KEY}")
    written = [f"{k}={v}" for k, v in settings.items()]
    policy = dataclasses.replace(base, name=SETTING_SEP.join([name, *written]),
                                 description=f"{base.description}; with {', '.join(written)}",
                                 predictor=predictor, settings=tuple(settings.items()))
    try:
        configured(policy, config)
    except ConfigError as exc:
        raise ConfigError(f"--policy {policy.name}: {exc}") from None
    return policy


def configured(policy: SimPolicy, config: Config) -> Config:
    """The daemon's configuration under ``policy``: ``config`` with the variant's settings.

    A bare key is an argument of the policy (``max_wait_h`` -> ``[policy.qssf]``), a
    ``planner.KEY`` a planner setting; nothing else differs between compared policies
    (the simulated cluster and slurmctld are the comparison's). ``predictor`` is the
    policy's own field (:attr:`SimPolicy.predictor`), set when the variant is parsed.

    Raises:
        ConfigError: a key of another section, an unknown key or an invalid value
            (named as in the configuration file, e.g. ``policy.qssf.max_wait_h``).
    """
    if not policy.settings or policy.engine_policy is None:
        return config
    args = config.policy.args_for(policy.engine_policy)
    planner: dict[str, str] = {}
    for key, value in policy.settings:
        if key == PREDICTOR_KEY:
            continue
        section, dot, name = key.rpartition(".")
        if not dot:
            args[key] = _list_value(value)
        elif section == "planner":
            planner[name] = _list_value(value)
        else:
            raise ConfigError(f"{key} cannot differ between compared policies "
                              "(give a policy argument such as max_wait_h, or planner.KEY)")
    make_policy(policy.engine_policy, args)  # checks the arguments, naming policy.<table>.<key>
    config = config.with_overrides("policy", **{POLICIES[policy.engine_policy].table: args})
    return config.with_overrides("planner", **planner)


def scheduler_config(policy: SimPolicy, config: Config) -> SchedulerConfig:
    """The simulated slurmctld's priority settings under ``policy``."""
    sim = config.sim
    return SchedulerConfig(weight_age=sim.weight_age, weight_fairshare=sim.weight_fairshare,
                           weight_job_size=sim.multifactor_weight_job_size if policy.job_size_weight
                           else sim.weight_job_size,
                           weight_partition=sim.weight_partition, priority_max_age_s=sim.priority_max_age_s)


def with_slurmctld_weights(config: Config, live: SchedulerConfig) -> Config:
    """``config`` whose ``[sim]`` weights are a live slurmctld's (the other way round from
    :func:`scheduler_config`); a ``PriorityMaxAge`` of 0 keeps ``[sim]``'s."""
    return config.with_overrides("sim", weight_age=live.weight_age, weight_fairshare=live.weight_fairshare,
                                 weight_job_size=live.weight_job_size, weight_partition=live.weight_partition,
                                 priority_max_age_s=live.priority_max_age_s or config.sim.priority_max_age_s)


def engine_factory(policy: SimPolicy, config: Config, durations: Mapping[int, float]) -> EngineFactory | None:
    """What builds the daemon beside the simulated Slurm, or ``None`` for Slurm alone.

    Args:
        durations: every job's true run time (used only by the ``oracle`` predictor).
    """
    if policy.engine_policy is None:
        return None
    config = configured(policy, config)
    engine_policy, predictor_name = policy.engine_policy, policy.predictor or config.daemon.predictor

    def build(slurm: SimulatedSlurm, clock: SimClock) -> CycleRunner:
        from slurmsched.daemon import Daemon
        from slurmsched.planner import Planner
        from slurmsched.store.memory import MemoryJobRepository

        # The daemon keeps its job_submit.lua cache in the simulated plugin, or none when
        # the plugin is not modelled; it saves no model (a simulation never restarts;
        # pickling the model at every refit cost a third of a run).
        plugin = slurm.submit_plugin
        entries = config.daemon.submit_cache_entries if plugin is not None else 0
        daemon = dataclasses.replace(config.daemon, dry_run=False, save_model=False, submit_cache_entries=entries)
        daemon_config = dataclasses.replace(config, daemon=daemon)

        predictor: Predictor
        if predictor_name == OraclePredictor.name:
            predictor = OraclePredictor(durations)
            if plugin is not None:
                plugin.use_truth(durations)
        else:
            from slurmsched.predict.registry import make_predictor

            predictor = make_predictor(predictor_name)
        repository = MemoryJobRepository(cluster=slurm.spec.name, track_live=False)
        return Daemon(daemon_config, slurm, repository, predictor,
                      make_policy(engine_policy, config.policy.args_for(engine_policy)),
                      Planner(daemon_config), clock=clock, submit_cache=plugin)

    return build
