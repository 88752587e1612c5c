"""``slurmsched simulate``: replay a trace (or the site's history) under several policies.

Every option has an environment twin (``--help`` lists them): options that mirror a
config key use that key's variable (``--interval`` = ``SLURMSCHED_DAEMON_INTERVAL_S``,
``--target-load`` = ``SLURMSCHED_SIM_TARGET_LOAD``, ``--workers`` =
``SLURMSCHED_SIM_WORKERS``, ``--submit-plugin`` = ``SLURMSCHED_SIM_SUBMIT_PLUGIN``), the
rest ``SLURMSCHED_SIMULATE_<OPTION>``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from slurmsched.cli import get_config
from slurmsched.cli.db import DB_OPTION
from slurmsched.cli.params import Duration, Moment
from slurmsched.cli.output import output_dir, writing
from slurmsched.config import Config
from slurmsched.errors import ConfigError
from slurmsched.store.selection import check_past
from slurmsched.traces import FORMATS

if TYPE_CHECKING:
    from slurmsched.sim.cluster import ClusterSpec


@click.command("simulate")
@click.option("--trace", type=click.Path(dir_okay=False), default=None, envvar="SLURMSCHED_SIMULATE_TRACE",
              show_envvar=True,
              help="Trace file to replay (see --format); for itp also ARCHIVE:MEMBER, one cluster at a time.")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              envvar="SLURMSCHED_SIMULATE_FORMAT", allow_from_autoenv=False,
              show_envvar=True, help="Trace format.")
@click.option("--from-db", is_flag=True, envvar="SLURMSCHED_SIMULATE_FROM_DB", show_envvar=True,
              help="Replay the finished jobs of the history database instead.")
@DB_OPTION
@click.option("--cluster", "cluster_name", metavar="NAME", default=None,
              envvar="SLURMSCHED_SIMULATE_CLUSTER", allow_from_autoenv=False,
              show_envvar=True, help="With --from-db: the cluster to replay (default: the only one in the history).")
@click.option("--since", type=Moment(), default=None, envvar="SLURMSCHED_SIMULATE_SINCE", show_envvar=True,
              help="With --from-db: replay jobs submitted since DATE (YYYY-MM-DD[THH:MM] or an age like 30d).")
@click.option("--until", type=Moment(), default=None, envvar="SLURMSCHED_SIMULATE_UNTIL", show_envvar=True,
              help="With --from-db: replay jobs submitted before DATE.")
@click.option("--warmup", type=Duration(), default=None, envvar="SLURMSCHED_SIMULATE_WARMUP", show_envvar=True,
              help="With --since: also replay the jobs of this long before it (e.g. 2d), so the cluster is not "
                   "empty at the start, and leave them out of the results.")
@click.option("--policy", "policy_names", default="fifo,sjf,qssf", show_default=True,
              envvar="SLURMSCHED_SIMULATE_POLICY", allow_from_autoenv=False, show_envvar=True,
              help="Comma-separated policies: fifo, sjf, qssf, qssf-noaging, qssf-helios, multifactor; a "
                   "policy with other settings as NAME:KEY=VALUE[:KEY=VALUE], e.g. qssf:max_wait_h=48 (a key of "
                   "its [policy.qssf] table, planner.KEY, or predictor=NAME, oracle for the true run times; a list in "
                   "brackets: "
                   "planner.protected_qos=[a,b]).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), default=None,
              envvar="SLURMSCHED_SIMULATE_OUT", allow_from_autoenv=False,
              show_envvar=True, help="Directory for the table, results.json and the PNG plots.")
@click.option("--gpus", type=click.IntRange(min=1), default=None, envvar="SLURMSCHED_SIMULATE_GPUS",
              show_envvar=True, help="Simulated cluster size in GPUs (rounded up to whole nodes).")
@click.option("--nodes", type=click.IntRange(min=1), default=None, envvar="SLURMSCHED_SIMULATE_NODES",
              show_envvar=True, help="Simulated cluster size in nodes.")
@click.option("--gpus-per-node", type=click.IntRange(min=1), default=None,
              envvar="SLURMSCHED_SIMULATE_GPUS_PER_NODE", show_envvar=True,
              help="GPUs per simulated node (default: the trace's, else sim.gpus_per_node).")
@click.option("--nodes-from-slurm", is_flag=True, envvar="SLURMSCHED_SIMULATE_NODES_FROM_SLURM", show_envvar=True,
              help="Simulate the GPU nodes and partitions slurmctld reports now (the live cluster's twin).")
@click.option("--target-load", type=click.FloatRange(0, 1.5, min_open=True), default=None,
              envvar="SLURMSCHED_SIM_TARGET_LOAD", allow_from_autoenv=False, show_envvar=True,
              help="Offered load to size the cluster for when neither the trace nor --gpus/--nodes give it "
                   "(default sim.target_load).")
@click.option("--jobs", "limit", type=click.IntRange(min=1), default=None,
              envvar="SLURMSCHED_SIMULATE_JOBS", allow_from_autoenv=False,
              show_envvar=True, help="Replay only the first N jobs by submit time (--warmup's jobs come on top).")
@click.option("--interval", "interval_s", type=Duration(), default=None,
              envvar="SLURMSCHED_DAEMON_INTERVAL_S", allow_from_autoenv=False,
              show_envvar=True,
              help="The daemon's cycle interval in simulated time (60, 90s, 5m); default daemon.interval_s.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              envvar="SLURMSCHED_SIM_WORKERS", allow_from_autoenv=False,
              show_envvar=True, help="Policies to simulate at once, one process each (default sim.workers).")
@click.option("--submit-plugin/--no-submit-plugin", default=None, envvar="SLURMSCHED_SIM_SUBMIT_PLUGIN",
              allow_from_autoenv=False, show_envvar=True,
              help="Model job_submit.lua: new jobs get their SiteFactor at submission from the daemon's "
                   "submit cache (default sim.submit_plugin; with --nodes-from-slurm, on when the site's "
                   "job_submit.lua reads the daemon's cache).")
@click.option("--json", "as_json", is_flag=True,
              envvar="SLURMSCHED_SIMULATE_JSON", allow_from_autoenv=False, show_envvar=True,
              help="Print {\"jobs\": N, \"left_out\": {...}, \"policies\": {...}} only.")
@click.option("--progress/--no-progress", default=True, show_default=True, envvar="SLURMSCHED_SIMULATE_PROGRESS",
              show_envvar=True, help="Progress bars on stderr (when it is a terminal).")
@click.pass_context
def simulate(ctx: click.Context, trace: str | None, fmt: str | None, from_db: bool, db_url: str | None,
             cluster_name: str | None, since: float | None, until: float | None, warmup: float | None,
             policy_names: str, out_dir: str | None, gpus: int | None, nodes: int | None, gpus_per_node: int | None,
             nodes_from_slurm: bool, target_load: float | None, limit: int | None, interval_s: float | None,
             workers: int | None, submit_plugin: bool | None, as_json: bool, progress: bool) -> None:
    """Simulate the queue under each policy and compare avg JCT, waits, slowdown and utilisation.

    The simulated Slurm runs the same engine, policies, planner and predictor as the
    daemon; see docs/simulator.md for what it models.
    """
    from slurmsched.sim.experiment import compare
    from slurmsched.sim.policies import parse_policies
    from slurmsched.sim.report import render_table, summary, write_report
    from slurmsched.sim.sizing import SizeRequest, size_cluster
    from slurmsched.sim.workload import load_trace, workload_from_history

    if from_db == (trace is not None):
        raise ConfigError("give either --trace FILE --format F or --from-db")
    if trace is not None and fmt is None:
        raise ConfigError("--trace needs --format (one of " + ", ".join(FORMATS) + ")")
    if gpus is not None and nodes is not None:
        raise ConfigError("give --gpus or --nodes, not both")
    if nodes_from_slurm and (gpus, nodes, gpus_per_node) != (None, None, None):
        raise ConfigError("give --nodes-from-slurm or --gpus/--nodes/--gpus-per-node, not both")
    if trace is not None and (cluster_name, since, until, warmup) != (None, None, None, None):
        raise ConfigError("--cluster, --since, --until and --warmup choose jobs of --from-db"
                          " (use --jobs N with a trace)")
    if warmup is not None and since is None:
        raise ConfigError("--warmup needs --since (the warm-up is the time before it)")
    if since is not None and until is not None and since >= until:
        raise ConfigError("--since must be before --until")
    check_past(since)
    out = output_dir(out_dir, "--out") if out_dir is not None else None
    config = get_config(ctx).with_overrides("sim", target_load=target_load, workers=workers,
                                            submit_plugin=submit_plugin)
    policies = parse_policies(policy_names, config)
    live = None
    if nodes_from_slurm:  # before a long read: Slurm may be down
        live, config = _live_cluster(config)
        if submit_plugin is None and not config.sim.submit_plugin and _site_runs_the_script(config):
            config = config.with_overrides("sim", submit_plugin=True)
            click.echo("job_submit.lua beside slurm.conf reads the daemon's submit cache: modelled "
                       "(--no-submit-plugin leaves it out)", err=True)
    if config.sim.submit_plugin and config.daemon.submit_cache_entries == 0:
        raise ConfigError("sim.submit_plugin models job_submit.lua reading the daemon's submit cache, but "
                          "daemon.submit_cache_entries = 0 writes none: give --no-submit-plugin, or entries > 0")
    config = _with_interval(config, interval_s)
    if trace is not None:
        assert fmt is not None  # checked above
        workload = load_trace(trace, fmt, limit=limit, progress=progress)
    else:
        from slurmsched.store.repository import open_repository

        repository = open_repository(config, url=db_url, read_only=True)
        try:
            first = None if since is None else since - (warmup or 0.0)
            # a job submitted since `first` ended after it: the database skips the older ones
            workload = workload_from_history(repository.history(since=first), cluster=cluster_name, since=since,
                                             until=until, warmup_s=warmup or 0.0, limit=limit)
        finally:
            repository.close()
        if not workload.jobs:
            window = workload.window.span_text() if workload.window is not None else ""
            raise ConfigError("the history database has no finished job with a run time to replay"
                              + (f" {window}" if window else ""))
    request = SizeRequest(target_load=config.sim.target_load, default_gpus_per_node=config.sim.gpus_per_node,
                          gpus=gpus, nodes=nodes, gpus_per_node=gpus_per_node,
                          live=live)
    cluster, note = size_cluster(workload, request, path=trace, fmt=fmt)
    comparison = compare(workload, cluster, note, policies, config, progress=progress)
    if as_json:
        click.echo(json.dumps(summary(comparison)))
    else:
        click.echo(render_table(comparison))
    if out is not None:
        with writing(out, "--out"):
            written = write_report(comparison, out)
        if not as_json:
            click.echo("wrote " + ", ".join(str(p) for p in written))


def _with_interval(config: Config, interval_s: float | None) -> Config:
    """``config`` with the simulated daemon's cycle interval (``--interval``).

    Without the submit plugin the simulated daemon writes no cache, so its
    ``submit_cache_max_age_s`` does not bound the interval; with it, the plugin ignores a
    cache older than that, as the script does.

    Raises:
        ConfigError: ``--submit-plugin`` with an interval longer than the cache's max age.
    """
    if interval_s is None:
        return config
    if not config.sim.submit_plugin:
        return config.with_overrides("daemon", interval_s=interval_s, submit_cache_entries=0)
    max_age = config.daemon.submit_cache_max_age_s
    if interval_s > max_age:
        raise ConfigError(f"--interval {interval_s:g} s is longer than daemon.submit_cache_max_age_s ({max_age:g} s),"
                          " after which job_submit.lua (modelled: --submit-plugin) ignores the daemon's cache:"
                          " raise that key, or give --no-submit-plugin")
    return config.with_overrides("daemon", interval_s=interval_s)


def _site_runs_the_script(config: Config) -> bool:
    """Whether slurmctld's ``job_submit.lua`` reads this daemon's cache (what ``config check``
    checks), and the daemon writes one (``submit_cache_entries`` above 0)."""
    from slurmsched.submit_cache import script_reads

    return (config.daemon.submit_cache_entries > 0
            and bool(script_reads(config.slurm.conf_dir, config.daemon.submit_cache_path)))


def _live_cluster(config: Config) -> tuple[ClusterSpec, Config]:
    """The twin of the cluster slurmctld describes now, and ``config`` with its priority settings.

    One snapshot (``scontrol show config``, ``squeue``, ``sinfo`` ...) gives the GPU nodes
    and the ``PriorityWeight*``/``PriorityMaxAge`` values, which replace ``[sim]``'s;
    ``scontrol -a -o show partition`` gives each partition's ``PriorityTier`` and
    ``PriorityJobFactor``.

    Raises:
        SlurmError: Slurm cannot be reached; ConfigError: it has no GPU node, or it does
            not run ``priority/multifactor`` (SiteFactor would change nothing there).
    """
    from slurmsched.gateway.factory import make_gateway
    from slurmsched.sim.cluster import cluster_from_nodes
    from slurmsched.sim.policies import with_slurmctld_weights

    gateway = make_gateway(config)
    snapshot = gateway.snapshot()
    live = snapshot.config
    if live.priority_type != "priority/multifactor":
        raise ConfigError(f"slurmctld of {snapshot.cluster!r} runs {live.priority_type}, where SiteFactor changes "
                          "nothing: the what-if models priority/multifactor (leave out --nodes-from-slurm to "
                          "simulate one with [sim]'s weights)")
    return (cluster_from_nodes(snapshot.cluster, snapshot.nodes, gateway.partitions()),
            with_slurmctld_weights(config, live))


COMMANDS = [simulate]
