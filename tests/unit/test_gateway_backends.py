"""Backend choice (``slurm.backend``) and the pyslurm backend's record conversion."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from slurmsched.config import load_config
from slurmsched.errors import ConfigError
from slurmsched.gateway import CliGateway, make_gateway
from slurmsched.gateway.factory import pyslurm_available
from slurmsched.gateway.pyslurm_backend import _changes, _live_job, _node
from slurmsched.model import GresRequest, JobState, SetFeatures, SetSiteFactor, SetSwitches

PYSLURM = pyslurm_available()


def config(backend: str, **extra: str):
    env = {"SLURMSCHED_SLURM_BACKEND": backend, **{f"SLURMSCHED_SLURM_{k.upper()}": v for k, v in extra.items()}}
    return load_config(path=None, environ={**env, "SLURMSCHED_CONFIG": ""})


def test_cli_backend_gets_conf_bin_dir_and_timeout(tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\n")
    gateway = make_gateway(config("cli", conf=str(conf), bin_dir="/opt/slurm/bin", timeout_s="7"))
    assert isinstance(gateway, CliGateway)
    assert gateway.commands.env["SLURM_CONF"] == str(conf)
    assert gateway.commands.binary("squeue") == "/opt/slurm/bin/squeue"
    assert gateway.commands.timeout_s == 7


def test_a_missing_slurm_conf_is_a_config_error_when_slurm_is_needed(tmp_path):
    # scontrol would retry a missing slurm.conf for a minute: the error must come from the config;
    # but only once Slurm is needed: loading the config (for offline commands) works
    missing = tmp_path / "x" / "nonexist.conf"
    for backend in ("cli", "pyslurm", "auto"):
        with pytest.raises(ConfigError, match=f"^slurm.conf: {missing} does not exist$"):
            make_gateway(config(backend, conf=str(missing)))
    with pytest.raises(ConfigError, match=f"^slurm.conf: {tmp_path} is not a file$"):
        make_gateway(config("cli", conf=str(tmp_path)))


def test_a_missing_slurm_conf_in_the_environment_is_a_config_error_too(tmp_path, monkeypatch):
    """With ``[slurm] conf`` unset, a stale ``SLURM_CONF`` made explain and queue wait a minute."""
    missing = tmp_path / "nonexist.conf"
    monkeypatch.setenv("SLURM_CONF", str(missing))
    with pytest.raises(ConfigError, match=rf"^SLURM_CONF \(environment\): {missing} does not exist$"):
        make_gateway(config("cli"))
    assert make_gateway(config("cli", conf=__file__)).commands.env["SLURM_CONF"] == __file__  # the key wins


@pytest.mark.skipif(PYSLURM, reason="pyslurm imports here, so 'auto' picks it")
def test_auto_falls_back_to_cli_and_pyslurm_is_a_config_error_without_it():
    assert isinstance(make_gateway(config("auto")), CliGateway)
    with pytest.raises(ConfigError) as err:
        make_gateway(config("pyslurm"))
    assert str(err.value).startswith("slurm.backend is pyslurm but 'import pyslurm' fails: ")
    assert "\n" not in str(err.value)


def test_pyslurm_job_conversion_handles_known_pitfalls():
    """Objects with pyslurm 25.11.2's attribute names and its quirks (see SLURM_LAB.md)."""
    job = SimpleNamespace(
        id=81, user_name="alice", user_id=1000, submit_time=1795347329, name="sweep", cluster="c",
        array_id=79, array_task_id=None, account="ml", partition="gpu", qos="normal", state="PENDING",
        state_reason="None", eligible_time=1795347329, start_time=1795350060, time_limit=240, num_nodes=2,
        cpus=2, memory=2048, gres_per_node={"gres/gpu:a100": 2}, tres_per_node=None, constraints=["a100"],
        excluded_nodes="gpu03", allocated_nodes=None, required_switches=1, max_wait_time_switches=300,
        priority=1121, nice=0, requeue_count=1, admin_comment="slurmsched:site_factor=500",
        hetjob_id=None, hetjob_offset=None)
    record = _live_job(job, {81: 500})
    assert (record.array_job_id, record.array_task_id) == (79, 0)  # task 0 comes back as None
    assert record.reason == "" and record.start_time is None and record.site_factor == 500
    assert record.admin_comment == "slurmsched:site_factor=500"
    assert record.gres_per_node == (GresRequest("gpu", "a100", 2),)
    assert (record.gpus, record.gpu_type, record.time_limit_s) == (4, "a100", 14400)
    assert (record.features, record.excluded_nodes, record.switches, record.restart_count) == ("a100", "gpu03", 1, 1)
    assert _live_job(SimpleNamespace(**{**vars(job), "name": 'say "hi"'}), {}).name == "say `hi`"  # as sacct
    running = _live_job(SimpleNamespace(**{**vars(job), "state": "RUNNING", "time_limit": None,
                                           "array_id": 0, "gres_per_node": {}}), {81: 500})
    assert running.state is JobState.RUNNING and running.site_factor is None and running.time_limit_s is None
    assert running.start_time == 1795350060.0 and running.gpus == 0 and running.array_task_id is None
    assert (record.het_job_id, record.het_job_offset) == (None, None)
    leader = _live_job(SimpleNamespace(**{**vars(job), "hetjob_id": 81}), {})  # offset 0 comes back as None
    other = _live_job(SimpleNamespace(**{**vars(job), "id": 82, "hetjob_id": 81, "hetjob_offset": 1}), {})
    assert [(r.het_job_id, r.het_job_offset) for r in (leader, other)] == [(81, 0), (81, 1)]


def test_pyslurm_node_conversion():
    node = SimpleNamespace(name="gpu01", state="MIXED+DRAIN", partitions=["gpu", "short"], total_cpus=32,
                           allocated_cpus=4, real_memory=128000, active_features=["a100"],
                           configured_gres={"gpu:a100": 8}, allocated_gres={"gpu:a100": 3})
    record = _node(node)
    assert record.state == ("MIXED", "DRAIN") and (record.gpus("a100"), record.gpus_used("a100")) == (8, 3)


def test_values_pyslurm_would_drop_go_through_scontrol():
    assert _changes(SetSiteFactor(1, 300)) == {"site_factor": 300}
    assert _changes(SetSiteFactor(1, 0)) is None  # JobSubmitDescription skips site_factor=0
    assert _changes(SetSwitches(1, 0)) is None and _changes(SetFeatures(1, "")) is None
    assert _changes(SetSwitches(1, 2, 600)) == {"switches": {"count": 2, "max_wait_time": 600}}
