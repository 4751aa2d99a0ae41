"""Closure cuts: the Problem 1 bound at a node as a minimum cut, by OR-tools' maximum flow.

The argument is in :mod:`solver.bounds` (*closure cut*): while node v runs, the nodes run so
far are a down-set of the graph holding v and its ancestors and none of its descendants, and
the L1/UB buffers live are those with ALLOC inside and FREE outside; the least such total over
every down-set is a minimum s-t cut. It lives here, not in the core, because the core never
imports OR-tools: :class:`ClosureCuts` solves each cut with its push-relabel maximum flow
(``SimpleMaxFlow``), and :func:`closure_cut_bound` searches nodes for the largest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
from ortools.graph.python import max_flow

from npuopt.solver.hardware import COUNTED_MEMORIES, L0_MEMORIES
from npuopt.solver.instance import Instance


class ClosureCuts:
    """The closure-cut bound at a node (module docstring), one maximum flow per node.

    The flow network is built once: an arc w -> u of unbounded capacity for every precedence u
    -> w (a node run implies its predecessors run), an arc ALLOC -> FREE weighing each L1/UB
    buffer's size, and, of capacity 0 until a node is asked for, arcs from the source to every
    node, from every node to the sink, and ALLOC -> FREE for every L0 buffer. Asking for node v
    opens the source's arc to v, v's successors' arcs to the sink and the L0 arcs of v's L0
    memories (but v's own buffers'), solves the maximum flow (OR-tools' push-relabel,
    ``SimpleMaxFlow``: 15-70 ms a node at 36k nodes, where networkx's Boykov-Kolmogorov took
    0.5-6 s) and closes them again. "Unbounded" is a capacity above every L1/UB size together:
    a flow that reaches it has found a path no finite cut breaks."""

    def __init__(self, instance: Instance) -> None:
        self._instance = instance
        n = instance.n_nodes
        self._source, self._sink = n, n + 1
        tails: list[int] = []
        heads: list[int] = []
        capacities: list[int] = []
        for u, successors in enumerate(instance.successors):
            tails += successors
            heads += [u] * len(successors)
        self._unbounded = 1 + sum(
            buf.size_units for buf in instance.buffers.values() if buf.memory in COUNTED_MEMORIES
        )
        capacities += [self._unbounded] * len(tails)
        self._l0: dict[str, list[tuple[int, int]]] = {}  # memory -> (buffer, its arc)
        for b, buf in instance.buffers.items():
            if buf.memory in COUNTED_MEMORIES or buf.memory in L0_MEMORIES:
                if buf.memory in L0_MEMORIES:
                    self._l0.setdefault(buf.memory, []).append((b, len(tails)))
                tails.append(buf.alloc)
                heads.append(buf.free)
                capacities.append(buf.size_units if buf.memory in COUNTED_MEMORIES else 0)
        self._from_source = len(tails)  # arc of source -> v: this + v
        tails += [self._source] * n
        heads += range(n)
        self._to_sink = len(tails)  # arc of v -> sink: this + v
        tails += range(n)
        heads += [self._sink] * n
        capacities += [0] * (2 * n)
        self._flow = max_flow.SimpleMaxFlow()
        self._flow.add_arcs_with_capacity(
            np.asarray(tails, dtype=np.int32),
            np.asarray(heads, dtype=np.int32),
            np.asarray(capacities, dtype=np.int64),
        )

    def at(self, node: int) -> int:
        """Least L1/UB total live while ``node`` runs (a FREE: just before), over every order
        (module docstring)."""
        instance = self._instance
        own = set(instance.bufs_of(node)) if instance.is_op(node) else set()
        if (mine := instance.buffer_of_node[node]) is not None:
            own.add(mine)
        memories = {instance.buffers[b].memory for b in own} & set(self._l0)
        # Just before a FREE its buffer is still live: its predecessors have run, it has not.
        freeing = mine is not None and instance.buffers[mine].free == node
        first = instance.predecessors[node] if freeing else (node,)
        last = (node,) if freeing else instance.successors[node]
        opened = [self._from_source + v for v in first] + [self._to_sink + w for w in last]
        locks = [arc for m in memories for b, arc in self._l0[m] if b not in own]
        value = self._cut(opened + locks)
        if value >= self._unbounded:  # no order keeps single residency around node
            value = self._cut(opened)
        return value

    def _cut(self, opened: Sequence[int]) -> int:
        """The maximum flow with the ``opened`` arcs unbounded for the call."""
        arcs = np.asarray(opened, dtype=np.int32)
        flow = self._flow
        flow.set_arcs_capacity(arcs, np.full(len(arcs), self._unbounded, dtype=np.int64))
        try:
            if flow.solve(self._source, self._sink) != flow.OPTIMAL:
                return 0  # not expected (capacities are far from overflowing); 0 is a bound
            return int(flow.optimal_flow())
        finally:
            flow.set_arcs_capacity(arcs, np.zeros(len(arcs), dtype=np.int64))


#: Nodes either side (along the topological order) that :func:`closure_cut_bound` evaluates
#: around its best node so far.
CUT_RADIUS = 3
#: Share of the nodes :func:`closure_cut_bound` cuts that it spreads over the busiest ones.
CUT_SPREAD = 0.5


def closure_cut_bound(
    instance: Instance,
    cuts: int,
    deadline: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[int, int]:
    """The largest closure cut (module docstring) found in at most ``cuts`` nodes, and how
    many nodes were cut, among the nodes with both predecessors and successors. Half of them
    are the ops that use the most buffers, where inputs from several producers meet (the best
    of 20 in the busiest tenth against 20 spread over every op: Conv_Case0 5,376 / 1,346,
    FlashAttention_Case0 1,024 / 392, Conv_Case1 1,728 / 1,584), spread along the topological
    order (:func:`_busiest_first`); the rest are the nearest ones in that grouped list,
    ``CUT_RADIUS`` either side, of the best node so far that still has some
    (ties: the earliest): on Conv_Case1 the high cuts gather in its first layers. Nothing
    else than the graph decides which nodes, so the same graph under other names (the
    canonical numbering of :mod:`solver.canonical`) gets the same bound. Stops early past
    ``deadline`` (``time.monotonic()``); ``progress`` hears the count and the best after each
    node. (The share spread, half, is ``CUT_SPREAD``.)"""
    candidates = [
        v for v in instance.topological_order if instance.predecessors[v] and instance.successors[v]
    ]
    if cuts <= 0 or not candidates or (deadline is not None and time.monotonic() > deadline):
        return 0, 0
    cutter = ClosureCuts(instance)
    # The busiest nodes first, then the others by count, each group in topological order: the
    # climb's neighbours are the nodes next to the best one in that list.
    line, spread = _busiest_first(instance, candidates)
    found: dict[int, int] = {}  # position in line -> cut
    todo = spread[: max(1, int(CUT_SPREAD * min(cuts, len(line))))]
    while todo and len(found) < cuts:
        for at in todo[: cuts - len(found)]:
            if deadline is not None and time.monotonic() > deadline:
                return max(found.values(), default=0), len(found)
            found[at] = cutter.at(line[at])
            if progress is not None:
                progress(len(found), max(found.values()))
        todo = []
        for at, _ in sorted(found.items(), key=lambda item: (-item[1], item[0])):
            near = range(max(0, at - CUT_RADIUS), min(len(line), at + CUT_RADIUS + 1))
            todo = [p for p in near if p not in found]
            if todo:
                break
    return max(found.values(), default=0), len(found)


#: Golden-ratio step: taking positions i * step (mod 1) in turn, any prefix is spread evenly.
_SPREAD = (5**0.5 - 1) / 2
#: Share of the candidates that :func:`closure_cut_bound` takes as the busiest: those using
#: at least as many buffers as this share of them does.
BUSIEST_SHARE = 0.1


def _busiest_first(instance: Instance, candidates: Sequence[int]) -> tuple[list[int], list[int]]:
    """``candidates`` (in topological order) grouped: first the busiest nodes, those using at
    least as many buffers as the ``BUSIEST_SHARE`` that use the most (a buffer node uses
    none), then the others by decreasing count, each group in topological order; and the
    positions in that list group by group, each group's in golden-ratio turn so that any
    first few of a group spread along the order."""
    uses = [len(instance.bufs_of(v)) if instance.is_op(v) else 0 for v in candidates]
    ranked = sorted(uses, reverse=True)
    busy = ranked[min(len(ranked) - 1, int(BUSIEST_SHARE * len(ranked)))]
    groups: dict[int, list[int]] = {}
    for v, count in zip(candidates, uses, strict=True):
        groups.setdefault(min(count, busy), []).append(v)
    line: list[int] = []
    spread: list[int] = []
    for count in sorted(groups, reverse=True):
        group = groups[count]
        turn = sorted(range(len(group)), key=lambda i: ((i * _SPREAD) % 1.0, i))
        spread += [len(line) + i for i in turn]
        line += group
    return line, spread
