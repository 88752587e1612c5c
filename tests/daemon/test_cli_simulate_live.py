"""``slurmsched simulate --from-db --nodes-from-slurm`` on the dev cluster: the site's own
history replayed on the twin of the nodes, partitions and priority weights slurmctld reports."""

from __future__ import annotations

import json
import re

import pytest

pytestmark = pytest.mark.slurm


def test_history_replays_on_the_live_clusters_nodes(daemon_env, tmp_path) -> None:
    daemon_env.seed_history("train", [600.0, 620.0, 580.0, 640.0] * 10, gpus=4)
    daemon_env.seed_history("eval", [60.0, 65.0, 70.0] * 10, gpus=1)
    gpus: dict[str, int] = {}  # node -> GPUs, from sinfo's GRES column (a node shows once per partition)
    for line in daemon_env.cluster.run("sinfo", "-h", "-N", "-o", "%N|%G").stdout.split():
        node, gres = line.split("|")
        gpus[node] = sum(int(n) for n in re.findall(r"gpu:(?:[^:,(]+:)?(\d+)", gres))
    show_config = daemon_env.cluster.run("scontrol", "show", "config").stdout
    weights = {key: int(re.search(rf"^PriorityWeight{key}\s*=\s*(\d+)", show_config, re.M).group(1))
               for key in ("Age", "Partition")}
    with daemon_env.path.open("a") as config:  # [sim]'s weights give way to slurmctld's
        config.write(f"[sim]\nweight_age = {weights['Age'] + 1}\nweight_partition = {weights['Partition'] + 1}\n")
    before = dict(re.findall(r"^PartitionName=(short) .* (PriorityJobFactor=\d+ PriorityTier=\d+) ",
                             daemon_env.cluster.run("scontrol", "-o", "show", "partition").stdout, re.M))
    out = tmp_path / "out"
    daemon_env.cluster.run("scontrol", "update", "PartitionName=short", "PriorityJobFactor=4", "PriorityTier=3")
    try:
        result = daemon_env.cli("simulate", "--from-db", "--nodes-from-slurm", "--policy", "fifo,qssf", "--json",
                                "--no-progress", "--out", str(out))
    finally:
        daemon_env.cluster.run("scontrol", "update", "PartitionName=short", *before["short"].split())
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["jobs"] == 70
    results = json.loads((out / "results.json").read_text())
    cluster = results["cluster"]
    assert (cluster["nodes"], cluster["gpus"]) == (len(gpus), sum(gpus.values())) and cluster["gpus"] > 0
    assert "slurmctld" in cluster["size_from"]
    # the default partition (gpu, job factor 1) first; factors as slurmctld normalises them
    assert [(p["name"], p["tier"], p["priority_factor"]) for p in cluster["partitions"]] == [
        ("gpu", 1, 0.25), ("short", 3, 1.0)]
    assert (results["slurmctld"]["weight_age"], results["slurmctld"]["weight_partition"]) == (
        weights["Age"], weights["Partition"])


def test_the_sites_job_submit_lua_is_modelled_when_it_reads_the_daemons_cache(daemon_env, lua_cache) -> None:
    """up.sh installs job_submit.lua beside slurm.conf; a daemon whose cache is the file the
    script reads gets the plugin modelled in its what-if (as config check finds it)."""
    daemon_env.seed_history("train", [600.0, 620.0] * 10, gpus=4)
    args = ("simulate", "--from-db", "--nodes-from-slurm", "--policy", "fifo,qssf", "--no-progress")
    daemon_env.write(submit_cache=str(lua_cache))
    modelled = daemon_env.cli(*args)
    assert modelled.exit_code == 0, modelled.output
    assert "job_submit.lua beside slurm.conf reads the daemon's submit cache: modelled" in modelled.output
    assert re.search(r"^history.*; job_submit\.lua modelled$", modelled.output, re.M)
    left_out = daemon_env.cli(*args, "--no-submit-plugin")
    assert left_out.exit_code == 0 and "modelled" not in left_out.output
    daemon_env.write(submit_cache=str(lua_cache), submit_cache_entries=0)  # a daemon that writes no cache
    no_cache = daemon_env.cli(*args)
    assert no_cache.exit_code == 0 and "modelled" not in no_cache.output
    daemon_env.write()  # the daemon's cache elsewhere (its state directory): not the script's
    elsewhere = daemon_env.cli(*args)
    assert elsewhere.exit_code == 0 and "modelled" not in elsewhere.output
