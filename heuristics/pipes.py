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
"""

from __future__ import annotations

import heapq

from solver.evaluate import precedence_graph
from solver.instance import Instance
from solver.solution import Solution


def compact(instance: Instance, solution: Solution) -> Solution:
    """The same placement and spills in a pipe-friendly order (see the module docstring)."""
    pred, cycles, pipe = precedence_graph(instance, solution)
    n_total = len(pred)
    succ: list[list[int]] = [[] for _ in range(n_total)]
    for v, ps in enumerate(pred):
        for u in sorted(set(ps)):
            succ[u].append(v)
    level = _bottom_levels(solution.order, succ, cycles)

    missing = [len(set(ps)) for ps in pred]
    ready_at = [0] * n_total
    end = [0] * n_total
    pipe_free: dict[str, int] = {}
    waiting: dict[str, list[tuple[int, int, int]]] = {}  # by ready time
    available: dict[str, list[tuple[int, int, int]]] = {}  # ready by now: by bottom level
    order: list[int] = []
    instant: list[int] = [v for v in range(n_total) if missing[v] == 0 and pipe[v] is None]

    def release(v: int) -> None:
        for w in succ[v]:
            ready_at[w] = max(ready_at[w], end[v])
            missing[w] -= 1
            if missing[w] == 0:
                if pipe[w] is None:
                    instant.append(w)
                else:
                    heapq.heappush(waiting.setdefault(pipe[w], []), (ready_at[w], -level[w], w))  # type: ignore[arg-type]

    for v in range(n_total):
        if missing[v] == 0 and pipe[v] is not None:
            heapq.heappush(waiting.setdefault(pipe[v], []), (0, -level[v], v))  # type: ignore[arg-type]
    while True:
        while instant:  # pipeless nodes run the moment they are ready
            v = instant.pop()
            end[v] = ready_at[v]
            order.append(v)
            release(v)
        best: tuple[int, int, str] | None = None
        for p in sorted(set(waiting) | set(available)):  # sorted: ties must not hang on hashing
            start = _earliest_start(p, pipe_free.get(p, 0), waiting, available)
            if start is None:
                continue
            top = available[p][0]
            if best is None or (start, top[0]) < best[:2]:
                best = (start, top[0], p)
        if best is None:
            break
        start, _, p = best
        _, _, v = heapq.heappop(available[p])
        end[v] = start + cycles[v]
        pipe_free[p] = end[v]
        order.append(v)
        release(v)
    if len(order) != n_total:
        raise AssertionError("constraint graph of a valid solution must be acyclic")
    return Solution(order=tuple(order), offsets=solution.offsets, spills=solution.spills)


def _earliest_start(
    p: str,
    free_at: int,
    waiting: dict[str, list[tuple[int, int, int]]],
    available: dict[str, list[tuple[int, int, int]]],
) -> int | None:
    """Earliest start on pipe ``p``; moves the nodes ready by then into its available heap."""
    w = waiting.get(p, [])
    a = available.setdefault(p, [])
    start = free_at if a or not w else max(free_at, w[0][0])
    while w and w[0][0] <= start:
        ready, neg_level, v = heapq.heappop(w)
        heapq.heappush(a, (neg_level, ready, v))
    return start if a else None


def _bottom_levels(order: tuple[int, ...], succ: list[list[int]], cycles: list[int]) -> list[int]:
    """Longest path (sum of cycles) from each node to the end, along a valid order."""
    level = [0] * len(succ)
    for v in reversed(order):
        level[v] = cycles[v] + max((level[w] for w in succ[v]), default=0)
    return level
