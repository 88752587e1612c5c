"""Configuration: one TOML file plus ``SLURMSCHED_<SECTION>_<KEY>`` environment variables.

Each section is a frozen dataclass whose fields (with their defaults) *are* the
reference. Precedence, lowest first: defaults, the TOML file, environment variables,
then explicit CLI options (``Config.with_overrides``). Everything is validated at
load time; an error names the key (``policy.qssf.max_wait_h``) and what was wrong.
Numbers must be finite (TOML's ``inf`` and ``nan`` are refused).

Environment variables: a key of a table within a section is
``SLURMSCHED_<SECTION>_<TABLE>_<KEY>`` (``SLURMSCHED_POLICY_QSSF_MAX_WAIT_H``); a list is
comma-separated (``SLURMSCHED_PLANNER_PROTECTED_QOS=urgent,admin``), a list of lists
``;``-separated lists (``SLURMSCHED_CONSTRAINTS_GPU_EQUIVALENCE=a100,h100;l40s,a40``). A
variable under a section's prefix that names none of its keys is refused (no option
twin of the command line is named under one unless it is that key's variable).

The file is found at ``--config``, else ``$SLURMSCHED_CONFIG``, else
``/etc/slurmsched/slurmsched.toml`` if it exists; otherwise defaults apply.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import threading
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Mapping

from slurmsched.errors import ConfigError, StoreError

DEFAULT_CONFIG_PATH = Path("/etc/slurmsched/slurmsched.toml")
ENV_PREFIX = "SLURMSCHED_"
#: Twins of command options that fall under a section's prefix (``db downgrade --yes`` is
#: ``SLURMSCHED_DB_DOWNGRADE_YES``), after ``SLURMSCHED_``: no config keys, left to the command.
_COMMAND_TWINS = ("db_downgrade_",)

_DURATION = re.compile(r"^(?P<n>\d+(?:\.\d+)?)(?P<unit>[smhdw]?)$")
_UNIT_S = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
#: Marks a key in seconds that also takes a duration with a unit (``90s``, ``5m``, ``6h``).
Seconds = Annotated[float, "duration"]


def parse_seconds(text: str, *, bare: bool = True) -> float | None:
    """A length of time: ``3600``, ``90s``, ``5m``, ``1.5h``, ``1d``, ``2w`` -> seconds.

    Args:
        text: the length; surrounding blanks are ignored.
        bare: accept a number without a unit (seconds).

    Returns:
        The seconds (>= 0), or ``None`` when ``text`` is no such length (a sign, an
        exponent, another unit, or no unit when ``bare`` is False).
    """
    match = _DURATION.match(text.strip())
    if match is None or not (bare or match["unit"]):
        return None
    return float(match["n"]) * _UNIT_S[match["unit"]]


def parse_length(text: str) -> float | None:
    """What a key in seconds, and an option that mirrors one, read from text: a length
    (:func:`parse_seconds`) or any number ``float()`` reads (``1e3``, ``-5``, ``inf``: the
    key's own checks refuse what it cannot take); ``None`` for anything else."""
    seconds = parse_seconds(text)
    if seconds is None:
        try:
            seconds = float(text)
        except ValueError:
            return None
    return seconds


@dataclass(frozen=True)
class SlurmSection:
    """``[slurm]``: how to reach Slurm.

    Attributes:
        backend: ``"cli"`` (JSON CLI, default), ``"pyslurm"`` or ``"auto"`` (pyslurm if importable).
        bin_dir: directory holding ``squeue``/``scontrol``...; empty means ``$PATH``.
        conf: path of ``slurm.conf`` passed as ``SLURM_CONF``; empty keeps the environment's.
            A path that is set must name an existing file (checked when a command first
            needs Slurm, :func:`slurmsched.gateway.make_gateway`: without it every Slurm
            command would fail, and ``scontrol`` would hang until ``timeout_s``).
        timeout_s: seconds before a Slurm command counts as unreachable.

    Keys in seconds (``..._s``) also take a duration with a unit (:func:`parse_seconds`).
    """

    backend: str = "cli"
    bin_dir: str = ""
    conf: str = ""
    timeout_s: Seconds = 60.0

    @property
    def conf_dir(self) -> Path:
        """The directory of the ``slurm.conf`` Slurm's commands read (``conf``, else
        ``$SLURM_CONF``, else ``/etc/slurm``): where ``job_submit.lua`` lives."""
        return Path(self.conf or os.environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf").parent

    def validate(self, prefix: str) -> None:
        """Raise :class:`ConfigError` naming the bad key."""
        if self.backend not in ("cli", "pyslurm", "auto"):
            raise ConfigError(f"{prefix}.backend must be one of cli, pyslurm, auto (got {self.backend!r})")
        if self.timeout_s <= 0:
            raise ConfigError(f"{prefix}.timeout_s must be > 0 (got {self.timeout_s})")


#: SQLite's busy timeout is milliseconds in a C ``int``.
MAX_BUSY_TIMEOUT_S = (2**31 - 1) / 1000


@dataclass(frozen=True)
class DbSection:
    """``[db]``: the history database.

    Attributes:
        url: SQLAlchemy URL; empty means SQLite at ``<daemon.state_dir>/slurmsched.db``.
            PostgreSQL: ``postgresql+psycopg://user@host/dbname``.
        busy_timeout_s: seconds SQLite waits for another process's write lock before failing;
            at most :data:`MAX_BUSY_TIMEOUT_S` (SQLite takes milliseconds in a C ``int``).
        readers_group: a group whose members may read the SQLite database (``explain``,
            ``status``): its files become mode 0640 and the state directory 0750, of that
            group. Empty (default): only the daemon's user (and root). Must name a group
            of this host. PostgreSQL ignores it (grant a read-only role instead).
    """

    url: str = ""
    busy_timeout_s: Seconds = 10.0
    readers_group: str = ""

    def validate(self, prefix: str) -> None:
        """Raise :class:`ConfigError` naming the bad key; ``url`` as ``--db`` is checked
        (:func:`slurmsched.store.connect.parse_url`), ``readers_group`` must name a group."""
        from slurmsched.store.connect import group_id, parse_url

        if self.url:
            try:
                parse_url(self.url)
            except StoreError as exc:
                raise ConfigError(f"{prefix}.url: {exc}") from None
        if not 0 <= self.busy_timeout_s <= MAX_BUSY_TIMEOUT_S:
            raise ConfigError(f"{prefix}.busy_timeout_s must be >= 0 and <= {MAX_BUSY_TIMEOUT_S} "
                              f"(got {self.busy_timeout_s})")
        if self.readers_group:
            try:
                group_id(self.readers_group)
            except StoreError as exc:
                raise ConfigError(f"{prefix}.readers_group: {exc}") from None


@dataclass(frozen=True)
class DaemonSection:
    """``[daemon]``: the scheduling loop.

    Keys in seconds (``..._s``) also take a duration with a unit (:func:`parse_seconds`):
    ``interval_s = "5m"``, ``SLURMSCHED_DAEMON_INTERVAL_S=5m`` (as ``run --interval``).

    Attributes:
        interval_s: seconds between cycles; at most ``threading.TIMEOUT_MAX`` (what the
            daemon's sleep can wait).
        dry_run: plan and record, but send nothing to Slurm (and write no submit cache).
        state_dir: where the default SQLite database and the job_submit cache live.
        predictor: duration predictor by name (``slurmsched``, ``helios``, ``last2``, ``user_limit``).
        refit_interval_s: refit the predictor on its history (``fit_history_jobs``) this
            often (the fitted model is saved in the database and reloaded at start).
        fit_history_jobs: a fit learns from the newest this many finished jobs (by end
            time); 0: every one. It bounds a refit's time and memory (reading 100,000
            jobs takes about 2 s and 80 MB) on a database that grows for years.
        save_model: save each fitted model in the database, so that a restart reloads it
            instead of refitting (the simulator, which never restarts, turns it off).
        submit_cache: the file ``job_submit.lua`` reads; empty means
            ``<state_dir>/slurmsched-submit.cache``. Link it as ``slurmsched-submit.cache``
            beside ``job_submit.lua``.
        submit_cache_max_age_s: ``job_submit.lua`` ignores a cache older than this, so new
            jobs are left alone when the daemon stops (fail-open). Must be at least
            ``interval_s`` when the daemon writes a cache (:attr:`writes_submit_cache`).
        submit_cache_entries: at most this many (user, job name) predictions in the cache,
            the most recently seen first; 0: no cache (the file is left alone).
        submit_cache_lookback_days: only (user, job name) pairs that finished a job within
            this many days go into the cache.
        metrics_file: after each cycle, write the loop's Prometheus metrics
            (:mod:`slurmsched.metrics`) to this ``*.prom`` file, for node_exporter's
            textfile collector (its ``--collector.textfile.directory``); empty: none.
    """

    interval_s: Seconds = 60.0
    dry_run: bool = False
    state_dir: str = "/var/lib/slurmsched"
    predictor: str = "slurmsched"
    refit_interval_s: Seconds = 6 * 3600.0
    fit_history_jobs: int = 500_000
    save_model: bool = True
    submit_cache: str = ""
    submit_cache_max_age_s: Seconds = 900.0
    submit_cache_entries: int = 5000
    submit_cache_lookback_days: float = 30.0
    metrics_file: str = ""

    @property
    def submit_cache_path(self) -> Path:
        """The effective path of the job_submit.lua cache file."""
        return Path(self.submit_cache) if self.submit_cache else Path(self.state_dir) / "slurmsched-submit.cache"

    @property
    def fit_limit(self) -> int | None:
        """``fit_history_jobs``; ``None`` for every finished job."""
        return self.fit_history_jobs or None

    @property
    def writes_submit_cache(self) -> bool:
        """Whether the daemon writes the job_submit.lua cache: ``submit_cache_entries`` above
        0 and not ``dry_run`` (a dry run neither writes nor removes it)."""
        return self.submit_cache_entries > 0 and not self.dry_run

    def validate(self, prefix: str) -> None:
        """Raise :class:`ConfigError` naming the bad key."""
        if not self.interval_s > 0:
            raise ConfigError(f"{prefix}.interval_s must be > 0 (got {self.interval_s})")
        if self.interval_s > threading.TIMEOUT_MAX:  # the loop's sleep could not wait that long
            raise ConfigError(f"{prefix}.interval_s must be at most {threading.TIMEOUT_MAX:.0f} s"
                              f" (got {self.interval_s:g})")
        from slurmsched.predict.registry import check_predictor

        check_predictor(self.predictor, f"{prefix}.predictor")
        if not self.state_dir.strip():
            raise ConfigError(f"{prefix}.state_dir must name a directory (it is empty)")
        for key in ("refit_interval_s", "submit_cache_max_age_s", "submit_cache_lookback_days"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"{prefix}.{key} must be > 0 (got {getattr(self, key)})")
        if self.writes_submit_cache and self.submit_cache_max_age_s < self.interval_s:
            raise ConfigError(f"{prefix}.submit_cache_max_age_s must be >= interval_s "
                              f"({self.submit_cache_max_age_s} < {self.interval_s}): the cache would go stale between cycles")
        if self.submit_cache_entries < 0:
            raise ConfigError(f"{prefix}.submit_cache_entries must be >= 0 (got {self.submit_cache_entries})")
        if self.fit_history_jobs < 0:
            raise ConfigError(f"{prefix}.fit_history_jobs must be >= 0, 0 for every finished job "
                              f"(got {self.fit_history_jobs})")
        if self.metrics_file and not self.metrics_file.endswith(".prom"):
            raise ConfigError(f"{prefix}.metrics_file must end in .prom, the files node_exporter's textfile "
                              f"collector reads (got {self.metrics_file!r})")


@dataclass(frozen=True)
class PolicySection:
    """``[policy]``: which queue-ordering policy ranks pending jobs.

    Attributes:
        name: ``"qssf"`` (default: shortest predicted service first, with an aging
            guard), ``"qssf-noaging"`` (the same without the guard) or ``"fifo"``
            (leave Slurm's order alone; only undo what slurmsched set).
        qssf: ``[policy.qssf]`` arguments of ``qssf`` and ``qssf-noaging``
            (``max_wait_h``, ``halflife_h``, ``aging_step_h``, ``backlog_factor``,
            ``slowdown_factor``, ``cpu_gpu_weight``, ``estimate``; see
            :class:`slurmsched.policy.qssf.QssfArgs`).
        fifo: ``[policy.fifo]`` arguments of ``fifo`` (none yet).

    Every table is validated, the unused ones too: an unknown key or a bad value in
    ``[policy.fifo]`` is refused while ``name`` is ``qssf``.
    """

    name: str = "qssf"
    qssf: dict = field(default_factory=dict)
    fifo: dict = field(default_factory=dict)

    @staticmethod
    def tables() -> dict[str, type]:
        """Each argument table's name (``qssf``, ``fifo``) and the dataclass of its keys."""
        from slurmsched.policy.registry import POLICIES

        return {spec.table: spec.args_type for spec in POLICIES.values()}

    def effective_tables(self, prefix: str = "policy") -> dict[str, dict[str, Any]]:
        """Each argument table as its policy reads it: the keys given and every default.

        Raises:
            ConfigError: a table has an unknown key or a bad value, named under ``prefix``.
        """
        return {table: dataclasses.asdict(parse_table(args_type, getattr(self, table), f"{prefix}.{table}"))
                for table, args_type in self.tables().items()}

    def args_for(self, name: str) -> dict:
        """The argument table of policy ``name`` (``qssf-noaging`` shares ``qssf``'s)."""
        return dict(self.fifo if name == "fifo" else self.qssf)

    def validate(self, prefix: str) -> None:
        """Raise :class:`ConfigError` naming the bad key: each table's, then ``name``."""
        from slurmsched.policy.registry import make_policy

        self.effective_tables(prefix)
        make_policy(self.name, self.args_for(self.name), key=f"{prefix}.name")


@dataclass(frozen=True)
class PlannerSection:
    """``[planner]``: how policy scores become ``SiteFactor`` values.

    Attributes:
        mode: ``"dominate"`` (one level step outweighs every other configured
            ``PriorityWeight*`` together, so QSSF decides the order) or ``"blend"``
            (all levels together span ``blend_range``, so fair-share and age still count).
        blend_range: SiteFactor span of all levels in blend mode; 0 means the largest
            configured ``PriorityWeight*``.
        level_ratio: service ratio between two adjacent levels (2 = one level per doubling).
        min_service_gpu_h: predicted services at or below this share the top level.
        max_service_gpu_h: predicted services at or above this share the bottom level (SiteFactor 0).
        hysteresis_levels: a job keeps its level until its score is this many levels past it.
        max_rpcs_per_cycle: cap on ``scontrol update`` calls per cycle (the rest waits;
            jobs sharing a SiteFactor value go in one batched call).
        protected_partitions: jobs in these partitions are never touched.
        protected_qos: jobs with these QOS are never touched.
    """

    mode: str = "dominate"
    blend_range: int = 0
    level_ratio: float = 2.0
    min_service_gpu_h: float = 0.05
    max_service_gpu_h: float = 50000.0
    hysteresis_levels: float = 0.25
    max_rpcs_per_cycle: int = 100
    protected_partitions: tuple[str, ...] = ()
    protected_qos: tuple[str, ...] = ()

    @property
    def top_level(self) -> int:
        """``L``, the last level: ``level_ratio`` steps from ``min_service_gpu_h`` to
        ``max_service_gpu_h`` (:class:`slurmsched.planner.scale.SiteFactorScale`).

        Valid once :meth:`validate` passed (positive finite bounds, ``level_ratio > 1``);
        the logs are subtracted so that no ratio of the bounds overflows.
        """
        span = math.log(self.max_service_gpu_h) - math.log(self.min_service_gpu_h)
        return math.ceil(span / math.log(self.level_ratio) - 1e-9)

    def validate(self, prefix: str) -> None:
        """Raise :class:`ConfigError` naming the bad key."""
        if self.mode not in ("dominate", "blend"):
            raise ConfigError(f"{prefix}.mode must be dominate or blend (got {self.mode!r})")
        if self.blend_range < 0:
            raise ConfigError(f"{prefix}.blend_range must be >= 0 (got {self.blend_range})")
        if self.level_ratio <= 1:
            raise ConfigError(f"{prefix}.level_ratio must be > 1 (got {self.level_ratio})")
        if self.min_service_gpu_h <= 0:
            raise ConfigError(f"{prefix}.min_service_gpu_h must be > 0 (got {self.min_service_gpu_h})")
        if self.max_service_gpu_h <= self.min_service_gpu_h:
            raise ConfigError(f"{prefix}.max_service_gpu_h must be > min_service_gpu_h (got {self.max_service_gpu_h})")
        from slurmsched.model import SITE_FACTOR_LIMIT

        if self.top_level + 1 > SITE_FACTOR_LIMIT:
            raise ConfigError(f"{prefix}.level_ratio {self.level_ratio} makes {self.top_level + 2} SiteFactor levels"
                              f" from min_service_gpu_h to max_service_gpu_h; at most {SITE_FACTOR_LIMIT + 1} fit")
        if not 0 <= self.hysteresis_levels < 1:
            raise ConfigError(f"{prefix}.hysteresis_levels must be >= 0 and < 1 (got {self.hysteresis_levels})")
        if self.max_rpcs_per_cycle < 1:
            raise ConfigError(f"{prefix}.max_rpcs_per_cycle must be >= 1 (got {self.max_rpcs_per_cycle})")


@dataclass(frozen=True)
class ConstraintsSection:
    """``[constraints]``: topology and GPU-type tuning of pending jobs.

    Attributes:
        switches: give multi-node GPU jobs without a switch request ``Switches=1@<wait>``
            (only when slurmctld runs ``TopologyPlugin=topology/tree``).
        switch_wait_s: the ``@<wait>`` part; capped by Slurm's ``max_switch_wait``.
        gpu_equivalence: classes of interchangeable GPU types, e.g. ``[["a100", "h100"]]``;
            a job whose ``Features`` pin it to a saturated type is widened to
            ``Features=a100|h100`` when an equivalent type has idle GPUs. Empty: off.
    """

    switches: bool = True
    switch_wait_s: int = 600
    gpu_equivalence: tuple[tuple[str, ...], ...] = ()

    def validate(self, prefix: str) -> None:
        """Raise :class:`ConfigError` naming the bad key."""
        if self.switch_wait_s < 0:
            raise ConfigError(f"{prefix}.switch_wait_s must be >= 0 (got {self.switch_wait_s})")
        seen: set[str] = set()
        for i, group in enumerate(self.gpu_equivalence):
            if len(group) < 2:
                raise ConfigError(f"{prefix}.gpu_equivalence[{i}] must name at least two GPU types")
            for gpu_type in group:
                if not gpu_type or "|" in gpu_type or "&" in gpu_type:
                    raise ConfigError(f"{prefix}.gpu_equivalence[{i}] has an invalid GPU type {gpu_type!r}")
                if gpu_type.lower() in seen:
                    raise ConfigError(f"{prefix}.gpu_equivalence: GPU type {gpu_type!r} is in two classes")
                seen.add(gpu_type.lower())


@dataclass(frozen=True)
class SimSection:
    """``[sim]``: the simulated slurmctld of ``slurmsched simulate`` (see docs/simulator.md).

    Attributes:
        weight_age, weight_fairshare, weight_job_size, weight_partition, priority_max_age_s:
            the simulated slurmctld's ``PriorityWeight*`` and ``PriorityMaxAge`` (default:
            the shipped ``contrib/slurm.conf.d/slurmsched.conf``). Fair-share is reported
            to the planner but not modelled (traces carry no associations: equal for all).
        multifactor_weight_job_size: ``PriorityWeightJobSize`` of the ``multifactor``
            reference policy (Slurm's multifactor with age and job size, no slurmsched).
        bf_max_job_test: jobs the simulated scheduler tests per pass (Slurm's ``bf_max_job_test``).
        target_load: offered load the cluster is sized for when neither the trace nor
            the command line gives its size.
        gpus_per_node: GPUs per node of a cluster sized from ``--gpus`` or the load.
        workers: policies simulated at once, each in a process of its own (each holds
            its own copy of the workload; 1 runs them one after another in-process).
        submit_plugin: model ``job_submit.lua``: the simulated daemon writes its submit
            cache (``daemon.submit_cache_*``) and the simulated slurmctld gives each new
            job the SiteFactor the script would (for sites that install the script).
    """

    weight_age: int = 10000
    weight_fairshare: int = 10000
    weight_job_size: int = 0
    weight_partition: int = 0
    priority_max_age_s: int = 86400
    multifactor_weight_job_size: int = 10000
    bf_max_job_test: int = 500
    target_load: float = 0.83
    gpus_per_node: int = 8
    workers: int = 1
    submit_plugin: bool = False

    def validate(self, prefix: str) -> None:
        """Raise :class:`ConfigError` naming the bad key."""
        for key in ("weight_age", "weight_fairshare", "weight_job_size", "weight_partition",
                    "multifactor_weight_job_size"):
            if getattr(self, key) < 0:
                raise ConfigError(f"{prefix}.{key} must be >= 0 (got {getattr(self, key)})")
        for key in ("priority_max_age_s", "bf_max_job_test", "gpus_per_node", "workers"):
            if getattr(self, key) < 1:
                raise ConfigError(f"{prefix}.{key} must be >= 1 (got {getattr(self, key)})")
        if not 0 < self.target_load <= 1.5:
            raise ConfigError(f"{prefix}.target_load must be > 0 and <= 1.5 (got {self.target_load})")


@dataclass(frozen=True)
class Config:
    """The whole configuration; one attribute per TOML section."""

    slurm: SlurmSection = field(default_factory=SlurmSection)
    db: DbSection = field(default_factory=DbSection)
    daemon: DaemonSection = field(default_factory=DaemonSection)
    policy: PolicySection = field(default_factory=PolicySection)
    planner: PlannerSection = field(default_factory=PlannerSection)
    constraints: ConstraintsSection = field(default_factory=ConstraintsSection)
    sim: SimSection = field(default_factory=SimSection)
    source: str = "defaults"

    @property
    def db_url(self) -> str:
        """The effective database URL (SQLite under the state directory by default)."""
        return self.db.url or f"sqlite:///{Path(self.daemon.state_dir) / 'slurmsched.db'}"

    def with_overrides(self, section: str, **values: Any) -> "Config":
        """A copy with some keys of one section replaced (``None`` values are ignored)."""
        values = {k: v for k, v in values.items() if v is not None}
        if not values:
            return self
        current = getattr(self, section)
        merged = _build_section(type(current), {**dataclasses.asdict(current), **values}, section)
        return dataclasses.replace(self, **{section: merged})


def _sections() -> dict[str, type]:
    return {f.name: _field_type(Config, f) for f in dataclasses.fields(Config) if f.name != "source"}


def _field_type(owner: type, f: dataclasses.Field) -> Any:
    return typing.get_type_hints(owner)[f.name]


def _coerce(value: Any, hint: Any, key: str) -> Any:
    """Convert a TOML or environment value to ``hint``; raise ConfigError naming ``key``.

    Numbers must be finite; a :data:`Seconds` key also takes a duration string
    (:func:`parse_seconds`); a string for a list is split at ``,`` (a list of lists:
    at ``;``, then each part at ``,``).
    """
    if typing.get_origin(hint) is Annotated:
        hint, *marks = typing.get_args(hint)
        if "duration" in marks and isinstance(value, str):
            seconds = parse_length(value)
            if seconds is None:
                raise ConfigError(f"{key} must be a number of seconds or a duration such as 90s, 5m, 6h"
                                  f" (got {value!r})")
            value = seconds
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None or value == "":
            return None
        return _coerce(value, args[0], key)
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            return value.lower() in ("1", "true", "yes", "on")
        raise ConfigError(f"{key} must be true or false (got {value!r})")
    if hint in (int, float):
        if isinstance(value, bool):
            raise ConfigError(f"{key} must be a number (got {value!r})")
        try:
            number = hint(value)
            finite = math.isfinite(number)
        except (TypeError, ValueError):
            raise ConfigError(f"{key} must be {'an integer' if hint is int else 'a number'} (got {value!r})") from None
        except OverflowError:  # an integer beyond any float
            raise ConfigError(f"{key} must be a finite number (got an integer of {len(str(value))} digits)") from None
        if hint is int and isinstance(value, float) and value != number:
            raise ConfigError(f"{key} must be an integer (got {value!r})")
        if not finite:
            raise ConfigError(f"{key} must be a finite number (got {number})")
        return number
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key} must be a string (got {value!r})")
        return value
    if origin in (tuple, list):
        (item,) = typing.get_args(hint)[:1] or (str,)
        if isinstance(value, str):
            separator = ";" if typing.get_origin(item) in (tuple, list) else ","
            value = [v.strip() for v in value.split(separator) if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key} must be a list (got {value!r})")
        return tuple(_coerce(v, item, f"{key}[{i}]") for i, v in enumerate(value))
    if origin is dict or hint is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(f"{key} must be a table (got {value!r})")
        return dict(value)
    return value


def _build_section(cls: type, raw: Mapping[str, Any], prefix: str) -> Any:
    """Build and validate one section from a mapping; unknown keys are errors."""
    hints = typing.get_type_hints(cls, include_extras=True)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - names)
    if unknown:
        raise ConfigError(f"unknown key {prefix}.{unknown[0]} (known: {', '.join(sorted(names)) or 'none'})")
    values = {k: _coerce(v, hints[k], f"{prefix}.{k}") for k, v in raw.items()}
    section = cls(**values)
    validate = getattr(section, "validate", None)
    if validate is not None:
        validate(prefix)
    return section


def parse_table(cls: type, raw: Mapping[str, Any], prefix: str) -> Any:
    """Build a typed, validated dataclass (a section or a policy's args) from a table.

    Values are coerced to the field types, unknown keys are errors, and the class's
    ``validate(prefix)`` runs last; every error is a :class:`ConfigError` naming
    ``<prefix>.<key>``.
    """
    return _build_section(cls, raw, prefix)


def _env_layer(environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """``SLURMSCHED_DAEMON_INTERVAL_S=30`` -> ``{"daemon": {"interval_s": "30"}}``.

    A key of a section's table (:meth:`PolicySection.tables`) goes into that table:
    ``SLURMSCHED_POLICY_QSSF_MAX_WAIT_H=48`` -> ``{"policy": {"qssf": {"max_wait_h": "48"}}}``.
    Names outside every section's prefix, ``SLURMSCHED_CONFIG`` and the twins of command
    options under a section's prefix (``SLURMSCHED_DB_DOWNGRADE_YES``) are left alone.

    Raises:
        ConfigError: a variable under a section's prefix names none of its keys; the
            message names the variable and lists the section's keys.
    """
    layer: dict[str, dict[str, Any]] = {}
    sections = _sections()
    for name, value in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX) or name == ENV_PREFIX + "CONFIG":
            continue
        rest = name[len(ENV_PREFIX):].lower()
        if rest.startswith(_COMMAND_TWINS):
            continue
        section = next((s for s in sections if rest.startswith(s + "_")), None)
        if section is None:
            continue
        key = rest[len(section) + 1:]
        tables: dict[str, type] = getattr(sections[section], "tables", dict)()
        known: dict[str, tuple[str, ...]] = {f.name: () for f in dataclasses.fields(sections[section]) if f.name not in tables}
        known.update({f"{table}_{f.name}": (table, f.name)
                      for table, args_type in tables.items() for f in dataclasses.fields(args_type)})
        if key not in known:
            listed = ", ".join(k if not known[k] else ".".join(known[k]) for k in sorted(known))
            raise ConfigError(f"unknown variable {name}: it names no key of [{section}] (known: {listed})")
        place = known[key]
        if place:
            layer.setdefault(section, {}).setdefault(place[0], {})[place[1]] = value
        else:
            layer.setdefault(section, {})[key] = value
    return layer


def _merged(table: Mapping[str, Any], env: Mapping[str, Any]) -> dict[str, Any]:
    """A section's TOML table with its environment layer over it, table by table."""
    merged = {**table}
    for key, value in env.items():
        below = table.get(key)
        merged[key] = {**below, **value} if isinstance(value, dict) and isinstance(below, Mapping) else value
    return merged


def load_config(path: str | os.PathLike[str] | None = None,
                environ: Mapping[str, str] | None = None) -> Config:
    """Load and validate the configuration.

    Args:
        path: TOML file; ``None`` means ``$SLURMSCHED_CONFIG`` or the default path if present.
        environ: environment to read ``SLURMSCHED_*`` from (``os.environ`` by default).

    Raises:
        ConfigError: unreadable file, TOML syntax error, unknown key or invalid value.
    """
    environ = os.environ if environ is None else environ
    explicit = path or environ.get(ENV_PREFIX + "CONFIG")
    file = Path(explicit) if explicit else (DEFAULT_CONFIG_PATH if DEFAULT_CONFIG_PATH.exists() else None)
    raw: dict[str, Any] = {}
    if file is not None:
        try:
            raw = tomllib.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file {file} does not exist") from None
        except OSError as exc:
            raise ConfigError(f"cannot read config file {file}: {exc.strerror}") from None
        except ValueError as exc:  # TOMLDecodeError, UnicodeDecodeError, an integer of over 4300 digits
            raise ConfigError(f"config file {file} is not valid TOML: {exc}") from None
    sections = _sections()
    unknown = sorted(set(raw) - set(sections))
    if unknown:
        raise ConfigError(f"unknown section [{unknown[0]}] in {file} (known: {', '.join(sorted(sections))})")
    env = _env_layer(environ)
    built = {}
    for name, cls in sections.items():
        table = raw.get(name, {})
        if not isinstance(table, Mapping):
            raise ConfigError(f"{name} must be a table in {file}")
        built[name] = _build_section(cls, _merged(table, env.get(name, {})), name)
    return Config(**built, source=str(file) if file else "defaults")
