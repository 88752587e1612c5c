"""The controller container restarted in the middle of a run: the daemon container rides it out.

Jobs end while slurmctld is down (their slurmd report once it is back). The daemon keeps
running (its container is not restarted), its first cycle after the controller answers
again succeeds, and its history holds every finished attempt exactly once, as sacct does.
"""

from __future__ import annotations

import calendar
import time

import pytest

pytestmark = [pytest.mark.compose, pytest.mark.restarts_controller]


def _started_at(compose, container: str) -> str:
    return compose.engine_cmd("container", "inspect", "-f", "{{.State.StartedAt}}", container).stdout.strip()


def _sacct_attempts(compose, since: float, prefix: str) -> list[tuple[int, str, float]]:
    """(job id, state, start time) of every attempt of our jobs (the containers run in UTC)."""
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(since - 60))
    out = compose.slurm("sacct", "-n", "-P", "-X", "-D", "-a", "-S", start, "-E", "now",
                        "-o", "JobIDRaw,JobName,State,Start").stdout
    rows = [line.split("|") for line in out.splitlines()]     # other tests' names may hold newlines
    return sorted((int(r[0]), r[2].split()[0], calendar.timegm(time.strptime(r[3], "%Y-%m-%dT%H:%M:%S")))
                  for r in rows if len(r) == 4 and r[1].startswith(prefix) and r[3][:1].isdigit())


def test_controller_restart_mid_run(compose, compose_jobs):
    t0 = time.time()
    daemon_started = _started_at(compose, compose.daemon)
    sleeps = {compose_jobs.submit("--gres=gpu:v100:1", "-t", "5", name=f"v{i}", wrap=f"sleep {12 + i}"): 12 + i
              for i in range(3)}
    sleeps |= {compose_jobs.submit("--gres=gpu:a100:2", "-t", "5", name=f"a{i}", wrap="sleep 15"): 15
               for i in range(2)}
    sleeps[compose_jobs.submit("-n", "2", "-t", "5", name="cpu", wrap="sleep 12")] = 12
    ids = list(sleeps)
    compose.wait("the jobs to run", lambda: sorted(compose_jobs.states().values()) == ["RUNNING"] * len(ids),
                 timeout=10)

    compose.engine_cmd("stop", "-t", "20", compose.controller)
    time.sleep(20)                      # every job ends while the controller is down
    compose.engine_cmd("start", compose.controller)
    compose.wait("slurmctld to answer", lambda: compose.slurm("scontrol", "ping", check=False).returncode == 0,
                 timeout=120)
    back = time.time()

    # within one cycle: the first cycle to finish after the controller is back (one in flight
    # then, or the next, at most one interval later) is on record; a failed cycle is not
    def first_cycle_after():
        done = [c for c in compose.records(t0)["cycles"] if c[1] + c[2] >= back]
        return min(done, key=lambda c: c[1]) if done else None

    cycle = compose.wait("a cycle after the restart", first_cycle_after, timeout=2 * compose.interval_s + 60)
    assert cycle[1] - back <= compose.interval_s + 5, (cycle, back)
    assert _started_at(compose, compose.daemon) == daemon_started    # the daemon process itself survived

    # history: every attempt that sacct reports, once (no duplicates, none lost)
    compose.wait("the jobs to finish", lambda: all(s == "COMPLETED" for s in compose_jobs.states().values()),
                 timeout=120)
    sacct = compose.wait("sacct to report every job",
                         lambda: (rows := _sacct_attempts(compose, t0, compose_jobs.prefix))
                         and {r[0] for r in rows} == set(ids) and rows, timeout=60)
    # each job ended while the controller was down (sacct's End is when slurmctld heard of it)
    assert all(start + sleeps[i] < back for i, _, start in sacct), (sacct, sleeps, back)

    def recorded():
        rows = [r for r in compose.records(t0)["history"] if r[2].startswith(compose_jobs.prefix)]
        return rows if {r[0] for r in rows} >= set(ids) else None

    history = compose.wait("the daemon to record every job", recorded, timeout=3 * compose.interval_s + 60)
    assert len({(r[0], r[1]) for r in history}) == len(history), history       # no duplicated rows
    assert sorted((r[0], r[3]) for r in history) == [(i, state) for i, state, _ in sacct]   # none lost
