"""The submit cache file: exact format, atomic replacement, clean failures; what the daemon puts in it."""

from __future__ import annotations

import dataclasses
import logging
import os
import time

import pytest

from slurmsched.config import Config, PlannerSection
from slurmsched.daemon import Daemon, StopNow
from slurmsched.errors import StoreError
from slurmsched.model import JobRecord, JobState, SchedulerConfig
from slurmsched.planner import Planner, SiteFactorScale
from slurmsched.policy import make_policy
from slurmsched.predict.gbm import SlurmschedPredictor
from slurmsched.sim.clock import SimClock
from slurmsched.sim.cluster import ClusterSpec
from slurmsched.sim.slurm import SimulatedSlurm
from slurmsched.store.memory import MemoryJobRepository
from slurmsched.sim.submit_plugin import SubmitPlugin
from slurmsched.submit_cache import (MAX_SERVICE_S, CacheFile, SubmitCache, SubmitEstimate, levels_for, protected,
                                     read_submit_cache, render, write_submit_cache)

SCALE = SiteFactorScale.build(PlannerSection(), SchedulerConfig(weight_age=10000, weight_fairshare=10000))


def _cache(**kw) -> SubmitCache:
    base = dict(written_at=1_700_000_000, max_age_s=600, cpu_weight=0.25, levels=levels_for(SCALE),
                estimates=(SubmitEstimate("alice", "train resnet", 3600), SubmitEstimate("bob", "eval", 60)))
    return SubmitCache(**{**base, **kw})


@pytest.mark.parametrize("planner", [PlannerSection(), PlannerSection(mode="blend", level_ratio=1.5),
                                     PlannerSection(min_service_gpu_h=0.001, max_service_gpu_h=7.0)])
def test_levels_give_exactly_the_planners_site_factor(planner):
    scale = SiteFactorScale.build(planner, SchedulerConfig(weight_age=1000, weight_fairshare=5000))
    levels = levels_for(scale)
    bounds = [b for b, _ in levels]
    assert bounds == sorted(set(bounds)) and bounds[-1] == MAX_SERVICE_S
    services = {1, 2, MAX_SERVICE_S} | {b + d for b, _ in levels[:-1] for d in (-1, 0, 1)}
    for service in sorted(services):
        assert next(v for b, v in levels if service <= b) == scale.site_factor(service), service


def test_render_exact_format_and_round_trip(tmp_path):
    cache = _cache(levels=((100, 900), (MAX_SERVICE_S, 100)))
    assert render(cache) == ("slurmsched-submit-cache 1\nwritten 1700000000\nmax_age 600\ncpu_weight 0.25\n"
                             f"level 100 900\nlevel {MAX_SERVICE_S} 100\n"
                             "job 3600\talice\ttrain resnet\njob 60\tbob\teval\n")
    path = tmp_path / "c"
    write_submit_cache(path, cache)
    assert read_submit_cache(path) == cache
    assert oct(os.stat(path).st_mode & 0o777) == "0o640"


def test_names_with_tabs_or_newlines_are_left_out(tmp_path):
    cache = _cache(estimates=(SubmitEstimate("a", "x\ty", 5), SubmitEstimate("b", "line\nbreak", 5),
                              SubmitEstimate("c", "ok", 5)))
    write_submit_cache(tmp_path / "c", cache)
    assert read_submit_cache(tmp_path / "c").estimates == (SubmitEstimate("c", "ok", 5),)


def test_names_with_other_line_breaks_read_back_as_the_script_reads_them(tmp_path):
    """job_submit.lua splits the file at "\n" only; so does the reader (status, config check)."""
    odd = (SubmitEstimate("a", "ff\x0clevel x", 5), SubmitEstimate("b", "ls\u2028protect zzz", 5),
           SubmitEstimate("c", "nl\x85x", 5))
    cache = _cache(estimates=odd)
    write_submit_cache(tmp_path / "c", cache)
    assert read_submit_cache(tmp_path / "c").estimates == odd


def test_replace_is_atomic_and_leaves_no_temporary_files(tmp_path):
    path = tmp_path / "c"
    write_submit_cache(path, _cache())
    inode = os.stat(path).st_ino
    write_submit_cache(path, _cache(written_at=1_700_000_100))
    assert os.stat(path).st_ino != inode            # a new file renamed over the old one
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]
    assert read_submit_cache(path).written_at == 1_700_000_100


def test_a_stop_signal_while_writing_leaves_no_temporary_file(tmp_path, monkeypatch):
    """The daemon's second SIGTERM raises StopNow wherever the cycle is; one in the middle
    of writing the cache left its temporary file behind in the state directory."""
    path = tmp_path / "c"
    write_submit_cache(path, _cache())

    def interrupted(fd: int) -> None:
        raise StopNow()

    monkeypatch.setattr(os, "fsync", interrupted)
    with pytest.raises(StopNow):
        write_submit_cache(path, _cache(written_at=1_700_000_100))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]
    assert read_submit_cache(path).written_at == _cache().written_at


def test_missing_directory_and_bad_files_raise_store_error(tmp_path):
    with pytest.raises(StoreError, match="cannot write submit cache"):
        write_submit_cache(tmp_path / "no" / "c", _cache())
    assert read_submit_cache(tmp_path / "absent") is None
    (tmp_path / "junk").write_text("hello\n")
    with pytest.raises(StoreError, match="not a slurmsched cache"):
        read_submit_cache(tmp_path / "junk")
    (tmp_path / "bad").write_text("slurmsched-submit-cache 1\nwritten 1\nmax_age 5\nlevel x y\n")
    with pytest.raises(StoreError, match="line 4 is malformed"):
        read_submit_cache(tmp_path / "bad")


class CountingPredictor(SlurmschedPredictor):
    """slurmsched's predictor, counting the probes of each call that does not remember."""

    def __init__(self) -> None:
        super().__init__()
        self.probed: list[set[tuple[str, str]]] = []

    def predict(self, jobs, *, remember=True):
        if not remember:
            self.probed.append({(j.user, j.name) for j in jobs})
        return super().predict(jobs, remember=remember)


def _finished(job_id: int, user: str, name: str, end: float, run: float = 600.0) -> JobRecord:
    return JobRecord(job_id=job_id, user=user, name=name, submit_time=end - run - 60, cluster="c",
                     state=JobState.COMPLETED, start_time=end - run, end_time=end, gpus=1, cpus=1,
                     time_limit_s=7200)


def _expected(daemon: Daemon, job: JobRecord, now: float) -> int:
    """What the daemon's cycle would count for the job re-submitted now: qssf's expected run time."""
    probe = dataclasses.replace(job, state=JobState.PENDING, submit_time=now, start_time=None, end_time=None)
    (prediction,) = SlurmschedPredictor.predict(daemon.engine.predictor, [probe], remember=False)  # uncounted
    return round(daemon.policy.duration(probe, prediction))


def test_submit_estimates_predict_again_only_what_changed_and_remember_no_probe() -> None:
    """A pair is predicted again when its user finished a job, every pair after a refit or
    once its estimate is a refit interval old; the probes (hypothetical jobs) leave no trace in the
    predictor, and the cache holds the run time qssf scores with (the expected one)."""
    now = 1_700_100_000.0
    config = Config()
    clock = SimClock(now)
    repository = MemoryJobRepository(cluster="c", track_live=False)
    predictor = CountingPredictor()
    daemon = Daemon(config, SimulatedSlurm(ClusterSpec.uniform(1, 4), SchedulerConfig(), clock), repository,
                    predictor, make_policy("qssf"), Planner(config), clock=clock)
    history = [_finished(1, "alice", "train", now - 3000), _finished(2, "alice", "eval", now - 2000, 60.0),
               _finished(3, "bob", "train", now - 1000, 3000.0)]
    repository.ingest_finished(history)
    predictor.update(history)
    first = {(e.user, e.name): e.estimate_s for e in daemon.submit_estimates(now)}
    assert first == {(j.user, j.name): _expected(daemon, j, now) for j in history}
    assert first[("alice", "eval")] > 60  # the expected run time, not the 60 s point estimate
    assert predictor.probed == [set(first)] and not predictor._pending
    assert daemon.submit_estimates(now + 300) == daemon.submit_estimates(now + 600)  # nothing new: no probe
    assert len(predictor.probed) == 1
    later = _finished(4, "bob", "train", now + 700, 1200.0)
    repository.ingest_finished([later])
    predictor.update([later])
    again = {(e.user, e.name): e.estimate_s for e in daemon.submit_estimates(now + 800)}
    assert predictor.probed[-1] == {("bob", "train")} and again[("bob", "train")] == _expected(daemon, later, now)
    assert again[("alice", "train")] == first[("alice", "train")]
    daemon.submit_estimates(now + config.daemon.refit_interval_s + 1)  # the first ones are a refit interval old
    assert predictor.probed[-1] == {("alice", "train"), ("alice", "eval")}
    predictor.version = "refitted"  # what a fit does: every pair again
    daemon.submit_estimates(now + config.daemon.refit_interval_s + 300)
    assert predictor.probed[-1] == set(first)


def test_protected_partitions_and_qos_travel_in_the_cache(tmp_path):
    cache = _cache(levels=((100, 900), (MAX_SERVICE_S, 100)), protected_partitions=("debug", "urgent"),
                   protected_qos=("admin",))
    text = render(cache)
    assert "protect partition debug\nprotect partition urgent\nprotect qos admin\n" in text
    write_submit_cache(tmp_path / "c", cache)
    assert read_submit_cache(tmp_path / "c") == cache
    # an earlier daemon's line for the default partition (the script now reads part_list's) is ignored
    (tmp_path / "old").write_text(text.replace("protect qos admin\n", "protect qos admin\ndefault_partition debug\n"))
    assert read_submit_cache(tmp_path / "old") == cache
    # the script's rule (job_submit.lua; the live test checks it in slurmctld)
    assert protected(cache, "urgent", "normal", "gpu") and protected(cache, "gpu,debug", "normal", "gpu")
    assert protected(cache, "", "normal", "debug")  # no partition named: the default one, protected here
    assert not protected(cache, "", "normal", "gpu")
    assert protected(cache, "gpu", "admin", "gpu") and protected(cache, "gpu", "", "gpu")  # no QOS: unknown default
    assert not protected(cache, "gpu", "normal", "debug")
    assert not protected(_cache(), "", "", "debug")  # nothing protected


def test_the_daemon_writes_the_planners_protections() -> None:
    """The cache the daemon writes (here into the simulated plugin) carries [planner]'s protections."""
    now = 1_700_100_000.0
    config = Config().with_overrides("planner", protected_partitions=("short",), protected_qos=("admin",))
    clock = SimClock(now)
    plugin = SubmitPlugin()
    daemon = Daemon(config, SimulatedSlurm(ClusterSpec.uniform(1, 4), SchedulerConfig(), clock),
                    MemoryJobRepository(cluster="c", track_live=False), SlurmschedPredictor(), make_policy("qssf"),
                    Planner(config), clock=clock, submit_cache=plugin)
    daemon.refresh_submit_cache(now, active=True)
    assert plugin.cache is not None and (plugin.cache.protected_partitions,
                                         plugin.cache.protected_qos) == (("short",), ("admin",))


def test_the_daemon_logs_the_estimates_the_file_holds(tmp_path, caplog) -> None:
    """A name with a tab or line break is left out of the file; the log counts what was written."""
    now = 1_700_100_000.0
    config = Config()
    clock = SimClock(now)
    repository = MemoryJobRepository(cluster="c", track_live=False)
    history = [_finished(1, "alice", "train", now - 3000), _finished(2, "alice", "a\tb", now - 2000),
               _finished(3, "bob", "x\ny", now - 1000)]
    repository.ingest_finished(history)
    path = tmp_path / "cache"
    daemon = Daemon(config, SimulatedSlurm(ClusterSpec.uniform(1, 4), SchedulerConfig(), clock), repository,
                    SlurmschedPredictor(), make_policy("qssf"), Planner(config), clock=clock,
                    submit_cache=CacheFile(path))
    with caplog.at_level(logging.INFO, logger="slurmsched.daemon"):
        daemon.refresh_submit_cache(now, active=True)
    assert len(read_submit_cache(path).estimates) == 1
    assert (f"wrote submit cache {path}: 1 (user, job name) estimate (2 left out: a tab or line break in the "
            "user or job name)") in caplog.messages


def test_a_clock_stepped_back_gets_the_cache_rewritten_at_once(daemon_env) -> None:
    """A cache the daemon stamped before its clock was stepped back an hour is stale to
    job_submit.lua (stamped over max_age ahead): the next cycle rewrites it, as it does a
    stale one (it used to wait until the clock caught up with the stamp)."""
    daemon = daemon_env.daemon()
    path = daemon_env.config.daemon.submit_cache_path
    now = time.time()
    daemon.refresh_submit_cache(now + 3600, active=True)  # written while the clock was an hour ahead
    assert not read_submit_cache(path).fresh(now)
    daemon.refresh_submit_cache(now, active=True)
    assert read_submit_cache(path).written_at == int(now)
