"""``scontrol show config`` text -> :class:`SchedulerConfig` (22.05 has no ``--json`` for it)."""

from __future__ import annotations

from slurmsched.errors import SlurmParseError
from slurmsched.model import SchedulerConfig

_UNSET = ("", "(null)", "N/A", "None")


def parse_show_config(text: str) -> dict[str, str]:
    """``Key = Value`` lines -> dict (first occurrence wins; headers are skipped)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        key = key.strip()
        if sep and key and " " not in key:
            values.setdefault(key, value.strip())
    return values


def parse_duration(text: str) -> int | None:
    """Slurm's ``[days-]hours:minutes:seconds`` (or minutes) -> seconds; unlimited -> None.

    Raises:
        ValueError: not a Slurm duration.
    """
    text = text.strip()
    if text.upper() in ("UNLIMITED", "INFINITE", *_UNSET):
        return None
    days = 0
    if "-" in text:
        day_text, text = text.split("-", 1)
        days = int(day_text)
    parts = [int(p) for p in text.split(":")]
    if len(parts) == 1:
        seconds = parts[0] * 60
    elif len(parts) == 2:
        seconds = parts[0] * 60 + parts[1]
    elif len(parts) == 3:
        seconds = parts[0] * 3600 + parts[1] * 60 + parts[2]
    else:
        raise ValueError(f"not a Slurm duration: {text!r}")
    return days * 86400 + seconds


def scheduler_params(text: str) -> dict[str, str]:
    """``SchedulerParameters`` (``bf_interval=2,max_switch_wait=3600,...``) -> dict."""
    out: dict[str, str] = {}
    if text.strip() in _UNSET:
        return out
    for item in text.split(","):
        key, _, value = item.partition("=")
        if key.strip():
            out[key.strip()] = value.strip()
    return out


def scheduler_config(values: dict[str, str]) -> SchedulerConfig:
    """Build the planner's view of slurmctld's configuration from ``parse_show_config``.

    ``max_switch_wait`` defaults to Slurm's 300 s when ``SchedulerParameters`` omits it.

    Raises:
        SlurmParseError: a weight, ``PriorityMaxAge`` or ``max_switch_wait`` is malformed.
    """
    default = SchedulerConfig()

    def weight(key: str) -> int:
        text = values.get(key, "0")
        return 0 if text in _UNSET else int(text)

    try:
        max_age = values.get("PriorityMaxAge")
        params = scheduler_params(values.get("SchedulerParameters", ""))
        wait = params.get("max_switch_wait")
        return SchedulerConfig(
            priority_type=values.get("PriorityType", default.priority_type),
            weight_age=weight("PriorityWeightAge"),
            weight_fairshare=weight("PriorityWeightFairShare"),
            weight_job_size=weight("PriorityWeightJobSize"),
            weight_partition=weight("PriorityWeightPartition"),
            weight_qos=weight("PriorityWeightQOS"),
            weight_tres="" if values.get("PriorityWeightTRES", "") in _UNSET else values["PriorityWeightTRES"],
            priority_max_age_s=(parse_duration(max_age) or 0) if max_age else default.priority_max_age_s,
            topology_plugin="" if values.get("TopologyPlugin", "") in _UNSET else values["TopologyPlugin"],
            max_switch_wait_s=int(wait) if wait else default.max_switch_wait_s,
            scheduler_type=values.get("SchedulerType", default.scheduler_type),
            select_type=values.get("SelectType", default.select_type),
        )
    except ValueError as exc:
        raise SlurmParseError(f"scontrol show config: unexpected value ({exc})") from None
