"""The daemon: :meth:`Engine.run_cycle` on a timer, plus what a long-running process needs.

Around each cycle the loop

* refits a learning predictor on its history (``daemon.fit_history_jobs``) when
  :class:`~slurmsched.predict.schedule.RefitSchedule` says so (enough new jobs, or
  ``daemon.refit_interval_s`` passed) and saves the fitted model through
  :meth:`JobRepository.save_model`; at start it reloads the newest saved model (and
  folds in what finished since) instead of refitting;
* keeps the ``job_submit.lua`` cache (:mod:`slurmsched.submit_cache`) current (and
  rewrites it at once when it has gone missing), and removes it while paused or under a
  policy that does not reorder, so Slurm's plugin never acts for a daemon that does
  not. A dry-run daemon neither writes nor removes it: the file belongs to the live
  daemon, and a preview must not change what ``job_submit.lua`` does;
* survives Slurm or database hiccups: a cycle that fails with a
  :class:`~slurmsched.errors.SlurmschedError` is logged and retried next interval;
* writes its Prometheus metrics (:mod:`slurmsched.metrics`) after each cycle, failed
  ones included, when ``daemon.metrics_file`` names a file.

Stopping: the first SIGTERM/SIGINT lets the running cycle finish and then exits; a
second one stops at once (a cycle in flight rolls its transaction back).
The pause flag lives in the database (``slurmsched pause``): the engine reads it in
every cycle and then applies nothing.
"""

from __future__ import annotations

import itertools
import logging
import math
import signal
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Callable, Collection, Sequence, cast

from slurmsched import __version__
from slurmsched.config import Config
from slurmsched.engine import Clock, CycleReport, Engine, SystemClock
from slurmsched.engine.cycle import CURSOR, fit_history
from slurmsched.errors import SlurmschedError
from slurmsched.gateway.protocol import SlurmGateway
from slurmsched.metrics import LoopMetrics, write_metrics
from slurmsched.model import Action, ClusterSnapshot, Decision, JobRecord, JobState, SetFeatures, SetSiteFactor
from slurmsched.planner import Planner
from slurmsched.policy import Policy
from slurmsched.policy.qssf import QssfPolicy
from slurmsched.predict.protocol import Predictor
from slurmsched.predict.schedule import RefitSchedule
from slurmsched.store.protocol import AppliedChange, CycleKind, JobRepository
from slurmsched.submit_cache import CacheFile, CacheTarget, SubmitCache, SubmitEstimate, levels_for, listed
from slurmsched.text import plural

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
        clock: wall clock; its ``stop`` event ends the loop gracefully. :meth:`run` and
            :meth:`stop` need a :class:`SystemClock`; the simulator, which only calls
            :meth:`cycle`, gives its own clock.
        submit_cache: where the ``job_submit.lua`` cache goes: by default the file
            ``daemon.submit_cache``; the simulator gives its model of the plugin.
    """

    def __init__(self, config: Config, gateway: SlurmGateway, repository: JobRepository,
                 predictor: Predictor, policy: Policy, planner: Planner,
                 clock: Clock | None = None, submit_cache: CacheTarget | None = None) -> None:
        self.config = config
        self.settings = config.daemon
        self.gateway = gateway
        self.repository = repository
        self.policy = policy
        self.planner = planner
        self.clock: Clock = clock or SystemClock()
        self.schedule = RefitSchedule(interval_s=self.settings.refit_interval_s)
        self._last_fit: float | None = None
        self._fitted_jobs: int | None = None
        self._history_jobs = 0
        self._unsaved: tuple[str, str, bytes, dict[str, object]] | None = None  # a model whose save failed
        self.submit_cache = submit_cache or CacheFile(self.settings.submit_cache_path)
        self._cache_written: float | None = None
        # (user, job name) -> its latest finished job, in end-time order
        self._recent: dict[tuple[str, str], JobRecord] = {}
        self._recent_until: float | None = None
        # each recent pair's last estimate: its user's epoch then (one more per finished job),
        # when it was made, the estimate
        self._estimates: dict[tuple[str, str], tuple[int, float, SubmitEstimate]] = {}
        self._epochs: dict[str, int] = {}
        self._estimates_version: str | None = None
        self._stop_now = False  # a second signal came while updates were being sent
        self._metrics_failing = False  # the last write of daemon.metrics_file failed
        self.engine = Engine(gateway, repository, self._start_predictor(predictor), policy, planner,
                             dry_run=self.settings.dry_run, fit_limit=self.settings.fit_limit)

    # -- the loop ---------------------------------------------------------------------

    def run(self, *, once: bool = False, handle_signals: bool = True) -> LoopResult:
        """Run cycles every ``interval_s`` until stopped (or one cycle with ``once``).

        Args:
            once: run a single cycle and return; its error, if any, is raised.
            handle_signals: install SIGTERM/SIGINT handlers (main thread only).

        Raises:
            SlurmschedError: only with ``once``, when the cycle failed; without it such a
                cycle is logged and the next one runs after ``interval_s``.
            Exception: any other exception (a bug) stops the loop, with the traceback
                logged unless ``once``: the in-memory state may be half-updated, so a
                restart is safer than another cycle.
        """
        restore = self._install_signals() if handle_signals else None
        cycles = failed = 0
        metrics = LoopMetrics(started_at=self.clock.now(), info={
            "version": __version__, "policy": self.policy.name, "predictor": self.engine.predictor.name})
        try:
            while not cast(SystemClock, self.clock).stop.is_set():  # the loop runs on the wall clock
                began = self.clock.now()
                try:
                    metrics.succeeded(self.cycle(began))
                except SlurmschedError as exc:
                    failed += 1
                    metrics.failed(began)
                    if once:
                        raise
                    log.error("cycle failed, retrying in %.0f s: %s", self.settings.interval_s, exc)
                except Exception:
                    if not once:  # the loop runs under systemd: the traceback goes to the journal
                        log.exception("cycle failed on an internal error (a bug): stopping, so that the "
                                      "service manager restarts slurmsched with a fresh state")
                    raise
                finally:
                    self._write_metrics(metrics)
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
        log.info("stopped after %s", plural(cycles, "cycle"))
        return LoopResult(cycles, failed, False)

    def cycle(self, now: float) -> CycleReport:
        """One cycle at ``now``: :meth:`Engine.run_cycle`, the save of a model a failed save
        left, a refit if due, then the submit cache."""
        report = self.engine.run_cycle(now)
        if self._stop_now:
            raise StopNow()
        if self._unsaved is not None:
            self._save_model()
        self._history_jobs += report.finished
        if getattr(self.engine.predictor, "learns", True) and self.schedule.due(
                self._history_jobs, self._fitted_jobs, now, self._last_fit):
            self.refit(now)
        plan = report.plan
        log.info("cycle %d: %d pending, %d running, %d finished; %s (%d failed)%s, %d kept by hysteresis, "
                 "%d deferred; %.3f s", report.cycle_id, report.pending, report.running, report.finished,
                 plural(len(plan.actions), "action"), report.failed,
                 " not sent: dry-run" if report.dry_run else " not sent: paused" if report.paused else "",
                 plan.held, plan.deferred, report.timings.get("total", 0.0))
        if not report.dry_run:  # a preview leaves the live daemon's cache alone
            self.refresh_submit_cache(now, active=not report.paused)
        return report

    def _write_metrics(self, metrics: LoopMetrics) -> None:
        """Write ``daemon.metrics_file``, if set; a failure is logged (once until the next
        write succeeds), never fails the cycle."""
        path = self.settings.metrics_file
        if not path:
            return
        try:
            write_metrics(Path(path), metrics)
        except OSError as exc:
            if not self._metrics_failing:
                log.warning("cannot write metrics file %s: %s (retried after each cycle)", path, exc.strerror)
            self._metrics_failing = True
        else:
            if self._metrics_failing:
                log.info("metrics file %s written again", path)
            self._metrics_failing = False

    def next_change(self) -> float:
        """The earliest time at which a cycle could act otherwise than one run right after
        the last, if neither the queue nor accounting changed: :meth:`Engine.next_change`,
        or the refit schedule's time trigger (:meth:`RefitSchedule.next_due`). The
        simulator cycles only then and after events. (The submit cache also ages with time;
        it matters only when a job arrives, and a simulator that models ``job_submit.lua``
        cycles before each arrival.)"""
        refit = math.inf
        if getattr(self.engine.predictor, "learns", True):
            refit = self.schedule.next_due(self._history_jobs, self._fitted_jobs, self._last_fit)
        return min(self.engine.next_change(), refit)

    def stop(self) -> None:
        """Ask the loop to stop after the current cycle."""
        cast(SystemClock, self.clock).stop.set()

    # -- signals ----------------------------------------------------------------------

    def _install_signals(self) -> Callable[[], None] | None:
        if threading.current_thread() is not threading.main_thread():
            return None
        signals = (signal.SIGTERM, signal.SIGINT)
        previous = {s: signal.getsignal(s) for s in signals}

        def handler(signum: int, _frame: FrameType | None) -> None:
            if cast(SystemClock, self.clock).stop.is_set():
                if self.engine.sending:  # stopping now would lose the record of Slurm's answers
                    log.warning("%s again: stopping once the updates being sent are recorded",
                                signal.Signals(signum).name)
                    self._stop_now = True
                    return
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

    def _start_predictor(self, predictor: Predictor) -> Predictor:
        """The predictor to start with: the saved model brought up to date, else a fresh fit.

        A saved model is loaded with the predictor class's ``from_bytes`` and gets the
        jobs that finished after its fit through ``update``. Without one, the predictor
        is fitted on its history (:func:`fit_history`) when it only keeps statistics (``learns`` false)
        or when :class:`RefitSchedule` finds enough history; otherwise it starts from
        the statistics alone and is fitted once enough jobs have finished.
        """
        now = self.clock.now()
        loaded = self._load_model(predictor)
        if loaded is not None:
            return loaded
        history = fit_history(self.repository, self.settings.fit_limit)
        self._history_jobs = len(history)
        learns = getattr(predictor, "learns", True)
        if not learns or self.schedule.due(len(history), None, now, None):
            predictor.fit(history)
            if learns:
                self._fitted(predictor, now, self.repository.get_cursor(CURSOR))
        else:
            predictor.update(history)
            log.info("predictor %s: %s, fewer than the %d its first fit needs; using history "
                     "statistics until then", predictor.name, plural(len(history), "finished job"),
                     self.schedule.min_jobs)
        return predictor

    def _load_model(self, predictor: Predictor) -> Predictor | None:
        """The newest saved model of ``predictor.name`` plus what finished since, or ``None``."""
        restore = getattr(type(predictor), "from_bytes", None)
        if restore is None:
            return None
        saved = self.repository.load_model(predictor.name)
        if saved is None:
            return None
        version, blob, meta = saved
        try:
            loaded = restore(blob)
        except SlurmschedError as exc:
            log.warning("saved model %s %s not used: %s", predictor.name, version, exc)
            return None
        through = meta.get("fitted_through")
        newer = self.repository.history(since=float(through)) if isinstance(through, (int, float)) else []
        if newer:
            loaded.update(newer)
        self._fitted_jobs = int(meta.get("jobs", 0))
        self._history_jobs = self._fitted_jobs + len(newer)
        self._last_fit = float(meta.get("fitted_at", self.clock.now()))
        log.info("loaded saved model %s %s (+%s finished since)", predictor.name, version, plural(len(newer), "job"))
        return loaded

    def refit(self, now: float) -> None:
        """Refit the predictor on its history (``daemon.fit_history_jobs``) and save it through the repository."""
        through = self.repository.get_cursor(CURSOR)
        self.engine.refit(now)
        self._cache_written = None  # predictions changed: rewrite the submit cache now
        self._fitted(self.engine.predictor, now, through)

    def _fitted(self, predictor: Predictor, now: float, through: float | None) -> None:
        """Note a fit of ``predictor`` at ``now`` and save the model when it can be saved."""
        self._last_fit = now
        self._fitted_jobs = self._history_jobs
        dump = getattr(predictor, "to_bytes", None)
        if dump is None or not self.settings.save_model:
            return
        self._unsaved = (predictor.name, predictor.version, dump(),
                         {"fitted_at": now, "fitted_through": through, "jobs": self._fitted_jobs})
        self._save_model()

    def _save_model(self) -> None:
        """Save the model as it was right after its fit (``_unsaved``). A save that fails
        (:class:`StoreError`, raised) leaves it to the next cycle, which saves it before
        anything else of the predictor's; the refit schedule does not wait for it."""
        assert self._unsaved is not None
        name, version, blob, meta = self._unsaved
        self.repository.save_model(name, version, blob, meta)
        self._unsaved = None
        log.info("saved model %s %s (fitted on %s jobs)", name, version, meta["jobs"])

    # -- the job_submit.lua cache ---------------------------------------------------------

    def refresh_submit_cache(self, now: float, *, active: bool) -> None:
        """Rewrite the submit cache when due, or remove it when slurmsched must not act.

        The cache is rewritten after a refit, whenever a third of its
        ``submit_cache_max_age_s`` has passed, when the clock was stepped back since (the
        script ignores a cache stamped far ahead), and when the file is gone (one ``stat``
        a cycle), so ``job_submit.lua`` never sees it stale or missing while the daemon
        runs. It is removed when ``active`` is false (paused) or the policy does not
        reorder. With ``submit_cache_entries = 0`` the file is left alone. Not called in
        dry-run (:meth:`cycle`): a dry-run daemon touches no shared state.

        The cache carries ``[planner]``'s protected partitions and QOS, so that the
        script leaves their jobs alone as the daemon does (a job that names no partition
        runs in the default one, which the script finds in slurmctld's ``part_list``).

        Raises:
            StoreError: the cache cannot be written.
            SlurmError: ``scontrol show config`` (for the SiteFactor levels) failed.
        """
        if self.settings.submit_cache_entries == 0:
            return  # disabled: the file is not ours to write or remove
        target = self.submit_cache
        if not active or not self.policy.reorders:
            if target.remove():
                log.info("removed submit cache %s: slurmsched is not changing priorities", target)
            self._cache_written = None
            return
        last = self._cache_written
        if last is not None and 0 <= now - last < self.settings.submit_cache_max_age_s / 3 and target.exists():
            return
        scale = self.planner.scale(self.gateway.scheduler_config())
        weight = self.policy.args.cpu_gpu_weight if isinstance(self.policy, QssfPolicy) else 0.0
        estimates = self.submit_estimates(now)
        planner = self.config.planner
        cache = SubmitCache(int(now), int(self.settings.submit_cache_max_age_s), weight, levels_for(scale),
                            tuple(estimates), tuple(planner.protected_partitions), tuple(planner.protected_qos))
        target.write(cache)
        self._cache_written = now
        written = len(listed(cache))
        log.info("wrote submit cache %s: %s%s", target, plural(written, "(user, job name) estimate"),
                 f" ({len(estimates) - written} left out: a tab or line break in the user or job name)"
                 if written < len(estimates) else "")

    def submit_estimates(self, now: float) -> list[SubmitEstimate]:
        """The run time the policy would count for the next job of each recently active
        (user, job name): ``qssf``'s expected run time (:meth:`QssfPolicy.duration`, as
        the daemon's cycles score jobs), else the predictor's estimate.

        Each pair is represented by its most recent finished job, re-submitted ``now``
        (a hypothetical job: the predictor does not remember it); the history is read
        incrementally (only what ended since the last call). A pair is predicted again
        when its user finished a job since the last call, when the model changed (a
        refit), and otherwise once its estimate is ``refit_interval_s`` old: an estimate
        follows its user's history, which those cover, but also the site's (the expert
        records of users without their own, the site median), which moves slowly; the
        model itself is refreshed on that cadence. (Every ``submit_cache_max_age_s``
        cost a simulated daemon three times the rest of its work on CTC-SP2.) The pairs
        are kept in end-time order, so a call costs the newly finished jobs, the
        expired pairs, the pairs predicted again and one pass over the listed ones: a
        simulated daemon rewrites the cache every 300 simulated seconds.
        """
        horizon = now - self.settings.submit_cache_lookback_days * 86400.0
        since = horizon if self._recent_until is None else max(horizon, self._recent_until)
        seen_until = self._recent_until
        recent, estimates, epochs = self._recent, self._estimates, self._epochs
        for job in self.repository.history(since=since):  # oldest end first
            key = (job.user, job.name)
            recent.pop(key, None)
            recent[key] = job  # to the end: the order stays by end time
            if seen_until is None or (job.end_time or 0.0) > seen_until:
                epochs[job.user] = epochs.get(job.user, 0) + 1  # the user's estimates are out of date
            self._recent_until = max(self._recent_until or 0.0, job.end_time or 0.0)
        while recent:
            key, job = next(iter(recent.items()))
            if (job.end_time or 0.0) >= horizon:
                break
            del recent[key]
            estimates.pop(key, None)
        newest = list(itertools.islice(reversed(recent.items()), self.settings.submit_cache_entries))
        predictor = self.engine.predictor
        if predictor.version != self._estimates_version:
            estimates.clear()
            self._estimates_version = predictor.version
        oldest = now - self.settings.refit_interval_s
        probes = [replace(job, state=JobState.PENDING, submit_time=now, eligible_time=None, start_time=None,
                          end_time=None, exit_code=None, reason="", site_factor=None, priority=None)
                  for key, job in newest if not _current(estimates.get(key), epochs.get(job.user), oldest)]
        policy = self.policy
        for probe, prediction in zip(probes, predictor.predict(probes, remember=False) if probes else []):
            seconds = policy.duration(probe, prediction) if isinstance(policy, QssfPolicy) else prediction.estimate_s
            estimates[probe.user, probe.name] = (epochs.get(probe.user, 0), now,
                                                 SubmitEstimate(probe.user, probe.name, max(1, round(seconds))))
        return [estimates[key][2] for key, _ in newest]


def _current(entry: tuple[int, float, SubmitEstimate] | None, epoch: int | None, oldest: float) -> bool:
    """Whether a cached submit estimate may be listed again: made at the user's current epoch, since ``oldest``."""
    return entry is not None and entry[0] == epoch and entry[1] > oldest


def build_daemon(config: Config, *, clock: SystemClock | None = None) -> Daemon:
    """Wire a daemon from the configuration: gateway, repository, predictor, policy, planner.

    The database must exist with the current schema (`slurmsched db upgrade` makes it).

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
    repository = open_repository(config)
    return Daemon(config, make_gateway(config), repository, predictor, policy, Planner(config), clock)


@dataclass(frozen=True, slots=True)
class RevertReport:
    """What :func:`revert_all` did.

    Attributes:
        reverted: changes restored (SiteFactor values count once per job).
        jobs: jobs touched, pending or running.
        kinds: restored changes by action kind.
        forgotten: records dropped because their job left the queue.
        failures: one line per action Slurm refused.
        left: one line per change left alone because its job holds another value now
            (set by a user or an admin since, or never made), whose record was dropped.
        kept: one line per change that Slurm cannot restore on the job as it is now
            (:data:`PENDING_ONLY` on a running job), whose record is kept.
    """

    reverted: int
    jobs: int
    kinds: dict[str, int]
    forgotten: int
    failures: tuple[str, ...]
    left: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()


#: Changes Slurm 22.05 takes only on a pending job: ``scontrol update JobId=N Features=``
#: on a running one answers "Job is no longer pending execution" (SiteFactor and
#: ``Switches=`` it takes on a running job too).
PENDING_ONLY = frozenset({SetFeatures.__name__})


def kept_text(change: AppliedChange, state: JobState) -> str:
    """Why ``revert`` keeps the record of a change it cannot restore on a job in ``state``."""
    return (f"job {change.job_id} {change.kind} {change.current} (before slurmsched: {change.original or 'none'}):"
            f" the job is {state.value} and Slurm changes {change.kind.removeprefix('Set')} only on a pending job;"
            " the record is kept, so a requeue brings it back to the daemon and the next revert")


@dataclass(frozen=True, slots=True)
class RevertPlan:
    """What a revert would do now (``slurmsched revert --dry-run``).

    Attributes:
        actions: the ``scontrol update`` actions restoring jobs in the queue (pending or
            running), in job order.
        gone: records of changed jobs that left the queue (dropped, nothing sent).
        left: records of jobs that hold neither slurmsched's value nor the original
            one, with the value they hold (dropped, nothing sent): a user or an admin
            changed it since, which a revert must not undo.
        unmade: records of jobs that hold the original value: an update recorded
            although it failed, which Slurm never made (dropped, nothing sent).
        kept: records of running jobs that Slurm cannot restore until the job is
            pending again (:data:`PENDING_ONLY`), with the job's state (kept, nothing sent).
        inherited: the records, as the task's, of values that tasks split off a job
            array hold from their array (:func:`~slurmsched.planner.changes.record_of`),
            among ``actions`` or ``kept``: one that cannot be restored now becomes the
            task's own record, so it outlives its array's.
    """

    actions: tuple[Action, ...]
    gone: tuple[AppliedChange, ...]
    left: tuple[tuple[AppliedChange, str], ...] = ()
    unmade: tuple[AppliedChange, ...] = ()
    kept: tuple[tuple[AppliedChange, JobState], ...] = ()
    inherited: tuple[AppliedChange, ...] = ()


def plan_revert(snapshot: ClusterSnapshot, changes: Sequence[AppliedChange],
                restored: Collection[int] = ()) -> RevertPlan:
    """The actions that restore every job in the queue that slurmsched changed, as of ``snapshot``.

    Covers the ``changes`` the repository recorded whose job still holds slurmsched's
    value where the queue shows it (:func:`~slurmsched.planner.changes.live_text`; a
    value changed since is left alone), on pending and running jobs alike: a requeued
    job comes back pending with the values it had, so a running job's SiteFactor and
    ``Switches`` are restored too (unseen: ``sprio`` does not list a running job), and
    a change Slurm takes only on a pending job (:data:`PENDING_ONLY`) is kept for later.
    A task split off a job array that has no record of its own and holds its array's
    value (or one the queue does not show) gets its array's original back too; the
    array's record stays, though its job left the queue, while such a task needs it.
    Also SiteFactor values that ``job_submit.lua`` set at submit time but no cycle has
    adopted yet (a pending job that slurmsched has no record of and whose
    ``AdminComment`` is the script's stamp of the value it holds; of a job ``sprio``
    does not list, held or deferred since, the stamp alone, as a change recorded for
    such a job is restored unseen, unless it is among ``restored``: an earlier pass of
    the same revert restored it, and the stamp stays).
    Pure: reads nothing, sends nothing.
    """
    from slurmsched.planner import revert_action
    from slurmsched.planner.changes import REVERT_REASON, inherits, live_text, original_text, record_of
    from slurmsched.planner.plan import stamped_value

    queued = {j.job_id: j for j in snapshot.jobs}
    recorded = {c.job_id for c in changes if c.kind == SetSiteFactor.__name__}
    actions: list[Action] = []
    left: list[tuple[AppliedChange, str]] = []
    unmade: list[AppliedChange] = []
    kept: list[tuple[AppliedChange, JobState]] = []
    inherited: list[AppliedChange] = []

    def restore(change: AppliedChange, job: JobRecord, reason: str) -> None:
        if job.state is not JobState.PENDING and change.kind in PENDING_ONLY:
            kept.append((change, job.state))
        else:
            actions.append(revert_action(change, reason))

    for change in sorted(changes, key=lambda c: (c.job_id, c.kind)):
        job = queued.get(change.job_id)
        if job is None:
            continue
        live = live_text(job, change.kind)
        if live is not None and live != change.current:
            if live == original_text(change):
                unmade.append(change)
            else:
                left.append((change, live))
        else:
            restore(change, job, REVERT_REASON)
    applied = {(c.job_id, c.kind): c for c in changes}
    by_job: dict[int, list[AppliedChange]] = {}
    for change in changes:
        by_job.setdefault(change.job_id, []).append(change)
    for task in (j for j in snapshot.jobs if inherits(j) and j.job_id not in restored):
        for change in by_job.get(task.array_job_id or 0, ()):
            record = record_of(applied, task, change.kind)
            live = live_text(task, change.kind)
            if (task.job_id, change.kind) in applied or record is None or live not in (None, change.current):
                continue  # its own record, or a value of its own: the original, or one set since
            inherited.append(record)
            if change.kind == SetSiteFactor.__name__:
                recorded.add(task.job_id)  # not job_submit.lua's, whatever its stamp
            restore(record, task, f"{REVERT_REASON} (inherited from job array {change.job_id})")
    needed = {task.array_job_id for task in (queued[c.job_id] for c in inherited)}
    for j in snapshot.pending:
        if j.job_id in recorded or j.job_id in restored:
            continue
        # a job sprio does not list (held, or its begin time ahead since submit): the stamp tells
        stamped = stamped_value(j)
        if stamped and j.site_factor in (None, stamped):
            actions.append(SetSiteFactor(j.job_id, 0, stamped, "revert: SiteFactor set at submit by job_submit.lua"))
    return RevertPlan(tuple(actions), tuple(c for c in changes if c.job_id not in queued and c.job_id not in needed),
                      tuple(left), tuple(unmade), tuple(kept), tuple(inherited))


def revert_all(gateway: SlurmGateway, repository: JobRepository,
               *, rounds: int = 3) -> RevertReport:
    """Restore every job in the queue that slurmsched changed (:func:`plan_revert`);
    forget records of jobs that left the queue, keep those Slurm cannot restore yet.

    The caller pauses the daemon first; a cycle that was already running may still have
    recorded changes, so the pass repeats (up to ``rounds`` times) until nothing is left.
    Each pass that finds work is recorded as a ``revert`` cycle (for ``status``), each
    restored change as a ``revert`` decision (for ``explain``).

    Raises:
        SlurmError: the queue could not be read (``squeue``); what earlier rounds
            restored stays restored and recorded.
    """
    from slurmsched.planner import describe

    reverted, forgotten = 0, 0
    jobs: set[int] = set()
    kinds: dict[str, int] = {}
    failures: dict[tuple[int, str], str] = {}
    left: list[str] = []
    kept: tuple[str, ...] = ()
    for _ in range(rounds):
        snapshot = gateway.snapshot()
        queued = {j.job_id for j in snapshot.jobs}
        failures = {key: text for key, text in failures.items() if key[0] in queued}
        plan = plan_revert(snapshot, repository.applied_changes(), jobs)
        kept = tuple(kept_text(change, state) for change, state in plan.kept)
        copies = {(c.job_id, c.kind): c for c in plan.inherited}
        if not (plan.actions or plan.gone or plan.left or plan.unmade):
            break
        outcomes = gateway.apply(plan.actions) if plan.actions else []
        now = time.time()
        with repository.transaction():
            for change in plan.gone:
                repository.forget_applied(change.job_id, change.kind)
            forgotten += len(plan.gone)
            for change in plan.unmade:
                repository.forget_applied(change.job_id, change.kind)
            for change, live in plan.left:
                repository.forget_applied(change.job_id, change.kind)
                left.append(f"job {change.job_id} {change.kind} is {live}, not slurmsched's {change.current}:"
                            " changed since, left as it is")
            for change, _ in plan.kept:  # a task's value from its array outlives the array's record
                if (change.job_id, change.kind) in copies:
                    repository.record_applied(change.job_id, change.kind, change.original, change.current)
            cycle_id = repository.start_cycle(now, CycleKind.REVERT)
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
                    inherited = copies.get(key)
                    if inherited is not None:
                        repository.record_applied(key[0], kind, inherited.original, inherited.current)
            repository.record_decisions(cycle_id, decisions)
            repository.finish_cycle(cycle_id, pending=len(snapshot.pending), running=len(snapshot.running),
                                    actions=len(outcomes), failed=sum(not o.ok for o in outcomes),
                                    timings={"total": time.time() - now})
    return RevertReport(reverted, len(jobs), kinds, forgotten, tuple(failures.values()), tuple(left), kept)
