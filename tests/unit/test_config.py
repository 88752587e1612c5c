"""Loading the configuration: finite numbers, environment variables, every policy table."""

from __future__ import annotations

import dataclasses
import typing

import click
import pytest

from slurmsched.cli import main
from slurmsched.config import Config, _env_layer, load_config, parse_seconds
from slurmsched.errors import ConfigError
from slurmsched.policy.qssf import QssfArgs
from slurmsched.sim.policies import parse_policies


@pytest.fixture
def toml(tmp_path):
    """Write a config file and return its path (so no /etc file is read)."""
    path = tmp_path / "slurmsched.toml"

    def write(text: str = "") -> str:
        path.write_text(text)
        return str(path)

    return write


def _float_keys() -> list[tuple[str, str]]:
    """Every float key as (TOML table, key): each section's, and ``[policy.qssf]``'s."""
    keys = []
    for section in dataclasses.fields(Config):
        if section.name == "source":
            continue
        cls = typing.get_type_hints(Config)[section.name]
        keys += [(section.name, f.name) for f in dataclasses.fields(cls) if typing.get_type_hints(cls)[f.name] is float]
    return keys + [("policy.qssf", f.name) for f in dataclasses.fields(QssfArgs)
                   if typing.get_type_hints(QssfArgs)[f.name] is float]


@pytest.mark.parametrize(("table", "key"), _float_keys())
@pytest.mark.parametrize("value", ["inf", "-inf", "nan"])
def test_every_float_key_refuses_non_finite_numbers_from_toml_and_environment(toml, table, key, value):
    message = rf"{table}\.{key} must be a finite number \(got {value}\)"
    with pytest.raises(ConfigError, match=message):
        load_config(toml(f"[{table}]\n{key} = {value}\n"), environ={})
    variable = "SLURMSCHED_" + f"{table}_{key}".replace(".", "_").upper()
    with pytest.raises(ConfigError, match=message):
        load_config(toml(), environ={variable: value})


def test_float_keys_cover_the_known_crashes():
    assert {("policy.qssf", "max_wait_h"), ("planner", "max_service_gpu_h"), ("daemon", "interval_s")} <= set(
        _float_keys())


@pytest.mark.parametrize(("variant", "message"), [
    ("qssf:max_wait_h=inf", r"policy\.qssf\.max_wait_h must be a finite number \(got inf\)"),
    ("qssf:max_wait_h=1e308", r"policy\.qssf\.max_wait_h must be at least 1 s .* and at most 1e\+06 h"),
    ("qssf:halflife_h=1e-320", r"policy\.qssf\.halflife_h must be at least 1 s"),
    ("qssf:aging_step_h=1e-310", r"policy\.qssf\.aging_step_h must be at least 1 s"),
    ("qssf:cpu_gpu_weight=1e308", r"policy\.qssf\.cpu_gpu_weight must be at most 1e\+06"),
    ("qssf:planner.max_service_gpu_h=inf", r"planner\.max_service_gpu_h must be a finite number \(got inf\)"),
    ("qssf:planner.level_ratio=1.0000000001", r"planner\.level_ratio 1\.0000000001 makes \d+ SiteFactor levels"),
])
def test_simulated_variants_refuse_values_that_overflow(variant, message):
    with pytest.raises(ConfigError, match=message):
        parse_policies(variant)


@pytest.mark.parametrize(("text", "message"), [
    ("[db]\nbusy_timeout_s = 1e12\n", r"db\.busy_timeout_s must be >= 0 and <= 2147483\.647"),
    ("[daemon]\ninterval_s = 1e308\nsubmit_cache_max_age_s = 1e308\n", r"daemon\.interval_s must be at most 9223372036 s \(got 1e\+308\)"),
])
def test_seconds_beyond_what_they_feed_are_refused(toml, text, message):
    with pytest.raises(ConfigError, match=message):
        load_config(toml(text), environ={})


@pytest.mark.parametrize(("text", "environ", "message"), [
    ("[daemon]\ninterval_s = 1" + "0" * 400 + "\n", {},
     r"daemon\.interval_s must be a finite number \(got an integer of 401"),
    ("", {"SLURMSCHED_PLANNER_MAX_RPCS_PER_CYCLE": "1" + "0" * 400}, r"planner\.max_rpcs_per_cycle must be a finite"),
    ("[daemon]\ninterval_s = 1" + "0" * 5000 + "\n", {}, r"is not valid TOML: Exceeds the limit"),
    ("[daemon]\npredictor = \"nope\"\n", {}, r"daemon\.predictor must be one of slurmsched, helios, last2, user_limit"),
    ("", {"SLURMSCHED_DAEMON_STATE_DIR": ""}, r"daemon\.state_dir must name a directory \(it is empty\)"),
    ("", {"SLURMSCHED_DB_URL": "mysql://x/y"}, r"db\.url: unsupported database 'mysql'"),
    ("", {"SLURMSCHED_DB_URL": "::"}, r"db\.url: not a database URL"),
    ("[daemon]\nfit_history_jobs = -1\n", {}, r"daemon\.fit_history_jobs must be >= 0, 0 for every finished job"),
    ("", {"SLURMSCHED_DAEMON_METRICS_FILE": "/var/lib/node_exporter/slurmsched.txt"},
     r"daemon\.metrics_file must end in \.prom, the files node_exporter's textfile collector reads"),
])
def test_values_refused_at_load_name_their_key(toml, text, environ, message):
    with pytest.raises(ConfigError, match=message):
        load_config(toml(text), environ=environ)


def test_db_url_takes_what_db_takes(toml):
    """``[db] url`` and ``--db`` share one rule: a driver ``--db`` takes is taken here too."""
    url = "sqlite+pysqlite:////tmp/x.db"
    assert load_config(toml(), environ={"SLURMSCHED_DB_URL": url}).db.url == url


def test_nested_table_keys_from_the_environment(toml):
    path = toml("[policy.qssf]\nhalflife_h = 6\n")
    with pytest.raises(ConfigError, match=r"policy\.qssf\.max_wait_h must be > 0 \(got -1\.0\)"):
        load_config(path, environ={"SLURMSCHED_POLICY_QSSF_MAX_WAIT_H": "-1"})
    loaded = load_config(path, environ={"SLURMSCHED_POLICY_QSSF_MAX_WAIT_H": "48"})
    assert loaded.policy.qssf == {"halflife_h": 6, "max_wait_h": "48"}  # the file's keys stay


def test_list_of_lists_from_the_environment(toml):
    loaded = load_config(toml(), environ={"SLURMSCHED_CONSTRAINTS_GPU_EQUIVALENCE": "a100, h100; l40s,a40",
                                          "SLURMSCHED_PLANNER_PROTECTED_QOS": "urgent,admin"})
    assert loaded.constraints.gpu_equivalence == (("a100", "h100"), ("l40s", "a40"))
    assert loaded.planner.protected_qos == ("urgent", "admin")


@pytest.mark.parametrize(("variable", "known"), [
    ("SLURMSCHED_DAEMON_INTERVALL_S", r"\[daemon\] \(known: dry_run, fit_history_jobs, interval_s, "),
    ("SLURMSCHED_POLICY_QSSF_MAX_WAIT", r"\[policy\] \(known: name, qssf\.aging_step_h, "),
    ("SLURMSCHED_POLICY_QSSF", r"\[policy\] \(known: name, "),
])
def test_misspelled_variable_is_refused_naming_it_and_the_keys(toml, variable, known):
    with pytest.raises(ConfigError, match=rf"unknown variable {variable}: it names no key of {known}"):
        load_config(toml(), environ={variable: "5"})


def _options() -> list[tuple[click.Option, str]]:
    """Every option of the command line that takes a value, with its command's ``SLURMSCHED_<COMMAND>`` prefix."""
    options = []

    def walk(command: click.Command, prefix: str) -> None:
        options.extend((p, prefix) for p in command.params if isinstance(p, click.Option) and p.expose_value)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{prefix}_{name.replace('-', '_').upper()}")

    walk(main, "SLURMSCHED")
    return options


def _option_twins() -> list[str]:
    return [option.envvar for option, _ in _options()]


@pytest.mark.parametrize(("option", "prefix"), _options(), ids=lambda v: getattr(v, "name", v))
def test_every_option_has_the_twin_its_help_names(option, prefix):
    """The admin guide's rule: a config key's variable, else SLURMSCHED_<COMMAND>_<OPTION>; no hidden alias."""
    flag = max(option.opts, key=len).lstrip("-").replace("-", "_").upper()
    assert isinstance(option.envvar, str) and option.show_envvar
    assert option.envvar == f"{prefix}_{flag}" or _env_layer({option.envvar: "1"}), option.envvar
    assert not option.allow_from_autoenv or option.envvar == f"{prefix}_{option.name.upper()}"


@pytest.mark.parametrize("twin", _option_twins())
def test_option_twins_and_other_variables_are_not_refused(toml, twin):
    for variable in (twin, "SLURMSCHED_DEV_STATE", "SLURMSCHED_TRACES"):
        try:
            load_config(toml(), environ={variable: "1"})
        except ConfigError as exc:
            assert "unknown variable" not in str(exc)


@pytest.mark.parametrize(("text", "seconds"), [("30", 30.0), ("90s", 90.0), ("5m", 300.0), ("1.5h", 5400.0),
                                               ("1d", 86400.0), (" 2w ", 1209600.0)])
def test_parse_seconds(text, seconds):
    assert parse_seconds(text) == seconds


@pytest.mark.parametrize("text", ["-5m", "5y", "m", "1e3", ""])
def test_parse_seconds_refuses_what_is_no_length(text):
    assert parse_seconds(text) is None
    assert parse_seconds("30", bare=False) is None


def test_interval_takes_a_duration_like_run_interval(toml):
    assert load_config(toml(), environ={"SLURMSCHED_DAEMON_INTERVAL_S": "5m"}).daemon.interval_s == 300.0
    assert load_config(toml('[daemon]\ninterval_s = "90s"\nrefit_interval_s = "6h"\n'),
                       environ={}).daemon.refit_interval_s == 21600.0
    with pytest.raises(ConfigError, match=r"daemon\.interval_s must be a number of seconds or a duration such as"
                                          r" 90s, 5m, 6h \(got '5 min'\)"):
        load_config(toml(), environ={"SLURMSCHED_DAEMON_INTERVAL_S": "5 min"})


def test_unused_policy_table_is_validated_too(toml):
    with pytest.raises(ConfigError, match=r"unknown key policy\.fifo\.foo \(known: none\)"):
        load_config(toml("[policy.fifo]\nfoo = 1\n"), environ={})
    with pytest.raises(ConfigError, match=r"policy\.qssf\.max_wait_h must be > 0"):
        load_config(toml('[policy]\nname = "fifo"\n[policy.qssf]\nmax_wait_h = -1\n'), environ={})


def test_cache_max_age_is_held_to_the_interval_only_when_a_cache_is_written(toml):
    """``submit_cache_max_age_s >= interval_s`` binds a daemon that writes the cache: not a
    dry run (``run --once --dry-run --interval 1h``), nor ``submit_cache_entries = 0``."""
    stale = r"daemon\.submit_cache_max_age_s must be >= interval_s \(900\.0 < 3600\.0\)"
    with pytest.raises(ConfigError, match=stale):
        load_config(toml('[daemon]\ninterval_s = "1h"\n'), environ={})
    assert load_config(toml('[daemon]\ninterval_s = "1h"\ndry_run = true\n'), environ={}).daemon.interval_s == 3600
    assert load_config(toml('[daemon]\ninterval_s = "1h"\nsubmit_cache_entries = 0\n'), environ={}).daemon.dry_run is False
    config = load_config(toml(), environ={})
    assert config.with_overrides("daemon", interval_s=3600.0, dry_run=True).daemon.interval_s == 3600
    with pytest.raises(ConfigError, match=stale):  # run --interval 1h, live
        config.with_overrides("daemon", interval_s=3600.0)
    with pytest.raises(ConfigError, match=stale):  # run --no-dry-run over a dry-run config
        load_config(toml('[daemon]\ninterval_s = "1h"\ndry_run = true\n'), environ={}).with_overrides(
            "daemon", dry_run=False)
