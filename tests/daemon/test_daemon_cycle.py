"""The daemon against the live cluster: ordering, dry-run, pause, time limits, the lua cache."""

from __future__ import annotations

import re
import time

import pytest

from slurmsched.submit_cache import read_submit_cache

pytestmark = pytest.mark.slurm


def _seed(env) -> None:
    env.seed_history("short", [60, 70, 50, 65, 55])
    env.seed_history("long", [5000, 5200, 4800, 5100, 4900])


def test_once_orders_by_predicted_service_and_never_shortens_time_limits(daemon_env, busy):
    _seed(daemon_env)
    short = busy.submit("--gres=gpu:1", "-t", "120", name="short")
    long = busy.submit("--gres=gpu:1", "-t", "120", name="long")
    fresh = busy.submit("--gres=gpu:1", "-t", "30", name="never-seen")
    limits = daemon_env.time_limits([short, long, fresh])
    result = daemon_env.daemon().run(once=True, handle_signals=False)
    assert (result.cycles, result.failed) == (1, 0)
    factors = daemon_env.site_factors([short, long, fresh])
    # short: 1 GPU x ~1 min, long: ~83 min; a name without history still gets a value
    assert factors[short] > factors[long] > 0 and factors[fresh] > 0
    assert daemon_env.time_limits([short, long, fresh]) == limits
    with daemon_env.repo() as repo:
        applied = {c.job_id: c for c in repo.applied_changes() if c.kind == "SetSiteFactor"}
        assert {short, long, fresh} <= set(applied)
        assert applied[short].original == "0" and applied[short].current == str(factors[short])
    # a second cycle with nothing changed sends nothing
    daemon = daemon_env.daemon()
    report = daemon.cycle(time.time())
    assert report.plan.actions == () and report.outcomes == ()


def test_a_heterogeneous_jobs_components_get_one_site_factor_of_the_whole_job(daemon_env, busy):
    _seed(daemon_env)
    leader = busy.submit("--gres=gpu:1", "-t", "120", ":", "--gres=gpu:2", "-t", "120", name="long")
    components = dict(line.split() for line in daemon_env.cluster.run(
        "squeue", "-h", "-j", str(leader), "-o", "%i %A").stdout.splitlines())  # 2481+1 -> 2482
    other = int(components[f"{leader}+1"])
    single = busy.submit("--gres=gpu:1", "-t", "120", name="long")
    result = daemon_env.daemon().run(once=True, handle_signals=False)
    assert (result.cycles, result.failed) == (1, 0)
    factors = daemon_env.site_factors([leader, other, single])
    # the whole job: 3 GPUs x ~83 min, ordered after the same run on 1 GPU
    assert factors[leader] == factors[other] and 0 < factors[leader] < factors[single]
    explained = daemon_env.cli("explain", str(other)).stdout
    assert f"heterogeneous job {leader} (2 components, scored as one)" in explained and "x 3 GPUs" in explained
    assert re.search(r"^reverted 3 changes on 3 jobs", daemon_env.cli("revert").stdout, re.M)
    assert daemon_env.site_factors([leader, other]) == {leader: 0, other: 0}


def test_dry_run_sends_nothing_to_slurm(daemon_env, busy, lua_cache):
    daemon_env.write(dry_run=True, submit_cache=str(lua_cache))
    lua_cache.write_text("left over from a live run\n")   # stands for the live daemon's cache
    left = lua_cache.stat()
    _seed(daemon_env)
    short = busy.submit("--gres=gpu:1", "-t", "120", name="short")
    long = busy.submit("--gres=gpu:1", "-t", "120", name="long")
    before = daemon_env.site_factors([short, long])
    daemon = daemon_env.daemon()
    daemon.run(once=True, handle_signals=False)
    daemon.cycle(time.time())
    assert daemon_env.site_factors([short, long]) == before == {short: 0, long: 0}
    # a preview touches no shared state: the live daemon's cache stays, byte for byte
    assert lua_cache.read_text() == "left over from a live run\n"
    assert (lua_cache.stat().st_ino, lua_cache.stat().st_mtime_ns) == (left.st_ino, left.st_mtime_ns)
    with daemon_env.repo() as repo:
        assert repo.applied_changes() == []
        outcomes = [d.outcome for _, d in repo.decisions_for(short) if d.kind == "SetSiteFactor"]
        assert outcomes == ["dry-run"]       # planned and recorded once, never sent
        assert {c.kind for c in repo.recent_cycles()} == {"dry-run"}
        first = repo.recent_cycles()[-1]
        assert (first.actions, first.failed) == (2, 0)  # status counts what a dry run would send


def test_pause_stops_actions_within_one_cycle(daemon_env, busy, lua_cache):
    daemon_env.write(submit_cache=str(lua_cache))
    _seed(daemon_env)
    first = busy.submit("--gres=gpu:1", "-t", "120", name="short")
    daemon = daemon_env.daemon()
    daemon.cycle(time.time())
    assert daemon_env.site_factors([first])[first] > 0
    assert read_submit_cache(lua_cache) is not None
    paused = daemon_env.cli("pause")
    assert paused.exit_code == 0, paused.output
    assert not lua_cache.exists()            # new submissions are left alone at once
    second = busy.submit("--gres=gpu:1", "-t", "120", name="short")
    assert daemon_env.site_factors([second]) == {second: 0}
    report = daemon.cycle(time.time())
    assert report.paused and report.outcomes == ()
    assert daemon_env.site_factors([second]) == {second: 0}
    assert not lua_cache.exists()
    with daemon_env.repo() as repo:
        assert second not in {c.job_id for c in repo.applied_changes()}
    assert daemon_env.cli("resume").exit_code == 0
    daemon.cycle(time.time())
    assert daemon_env.site_factors([second])[second] == daemon_env.site_factors([first])[first]
    assert read_submit_cache(lua_cache) is not None


def test_cache_gives_new_jobs_the_daemons_value_at_submit(daemon_env, busy, lua_cache):
    daemon_env.write(submit_cache=str(lua_cache))
    _seed(daemon_env)
    first = busy.submit("--gres=gpu:2", "-t", "120", name="long")
    daemon = daemon_env.daemon()
    daemon.cycle(time.time())
    cache = read_submit_cache(lua_cache)
    assert {(e.user, e.name) for e in cache.estimates} >= {(daemon_env.user, busy.prefix + "long")}
    second = busy.submit("--gres=gpu:2", "-t", "120", name="long")   # valued by job_submit.lua
    factors = daemon_env.site_factors([first, second])
    assert factors[second] == factors[first] > 0
    report = daemon.cycle(time.time())
    assert report.outcomes == ()             # nothing to send: the lua value is the daemon's
    with daemon_env.repo() as repo:
        assert second in {c.job_id for c in repo.applied_changes()}    # adopted, so revert covers it


def test_live_daemon_rewrites_a_cache_that_went_missing(daemon_env, busy, lua_cache):
    daemon_env.write(submit_cache=str(lua_cache))   # max_age 60 s: rewritten every 20 s when present
    _seed(daemon_env)
    daemon = daemon_env.daemon()
    daemon.cycle(time.time())
    written = read_submit_cache(lua_cache)
    assert written is not None
    lua_cache.unlink()                       # e.g. removed by an older dry run, or by hand
    daemon.cycle(time.time())                # long before a rewrite would be due
    assert read_submit_cache(lua_cache) is not None
    second = busy.submit("--gres=gpu:1", "-t", "120", name="short")   # job_submit.lua values it again
    assert daemon_env.site_factors([second])[second] > 0


def test_a_job_name_with_a_double_quote_has_one_name_live_in_history_and_at_submit(
        daemon_env, slurm_jobs, lua_cache):
    # Seen on the dev cluster (Slurm 22.05.8) for a job named quote"s: squeue --json and
    # scontrol show job give the name quote"s, sacct -P -o jobname and sacct --json give
    # quote`s (slurmdbd's as_mysql stores '"' as '`'); it's and back\sl come back unchanged.
    daemon_env.write(submit_cache=str(lua_cache))
    runs = [slurm_jobs.submit("-t", "10", name='say "hi"', wrap="sleep 1") for _ in range(2)]
    for job in runs:
        slurm_jobs.wait_state(job, {"COMPLETED"}, timeout=60)
    stored = slurm_jobs.prefix + "say `hi`"
    gateway = daemon_env.daemon().gateway
    deadline = time.monotonic() + 60
    while not set(runs) <= {j.job_id for j in gateway.finished_since(time.time() - 600) if j.name == stored}:
        assert time.monotonic() < deadline, "the finished runs never reached accounting under their stored name"
        time.sleep(1)
    daemon = daemon_env.daemon()
    daemon.cycle(time.time())                # imports both runs and writes the cache
    assert (daemon_env.user, stored) in {(e.user, e.name) for e in read_submit_cache(lua_cache).estimates}
    blocker = slurm_jobs.submit("-N", "4", "--exclusive", name="blocker", wrap="sleep 300")
    slurm_jobs.wait_state(blocker, {"RUNNING"}, timeout=90)
    new = slurm_jobs.submit("-t", "10", name='say "hi"')

    assert daemon_env.site_factors([new])[new] > 0   # job_submit.lua found it in the cache
    (live,) = [j for j in gateway.snapshot().pending if j.job_id == new]
    assert live.name == stored
    report = daemon.cycle(time.time())
    assert report.outcomes == ()             # the value given at submit is the daemon's own
    explained = daemon_env.cli("explain", str(new))
    assert "from user+name, same size: mean of 2 runs" in explained.stdout, explained.output


def test_a_bug_in_a_cycle_stops_the_loop_with_its_traceback_logged(daemon_env, caplog):
    daemon = daemon_env.daemon()
    real = daemon.cycle

    def cycle(now: float):
        real(now)
        raise ZeroDivisionError("division by zero")  # stands for a bug found after a cycle's work

    daemon.cycle = cycle
    with pytest.raises(ZeroDivisionError):
        daemon.run(handle_signals=False)  # not retried: the loop's state may be half-updated
    (record,) = [r for r in caplog.records if "internal error" in r.message]
    assert record.exc_info[0] is ZeroDivisionError  # the traceback goes to the journal
    with daemon_env.repo() as repo:
        assert len(repo.recent_cycles()) == 1
