"""The waiting-time bound a configuration guarantees against reordering by slurmsched.

Slurm's multifactor priority is ``sum(weight_i * factor_i) + SiteFactor - Nice`` with
every factor in [0, 1]. slurmsched's ``qssf`` moves a job to the *guard level* (the
highest SiteFactor, ``step`` above every other level) once it has waited its patience:
the longest of ``max_wait_h``, ``backlog_factor`` times its backlog wait and
``slowdown_factor`` times its expected run time, at most its time limit (jobs without one
are not stretched so; counted in ``aging_step_h`` clock ticks). Let X be such a job and Y a job
submitted after X that has not reached the guard: Y can only start first if its other
factors beat X's by more than ``step``. Y's age factor is never above X's, so the
most Y can gain is the sum of the non-age weights (fair-share, job size, partition,
QOS, TRES). Hence, when ``step`` exceeds that sum (always in ``dominate`` mode), no
job submitted later overtakes a job that has waited its patience + ``aging_step_h``
(+ one daemon interval until the next cycle applies it) because of slurmsched; among
guard-level jobs Slurm's own factors decide, as without slurmsched.

Note that a SiteFactor spread below ``PriorityWeightAge`` alone gives no such bound:
once two jobs have both waited ``PriorityMaxAge``, their age factors are equal (1) and
SiteFactor decides again, so a big job can be overtaken for ever.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmsched.config import Config
from slurmsched.model import SchedulerConfig
from slurmsched.planner.scale import SiteFactorScale, other_weights
from slurmsched.policy import make_policy
from slurmsched.policy.qssf import QssfPolicy


@dataclass(frozen=True, slots=True)
class WaitBound:
    """The guarantee: ``seconds`` of extra wait at most (``None``: no bound) and why."""

    seconds: float | None
    explanation: str


def guaranteed_wait_bound(config: Config, scheduler: SchedulerConfig) -> WaitBound:
    """How long reordering by slurmsched can delay a job under ``config`` on ``scheduler``.

    Args:
        config: slurmsched's configuration (policy, planner mode, daemon interval).
        scheduler: slurmctld's priority settings (``gateway.scheduler_config()``).

    Returns:
        ``seconds`` = 0 when nothing is reordered, the guard's bound when it holds (for
        a job whose backlog wait and run time do not stretch its guard; the explanation
        says how they do), ``None`` when this configuration bounds nothing;
        ``explanation`` says why.
    """
    policy = make_policy(config.policy.name, config.policy.args_for(config.policy.name))
    if not policy.reorders:
        return WaitBound(0.0, f"policy {policy.name} does not reorder the queue")
    if scheduler.priority_type != "priority/multifactor":
        return WaitBound(0.0, f"PriorityType={scheduler.priority_type} ignores SiteFactor: nothing is reordered")
    if not isinstance(policy, QssfPolicy) or not policy.aging:
        return WaitBound(None, f"policy {policy.name} has no aging guard: a large job can be overtaken "
                               "by smaller ones for as long as they keep arriving")
    step = SiteFactorScale.build(config.planner, scheduler).step
    others = other_weights(scheduler) - scheduler.weight_age
    if step <= others:
        return WaitBound(None, f"{config.planner.mode} mode: a level step of {step} does not exceed the "
                               f"non-age PriorityWeight* sum {others}, so fair-share/QOS/size can keep a job "
                               "that reached the aging guard behind later ones")
    args = policy.args
    bound = (args.max_wait_h + args.aging_step_h) * 3600.0 + config.daemon.interval_s
    stretches = [f"{args.backlog_factor:g} x its backlog wait"] if args.backlog_factor else []
    if args.slowdown_factor:
        stretches.append(f"{args.slowdown_factor:g} x its expected run time (at most its time limit)")
    stretch = f" or {' or '.join(stretches)} if longer" if stretches else ""
    return WaitBound(bound, f"after max_wait_h={args.max_wait_h:g} h{stretch} (+ aging_step_h="
                            f"{policy.args.aging_step_h:g} h + one {config.daemon.interval_s:g} s cycle) a job "
                            f"holds the guard level, {step} above every other level, more than the non-age "
                            f"PriorityWeight* sum {others}: no later job overtakes it because of slurmsched")
