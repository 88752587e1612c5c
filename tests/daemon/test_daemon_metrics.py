"""``daemon.metrics_file``: the loop's Prometheus metrics, read back with prometheus_client's own parser."""

from __future__ import annotations

import logging
import stat

import pytest
from prometheus_client.parser import text_string_to_metric_families

from slurmsched import __version__
from slurmsched.errors import SlurmError

pytestmark = pytest.mark.slurm


def _read(path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the file as (name, sorted labels) -> value."""
    families = text_string_to_metric_families(path.read_text())
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples}


def test_each_cycle_writes_the_loop_metrics(daemon_env, busy, tmp_path):
    """A live cycle that sets a pending job's SiteFactor: counters, the queue it saw, its
    stages; world-readable and with no temporary file left beside it."""
    daemon_env.seed_history("quick", [60, 90, 60])
    job = busy.submit("--gres=gpu:1", "-t", "5", name="quick", wrap="sleep 2")
    path = tmp_path / "textfile" / "slurmsched.prom"
    path.parent.mkdir()
    daemon_env.write(metrics_file=str(path))
    assert daemon_env.daemon().run(once=True, handle_signals=False).failed == 0
    m = _read(path)
    assert m[("slurmsched_info", (("policy", "qssf"), ("predictor", "helios"), ("version", __version__)))] == 1
    assert m[("slurmsched_cycles_total", (("kind", "live"),))] == 1
    assert m[("slurmsched_cycles_total", (("kind", "paused"),))] == 0
    assert m[("slurmsched_cycle_failures_total", ())] == 0
    assert ("slurmsched_last_failure_timestamp_seconds", ()) not in m
    assert m[("slurmsched_pending_jobs", ())] >= 1 and m[("slurmsched_running_jobs", ())] >= 1
    assert m[("slurmsched_actions_total", ())] == m[("slurmsched_planned_actions", ())] >= 1
    assert m[("slurmsched_action_failures_total", ())] == 0 and m[("slurmsched_paused", ())] == 0
    assert daemon_env.site_factors([job])[job] not in (None, 0)  # the action counted was sent
    with daemon_env.repo() as repo:
        assert m[("slurmsched_changes_in_force", ())] == len(repo.applied_changes()) >= 1
    stages = {dict(labels)["stage"] for name, labels in m if name == "slurmsched_cycle_stage_seconds"}
    assert {"snapshot", "predict", "plan", "apply", "store"} <= stages
    assert m[("slurmsched_cycle_duration_seconds", ())] >= m[("slurmsched_cycle_stage_seconds", (("stage", "snapshot"),))]
    assert m[("slurmsched_last_cycle_timestamp_seconds", ())] >= m[("slurmsched_start_time_seconds", ())]
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in path.parent.iterdir()] == ["slurmsched.prom"]
    # paused: counted as such, and the gauge says so
    assert daemon_env.cli("pause").exit_code == 0
    daemon_env.daemon().run(once=True, handle_signals=False)
    m = _read(path)
    assert m[("slurmsched_cycles_total", (("kind", "paused"),))] == 1 and m[("slurmsched_paused", ())] == 1
    assert m[("slurmsched_actions_total", ())] == 0  # a new daemon counts from its start


def test_a_failed_cycle_is_counted_and_a_file_that_cannot_be_written_fails_nothing(daemon_env, tmp_path, caplog):
    path = tmp_path / "slurmsched.prom"
    daemon_env.write(metrics_file=str(path))
    daemon_env.point_at_closed_slurm()
    daemon = daemon_env.daemon()
    with pytest.raises(SlurmError):
        daemon.run(once=True, handle_signals=False)
    m = _read(path)
    assert m[("slurmsched_cycle_failures_total", ())] == 1
    assert m[("slurmsched_last_failure_timestamp_seconds", ())] >= m[("slurmsched_start_time_seconds", ())]
    assert sum(v for (name, _), v in m.items() if name == "slurmsched_cycles_total") == 0
    assert ("slurmsched_last_cycle_timestamp_seconds", ()) not in m  # no cycle succeeded yet

    daemon_env.write(metrics_file=str(tmp_path / "missing" / "slurmsched.prom"))
    with caplog.at_level(logging.WARNING, logger="slurmsched.daemon"):
        assert daemon_env.daemon().run(once=True, handle_signals=False).failed == 0
    assert any("cannot write metrics file" in r.getMessage() and "missing" in r.getMessage()
               for r in caplog.records), caplog.text
