"""The command line's shared parameter types."""

from __future__ import annotations

import click
import pytest

from slurmsched.cli.params import Duration, JobId, Moment


@pytest.mark.parametrize(("text", "job_id"), [("12345", 12345), (" 7 ", 7), (42, 42)])
def test_job_id_reads_whole_numbers(text, job_id):
    assert JobId().convert(text, None, None) == job_id


@pytest.mark.parametrize(("text", "message"), [
    ("9_1", r"'9_1' is an array task: give its own job id"),  # int() would read it as job 91
    ("1_000", r"'1_000' is an array task"),
    ("7_[2-3]", r"'7_\[2-3\]' is an array's pending tasks, queued as one job: give the array's job id 7$"),
    ("7_[1,4-9%2]", r"give the array's job id 7$"),  # squeue's form with a throttle
    ("12a", r"'12a' is not a job id"),
    ("0", r"'0' is not a job id"),
    ("-3", r"'-3' is not a job id"),
    ("\u0663", r"is not a job id"),  # an Arabic-Indic digit: int() would take it
    ("4294967296", r"'4294967296' is not a job id \(a whole number from 1 to 4294967295\)"),  # Slurm's are 32-bit
])
def test_job_id_refuses_anything_else(text, message):
    with pytest.raises(click.BadParameter, match=message):
        JobId().convert(text, None, None)


@pytest.mark.parametrize(("text", "seconds"), [("3600", 3600.0), ("90m", 5400.0), ("1.5h", 5400.0), ("1d", 86400.0),
                                               ("1e3", 1000.0)])  # as SLURMSCHED_DAEMON_INTERVAL_S=1e3 reads
def test_duration_reads_units(text, seconds):
    assert Duration().convert(text, None, None) == seconds


@pytest.mark.parametrize("text", ["0", "-5m", "5y", "m", "-5", "inf", "nan"])
def test_duration_refuses_what_is_not_a_positive_length(text):
    with pytest.raises(click.BadParameter, match="is not a positive duration"):
        Duration().convert(text, None, None)


@pytest.mark.parametrize("text", ["99999999999w", "0001-01-01"])
def test_moment_refuses_what_no_date_can_show(text):
    with pytest.raises(click.BadParameter, match="is out of the range of dates"):
        Moment().convert(text, None, None)
