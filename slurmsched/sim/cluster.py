"""The simulated cluster's description: nodes, node pools and partitions.

A *pool* is a set of nodes that no partition crosses: pools never overlap, every
partition lies inside one pool, and partitions inside a pool may overlap (the Helios
slice's virtual clusters are two pools; a site with a ``gpu`` partition over every node
and an ``a100`` partition over some of them is one pool). Partitions a trace names but
the description lacks are modelled as extra partitions over the default partition's
nodes, at its tier.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from slurmsched.errors import ConfigError
from slurmsched.model import NodeRecord, PartitionRecord
from slurmsched.text import plural

#: Most nodes, and most GPUs on one node, a simulated cluster may have (Fugaku has 158,976
#: nodes): a bigger size is a typo or a broken trace, and its nodes would not fit in memory.
MAX_NODES = 200_000
MAX_NODE_GPUS = 2**31 - 1

_HOST_RANGE = re.compile(r"^(?P<prefix>[^\[\]]*)\[(?P<ranges>[^\]]+)\](?P<suffix>.*)$")


def _check_size(what: str, nodes: int, gpus: int) -> None:
    """Raise :class:`ConfigError` unless ``nodes`` nodes of ``gpus`` GPUs each is a size to simulate."""
    if nodes <= 0 or gpus <= 0:
        raise ConfigError(f"{what} must have a positive size (got {nodes} nodes x {gpus} GPUs)")
    if nodes > MAX_NODES or gpus > MAX_NODE_GPUS:
        raise ConfigError(f"{what} would have {nodes:,} nodes of {gpus:,} GPUs: more than the simulator models"
                          f" (at most {MAX_NODES:,} nodes of at most {MAX_NODE_GPUS:,} GPUs)")


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One simulated node.

    Attributes:
        name: node name as ``sinfo`` would show it.
        gpus: GPUs on the node (for CPU traces: processors, which play the part of GPUs).
        gpu_type: GPU model (``"a100"``) or ``None`` when untyped; also the node's feature.
        pool: the pool (set of nodes) the node belongs to.
        partitions: the partitions the node is in; empty means every partition of its pool.
    """

    name: str
    gpus: int
    gpu_type: str | None
    pool: str
    partitions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionSpec:
    """One partition: a name over (part of) a pool, with Slurm's ``PriorityTier`` (higher first).

    Attributes:
        scope: the partition whose nodes it uses; empty means its own (an extra
            partition named by a trace uses the default partition's).
        priority_factor: the partition factor of its jobs' priority, 0 to 1
            (:attr:`~slurmsched.model.PartitionRecord.priority_factor`).
    """

    name: str
    pool: str
    tier: int = 1
    scope: str = ""
    priority_factor: float = 1.0

    @property
    def nodes_of(self) -> str:
        """The partition whose nodes jobs of this one may use."""
        return self.scope or self.name


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """Nodes and partitions of a simulated cluster.

    Attributes:
        name: cluster name (``ClusterSnapshot.cluster``).
        nodes: every node, in name order.
        partitions: the declared partitions; the first one is the default.
        unit_nodes: each GPU (processor) stands for one node of the machine modelled: a
            machine of one-processor nodes, modelled as one node of all its processors
            (same placements, far cheaper). Slurm's job-size factor then counts a job's
            processors as its nodes, and the machine's processors as its nodes.
    """

    name: str
    nodes: tuple[NodeSpec, ...]
    partitions: tuple[PartitionSpec, ...]
    unit_nodes: bool = False

    def __post_init__(self) -> None:
        if not self.nodes:
            raise ConfigError("a simulated cluster needs at least one node")
        if not self.partitions:
            raise ConfigError("a simulated cluster needs at least one partition")
        pools = {n.pool for n in self.nodes}
        for part in self.partitions:
            if part.pool not in pools:
                raise ConfigError(f"partition {part.name} names pool {part.pool!r}, which has no nodes")
        if any(n.gpus <= 0 for n in self.nodes):
            raise ConfigError("every simulated node needs at least one GPU (or processor)")

    @classmethod
    def uniform(cls, nodes: int, gpus_per_node: int, *, gpu_type: str | None = None,
                name: str = "sim", partition: str = "batch", unit_nodes: bool = False) -> "ClusterSpec":
        """``nodes`` identical nodes in one pool under one partition (``unit_nodes``: see the class).

        Raises:
            ConfigError: ``nodes`` or ``gpus_per_node`` is not positive, or above
                :data:`MAX_NODES` or :data:`MAX_NODE_GPUS`.
        """
        _check_size("the simulated cluster", nodes, gpus_per_node)
        width = len(str(nodes))
        specs = tuple(NodeSpec(f"n{i:0{width}d}", gpus_per_node, gpu_type, "main") for i in range(1, nodes + 1))
        return cls(name=name, nodes=specs, partitions=(PartitionSpec(partition, "main"),), unit_nodes=unit_nodes)

    @classmethod
    def pools(cls, sizes: dict[str, tuple[int, int]], *, name: str = "sim") -> "ClusterSpec":
        """One pool and one same-named partition per entry ``name -> (nodes, gpus_per_node)``.

        Raises:
            ConfigError: no pools, or a pool of non-positive size or of too many nodes or GPUs.
        """
        if not sizes:
            raise ConfigError("a pooled cluster needs at least one pool")
        nodes: list[NodeSpec] = []
        for pool, (count, gpus) in sizes.items():
            _check_size(f"pool {pool}", count, gpus)
            nodes += [NodeSpec(f"{pool}-{i:03d}", gpus, None, pool) for i in range(1, count + 1)]
        return cls(name=name, nodes=tuple(nodes), partitions=tuple(PartitionSpec(p, p) for p in sizes))

    @property
    def default_partition(self) -> PartitionSpec:
        """The partition jobs without a known partition run in."""
        return self.partitions[0]

    @property
    def total_gpus(self) -> int:
        """GPUs (processors for CPU traces) in the whole cluster."""
        return sum(n.gpus for n in self.nodes)

    def partition(self, name: str) -> PartitionSpec:
        """The named partition, or an extra one over the default partition's pool."""
        for part in self.partitions:
            if part.name == name:
                return part
        default = self.default_partition
        return PartitionSpec(name or default.name, default.pool, default.tier, default.nodes_of,
                             default.priority_factor)

    def partition_gpus(self, partition: PartitionSpec) -> int:
        """GPUs on the nodes jobs of ``partition`` may use."""
        return sum(n.gpus for n in self.nodes
                   if n.pool == partition.pool and (not n.partitions or partition.nodes_of in n.partitions))

    def describe(self) -> str:
        """One line for reports, e.g. ``56 nodes x 8 GPUs (448)``."""
        shapes: dict[int, int] = {}
        for node in self.nodes:
            shapes[node.gpus] = shapes.get(node.gpus, 0) + 1
        parts = [f"{plural(count, 'node')} x {gpus}" for gpus, count in sorted(shapes.items())]
        return f"{' + '.join(parts)} = {plural(self.total_gpus, 'GPU')}"


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed host list -> names: ``"gpu[01-02,04],cpu1"`` -> gpu01, gpu02, gpu04, cpu1.

    Raises:
        ValueError: unbalanced brackets or a malformed range.
    """
    names: list[str] = []
    depth, start = 0, 0
    parts = []
    for i, char in enumerate(text):
        depth += char == "["
        depth -= char == "]"
        if depth < 0:
            raise ValueError(f"unbalanced brackets in host list {text!r}")
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth != 0:
        raise ValueError(f"unbalanced brackets in host list {text!r}")
    parts.append(text[start:])
    for part in (p.strip() for p in parts):
        if not part:
            continue
        match = _HOST_RANGE.match(part)
        if match is None:
            names.append(part)
            continue
        for item in match["ranges"].split(","):
            low, _, high = item.partition("-")
            if not low.isdigit() or (high and not high.isdigit()):
                raise ValueError(f"bad range {item!r} in host list {text!r}")
            for number in range(int(low), int(high or low) + 1):
                names.append(f"{match['prefix']}{number:0{len(low)}d}{match['suffix']}")
    return names


def cluster_from_nodes(name: str, nodes: Sequence[NodeRecord],
                       partitions: Sequence[PartitionRecord] = ()) -> ClusterSpec:
    """The simulated twin of a live cluster's GPU nodes (as ``sinfo`` reported them).

    Partitions that share a node end up in one pool. Each partition has the
    ``PriorityTier`` and priority factor of its entry in ``partitions`` (``scontrol show
    partition``; 1 when it has none); the default partition comes first, the others in
    the order of ``partitions``, then in the order the nodes name them. Nodes without
    GPUs are left out (the simulated cluster is a GPU pool), and so are partitions
    without a GPU node.

    Raises:
        ConfigError: no GPU node.
    """
    gpu_nodes = [node for node in nodes if node.gpus() > 0]
    if not gpu_nodes:
        raise ConfigError("the cluster has no GPU node to simulate")
    parent: dict[str, str] = {}

    def root(item: str) -> str:
        while parent.setdefault(item, item) != item:
            item = parent[item]
        return item

    for node in gpu_nodes:
        first, *others = node.partitions or ("main",)
        for other in others:
            parent[root(other)] = root(first)
    specs = []
    for node in gpu_nodes:
        names = node.partitions or ("main",)
        types = [g.type for g in node.gres if g.name == "gpu" and g.type]
        specs.append(NodeSpec(node.name, node.gpus(), types[0] if types else None, root(names[0]), names))
    described = {p.name: p for p in sorted(partitions, key=lambda p: not p.default)}
    named = {p for node in specs for p in node.partitions}
    order = [p for p in described if p in named] + [p for node in specs for p in node.partitions]
    found = [described.get(p) or PartitionRecord(p) for p in dict.fromkeys(order)]
    return ClusterSpec(name=name, nodes=tuple(specs), partitions=tuple(
        PartitionSpec(p.name, root(p.name), p.tier, priority_factor=p.priority_factor) for p in found))
