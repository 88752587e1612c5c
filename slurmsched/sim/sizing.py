"""How big the simulated cluster is: given by the admin, or taken from the trace.

In order of precedence:

0. ``--nodes-from-slurm``: the GPU nodes and partitions slurmctld reports now (the
   live cluster's twin, :func:`~slurmsched.sim.cluster.cluster_from_nodes`).
1. ``--nodes N --gpus-per-node G``: N identical nodes.
2. ``--gpus N``: ``ceil(N / G)`` nodes of G GPUs (G: ``--gpus-per-node``, else the
   trace's processors per node for SWF, else ``sim.gpus_per_node``, 8); the note says
   when N was rounded up to whole nodes.
3. The trace's own description: SWF headers give ``MaxProcs`` and ``MaxNodes``
   (CTC-SP2: 338 x 1, HPC2N: 240 x 1). One-processor nodes are interchangeable (any
   free processors serve any job), so such a machine is modelled as one node holding
   all its processors: the same placements at a fraction of the cost; the Helios slice names its virtual clusters'
   node counts in a ``# per-VC pool sizes (nodes, 8 GPU/node): vcvGl=20, vcvlY=2``
   comment line, which become separate pools, one partition each.
4. Otherwise (Philly, ITP, a site's history) the cluster is sized for a target offered
   load: ``GPUs = offered GPU-seconds / arrival span / target_load`` (the measured jobs,
   as :func:`offered_load` counts them) rounded to the nearest whole node. For the
   Philly trace the default ``sim.target_load`` of 0.83 gives 448 GPUs. Two bounds, each
   named in the note since the offered load then differs from the target: never
   smaller than the biggest job, and never bigger than all jobs at once (a trace whose
   arrivals span too little time, a single job, say, offers no load to size for). When
   the biggest job sets the size, the note gives the GPUs the target load needs (the
   offered GPU-seconds per second over ``target_load``, rounded up, at least 1), not
   that figure rounded to whole nodes, which may be none.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from pathlib import Path

from slurmsched.errors import ConfigError
from slurmsched.sim.cluster import ClusterSpec
from slurmsched.sim.workload import Workload
from slurmsched.traces import read_swf_header
from slurmsched.traces.base import open_text
from slurmsched.text import plural

_HELIOS_POOLS = re.compile(r"per-VC pool sizes \(nodes,\s*(\d+)\s*GPU/node\):\s*(.+)")


@dataclass(frozen=True, slots=True)
class SizeRequest:
    """What the admin asked for.

    Attributes:
        gpus, nodes, gpus_per_node: ``--gpus``, ``--nodes``, ``--gpus-per-node``
            (``None``: take it from the trace).
        target_load: offered load to size for when nothing else gives the size.
        default_gpus_per_node: GPUs per node when neither the option nor the trace says.
        live: the live cluster's twin (``--nodes-from-slurm``), used as it is (its
            priority weights are in ``[sim]`` already).
    """

    target_load: float
    default_gpus_per_node: int
    gpus: int | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None
    live: ClusterSpec | None = None


def helios_pools(path: str | Path) -> dict[str, tuple[int, int]] | None:
    """``pool -> (nodes, GPUs per node)`` from a Helios slice's comment header, or ``None``."""
    with open_text(path) as handle:
        for line in handle:
            if not line.startswith("#"):
                break
            match = _HELIOS_POOLS.search(line)
            if match:
                per_node = int(match.group(1))
                pools = {}
                for item in match.group(2).split(","):
                    name, _, count = item.strip().partition("=")
                    if name and count.strip().isdigit():
                        pools[name.strip()] = (int(count), per_node)
                return pools or None
    return None


def _work_rate(workload: Workload, spec: ClusterSpec | None = None) -> float:
    """GPU-seconds offered per second of the measured jobs' arrival span (at least 1 s);
    with ``spec``, without the jobs larger than their partition there, which the
    simulation leaves out."""
    measured = workload.measured()
    if spec is None:
        work = measured.gpu_seconds
    else:
        room = {name: spec.partition_gpus(spec.partition(name)) for name in {j.record.partition for j in measured.jobs}}
        work = sum(j.units * j.duration for j in measured.jobs if j.units <= room[j.record.partition])
    return work / max(measured.span_s, 1.0)


def _by_load(workload: Workload, per_node: int, target_load: float) -> tuple[ClusterSpec, str]:
    """Nodes for ``target_load`` offered load, within the bounds, and a note that says which
    held (or, when whole nodes move the load off the target, the load they give)."""
    rate = _work_rate(workload)
    needed = rate / target_load  # GPUs
    wanted = round(needed / per_node)
    biggest = math.ceil(workload.max_units / per_node)
    everything = math.ceil(sum(j.units for j in workload.jobs) / per_node)
    if wanted > everything:
        spec = ClusterSpec.uniform(everything, per_node)
        jobs = f"all {len(workload.jobs)} jobs" if len(workload.jobs) > 1 else "its one job"
        measured = workload.measured()
        if len(measured.jobs) < len(workload.jobs):
            jobs += " (the warm-up's included)"
        why = ("no arrival span to size for" if measured.span_s == 0 else
               f"{target_load:.0%} offered load would need {math.ceil(needed):,} GPUs")
        return spec, f"room for {jobs} at once: {why}"
    if wanted < biggest:
        spec = ClusterSpec.uniform(biggest, per_node)
        least = max(math.ceil(needed), 1)
        return spec, (f"as big as the biggest job: {target_load:.0%} offered load would need only "
                      f"{plural(least, 'GPU')}")
    note = f"sized for {target_load:.0%} offered load"
    whole = f"{rate / (wanted * per_node):.0%}"  # the load whole nodes give, as the note rounds it
    if whole != f"{target_load:.0%}":
        note += f" ({whole} on whole nodes)"
    return ClusterSpec.uniform(wanted, per_node), note


def _swf_machine(max_procs: int, per_node: int) -> tuple[ClusterSpec, str]:
    """An SWF header's machine: nodes of ``per_node`` processors holding all ``max_procs``,
    the last one smaller when ``per_node`` does not divide them; and a note that says so.

    Raises:
        ConfigError: more nodes than the simulator models (see :meth:`ClusterSpec.uniform`).
    """
    full, rest = divmod(max_procs, per_node)
    note = f"SWF header: MaxProcs {max_procs}, {per_node} per node"
    if not rest:
        return ClusterSpec.uniform(full, per_node), note
    spec = ClusterSpec.uniform(full + 1, per_node)
    last = dataclasses.replace(spec.nodes[-1], gpus=rest)
    return (dataclasses.replace(spec, nodes=spec.nodes[:-1] + (last,)),
            f"{note}, the last node holding the remaining {rest}")


def _given(request: SizeRequest, per_node: int) -> tuple[ClusterSpec, str]:
    """The cluster ``--nodes`` or ``--gpus`` asks for, and a note that says which (and any rounding)."""
    if request.nodes is not None:
        return ClusterSpec.uniform(request.nodes, per_node), f"--nodes {request.nodes}"
    assert request.gpus is not None  # the caller checked
    nodes = math.ceil(request.gpus / per_node)
    if nodes * per_node == request.gpus:
        return ClusterSpec.uniform(nodes, per_node), f"--gpus {request.gpus}"
    return (ClusterSpec.uniform(nodes, per_node),
            f"--gpus {request.gpus} rounded up to whole nodes of {per_node}")


def _too_small_advice(request: SizeRequest, per_node: int, units: int) -> str:
    """What to do when the cluster cannot hold a job of ``units`` GPUs, for how it was sized."""
    if request.live is not None:
        return ("slurmctld's largest partition cannot run it: leave out --nodes-from-slurm to replay on a sized "
                "cluster (--gpus or --nodes)")
    if request.nodes is not None:
        return f"give --nodes {math.ceil(units / per_node)} or more"
    if request.gpus is not None:
        return f"give --gpus {units} or more"
    return "size the cluster with --gpus or --nodes"


def size_cluster(workload: Workload, request: SizeRequest, *, path: str | Path | None = None,
                 fmt: str | None = None) -> tuple[ClusterSpec, str]:
    """The simulated cluster and a short note on where its size came from.

    Raises:
        ConfigError: the cluster (its largest partition) is smaller than the biggest job;
            the message says what to give instead, for how the size was chosen.
    """
    header = read_swf_header(path) if fmt == "swf" and path is not None else None
    per_node = request.gpus_per_node or (header.procs_per_node if header else request.default_gpus_per_node)
    if request.live is not None:
        spec = request.live
        note = f"the nodes, partitions and priority weights slurmctld of {spec.name!r} reports"
    elif request.nodes is not None or request.gpus is not None:
        spec, note = _given(request, per_node)
    elif header is not None and header.max_procs:
        if per_node == 1:
            spec = ClusterSpec.uniform(1, header.max_procs, unit_nodes=True)
            note = f"SWF header: {header.max_procs} one-processor nodes, modelled as one pool of processors"
        else:
            spec, note = _swf_machine(header.max_procs, per_node)
    elif fmt == "helios" and path is not None and (pools := helios_pools(path)):
        if request.gpus_per_node is not None:
            raise ConfigError("--gpus-per-node: the trace's per-VC pool sizes give its nodes and their GPUs; "
                              "give --nodes or --gpus as well to size the cluster otherwise")
        spec, note = ClusterSpec.pools(pools), "Helios per-VC pool sizes"
    else:
        try:
            spec, note = _by_load(workload, per_node, request.target_load)
        except ConfigError as exc:  # too big: say what asked for it
            raise ConfigError(f"{exc}; sized from the workload, whose biggest job asks for {workload.max_units:,}"
                              f" GPUs: {_too_small_advice(request, per_node, workload.max_units)}") from None
    largest = max(spec.partition_gpus(p) for p in spec.partitions)
    if workload.max_units > largest:
        raise ConfigError(f"the simulated cluster ({spec.describe()}; {note}) is smaller than the biggest job "
                          f"({workload.max_units} GPUs): {_too_small_advice(request, per_node, workload.max_units)}")
    return spec, note


def offered_load(workload: Workload, spec: ClusterSpec) -> float | None:
    """Work offered per GPU-second of the cluster over the arrival span of the measured
    jobs (a warm-up's jobs are left out, and so is the work of jobs larger than their
    partition, which the simulation leaves out); ``None`` when they all arrive at once
    (there is no span to spread the work over)."""
    if workload.measured().span_s == 0:
        return None
    return _work_rate(workload, spec) / spec.total_gpus
