"""Stopping the daemon: first SIGTERM/SIGINT finishes the cycle, a second one stops at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from slurmsched.daemon import LoopResult

pytestmark = pytest.mark.slurm


def _send_during_cycle(daemon, *signals: signal.Signals) -> None:
    """Make the daemon receive ``signals`` at the start of each cycle."""
    real = daemon.cycle

    def cycle(now: float):
        for sig in signals:
            os.kill(os.getpid(), sig)
        return real(now)

    daemon.cycle = cycle


def test_first_signal_lets_the_cycle_finish(daemon_env):
    daemon = daemon_env.daemon()
    before = signal.getsignal(signal.SIGTERM)
    _send_during_cycle(daemon, signal.SIGTERM)
    assert daemon.run() == LoopResult(cycles=1, failed=0, interrupted=False)
    with daemon_env.repo() as repo:
        (cycle,) = repo.recent_cycles()
        assert "total" in cycle.timings          # the cycle completed and was recorded
    assert signal.getsignal(signal.SIGTERM) is before


def test_second_signal_stops_at_once(daemon_env):
    daemon = daemon_env.daemon()
    _send_during_cycle(daemon, signal.SIGINT, signal.SIGTERM)
    assert daemon.run() == LoopResult(cycles=0, failed=0, interrupted=True)
    with daemon_env.repo() as repo:
        assert repo.recent_cycles() == []        # interrupted before anything was written


def test_sigterm_stops_a_running_daemon_process_promptly(daemon_env, tmp_path):
    """The signal comes while the daemon sleeps: the metrics file is written once the
    whole cycle is done (after the submit cache, which a cycle record precedes: a first
    cycle over a dev cluster's thousands of finished jobs writes it for seconds)."""
    metrics = tmp_path / "slurmsched.prom"
    daemon_env.write(metrics_file=str(metrics))
    proc = subprocess.Popen([sys.executable, "-m", "slurmsched", "-v", "--config", str(daemon_env.path),
                             "run", "--interval", "50"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not metrics.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "slow"
            time.sleep(0.3)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert time.monotonic() - sent < 10           # not the 50 s interval
    assert "SIGTERM: stopping after the current cycle" in err and "stopped after 1 cycle" in err


def test_second_signal_while_updates_are_sent_stops_once_they_are_recorded(daemon_env, busy):
    """The change is on record before it is sent (for revert); stopping before Slurm's
    answer is recorded would lose the outcome that explain shows."""
    daemon_env.seed_history("short", [60, 70, 50])
    job = busy.submit("--gres=gpu:1", "-t", "120", name="short")
    daemon = daemon_env.daemon()
    apply = daemon.engine.gateway.apply

    def interrupted(actions):
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGTERM)       # the second one, while the update is being sent
        return apply(actions)

    daemon.engine.gateway.apply = interrupted
    assert daemon.run() == LoopResult(cycles=0, failed=0, interrupted=True)
    assert daemon_env.site_factors([job])[job] > 0
    with daemon_env.repo() as repo:
        assert [c.job_id for c in repo.applied_changes()] == [job]
        assert ("SetSiteFactor", "ok") in [(d.kind, d.outcome) for _, d in repo.decisions_for(job)]
