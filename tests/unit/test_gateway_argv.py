"""Actions -> scontrol argv: what is sent, and what is refused (hostile values)."""

from __future__ import annotations

import typing

import pytest

from slurmsched.errors import InvalidAction
from slurmsched.gateway.argv import format_duration, site_factor_argv, switches_value, update_argv
from slurmsched.model import Action, SetFeatures, SetSiteFactor, SetSwitches

#: The only keys slurmsched ever sends in ``scontrol update``.
ALLOWED_KEYS = {"JobId", "SiteFactor", "Switches", "Features"}


@pytest.mark.parametrize("action, argv", [
    (SetSiteFactor(7, 1200), ["update", "JobId=7", "SiteFactor=1200"]),
    (SetSiteFactor(7, -50), ["update", "JobId=7", "SiteFactor=-50"]),
    (SetSiteFactor(7, 0), ["update", "JobId=7", "SiteFactor=0"]),
    (SetSwitches(8, 1, 600), ["update", "JobId=8", "Switches=1@00:10:00"]),
    (SetSwitches(8, 2, 2 * 86400 + 61), ["update", "JobId=8", "Switches=2@2-00:01:01"]),
    (SetSwitches(8, 1), ["update", "JobId=8", "Switches=1"]),
    (SetSwitches(8, 0, 600), ["update", "JobId=8", "Switches=0"]),  # clears the request
    (SetFeatures(9, "a100"), ["update", "JobId=9", "Features=a100"]),
    (SetFeatures(9, "[a100|v100]&leaf1"), ["update", "JobId=9", "Features=[a100|v100]&leaf1"]),
    (SetFeatures(9, ""), ["update", "JobId=9", "Features="]),
])
def test_argv_for_each_action(action, argv):
    assert update_argv(action) == argv


def test_batched_site_factor():
    assert site_factor_argv([3, 4, 5], 900) == ["update", "JobId=3,4,5", "SiteFactor=900"]
    with pytest.raises(InvalidAction):
        site_factor_argv([], 900)


HOSTILE = [
    "x'; rm -rf / #", "a100 Nice=-10000", "a100\nPriority=1", "a100\tGres=gpu:v100:1", "$(reboot)",
    "`id`", "a100;id", 'a"100', "a100=1", "TimeLimit=1", "über", "a100\x00", " a100", "a100 ",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_names_are_refused(value):
    with pytest.raises(InvalidAction) as err:
        update_argv(SetFeatures(1, value))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("job_id", [0, -1, True, "12", "12,13", 1.5, None])
def test_bad_job_ids_are_refused(job_id):
    with pytest.raises(InvalidAction, match="job id"):
        update_argv(SetSiteFactor(job_id, 1))
    with pytest.raises(InvalidAction, match="job id"):
        update_argv(SetFeatures(job_id, "a100"))


@pytest.mark.parametrize("value", [2_147_483_646, -2_147_483_646, 1.5, "100", True, None])
def test_bad_site_factors_are_refused(value):
    with pytest.raises(InvalidAction, match="SiteFactor"):
        update_argv(SetSiteFactor(1, value))


@pytest.mark.parametrize("count, wait", [(-1, None), (1, -5), ("2", None), (1, 1.5), (True, None)])
def test_bad_switch_requests_are_refused(count, wait):
    with pytest.raises(InvalidAction):
        switches_value(count, wait)


def test_no_action_can_touch_gres_time_limit_or_nice():
    """The Action union is exactly these three, and each maps to an allowed key only."""
    kinds = set(typing.get_args(Action))
    assert kinds == {SetSiteFactor, SetSwitches, SetFeatures}
    samples = [SetSiteFactor(1, 5), SetSwitches(1, 1, 60), SetFeatures(1, "a100")]
    for action in samples:
        argv = update_argv(action)
        assert argv[0] == "update"
        assert {arg.split("=", 1)[0] for arg in argv[1:]} <= ALLOWED_KEYS


def test_format_duration():
    assert format_duration(0) == "00:00:00"
    assert format_duration(3600 * 25 + 5) == "1-01:00:05"
