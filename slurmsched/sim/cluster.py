"""The simulated cluster's description: nodes, node pools and partitions.

A *pool* is a set of nodes that partitions share whole: every partition maps onto
exactly one pool, and pools never overlap (the Helios slice's virtual clusters are
two pools; a Slurm site with per-team partitions over the same nodes is one pool with
several partitions). Partitions a trace names but the description lacks are modelled
as extra partitions over the default partition's pool, at its tier.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmsched.errors import ConfigError


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One simulated node.

    Attributes:
        name: node name as ``sinfo`` would show it.
        gpus: GPUs on the node (for CPU traces: processors, which play the part of GPUs).
        gpu_type: GPU model (``"a100"``) or ``None`` when untyped; also the node's feature.
        pool: the pool (set of nodes) the node belongs to.
    """

    name: str
    gpus: int
    gpu_type: str | None
    pool: str


@dataclass(frozen=True, slots=True)
class PartitionSpec:
    """One partition: a name over a pool, with Slurm's ``PriorityTier`` (higher first)."""

    name: str
    pool: str
    tier: int = 1


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """Nodes and partitions of a simulated cluster.

    Attributes:
        name: cluster name (``ClusterSnapshot.cluster``).
        nodes: every node, in name order.
        partitions: the declared partitions; the first one is the default.
    """

    name: str
    nodes: tuple[NodeSpec, ...]
    partitions: tuple[PartitionSpec, ...]

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
                name: str = "sim", partition: str = "batch") -> "ClusterSpec":
        """``nodes`` identical nodes in one pool under one partition.

        Raises:
            ConfigError: ``nodes`` or ``gpus_per_node`` is not positive.
        """
        if nodes <= 0 or gpus_per_node <= 0:
            raise ConfigError(f"cluster size must be positive (got {nodes} nodes x {gpus_per_node} GPUs)")
        width = len(str(nodes))
        specs = tuple(NodeSpec(f"n{i:0{width}d}", gpus_per_node, gpu_type, "main") for i in range(1, nodes + 1))
        return cls(name=name, nodes=specs, partitions=(PartitionSpec(partition, "main"),))

    @classmethod
    def pools(cls, sizes: dict[str, tuple[int, int]], *, name: str = "sim") -> "ClusterSpec":
        """One pool and one same-named partition per entry ``name -> (nodes, gpus_per_node)``.

        Raises:
            ConfigError: no pools, or a pool of non-positive size.
        """
        if not sizes:
            raise ConfigError("a pooled cluster needs at least one pool")
        nodes: list[NodeSpec] = []
        for pool, (count, gpus) in sizes.items():
            if count <= 0 or gpus <= 0:
                raise ConfigError(f"pool {pool} must have a positive size (got {count} nodes x {gpus} GPUs)")
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
        return PartitionSpec(name or default.name, default.pool, default.tier)

    def pool_gpus(self, pool: str, gpu_types: frozenset[str] | None = None) -> int:
        """GPUs in a pool, optionally only on nodes of the given types."""
        return sum(n.gpus for n in self.nodes
                   if n.pool == pool and (gpu_types is None or n.gpu_type in gpu_types))

    def describe(self) -> str:
        """One line for reports, e.g. ``56 nodes x 8 GPUs (448)``."""
        shapes: dict[int, int] = {}
        for node in self.nodes:
            shapes[node.gpus] = shapes.get(node.gpus, 0) + 1
        parts = [f"{count} nodes x {gpus}" for gpus, count in sorted(shapes.items())]
        return f"{' + '.join(parts)} = {self.total_gpus} GPUs"
