"""Pipe-aware reordering for Problem 3 (and Problem 2's makespan tie-break).

With offsets and spills fixed, :func:`compact` keeps as precedence constraints

* every edge of the graph and every spill edge the solution implies (users before a SPILL_OUT
  stay before it, users after it stay after its SPILL_IN),
* the order of residency segments that share an address unit (the segment that held the unit
  earlier still ends before the next one starts), and each segment's start before its end,

so *any* topological order of these constraints is a valid solution with the same traffic: the
segments that overlap in address stay apart in time, and the spill edges the evaluator derives
are the same. Among those orders it picks one by list scheduling the pipes (the classic
non-delay schedule, after Giffler and Thompson): the next node is the one that can start
earliest on its pipe, ties broken by the longest remaining path (bottom level). ALLOC/FREE take no
pipe and go as soon as they are ready. Prefetching of COPY_IN, MOVE and SPILL_IN as far as the
address constraints allow, and overlap between pipes, follow from that rule.

The bottom level knows the precedences but not the pipe queues. One round of *justification*
(the forward-backward improvement of Valls, Ballestín and Quintanilla, 2005) supplies them: the
same list scheduler runs on the reversed constraints, latest-ending nodes first, and its
schedule's end times (the time from each node's start to the end, queues included) are the
priorities of a second forward pass. The shortest of the three schedules wins (the backward
one, read in reverse, is an order too). Pure Python.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import NamedTuple

from npuopt.solver.evaluate import precedence_graph
from npuopt.solver.instance import Instance
from npuopt.solver.solution import Solution


class Constraints(NamedTuple):
    """What any order of a solution's placement and spills must respect
    (:func:`solver.evaluate.precedence_graph`): predecessors and successors of every node (no
    duplicates), its cycles and its pipe."""

    pred: list[list[int]]
    succ: list[list[int]]
    cycles: list[int]
    pipe: list[str | None]

    def reversed(self) -> Constraints:
        """The same constraints read backwards (successors first)."""
        return Constraints(self.succ, self.pred, self.cycles, self.pipe)


def constraints(instance: Instance, solution: Solution) -> Constraints:
    """The :class:`Constraints` of ``solution``."""
    listed, cycles, pipe = precedence_graph(instance, solution)
    pred = [sorted(set(ps)) for ps in listed]
    succ: list[list[int]] = [[] for _ in pred]
    for v, ps in enumerate(pred):
        for u in ps:
            succ[u].append(v)
    return Constraints(pred, succ, cycles, pipe)


def compact(instance: Instance, solution: Solution) -> Solution:
    """The same placement and spills in a pipe-friendly order (see the module docstring)."""
    held = constraints(instance, solution)
    forward, end = _non_delay(held, _bottom_levels(solution.order, held.succ, held.cycles))
    return _shortest((forward, *_justified(held, end)), held, solution)


def justify(instance: Instance, solution: Solution, end_cycles: Sequence[int]) -> Solution:
    """One round of justification (see the module docstring) from a schedule's own times:
    ``end_cycles`` (the simulated end of every node of ``solution``) order the backward pass.
    Returns the shorter of the two schedules it yields, which may be slower than ``solution``
    itself (the caller compares)."""
    held = constraints(instance, solution)
    return _shortest(_justified(held, end_cycles), held, solution)


def _justified(held: Constraints, end: Sequence[int]) -> tuple[list[int], list[int]]:
    """The backward list schedule (latest ``end`` first) read in reverse, and the forward one
    on its end times."""
    backward, back_end = _non_delay(held.reversed(), end)
    again, _ = _non_delay(held, back_end)
    return backward[::-1], again


def _shortest(orders: Sequence[list[int]], held: Constraints, solution: Solution) -> Solution:
    """``solution``'s placement and spills in the first of ``orders`` with the least makespan."""
    spans = [_makespan(order, held) for order in orders]
    best = orders[spans.index(min(spans))]
    return Solution(order=tuple(best), offsets=solution.offsets, spills=solution.spills)


def _non_delay(held: Constraints, level: Sequence[int]) -> tuple[list[int], list[int]]:
    """Non-delay list schedule of ``held`` on in-order pipes: the next node is the one that can
    start earliest, the highest ``level`` among those ready by then on its pipe. Returns the
    order and every node's end time."""
    pred, succ, cycles, pipe = held
    n_total = len(pred)
    missing = [len(ps) for ps in pred]
    ready_at = [0] * n_total
    end = [0] * n_total
    pipe_free: dict[str, int] = {}
    waiting: dict[str, list[tuple[int, int, int]]] = {}  # by ready time
    available: dict[str, list[tuple[int, int, int]]] = {}  # ready when the pipe frees: by level
    order: list[int] = []
    instant: list[int] = [v for v in range(n_total) if missing[v] == 0 and pipe[v] is None]

    def wait(v: int) -> None:
        unit = pipe[v]
        assert unit is not None
        heapq.heappush(waiting.setdefault(unit, []), (ready_at[v], -level[v], v))

    def release(v: int) -> None:
        for w in succ[v]:
            ready_at[w] = max(ready_at[w], end[v])
            missing[w] -= 1
            if missing[w] == 0:
                if pipe[w] is None:
                    instant.append(w)
                else:
                    wait(w)

    for v in range(n_total):
        if missing[v] == 0 and pipe[v] is not None:
            wait(v)
    while True:
        while instant:  # pipeless nodes run the moment they are ready
            v = instant.pop()
            end[v] = ready_at[v]
            order.append(v)
            release(v)
        best: tuple[int, int, str] | None = None
        for p in sorted(set(waiting) | set(available)):  # sorted: ties must not hang on hashing
            free_at = pipe_free.get(p, 0)
            w, a = waiting.get(p, []), available.setdefault(p, [])
            while w and w[0][0] <= free_at:  # ready by the time the pipe frees
                ready, neg_level, v = heapq.heappop(w)
                heapq.heappush(a, (neg_level, ready, v))
            if a:
                start, top = free_at, a[0][0]
            elif w:
                start, top = w[0][0], w[0][1]  # the pipe idles until its first node is ready
            else:
                continue
            if best is None or (start, top) < best[:2]:
                best = (start, top, p)
        if best is None:
            break
        start, _, p = best
        a, w = available[p], waiting.get(p, [])
        while w and w[0][0] <= start:  # the pipe idled: whatever is ready by then competes
            ready, neg_level, v = heapq.heappop(w)
            heapq.heappush(a, (neg_level, ready, v))
        _, _, v = heapq.heappop(a)
        end[v] = start + cycles[v]
        pipe_free[p] = end[v]
        order.append(v)
        release(v)
    if len(order) != n_total:
        raise AssertionError("constraint graph of a valid solution must be acyclic")
    return order, end


def _makespan(order: Sequence[int], held: Constraints) -> int:
    """The simulation of SPEC section 4 for a topological ``order`` of ``held``."""
    pred, _, cycles, pipe = held
    end = [0] * len(pred)
    pipe_free: dict[str, int] = {}
    for v in order:
        start = max((end[u] for u in pred[v]), default=0)
        unit = pipe[v]
        if unit is not None:
            start = max(start, pipe_free.get(unit, 0))
            pipe_free[unit] = start + cycles[v]
        end[v] = start + cycles[v]
    return max(end, default=0)


def _bottom_levels(order: tuple[int, ...], succ: list[list[int]], cycles: list[int]) -> list[int]:
    """Longest path (sum of cycles) from each node to the end, along a valid order."""
    level = [0] * len(succ)
    for v in reversed(order):
        level[v] = cycles[v] + max((level[w] for w in succ[v]), default=0)
    return level
