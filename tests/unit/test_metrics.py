"""The metrics file's text, read back with prometheus_client's own parser (the live loop: tests/daemon)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from slurmsched.metrics import LoopMetrics


def _samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def test_label_values_with_quotes_backslashes_and_line_feeds_read_back_unchanged():
    odd = 'qssf "x"\\y\nz \u00e9'
    metrics = LoopMetrics(started_at=1.5, info={"version": "0.1.0", "policy": odd, "predictor": "helios"})
    assert _samples(metrics.render())["slurmsched_info"] == [
        ({"version": "0.1.0", "policy": odd, "predictor": "helios"}, 1.0)]


def test_before_any_cycle_succeeded_only_the_counters_are_written():
    metrics = LoopMetrics(started_at=100.0)
    metrics.failed(160.0)
    metrics.failed(220.0)
    samples = _samples(metrics.render())
    assert samples["slurmsched_cycle_failures_total"] == [({}, 2.0)]
    assert samples["slurmsched_last_failure_timestamp_seconds"] == [({}, 220.0)]
    assert sorted(labels["kind"] for labels, _ in samples["slurmsched_cycles_total"]) == ["dry-run", "live", "paused"]
    assert "slurmsched_pending_jobs" not in samples and "slurmsched_last_cycle_timestamp_seconds" not in samples

