"""``sprio -h -o '%i|%S|%Y'``: each pending job's SiteFactor (no JSON field carries it).

sprio only answers under ``PriorityType=priority/multifactor``; the gateway does not call
it otherwise. A job submitted to several partitions is listed once per partition with
the same SiteFactor.
"""

from __future__ import annotations

from slurmsched.errors import SlurmParseError

#: Arguments for sprio: no header, job id | site factor | priority, every user's jobs.
SPRIO_ARGS = ("-h", "-o", "%i|%S|%Y")


def parse_sprio(text: str) -> dict[int, int]:
    """Parse sprio's ``job|site|priority`` lines into job id -> SiteFactor.

    Raises:
        SlurmParseError: a line is not three ``|``-separated integers.
    """
    factors: dict[int, int] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        fields = line.split("|")
        try:
            if len(fields) != 3:
                raise ValueError
            factors[int(fields[0])] = int(fields[1])
        except ValueError:
            raise SlurmParseError(f"sprio: line {lineno} is not 'job|site|priority': {line[:80]!r}") from None
    return factors
