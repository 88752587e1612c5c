"""Consolidating GPU placement over one pool of nodes, and the free-GPU view EASY plans with.

Placement rules (what ``select/cons_tres`` does for a job submitted as
``--nodes=ceil(G/per_node) --gpus=G``):

* a job that fits on one node goes to one node, the *fullest* node that still has room
  (best fit), so whole nodes stay free for big jobs;
* a bigger job runs on the fewest nodes that can hold it (``ceil(G / per_node)`` on
  nodes of one size; on mixed sizes as many as the largest nodes need), taken from the
  emptiest nodes; it waits rather than spread over more nodes.

Among equally free nodes a one-node job takes the first listed and a bigger job the last
listed (a fixed order, so runs are reproducible). Nodes carry one GPU type and a set of
partitions; a job may use the nodes of its partition, limited to a set of GPU types
(its typed GRES or its ``Features``; ``None`` meaning any type). Untyped nodes (a cluster
given only by its size) serve every type.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from itertools import accumulate
from typing import Iterable

#: (node index, GPUs taken on it) for each node of a job's allocation.
Allocation = tuple[tuple[int, int], ...]
GpuTypes = frozenset[str] | None
#: Nodes of one GPU type and one partition set (``None``: every partition) are interchangeable.
_NodeClass = tuple[str | None, frozenset[str] | None]


def _largest_needed(sums: list[int], units: int) -> int:
    """How many of the largest nodes hold ``units`` GPUs, given their running totals
    (:meth:`Pool.eligible`); more than there are when all of them cannot."""
    return bisect_left(sums, units) + 1


class ShadowState:
    """Free GPUs expected when a reserved job starts, and whether that job fits in them.

    EASY backfill folds the expected releases of running jobs into a copy of the free
    GPUs of the nodes the reserved (head) job may use until it fits (:meth:`release`,
    :attr:`head_fits`); backfilled jobs that would still be running then are taken out
    again (:meth:`try_take`), and refused if the head job would no longer fit. A head
    that fits on one node needs only a count of nodes with room for it; a bigger one
    needs the top ``need`` free counts (:meth:`Pool.nodes_needed`), which a sorted list
    keeps.
    """

    __slots__ = ("free", "units", "_need", "_fitting", "_levels")

    def __init__(self, free: dict[int, int], need: int, units: int) -> None:
        self.free = free
        self.units = units
        self._need = 0 if need <= 1 else need
        self._fitting = sum(1 for f in free.values() if f >= units)
        self._levels = sorted(free.values()) if self._need else []

    @property
    def head_fits(self) -> bool:
        """Whether the reserved job fits in these free GPUs under the placement rules."""
        if not self._need:
            return self._fitting > 0
        return sum(self._levels[-self._need:]) >= self.units

    def _shift(self, alloc: Allocation, sign: int) -> None:
        free, units, levels = self.free, self.units, self._levels
        for node, count in alloc:
            have = free.get(node)
            if have is None:
                continue
            now = have + sign * count
            free[node] = now
            self._fitting += (now >= units) - (have >= units)
            if self._need:
                del levels[bisect_left(levels, have)]
                insort(levels, now)

    def release(self, alloc: Allocation) -> None:
        """Give an allocation's GPUs back (nodes outside this view are ignored)."""
        self._shift(alloc, 1)

    def try_take(self, alloc: Allocation) -> bool:
        """Take an allocation's GPUs unless the reserved job would then no longer fit."""
        self._shift(alloc, -1)
        if self.head_fits:
            return True
        self._shift(alloc, 1)
        return False


class Pool:
    """Free GPUs of one pool's nodes: per node class (GPU type, partitions), a list of
    (free, node) sorted by free.

    Args:
        nodes: ``(node index, GPUs, GPU type, partitions)`` for each node of the pool;
            partitions ``None`` means every partition of the pool.
    """

    def __init__(self, name: str, nodes: Iterable[tuple[int, int, str | None, frozenset[str] | None]]) -> None:
        self.name = name
        self.capacity: dict[int, int] = {}
        self._class_of: dict[int, _NodeClass] = {}
        self._levels: dict[_NodeClass, list[tuple[int, int]]] = {}
        for index, gpus, gpu_type, partitions in nodes:
            self.capacity[index] = gpus
            self._class_of[index] = (gpu_type, partitions)
            self._levels.setdefault((gpu_type, partitions), []).append((gpus, index))
        for lst in self._levels.values():
            lst.sort()
        self.free = dict(self.capacity)
        self.free_total = sum(self.capacity.values())
        self._eligible_cache: dict[tuple[str, GpuTypes], tuple[list[_NodeClass], int, list[int]]] = {}

    def eligible(self, partition: str, types: GpuTypes) -> tuple[list[_NodeClass], int, list[int]]:
        """(node classes, largest node, GPUs of the k largest nodes for k = 1, 2 ...) a job
        of ``partition`` limited to ``types`` may use."""
        key = (partition, types)
        cached = self._eligible_cache.get(key)
        if cached is None:
            classes = [c for c in self._levels
                       if (types is None or c[0] is None or c[0] in types) and (c[1] is None or partition in c[1])]
            caps = sorted((self.capacity[i] for i, c in self._class_of.items() if c in classes), reverse=True)
            cached = (classes, caps[0] if caps else 0, list(accumulate(caps)))
            self._eligible_cache[key] = cached
        return cached

    def nodes_needed(self, units: int, partition: str, types: GpuTypes) -> int | None:
        """Fewest nodes that can hold a job of ``units`` GPUs (the largest ones), ``None`` if all cannot."""
        sums = self.eligible(partition, types)[2]
        need = _largest_needed(sums, units)
        return None if units <= 0 or need > len(sums) else need

    def place(self, units: int, partition: str = "", types: GpuTypes = None) -> Allocation | None:
        """Where a job of ``units`` GPUs in ``partition`` would go now, or ``None`` if it does not fit."""
        if units > self.free_total:
            return None
        keys, cap, sums = self.eligible(partition, types)
        levels = [self._levels[k] for k in keys]
        if units <= cap:
            best = None
            for lst in levels:
                at = bisect_left(lst, (units, -1))
                if at < len(lst) and (best is None or lst[at] < best):
                    best = lst[at]
            return None if best is None else ((best[1], units),)
        need = _largest_needed(sums, units)
        if need > len(sums):
            return None
        chosen = heapq.nlargest(need, (e for lst in levels for e in lst[-need:]))
        if sum(f for f, _ in chosen) < units:
            return None
        alloc = []
        remaining = units
        for free, node in chosen:
            count = min(free, remaining)
            alloc.append((node, count))
            remaining -= count
        return tuple(alloc)

    def place_beside(self, units: int, partition: str, types: GpuTypes, shadow: ShadowState) -> Allocation | None:
        """Where a job of ``units`` GPUs would go now without taking what a reserved job
        needs when it starts (as backfill leaves the reserved nodes out of a job that would
        still run then): the first placement, in :meth:`place`'s order, that
        ``shadow.try_take`` accepts, taken out of ``shadow``; ``None`` if there is none.

        A one-node job tries every node with room, fullest first; a bigger one takes from
        the emptiest nodes that keep the reserved job fitting, at most as many nodes as
        :meth:`place` would use.
        """
        if units > self.free_total:
            return None
        keys, cap, sums = self.eligible(partition, types)
        levels = [self._levels[k] for k in keys]
        if units <= cap:
            for free, node in heapq.merge(*(lst[bisect_left(lst, (units, -1)):] for lst in levels)):
                if shadow.try_take(((node, units),)):
                    return ((node, units),)
            return None
        need = _largest_needed(sums, units)
        if need > len(sums):
            return None
        alloc: list[tuple[int, int]] = []
        remaining = units
        for free, node in heapq.merge(*(reversed(lst) for lst in levels), reverse=True):
            if not free or len(alloc) == need:
                break
            piece = ((node, min(free, remaining)),)
            if shadow.try_take(piece):
                alloc += piece
                remaining -= piece[0][1]
                if not remaining:
                    return tuple(alloc)
        shadow.release(tuple(alloc))
        return None

    def _shift(self, alloc: Allocation, sign: int) -> None:
        free = self.free
        for node, count in alloc:
            lst = self._levels[self._class_of[node]]
            have = free[node]
            del lst[bisect_left(lst, (have, node))]
            have += sign * count
            free[node] = have
            insort(lst, (have, node))
            self.free_total += sign * count

    def take(self, alloc: Allocation) -> None:
        """Mark an allocation's GPUs as used."""
        self._shift(alloc, -1)

    def release(self, alloc: Allocation) -> None:
        """Return an allocation's GPUs."""
        self._shift(alloc, 1)

    def shadow(self, partition: str, types: GpuTypes, units: int) -> ShadowState:
        """A copy of the free GPUs a job of ``units`` GPUs in ``partition`` limited to ``types`` may use."""
        keys, _, sums = self.eligible(partition, types)
        return ShadowState({node: f for k in keys for f, node in self._levels[k]}, _largest_needed(sums, units), units)
