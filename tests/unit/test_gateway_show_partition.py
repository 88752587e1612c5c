"""``scontrol -a -o show partition`` text -> partitions with their ``PriorityTier``.

The fixture is real output of Slurm 22.05.8 (dev cluster) after
``scontrol update PartitionName=short PriorityTier=2``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slurmsched.errors import SlurmParseError
from slurmsched.gateway.show_partition import parse_partitions
from slurmsched.model import PartitionRecord

TEXT = (Path(__file__).resolve().parents[1] / "fixtures" / "slurm-json" / "22.05"
        / "scontrol_show_partition.txt").read_text()


def test_partitions_tiers_and_default_from_real_output():
    assert parse_partitions(TEXT) == [PartitionRecord("gpu", 1, True), PartitionRecord("short", 2, False)]


def test_no_partitions_and_lines_without_a_tier():
    assert parse_partitions("") == [] and parse_partitions("No partitions in the system\n") == []
    assert parse_partitions("PartitionName=a Default=NO State=UP\n") == [PartitionRecord("a", 1, False, 1.0)]


def test_priority_factors_are_normalised_by_the_largest_job_factor():
    text = ("PartitionName=gpu Default=YES PriorityJobFactor=1 PriorityTier=1\n"
            "PartitionName=cpu Default=NO PriorityJobFactor=0 PriorityTier=1\n"
            "PartitionName=urgent Default=NO PriorityJobFactor=4 PriorityTier=2\n")
    assert [(p.name, p.priority_factor) for p in parse_partitions(text)] == [("gpu", 0.25), ("cpu", 0.0),
                                                                            ("urgent", 1.0)]
    assert parse_partitions("PartitionName=a PriorityJobFactor=0\n") == [PartitionRecord("a", 1, False, 0.0)]


@pytest.mark.parametrize("line", ["PartitionName=a PriorityTier=high", "PartitionName= PriorityTier=1",
                                  "PartitionName=a PriorityTier=-1", "PartitionName=a PriorityJobFactor=1.5"])
def test_a_malformed_line_is_a_parse_error_naming_it(line):
    with pytest.raises(SlurmParseError, match="scontrol show partition, line 2"):
        parse_partitions("PartitionName=ok PriorityTier=1\n" + line + "\n")
