"""Untangling: work that does not depend on other work inside a window of an op order, run one
part after another instead of interleaved.

A greedy generator can interleave sub-computations that share nothing but their loads. On
Conv_Case1, twelve spatial positions each read their own seven input tiles through eight output
channel chains; the ``cone-net`` order takes the chains channel by channel across the
positions, so every position's tiles wait for the last channel while the next layer's tiles
pile up (5,570 units at the peak). Run position by position, a position's tiles are freed as
soon as its eight chains are done (4,344 in that window).

Inside a window (a run of consecutive ops of an order), leave out the *loads* (ops with no op
predecessor: they read only DDR) and split the other ops into the parts that the window's
edges connect. No path links two parts inside the window: a path between two ops of the window
runs through ops placed between them, so inside it, and no path runs through a load. Running
the parts one after another, each in its own order, with each load just before its first user
(a load nothing in the window uses stays last), is again an order that keeps every path.

:func:`untangle` re-sorts windows of several sizes around the peak (live L1/UB units by first
and last use, :func:`solver.solution.op_profile`), the parts in the order they first appear,
and keeps the window that lowers the peak most (then the number of ops at it); it repeats
while that helps, at most ``rounds`` times. The windows come from positions in the order only,
so the result depends on the order and the graph, never on ids. Pure Python.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from npuopt.heuristics.structure import OpGraph
from npuopt.solver.instance import Instance
from npuopt.solver.solution import op_profile

#: Re-sorts :func:`untangle` tries at most (each is one pass over the order).
ROUNDS = 32
#: Smallest window before the peak (ops); the others double up to the whole order.
SMALLEST_WINDOW = 64


def untangle(
    instance: Instance, graph: OpGraph, op_order: Sequence[int], rounds: int = ROUNDS
) -> list[int]:
    """``op_order`` with windows around its peak untangled (module docstring) while the peak
    (then the count of ops at it) goes down, at most ``rounds`` times."""
    order = list(op_order)
    if len(order) < 2:
        return order
    profile = op_profile(instance, order)
    key = _key(profile)
    for _ in range(rounds):
        peak_at = int(np.argmax(profile))
        best: tuple[tuple[int, int], list[int], np.ndarray] | None = None
        for lo, hi in _windows(len(order), peak_at):
            tried = untangled_window(graph, order, lo, hi)
            if tried is None:
                continue
            found = op_profile(instance, tried)
            if _key(found) < (best[0] if best is not None else key):
                best = (_key(found), tried, found)
        if best is None:
            break
        key, order, profile = best
    return order


def _key(profile: np.ndarray) -> tuple[int, int]:
    peak = int(profile.max(initial=0))
    return peak, int(np.count_nonzero(profile == peak))


def _windows(n: int, peak_at: int) -> list[tuple[int, int]]:
    """Windows ``[lo, hi)`` of the order around position ``peak_at``: ``before`` ops before it
    (64, 128, ... up to all) and none, a quarter or as many after it."""
    windows: list[tuple[int, int]] = []
    before = SMALLEST_WINDOW
    while True:
        for after in (0, before // 4, before):
            window = (max(0, peak_at - before), min(n, peak_at + after + 1))
            if window not in windows:
                windows.append(window)
        if before >= n:
            return windows
        before *= 2


def untangled_window(graph: OpGraph, order: Sequence[int], lo: int, hi: int) -> list[int] | None:
    """``order`` with the window ``order[lo:hi]`` run part after part (module docstring), or
    ``None`` when the window is one part."""
    window = order[lo:hi]
    pred = graph.pred
    loads = {v for v in window if not pred[v]}
    parent = {v: v for v in window if v not in loads}

    def root(v: int) -> int:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    for v in parent:
        for p in pred[v]:
            if p in parent:
                parent[root(p)] = root(v)
    parts: dict[int, list[int]] = {}  # root -> its ops in window order; dicts keep first-seen
    for v in window:
        if v not in loads:
            parts.setdefault(root(v), []).append(v)
    if len(parts) < 2:
        return None
    at = {v: i for i, v in enumerate(window)}
    placed: set[int] = set()
    new: list[int] = []
    for part in parts.values():
        for v in part:
            # Its loads not yet placed, in their window order (not by id: names decide nothing).
            due = sorted((p for p in pred[v] if p in loads and p not in placed), key=at.__getitem__)
            placed.update(due)
            new += due
            new.append(v)
    new += [v for v in window if v in loads and v not in placed]
    return [*order[:lo], *new, *order[hi:]]
