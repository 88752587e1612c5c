"""``scontrol -a -o show partition``: each partition's ``PriorityTier``, ``PriorityJobFactor``
and which is the default.

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

    Each partition's priority factor is its ``PriorityJobFactor`` over the largest of
    all partitions' (as ``priority/multifactor`` normalises it; 0 when all are 0). A
    line without ``PriorityTier`` or ``PriorityJobFactor`` (not a Slurm this reads)
    counts 1 for it.

    Raises:
        SlurmParseError: a ``PartitionName`` line has an empty name, or a ``PriorityTier``
            or ``PriorityJobFactor`` that is not a whole number.
    """
    found: list[tuple[str, int, bool, int]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.startswith("PartitionName="):
            continue
        fields = dict(item.partition("=")[::2] for item in line.split(" ") if "=" in item)
        name = fields.get("PartitionName", "")
        tier, factor = fields.get("PriorityTier", "1"), fields.get("PriorityJobFactor", "1")
        if not name or not all(n.isascii() and n.isdigit() for n in (tier, factor)):
            raise SlurmParseError(f"scontrol show partition, line {lineno}: expected PartitionName=NAME and whole "
                                  f"PriorityTier and PriorityJobFactor, got {line[:120]!r}")
        found.append((name, int(tier), fields.get("Default") == "YES", int(factor)))
    top = max((factor for *_, factor in found), default=0)
    return [PartitionRecord(name, tier, default, factor / top if top else 0.0)
            for name, tier, default, factor in found]
