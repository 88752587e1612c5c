"""The daemon: :meth:`Engine.run_cycle` on a timer, plus what a long-running process needs.

Around each cycle the loop

* refits the predictor on the whole history every ``daemon.refit_interval_s`` and
  saves the fitted model (pickled: the database is the daemon's own, trusted state)
  through :meth:`JobRepository.save_model`; at start it
  reloads the newest saved model (and folds in what finished since) instead of
  refitting, when that model is younger than the refit interval;
* keeps the ``job_submit.lua`` cache (:mod:`slurmsched.submit_cache`) current, and
  removes it while paused, in dry-run or under a policy that does not reorder, so
  Slurm's plugin never acts for a daemon that does not;
* survives Slurm or database hiccups: a cycle that fails with a
  :class:`~slurmsched.errors.SlurmschedError` is logged and retried next interval.

Stopping: the first SIGTERM/SIGINT lets the running cycle finish and then exits; a
second one stops at once (a cycle in flight rolls its transaction back).
The pause flag lives in the database (``slurmsched pause``): the engine reads it in
every cycle and then applies nothing.
"""

from __future__ import annotations

import logging
import pickle
import signal
import threading
import time
from dataclasses import dataclass, replace
from types import FrameType
from typing import Callable

from slurmsched.config import Config
from slurmsched.engine import CycleReport, Engine, SystemClock
from slurmsched.engine.cycle import CURSOR
from slurmsched.errors import SlurmschedError
from slurmsched.gateway.protocol import SlurmGateway
from slurmsched.model import Decision, JobRecord, JobState, SetSiteFactor
from slurmsched.planner import Planner
from slurmsched.policy import Policy
from slurmsched.policy.qssf import QssfPolicy
from slurmsched.predict.protocol import Predictor
from slurmsched.store.protocol import JobRepository
from slurmsched.submit_cache import SubmitCache, SubmitEstimate, levels_for, write_submit_cache

log = logging.getLogger(__name__)


class StopNow(BaseException):
    """Raised by the second SIGTERM/SIGINT to leave the loop at once."""


@dataclass(frozen=True, slots=True)
class LoopResult:
    """How a :meth:`Daemon.run` ended: cycles run, cycles that failed, and whether it was cut short."""

    cycles: int
    failed: int
    interrupted: bool


class Daemon:
    """The scheduling loop over one engine.

    Args:
        config: the whole configuration (``[daemon]`` drives the loop).
        gateway, repository, policy, planner: as for :class:`Engine`.
        predictor: a fresh (unfitted) predictor; replaced by the saved model when one
            is loaded.
        clock: wall clock; its ``stop`` event ends the loop gracefully.
    """

    def __init__(self, config: Config, gateway: SlurmGateway, repository: JobRepository,
                 predictor: Predictor, policy: Policy, planner: Planner,
                 clock: SystemClock | None = None) -> None:
        self.config = config
        self.settings = config.daemon
        self.gateway = gateway
        self.repository = repository
        self.policy = policy
        self.planner = planner
        self.clock = clock or SystemClock()
        self._last_fit: float | None = None
        self._fitted_empty = False
        self._cache_written: float | None = None
        self._recent: dict[tuple[str, str], JobRecord] = {}
        self._recent_until: float | None = None
        self.engine = Engine(gateway, repository, self._load_model(predictor), policy, planner,
                             dry_run=self.settings.dry_run)

    @property
    def dry_run(self) -> bool:
        """True when nothing is sent to Slurm."""
        return self.settings.dry_run

    # -- the loop ---------------------------------------------------------------------

    def run(self, *, once: bool = False, handle_signals: bool = True) -> LoopResult:
        """Run cycles every ``interval_s`` until stopped (or one cycle with ``once``).

        Args:
            once: run a single cycle and return; its error, if any, is raised.
            handle_signals: install SIGTERM/SIGINT handlers (main thread only).

        Raises:
            SlurmschedError: only with ``once``, when the cycle failed.
        """
        restore = self._install_signals() if handle_signals else None
        cycles = failed = 0
        try:
            while not self.clock.stop.is_set():
                began = self.clock.now()
                try:
                    self.cycle(began)
                except SlurmschedError as exc:
                    failed += 1
                    if once:
                        raise
                    log.error("cycle failed, retrying in %.0f s: %s", self.settings.interval_s, exc)
                cycles += 1
                if once:
                    break
                self.clock.sleep(self.settings.interval_s - (self.clock.now() - began))
        except StopNow:
            log.warning("second signal: stopped at once")
            return LoopResult(cycles, failed, True)
        finally:
            if restore is not None:
                restore()
        log.info("stopped after %d cycles", cycles)
        return LoopResult(cycles, failed, False)

    def cycle(self, now: float) -> CycleReport:
        """One cycle at ``now``: refit if due, :meth:`Engine.run_cycle`, then the submit cache.

        A refit is due every ``refit_interval_s``, and once more right after the first
        cycle that brings history into a database that had none when the model was fit
        (a fresh install reads its first day of accounting in that cycle).
        """
        if self._last_fit is None or now - self._last_fit >= self.settings.refit_interval_s:
            self.refit(now)
        report = self.engine.run_cycle(now)
        if report.finished and self._fitted_empty:
            self.refit(now)
        plan = report.plan
        log.info("cycle %d: %d pending, %d running, %d finished; %d actions (%d failed)%s, %d held, "
                 "%d deferred; %.3f s", report.cycle_id, report.pending, report.running, report.finished,
                 len(plan.actions), report.failed,
                 " not sent: dry-run" if report.dry_run else " not sent: paused" if report.paused else "",
                 plan.held, plan.deferred, report.timings.get("total", 0.0))
        self.refresh_submit_cache(now, active=not (report.dry_run or report.paused))
        return report

    def stop(self) -> None:
        """Ask the loop to stop after the current cycle."""
        self.clock.stop.set()

    # -- signals ----------------------------------------------------------------------

    def _install_signals(self) -> Callable[[], None] | None:
        if threading.current_thread() is not threading.main_thread():
            return None
        signals = (signal.SIGTERM, signal.SIGINT)
        previous = {s: signal.getsignal(s) for s in signals}

        def handler(signum: int, _frame: FrameType | None) -> None:
            if self.clock.stop.is_set():
                raise StopNow()
            log.warning("%s: stopping after the current cycle (send it again to stop now)",
                        signal.Signals(signum).name)
            self.stop()

        for s in signals:
            signal.signal(s, handler)

        def restore() -> None:
            for s, h in previous.items():
                signal.signal(s, h)
        return restore

    # -- the predictor model ------------------------------------------------------------

    def _load_model(self, predictor: Predictor) -> Predictor:
        """The newest saved model of ``predictor.name`` if young enough, else ``predictor``."""
        saved = self.repository.load_model(predictor.name)
        if saved is None:
            return predictor
        version, blob, meta = saved
        fitted_at = float(meta.get("fitted_at", 0.0))
        if self.clock.now() - fitted_at >= self.settings.refit_interval_s:
            log.info("saved model %s %s is older than the refit interval; refitting", predictor.name, version)
            return predictor
        try:
            loaded = pickle.loads(blob)
        except Exception as exc:  # noqa: BLE001 - any unpickling failure means: refit instead
            log.warning("saved model %s %s cannot be loaded (%s); refitting", predictor.name, version, exc)
            return predictor
        if type(loaded) is not type(predictor):
            log.warning("saved model %s is a %s, not a %s; refitting", predictor.name,
                        type(loaded).__name__, type(predictor).__name__)
            return predictor
        through = meta.get("fitted_through")
        newer = self.repository.history(since=float(through)) if through is not None else []
        if newer:
            loaded.update(newer)
        self._last_fit = fitted_at
        log.info("loaded saved model %s %s (+%d jobs finished since)", predictor.name, version, len(newer))
        return loaded

    def refit(self, now: float) -> None:
        """Refit the predictor on the whole history and save it through the repository."""
        through = self.repository.get_cursor(CURSOR)
        self.engine.refit(now)
        self._last_fit = now
        self._fitted_empty = through is None
        predictor = self.engine.predictor
        try:
            blob = pickle.dumps(predictor)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            log.warning("predictor %s cannot be saved (%s); it will be refit after a restart", predictor.name, exc)
        else:
            self.repository.save_model(predictor.name, predictor.version, blob,
                                       {"fitted_at": now, "fitted_through": through})
        self._cache_written = None  # predictions changed: rewrite the submit cache now

    # -- the job_submit.lua cache ---------------------------------------------------------

    def refresh_submit_cache(self, now: float, *, active: bool) -> None:
        """Rewrite the submit cache when due, or remove it when slurmsched must not act.

        The cache is rewritten after a refit and whenever a third of its
        ``submit_cache_max_age_s`` has passed, so ``job_submit.lua`` never sees it stale
        while the daemon runs.
        """
        path = self.settings.submit_cache_path
        if not active or not self.policy.reorders or self.settings.submit_cache_entries == 0:
            if path.exists():
                path.unlink(missing_ok=True)
                log.info("removed submit cache %s: slurmsched is not changing priorities", path)
            self._cache_written = None
            return
        if self._cache_written is not None and now - self._cache_written < self.settings.submit_cache_max_age_s / 3:
            return
        scale = self.planner.scale(self.gateway.scheduler_config())
        weight = self.policy.args.cpu_gpu_weight if isinstance(self.policy, QssfPolicy) else 0.0
        estimates = self.submit_estimates(now)
        write_submit_cache(path, SubmitCache(int(now), int(self.settings.submit_cache_max_age_s), weight,
                                             levels_for(scale), tuple(estimates)))
        self._cache_written = now
        log.info("wrote submit cache %s: %d (user, job name) estimates", path, len(estimates))

    def submit_estimates(self, now: float) -> list[SubmitEstimate]:
        """Predicted run time of the next job of each recently active (user, job name).

        Each pair is represented by its most recent finished job, re-submitted ``now``;
        the history is read incrementally (only what ended since the last call).
        """
        horizon = now - self.settings.submit_cache_lookback_days * 86400.0
        since = horizon if self._recent_until is None else max(horizon, self._recent_until)
        for job in self.repository.history(since=since):
            self._recent[(job.user, job.name)] = job
            self._recent_until = max(self._recent_until or 0.0, job.end_time or 0.0)
        self._recent = {k: j for k, j in self._recent.items() if (j.end_time or 0.0) >= horizon}
        newest = sorted(self._recent.values(), key=lambda j: j.end_time or 0.0, reverse=True)
        newest = newest[:self.settings.submit_cache_entries]
        probes = [replace(j, state=JobState.PENDING, submit_time=now, eligible_time=None, start_time=None,
                          end_time=None, exit_code=None, reason="", site_factor=None, priority=None)
                  for j in newest]
        predictions = self.engine.predictor.predict(probes) if probes else []
        return [SubmitEstimate(j.user, j.name, max(1, round(p.estimate_s))) for j, p in zip(probes, predictions)]


def build_daemon(config: Config, *, clock: SystemClock | None = None) -> Daemon:
    """Wire a daemon from the configuration: gateway, repository, predictor, policy, planner.

    The database is created on first use; an existing one must have the current schema.

    Raises:
        ConfigError: an unknown policy, predictor or backend.
        SchemaOutOfDate: the database needs ``slurmsched db upgrade``.
        StoreError: the database cannot be opened.
    """
    from slurmsched.gateway import make_gateway
    from slurmsched.policy import make_policy
    from slurmsched.predict.registry import make_predictor
    from slurmsched.store.repository import open_repository

    policy = make_policy(config.policy.name, config.policy.args_for(config.policy.name))
    predictor = make_predictor(config.daemon.predictor)
    repository = open_repository(config, create=True)
    return Daemon(config, make_gateway(config), repository, predictor, policy, Planner(config), clock)


@dataclass(frozen=True, slots=True)
class RevertReport:
    """What :func:`revert_all` did.

    Attributes:
        reverted: changes restored (SiteFactor values count once per job).
        jobs: pending jobs touched.
        kinds: restored changes by action kind.
        forgotten: records dropped because their job is no longer pending.
        failures: one line per action Slurm refused.
    """

    reverted: int
    jobs: int
    kinds: dict[str, int]
    forgotten: int
    failures: tuple[str, ...]


def revert_all(gateway: SlurmGateway, repository: JobRepository, planner: Planner,
               *, rounds: int = 3) -> RevertReport:
    """Restore every pending job slurmsched changed; forget records of jobs that left the queue.

    Covers what the repository recorded and SiteFactor values that ``job_submit.lua``
    set at submit time but no cycle has adopted yet (a pending job whose SiteFactor is
    one of the planner's level values and that slurmsched has no record of). The caller
    pauses the daemon first; a cycle that was already running may still have recorded
    changes, so the pass repeats (up to ``rounds`` times) until nothing is left.
    Each restored change is recorded as a ``revert`` decision for ``explain``.

    Raises:
        SlurmError: the queue could not be read.
    """
    from slurmsched.planner import describe, revert_action

    reverted, forgotten = 0, 0
    jobs: set[int] = set()
    kinds: dict[str, int] = {}
    failures: dict[tuple[int, str], str] = {}
    for _ in range(rounds):
        snapshot = gateway.snapshot()
        pending = {j.job_id: j for j in snapshot.pending}
        failures = {key: text for key, text in failures.items() if key[0] in pending}
        changes = repository.applied_changes()
        recorded = {c.job_id for c in changes if c.kind == SetSiteFactor.__name__}
        scale = planner.scale(snapshot.config)
        actions = [revert_action(c) for c in sorted(changes, key=lambda c: (c.job_id, c.kind)) if c.job_id in pending]
        actions += [SetSiteFactor(j.job_id, 0, j.site_factor, "revert: SiteFactor set at submit by job_submit.lua")
                    for j in pending.values()
                    if j.job_id not in recorded and j.site_factor and scale.level_of_value(j.site_factor) is not None]
        gone = [c for c in changes if c.job_id not in pending]
        if not actions and not gone:
            break
        outcomes = gateway.apply(actions) if actions else []
        now = time.time()
        with repository.transaction():
            for change in gone:
                repository.forget_applied(change.job_id, change.kind)
            forgotten += len(gone)
            cycle_id = repository.start_cycle(now, dry_run=False)
            decisions = []
            for outcome in outcomes:
                kind, previous, new = describe(outcome.action)
                decisions.append(Decision(outcome.action.job_id, "revert", "ok" if outcome.ok else
                                          f"failed: {outcome.message}", outcome.action.reason, previous, new))
                key = (outcome.action.job_id, kind)
                if outcome.ok:
                    repository.forget_applied(*key)
                    failures.pop(key, None)
                    reverted += 1
                    jobs.add(outcome.action.job_id)
                    kinds[kind] = kinds.get(kind, 0) + 1
                else:
                    failures[key] = f"job {key[0]} {kind} {previous} -> {new}: {outcome.message}"
            repository.record_decisions(cycle_id, decisions)
            repository.finish_cycle(cycle_id, pending=len(pending), running=len(snapshot.running),
                                    actions=len(outcomes), failed=sum(not o.ok for o in outcomes),
                                    timings={"total": time.time() - now})
    return RevertReport(reverted, len(jobs), kinds, forgotten, tuple(failures.values()))
