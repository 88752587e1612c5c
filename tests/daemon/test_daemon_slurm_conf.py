"""contrib/slurm.conf.d: the slurm.conf settings give the wait bound the admin guide states."""

from __future__ import annotations

from pathlib import Path

from slurmsched.config import load_config
from slurmsched.model import SchedulerConfig
from slurmsched.planner import guaranteed_wait_bound
from slurmsched.policy import make_policy

HERE = Path(__file__).resolve().parents[2] / "contrib" / "slurm.conf.d"


def _settings() -> dict[str, str]:
    lines = (HERE / "slurmsched.conf").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line.strip() and not line.startswith("#"))


def _days_to_s(text: str) -> int:
    days, _, clock = text.partition("-")
    h, m, s = (int(x) for x in clock.split(":"))
    return int(days) * 86400 + h * 3600 + m * 60 + s


def test_snippet_enables_what_slurmsched_needs():
    conf = _settings()
    assert conf["PriorityType"] == "priority/multifactor"
    assert conf["TopologyPlugin"] == "topology/tree"
    assert "max_switch_wait=" in conf["SchedulerParameters"]
    assert conf["JobSubmitPlugins"] == "lua"
    assert "gres/gpu" in conf["AccountingStorageTRES"].split(",")


def test_snippet_weights_give_the_documented_bound():
    conf = _settings()
    scheduler = SchedulerConfig(weight_age=int(conf["PriorityWeightAge"]),
                                weight_fairshare=int(conf["PriorityWeightFairshare"]),
                                weight_job_size=int(conf["PriorityWeightJobSize"]),
                                weight_partition=int(conf["PriorityWeightPartition"]),
                                weight_qos=int(conf["PriorityWeightQOS"]),
                                priority_max_age_s=_days_to_s(conf["PriorityMaxAge"]))
    defaults = load_config(environ={})
    qssf = make_policy("qssf", defaults.policy.args_for("qssf")).args
    bound = guaranteed_wait_bound(defaults, scheduler)
    assert bound.seconds == (qssf.max_wait_h + qssf.aging_step_h) * 3600 + defaults.daemon.interval_s
    guide = (HERE.parents[1] / "docs" / "admin-guide.md").read_text().replace("\n     ", " ")
    assert f"ok   wait bound: {bound.seconds / 3600:.2f} h: {bound.explanation[:60]}" in guide
    blend = guaranteed_wait_bound(defaults.with_overrides("planner", mode="blend"), scheduler)
    assert blend.seconds is None                 # the guide says: no hard bound in blend mode
