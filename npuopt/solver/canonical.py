"""Canonical names: solve a graph under ids derived from its structure, answer in the user's.

A user's node ids and BufIds are whatever the tool that wrote the graph chose. The pipeline reads
ids in many places (ranks of the list scheduler, the smallest-id topological order, last
tie-breaks), so instead of trusting them it renames the graph first:

1. every node gets its structural class (:func:`heuristics.structure.structural_classes`);
2. the ops are ordered by the ``cone`` generator (:mod:`heuristics.generators`), whose choices
   read classes, never ids; ALLOCs go just before the op that first needs them and FREEs as soon
   as they are ready, equal nodes by class;
3. node ``i`` of the canonical instance is the i-th node of that order, buffer ``j`` the j-th
   buffer allocated in it, and every op's ``Bufs`` is listed by canonical BufId.

A renumbered copy of a graph therefore yields the same canonical instance, as long as the only
nodes the refinement cannot tell apart are interchangeable (true of every renumbering of the
contest cases we tried: ``tests/solver/test_canonical.py``, ``benchmarks/invariance.py``);
answers are then the same up to the renaming. The canonical ids also form a topological order
that the ``cone`` generator found good for Problem 1, which the id-ranked parts of the pipeline
(the ``program`` policy, the smallest-id topological order) start from.

:meth:`Canonical.restore` maps a solution back to the user's ids; spill node ids (``N + 2k``)
follow the spill list and need no mapping.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from npuopt.heuristics.generators import Structure, cone_order, structure_of
from npuopt.solver.evaluate import Evaluation
from npuopt.solver.instance import Instance, relabel
from npuopt.solver.solution import Solution, Spill


@dataclass(frozen=True)
class Canonical:
    """An instance under canonical names and the way back.

    Attributes
    ----------
    instance
        The renamed instance (same name, same problem).
    original
        The instance as the user gave it.
    node
        ``node[i]``: the user's id of canonical node ``i``.
    buffer
        ``buffer[j]``: the user's BufId of canonical buffer ``j``.
    structure
        The structure of the canonical instance (classes, op graph, units), reusable by the
        order generators.
    """

    instance: Instance
    original: Instance
    node: tuple[int, ...]
    buffer: Mapping[int, int]
    structure: Structure

    def restore(self, solution: Solution) -> Solution:
        """``solution`` (canonical names) in the user's ids."""
        n = len(self.node)
        node = self.node
        return Solution(
            order=tuple(node[v] if v < n else v for v in solution.order),
            offsets={self.buffer[b]: off for b, off in solution.offsets.items()},
            spills=tuple(Spill(self.buffer[s.buf_id], s.new_offset_units) for s in solution.spills),
        )

    def adopt(self, solution: Solution) -> Solution:
        """``solution`` (the user's ids) under canonical names."""
        n = len(self.node)
        node_of = {v: i for i, v in enumerate(self.node)}
        buffer_of = {b: j for j, b in self.buffer.items()}
        return Solution(
            order=tuple(node_of[v] if v < n else v for v in solution.order),
            offsets={buffer_of[b]: off for b, off in solution.offsets.items()},
            spills=tuple(Spill(buffer_of[s.buf_id], s.new_offset_units) for s in solution.spills),
        )

    def restore_evaluation(self, evaluation: Evaluation) -> Evaluation:
        """``evaluation`` of a canonical solution, its per-node times indexed by the user's ids
        (objectives, peaks and loads do not depend on names). Violations keep canonical names:
        only valid answers are restored."""
        n = len(self.node)

        def by_user_id(times: np.ndarray | None) -> np.ndarray | None:
            if times is None:
                return None
            out = times.copy()
            out[np.asarray(self.node, dtype=np.int64)] = times[:n]
            return out

        return replace(
            evaluation,
            start_cycles=by_user_id(evaluation.start_cycles),
            end_cycles=by_user_id(evaluation.end_cycles),
        )


def canonical_order(instance: Instance, structure: Structure) -> list[int]:
    """All nodes of ``instance`` in canonical order (module docstring, step 2): a topological
    order whose choices read only structural classes, with every buffer's ALLOC before its
    FREE even where no path joins them (a buffer no op uses)."""
    classes = structure.classes
    n = instance.n_nodes
    # The graph's edges, and ALLOC(b) -> FREE(b) for every buffer.
    pred = [list(p) for p in instance.predecessors]
    succ = [list(s) for s in instance.successors]
    for buf in instance.buffers.values():
        if buf.alloc not in pred[buf.free]:
            pred[buf.free].append(buf.alloc)
            succ[buf.alloc].append(buf.free)
    frees = {buf.free for buf in instance.buffers.values()}
    done = [False] * n
    pending = [len(p) for p in pred]
    out: list[int] = []
    ready_later: list[int] = []  # nodes whose last predecessor ran: the last loop's candidates

    placed: dict[int, int] = {}  # node -> position in ``out``
    alloc_of = {buf.free: buf.alloc for buf in instance.buffers.values()}

    def key(v: int) -> tuple[int, int, int]:
        # Equal classes: a FREE by where its buffer was allocated; the id only as a last resort.
        return (classes[v], placed.get(alloc_of.get(v, -1), -1), v)

    def emit(v: int) -> None:
        stack = [v]
        while stack:  # unscheduled predecessors (buffer nodes) first, depth first
            u = stack[-1]
            if done[u]:
                stack.pop()
                continue
            missing = [p for p in pred[u] if not done[p]]
            if missing:
                stack.append(min(missing, key=key))
                continue
            stack.pop()
            done[u] = True
            placed[u] = len(out)
            out.append(u)
            ready = []
            for w in succ[u]:
                pending[w] -= 1
                if pending[w] == 0:
                    ready_later.append(w)
                    if w in frees:
                        ready.append(w)
            stack.extend(sorted(ready, key=key, reverse=True))  # a FREE goes once ready

    ready_later.extend(v for v in range(n) if pending[v] == 0)
    for v in cone_order(instance, structure):
        emit(v)
    # What no op needs (buffers nobody uses): by class, in a topological order.
    rest: list[tuple[tuple[int, int, int], int]] = []
    while True:
        for v in ready_later:
            if not done[v]:
                heapq.heappush(rest, (key(v), v))
        ready_later.clear()
        while rest and done[rest[0][1]]:
            heapq.heappop(rest)
        if not rest:
            break
        emit(heapq.heappop(rest)[1])
    if len(out) != n:
        raise ValueError("canonical order: some nodes were left unscheduled")
    return out


def canonicalize(instance: Instance, classes: Sequence[int] | None = None) -> Canonical:
    """``instance`` under canonical names (module docstring)."""
    structure = structure_of(instance, classes)
    order = canonical_order(instance, structure)
    buffer_of = instance.buffer_of_node
    allocs = [buffer_of[v] for v in order if buffer_of[v] is not None]
    first_seen: dict[int, int] = {}
    for b in allocs:
        if b is not None and b not in first_seen:
            first_seen[b] = len(first_seen)
    # Validated as any graph is (the user's capacities were checked on the original).
    renamed = relabel(instance, order, first_seen, instance.name, sort_bufs=True)
    renamed_classes = [structure.classes[v] for v in order]
    return Canonical(
        instance=renamed,
        original=instance,
        node=tuple(order),
        buffer={j: b for b, j in first_seen.items()},
        structure=structure_of(renamed, renamed_classes),
    )
