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
The ``job_submit.lua`` plugin is not modelled: a new job gets its SiteFactor at the next
cycle, at most ``daemon.interval_s`` after it arrives.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

from slurmsched.config import Config
from slurmsched.errors import ConfigError
from slurmsched.model import SchedulerConfig
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
    """

    name: str
    description: str
    engine_policy: str | None = None
    predictor: str | None = None
    job_size_weight: bool = False


SIM_POLICIES: dict[str, SimPolicy] = {p.name: p for p in (
    SimPolicy("fifo", "Slurm alone, age priority: first come, first served with EASY backfill"),
    SimPolicy("sjf", "oracle: qssf-noaging fed the true run times (the limit of duration ordering)",
              "qssf-noaging", "oracle"),
    SimPolicy("qssf", "slurmsched: qssf with its predictor and aging guard (the daemon's defaults)",
              "qssf", "slurmsched"),
    SimPolicy("qssf-noaging", "slurmsched's qssf without the aging guard", "qssf-noaging", "slurmsched"),
    SimPolicy("qssf-helios", "qssf with the Helios estimator instead of slurmsched's predictor",
              "qssf", "helios"),
    SimPolicy("multifactor", "Slurm alone, multifactor with age and job size (reference)", job_size_weight=True),
)}


def parse_policies(text: str) -> list[SimPolicy]:
    """``"fifo,sjf,qssf"`` -> the policies, in order, without repeats.

    Raises:
        ConfigError: an unknown name, or none at all.
    """
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ConfigError("--policy needs at least one policy")
    unknown = [n for n in names if n not in SIM_POLICIES]
    if unknown:
        raise ConfigError(f"unknown policy {unknown[0]!r} (known: {', '.join(SIM_POLICIES)})")
    return [SIM_POLICIES[n] for n in dict.fromkeys(names)]


def scheduler_config(policy: SimPolicy, config: Config) -> SchedulerConfig:
    """The simulated slurmctld's priority settings under ``policy``."""
    sim = config.sim
    return SchedulerConfig(weight_age=sim.weight_age, weight_fairshare=sim.weight_fairshare,
                           weight_job_size=sim.multifactor_weight_job_size if policy.job_size_weight
                           else sim.weight_job_size,
                           priority_max_age_s=sim.priority_max_age_s)


def engine_factory(policy: SimPolicy, config: Config, durations: Mapping[int, float]) -> EngineFactory | None:
    """What builds the daemon beside the simulated Slurm, or ``None`` for Slurm alone.

    Args:
        durations: every job's true run time (used only by the ``oracle`` predictor).
    """
    if policy.engine_policy is None:
        return None
    engine_policy, predictor_name = policy.engine_policy, policy.predictor or config.daemon.predictor
    # The simulation writes no job_submit.lua cache (the plugin is not modelled) and saves
    # no model (it never restarts; pickling the model at every refit cost a third of a run).
    daemon_config = dataclasses.replace(
        config, daemon=dataclasses.replace(config.daemon, submit_cache_entries=0, dry_run=False, save_model=False))

    def build(slurm: SimulatedSlurm, clock: SimClock) -> CycleRunner:
        from slurmsched.daemon import Daemon
        from slurmsched.planner import Planner
        from slurmsched.policy import make_policy
        from slurmsched.store.memory import MemoryJobRepository

        if predictor_name == "oracle":
            predictor = OraclePredictor(durations)
        else:
            from slurmsched.predict.registry import make_predictor

            predictor = make_predictor(predictor_name)
        repository = MemoryJobRepository(cluster=slurm.spec.name, track_live=False)
        return Daemon(daemon_config, slurm, repository, predictor,
                      make_policy(engine_policy, config.policy.args_for(engine_policy)),
                      Planner(daemon_config), clock=clock)

    return build
