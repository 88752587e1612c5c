"""``scontrol -a -o show partition``: each partition's ``PriorityTier`` and which is the default.

Slurm 22.05's ``sinfo --json`` lists nodes only (24.11+ adds partitions); scontrol's
one-line-per-partition text has the same fields on every version::

    PartitionName=gpu AllowGroups=ALL ... Default=YES ... PriorityJobFactor=1 PriorityTier=1 ...

Fields are ``Key=Value`` separated by spaces; partition settings are the admin's
(``slurm.conf``), so no user text can forge one.
"""

from __future__ import annotations

from slurmsched.errors import SlurmParseError
from slurmsched.model import PartitionRecord

#: scontrol arguments listing every partition (``-a``: hidden ones too), one line each.
SHOW_PARTITIONS_ARGS = ("-a", "-o", "show", "partition")


def parse_partitions(text: str) -> list[PartitionRecord]:
    """Partitions in the order scontrol lists them (``slurm.conf``'s order).

    A line without ``PriorityTier`` (not a Slurm this reads) keeps tier 1.

    Raises:
        SlurmParseError: a ``PartitionName`` line has an empty name or a ``PriorityTier``
            that is not a whole number.
    """
    partitions = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.startswith("PartitionName="):
            continue
        fields = dict(item.partition("=")[::2] for item in line.split(" ") if "=" in item)
        name, tier = fields.get("PartitionName", ""), fields.get("PriorityTier", "1")
        if not name or not (tier.isascii() and tier.isdigit()):
            raise SlurmParseError(f"scontrol show partition, line {lineno}: expected PartitionName=NAME and a "
                                  f"whole PriorityTier, got {line[:120]!r}")
        partitions.append(PartitionRecord(name, int(tier), fields.get("Default") == "YES"))
    return partitions
