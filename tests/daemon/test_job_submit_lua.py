"""contrib/slurm.conf.d/job_submit.lua loaded into the live slurmctld.

up.sh installs the script beside slurm.conf with ``JobSubmitPlugins=lua``; the script
reads ``slurmsched-submit.cache`` from its own directory. A job it matches must start
with the cache's SiteFactor (seen in ``sprio``), and every way the cache can be
missing or wrong must leave jobs untouched and still accepted.
"""

from __future__ import annotations

import time

import pytest
from polling import wait_until

from slurmsched.config import PlannerSection
from slurmsched.model import SchedulerConfig
from slurmsched.planner import SiteFactorScale
from slurmsched.submit_cache import (SubmitCache, SubmitEstimate, levels_for, read_submit_cache, submit_site_factor,
                                     write_submit_cache)

pytestmark = pytest.mark.slurm

LEVELS = levels_for(SiteFactorScale.build(PlannerSection(), SchedulerConfig(weight_age=10000, weight_fairshare=10000)))
_stamps = [0]


def new_stamp() -> int:
    """A cache ``written`` stamp: now, and later than every stamp handed out before (the
    script keeps its parse of a cache while the stamp and size stay the same, and tests
    write several caches within a second)."""
    _stamps.append(max(int(time.time()), _stamps[-1] + 1))
    return _stamps[-1]


def test_matching_jobs_get_their_site_factor_at_submit(slurm_cluster, daemon_env, lua_cache, busy):
    assert "JobSubmitPlugins=lua" in slurm_cluster.conf.read_text()
    user = daemon_env.user
    names = {k: f"{busy.prefix}{k}" for k in ("short", "long", "cpu", "capped", "per-task")}
    cache = SubmitCache(written_at=new_stamp(), max_age_s=600, cpu_weight=0.25,
                        levels=LEVELS,
                        estimates=(SubmitEstimate(user, names["short"], 400),
                                   SubmitEstimate(user, names["long"], 50000),
                                   SubmitEstimate(user, names["cpu"], 3000),
                                   SubmitEstimate(user, names["capped"], 50000),
                                   SubmitEstimate(user, names["per-task"], 400)))
    write_submit_cache(lua_cache, cache)
    short = busy.submit("--gres=gpu:a100:2", "-t", "30", name="short")
    long = busy.submit("-N", "2", "--gres=gpu:4", name="long")
    cpu = busy.submit("-c", "4", name="cpu")
    capped = busy.submit("--gpus=3", "-t", "10", name="capped")
    unknown = busy.submit("--gres=gpu:1", name="unknown")
    per_task = busy.submit("-n", "2", "--gpus-per-task=1", name="per-task")
    factors = daemon_env.site_factors([short, long, cpu, capped, unknown, per_task])
    # the Lua script and the simulator's model of it (submit_site_factor) give the same values
    assert factors == {
        short: submit_site_factor(cache, 400, time_limit_s=1800, gpus=2, cpus=1),
        long: submit_site_factor(cache, 50000, time_limit_s=None, gpus=8, cpus=2),
        cpu: submit_site_factor(cache, 3000, time_limit_s=None, gpus=0, cpus=4),
        capped: submit_site_factor(cache, 50000, time_limit_s=600, gpus=3, cpus=1),  # capped at the limit
        unknown: 0,
        per_task: submit_site_factor(cache, 400, time_limit_s=None, gpus=2, cpus=2),  # 1 GPU x 2 tasks
    }
    assert factors[capped] == submit_site_factor(cache, 600, time_limit_s=None, gpus=3, cpus=1)
    # the values tell the counts apart: the script read 2 typed GPUs and 4 CPUs, not 1
    assert factors[short] != submit_site_factor(cache, 400, time_limit_s=None, gpus=1, cpus=1)
    assert factors[cpu] != submit_site_factor(cache, 3000, time_limit_s=None, gpus=0, cpus=1)
    assert factors[short] > factors[capped] > factors[long] > 0
    shown = slurm_cluster.run("scontrol", "show", "job", str(short)).stdout
    assert f"AdminComment=slurmsched:site_factor={factors[short]}" in shown


@pytest.mark.parametrize("broken", ["missing", "stale", "future", "garbage", "wrong-version"])
def test_a_missing_or_bad_cache_leaves_jobs_untouched(slurm_cluster, daemon_env, lua_cache, busy, broken):
    """"future": stamped an hour ahead (the daemon's clock ran ahead, or slurmctld's was
    stepped back), which would otherwise stay fresh for an hour after the daemon stopped."""
    user = daemon_env.user
    name = f"{busy.prefix}job"
    written = int(time.time()) + {"stale": -3600, "future": 3600}.get(broken, 0)
    write_submit_cache(lua_cache, SubmitCache(written, 600, 0.25, LEVELS,
                                               (SubmitEstimate(user, name, 60),)))
    if broken == "missing":
        lua_cache.unlink()
    elif broken == "garbage":
        lua_cache.write_bytes(b"\x00\xff not a cache\nlevel x\n")
    elif broken == "wrong-version":
        lua_cache.write_text(lua_cache.read_text().replace("cache 1", "cache 99", 1))
    job = busy.submit("--gres=gpu:1", name="job")       # accepted: sbatch would raise otherwise
    assert daemon_env.site_factors([job]) == {job: 0}
    assert "AdminComment=slurmsched" not in slurm_cluster.run("scontrol", "show", "job", str(job)).stdout


def test_jobs_the_daemon_protects_are_left_alone(slurm_cluster, daemon_env, lua_cache, busy):
    """Protected partitions and QOS travel in the cache; the script leaves their jobs alone
    (a job naming no partition while the default one, flagged in part_list, is protected;
    a job naming no QOS too: its default QOS is not visible to the script)."""
    user = daemon_env.user
    names = {k: f"{busy.prefix}{k}" for k in ("short", "gpu", "qos")}
    estimates = tuple(SubmitEstimate(user, name, 120) for name in names.values())
    write_submit_cache(lua_cache, SubmitCache(new_stamp(), 600, 0.25, LEVELS, estimates,
                                              protected_partitions=("short",)))
    in_short = busy.submit("-p", "short", "--gres=gpu:1", name="short")
    in_gpu = busy.submit("--gres=gpu:1", name="gpu")  # the default partition, not protected
    valued = submit_site_factor(read_submit_cache(lua_cache), 120, time_limit_s=None, gpus=1, cpus=1)
    assert daemon_env.site_factors([in_short, in_gpu]) == {in_short: 0, in_gpu: valued}
    write_submit_cache(lua_cache, SubmitCache(new_stamp(), 600, 0.25, LEVELS, estimates,
                                              protected_partitions=("gpu",)))
    by_default = busy.submit("--gres=gpu:1", name="gpu")  # the default partition, protected now
    named_short = busy.submit("-p", "short", "--gres=gpu:1", name="short")
    assert daemon_env.site_factors([by_default, named_short]) == {by_default: 0, named_short: valued}
    write_submit_cache(lua_cache, SubmitCache(new_stamp(), 600, 0.25, LEVELS, estimates,
                                              protected_qos=("normal",)))
    named_qos = busy.submit("--qos=normal", "--gres=gpu:1", name="qos")
    no_qos = busy.submit("--gres=gpu:1", name="gpu")
    assert daemon_env.site_factors([named_qos, no_qos]) == {named_qos: 0, no_qos: 0}


def test_held_and_deferred_jobs_are_left_to_the_daemon(slurm_cluster, daemon_env, lua_cache, busy):
    """sprio lists neither a held job nor one whose --begin is ahead, so neither the daemon
    nor revert could read back a value the script gave it: the script leaves both alone."""
    name = f"{busy.prefix}job"
    write_submit_cache(lua_cache, SubmitCache(new_stamp(), 600, 0.25, LEVELS,
                                              (SubmitEstimate(daemon_env.user, name, 120),)))
    held = busy.submit("-H", "--gres=gpu:1", name="job")
    later = busy.submit("--begin=now+2hours", "--gres=gpu:1", name="job")
    plain = busy.submit("--gres=gpu:1", name="job")
    for job in (held, later):
        assert "AdminComment=slurmsched" not in slurm_cluster.run("scontrol", "show", "job", str(job)).stdout
    slurm_cluster.run("scontrol", "release", str(held))
    slurm_cluster.run("scontrol", "update", f"JobId={later}", "StartTime=now")
    valued = submit_site_factor(read_submit_cache(lua_cache), 120, time_limit_s=None, gpus=1, cpus=1)
    listed = wait_until("sprio to list the released and the no longer deferred job",  # at its next pass
                        lambda: (f := daemon_env.site_factors([held, later, plain])) and None not in f.values() and f,
                        timeout=60)
    assert listed == {held: 0, later: 0, plain: valued}


def test_a_job_without_a_time_limit_is_capped_at_its_partitions_limit(slurm_cluster, daemon_env, lua_cache, busy):
    """Without ``-t`` Slurm gives the job its partition's DefaultTime, else MaxTime, and the
    daemon caps the estimate there; so does the script (``short``: MaxTime 4 h; ``gpu``,
    the default partition: INFINITE, no cap)."""
    user = daemon_env.user
    names = {k: f"{busy.prefix}{k}" for k in ("short", "gpu", "named", "several")}
    estimate = 50000  # over short's 4 h
    cache = SubmitCache(new_stamp(), 600, 0.25, LEVELS,
                        tuple(SubmitEstimate(user, name, estimate) for name in names.values()))
    write_submit_cache(lua_cache, cache)
    in_short = busy.submit("-p", "short", "--gres=gpu:1", name="short")
    by_default = busy.submit("--gres=gpu:1", name="gpu")
    in_gpu = busy.submit("-p", "gpu", "--gres=gpu:1", name="named")
    # several partitions: slurmctld gives the first one's limit
    short_first = busy.submit("-p", "short,gpu", "--gres=gpu:1", name="several")
    gpu_first = busy.submit("-p", "gpu,short", "--gres=gpu:1", name="several")
    factors = daemon_env.site_factors([in_short, by_default, in_gpu, short_first, gpu_first])
    capped = submit_site_factor(cache, estimate, time_limit_s=4 * 3600, gpus=1, cpus=1)
    uncapped = submit_site_factor(cache, estimate, time_limit_s=None, gpus=1, cpus=1)
    assert capped != uncapped
    assert factors == {in_short: capped, by_default: uncapped, in_gpu: uncapped, short_first: capped,
                       gpu_first: uncapped}
    for job, limit in ((in_short, "04:00:00"), (short_first, "04:00:00"), (gpu_first, "UNLIMITED")):
        shown = slurm_cluster.run("scontrol", "-o", "show", "job", str(job)).stdout
        assert f"TimeLimit={limit} " in shown  # the limit the daemon will see, and cap at


def test_an_unlimited_time_limit_caps_nothing(slurm_cluster, daemon_env, lua_cache, busy):
    """``-t UNLIMITED`` (and ``-t 0``) is no limit: the job keeps it, even in ``short``
    (MaxTime 4 h, where it waits for the partition), and the daemon caps its estimate at
    nothing; neither does the script (it used to cap such a job at short's 4 h, as if it
    had named no limit, and give it a shorter job's value until the daemon's next cycle)."""
    estimate = 50000  # over short's 4 h
    cache = SubmitCache(new_stamp(), 600, 0.25, LEVELS, (SubmitEstimate(daemon_env.user, f"{busy.prefix}job", estimate),))
    write_submit_cache(lua_cache, cache)
    jobs = [busy.submit("-p", "short", "-t", limit, "--gres=gpu:1", name="job") for limit in ("UNLIMITED", "0")]
    uncapped = submit_site_factor(cache, estimate, time_limit_s=None, gpus=1, cpus=1)
    assert uncapped != submit_site_factor(cache, estimate, time_limit_s=4 * 3600, gpus=1, cpus=1)
    assert daemon_env.time_limits(jobs) == dict.fromkeys(jobs, "UNLIMITED")
    assert daemon_env.site_factors(jobs) == dict.fromkeys(jobs, uncapped)


def test_a_cache_rewritten_within_the_same_second_is_read_again(slurm_cluster, daemon_env, lua_cache, busy):
    """The script keeps its parse while the cache's stamp and size are unchanged: a cache
    the daemon rewrites within one second (the same stamp) with other estimates is read again."""
    user = daemon_env.user
    name = f"{busy.prefix}job"
    stamp = new_stamp()
    first = SubmitCache(stamp, 600, 0.25, LEVELS, (SubmitEstimate(user, name, 60),))
    write_submit_cache(lua_cache, first)
    before = busy.submit("--gres=gpu:1", name="job")
    second = SubmitCache(stamp, 600, 0.25, LEVELS, (SubmitEstimate(user, name, 50000),
                                                    SubmitEstimate(user, f"{name}-other", 60)))
    write_submit_cache(lua_cache, second)
    after = busy.submit("--gres=gpu:1", name="job")
    expected = {before: submit_site_factor(first, 60, time_limit_s=None, gpus=1, cpus=1),
                after: submit_site_factor(second, 50000, time_limit_s=None, gpus=1, cpus=1)}
    assert expected[before] != expected[after]
    assert daemon_env.site_factors([before, after]) == expected
