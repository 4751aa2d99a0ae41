"""What a graph is, whatever its nodes are called: structural classes, op units and parts.

Node ids and BufIds are names. Every ranking npuopt needs (which op first, which of two equal
candidates) is derived here from the graph alone, so that a renumbered copy of a graph gets the
same answer:

* :func:`structural_classes` gives every node a *class*: colour refinement (1-dimensional
  Weisfeiler-Leman) started from what a node is (op, pipe, cycles, the memories and sizes of its
  buffers; for ALLOC/FREE the buffer's memory and size) and how deep it sits (longest path from a
  source and to a sink), refined by the classes of its predecessors, successors and, through the
  ``Bufs`` lists, the ops sharing a buffer with it, until no class splits. Classes are numbered by
  sorting the refined signatures, so a class number means the same on every renumbering. Nodes of
  one class cannot be told apart by this refinement; on the contest graphs they are the repeated
  tiles of one computation (Matmul_Case0: 4,160 nodes in 107 classes; Conv_Case1: 36,086 nodes in
  35,222);
* :func:`op_units` groups the ops that share an L0 buffer (one L0 memory holds one live buffer in
  Problem 1, so a group runs as one piece: a Matmul output block with its MOVEs, a CONV with the
  MOVE of its weights);
* :func:`weak_components` splits a graph into parts with no edge between them.

Pure Python; nothing here depends on the numeric value of a node id or BufId except, last of
all, to order nodes this refinement cannot tell apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from npuopt.solver.hardware import L0_MEMORIES
from npuopt.solver.instance import Instance, OpNode
from npuopt.solver.solution import op_successors

#: Refinement rounds at most (the contest graphs settle within 12).
MAX_ROUNDS = 64


def _dense(signatures: Sequence[object]) -> list[int]:
    """Each signature's rank among the distinct ones, sorted: equal signatures, equal ranks."""
    index = {s: i for i, s in enumerate(sorted(set(signatures)))}  # type: ignore[type-var]
    return [index[s] for s in signatures]


def _own_label(instance: Instance, v: int) -> str:
    node = instance.nodes[v]
    buffers = instance.buffers
    if isinstance(node, OpNode):
        bufs = sorted(
            (buffers[b].memory, buffers[b].size_units, b in instance.copy_in_backed)
            for b in node.bufs
        )
        return repr((0, node.op, node.pipe, node.cycles, tuple(bufs)))
    buf = buffers[node.buf_id]
    return repr((1, node.op, buf.memory, buf.size_units, buf.buf_id in instance.copy_in_backed))


def longest_paths(instance: Instance) -> tuple[list[int], list[int]]:
    """Per node, the most edges on a path from a source to it (depth) and from it to a sink
    (height)."""
    n = instance.n_nodes
    pred, succ = instance.predecessors, instance.successors
    topo = instance.topological_order
    depth, height = [0] * n, [0] * n
    for v in topo:
        for p in pred[v]:
            depth[v] = max(depth[v], depth[p] + 1)
    for v in reversed(topo):
        for s in succ[v]:
            height[v] = max(height[v], height[s] + 1)
    return depth, height


def structural_classes(instance: Instance, max_rounds: int = MAX_ROUNDS) -> tuple[int, ...]:
    """The class of every node (see the module docstring); equal on every renumbering."""
    n = instance.n_nodes
    pred, succ = instance.predecessors, instance.successors
    # A buffer's ALLOC is linked to its FREE and to every op using it.
    shared: list[list[int]] = [[] for _ in range(n)]
    for buf in instance.buffers.values():
        shared[buf.alloc].append(buf.free)
        shared[buf.free].append(buf.alloc)
        for u in set(buf.users):
            shared[u].append(buf.alloc)
            shared[buf.alloc].append(u)
    depth, height = longest_paths(instance)
    classes = _dense([(_own_label(instance, v), depth[v], height[v]) for v in range(n)])
    count = len(set(classes))
    for _ in range(max_rounds):
        refined = _dense(
            [
                (
                    classes[v],
                    tuple(sorted(classes[p] for p in pred[v])),
                    tuple(sorted(classes[s] for s in succ[v])),
                    tuple(sorted(classes[x] for x in shared[v])),
                )
                for v in range(n)
            ]
        )
        refined_count = len(set(refined))
        classes = refined
        if refined_count == count:
            break
        count = refined_count
    return tuple(classes)


@dataclass(frozen=True)
class OpGraph:
    """The op-level DAG: an edge u -> v when a path from op u reaches op v through buffer nodes
    only. ``order`` is a topological order of the ops; ``index`` each op's place in it."""

    succ: tuple[tuple[int, ...], ...]  # per node id (empty for buffer nodes)
    pred: tuple[tuple[int, ...], ...]
    order: tuple[int, ...]
    index: dict[int, int]


def op_graph(instance: Instance) -> OpGraph:
    """The op-level DAG of ``instance``."""
    n = instance.n_nodes
    succ = [tuple(s) for s in op_successors(instance)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for v in instance.op_ids:
        for w in succ[v]:
            pred[w].append(v)
    position = instance.topological_rank
    order = tuple(sorted(instance.op_ids, key=position.__getitem__))
    return OpGraph(
        tuple(succ), tuple(tuple(p) for p in pred), order, {v: i for i, v in enumerate(order)}
    )


def op_units(instance: Instance) -> list[list[int]]:
    """Groups of ops connected through L0 buffers (union-find); every op is in exactly one,
    possibly alone. Groups and their members come in no particular order."""
    parent = {v: v for v in instance.op_ids}

    def root(v: int) -> int:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    for buf in instance.buffers.values():
        if buf.memory in L0_MEMORIES and len(buf.users) > 1:
            first = root(buf.users[0])
            for u in buf.users[1:]:
                parent[root(u)] = first
    groups: dict[int, list[int]] = {}
    for v in instance.op_ids:
        groups.setdefault(root(v), []).append(v)
    return list(groups.values())


def weak_components(instance: Instance) -> list[list[int]]:
    """The node sets of the weakly connected components, each sorted, largest first (ties: by
    smallest node id, only to fix the order of the list)."""
    n = instance.n_nodes
    seen = [False] * n
    parts: list[list[int]] = []
    pred, succ = instance.predecessors, instance.successors
    for start in range(n):
        if seen[start]:
            continue
        seen[start] = True
        stack, part = [start], []
        while stack:
            v = stack.pop()
            part.append(v)
            for w in (*pred[v], *succ[v]):
                if not seen[w]:
                    seen[w] = True
                    stack.append(w)
        parts.append(sorted(part))
    parts.sort(key=lambda p: (-len(p), p[0]))
    return parts
