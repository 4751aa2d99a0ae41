"""Untangling: work that does not depend on other work inside a window of an op order, run one
part after another instead of interleaved.

A greedy generator can interleave sub-computations that share nothing but their loads. On
Conv_Case1, twelve spatial positions each read their own seven input tiles through eight output
channel chains; the ``cone-net`` order takes the chains channel by channel across the
positions, so every position's tiles wait for the last channel while the next layer's tiles
pile up (5,570 units at the peak). Run position by position, a position's tiles are freed as
soon as its eight chains are done (4,344 in that window).

Inside a window (a run of consecutive ops of an order), leave out the *loads* (ops with no op
predecessor, such as the COPY_INs: they read no op's output) and split the other ops into the
parts that the window's edges connect. No path links two parts inside the window: a path
between two ops of the window runs through ops placed between them, so inside it, and no path
runs through a load. Running the parts one after another, each in its own order, with each
load just before its first user (a load nothing in the window uses stays last), is again an
order that keeps every path. It may break L0 single residency (a part's L0 buffer can open
while another part's buffer of that memory is live): Problem 1's list scheduler restores it,
and Problem 2 keeps its first order when the untangled one breaks it.

:func:`untangle` re-sorts windows of several sizes around the peak (live L1/UB units by first
and last use, :class:`solver.solution.LiveProfile`), the parts in the order they first appear,
and keeps the window that lowers the peak most (then the number of ops at it); it repeats
while that helps, at most ``rounds`` times. The windows come from positions in the order only,
so the result depends on the order and the graph, never on ids. Pure Python.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from npuopt.heuristics.neighbourhoods import profile_key
from npuopt.heuristics.structure import OpGraph
from npuopt.solver.instance import Instance
from npuopt.solver.solution import LiveProfile

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
    live = LiveProfile(instance)
    profile = live.profile(order)
    key = profile_key(profile)
    for _ in range(rounds):
        peak_at = int(np.argmax(profile))
        best: tuple[tuple[int, int], list[int], np.ndarray] | None = None
        for lo, hi in _windows(len(order), peak_at):
            tried = untangled_window(graph, order, lo, hi)
            if tried is None:
                continue
            found = live.profile(tried)
            if profile_key(found) < (best[0] if best is not None else key):
                best = (profile_key(found), tried, found)
        if best is None:
            break
        key, order, profile = best
    return order


#: Positions :func:`untangle_excess` tries (the worst first): each costs a pass per window.
EXCESS_MOVES = 16


def untangle_excess(
    instance: Instance,
    graph: OpGraph,
    op_order: Sequence[int],
    capacity: Mapping[str, int],
    moves: int = EXCESS_MOVES,
) -> list[int]:
    """``op_order`` untangled (module docstring) where its live L1/UB units exceed
    ``capacity`` (units per memory): windows around the op of largest excess (summed over the
    memories), then the next largest not tried yet, each re-sorting kept when it lowers the
    total excess over every op (what Problem 2 must spill, roughly) without raising the peak;
    ``moves`` positions at most. Problem 2's orders start from it."""
    order = list(op_order)
    live = LiveProfile(instance)
    if len(order) < 2:
        return order

    def judged(trial: list[int]) -> tuple[int, np.ndarray]:
        """The peak of L1+UB together and, per op, the units above capacity."""
        profiles = live.by_memory(trial)
        over = np.zeros(len(trial), dtype=np.int64)
        for m, profile in profiles.items():
            if m in capacity:
                over += np.maximum(profile - capacity[m], 0)
        together = np.sum(list(profiles.values()), axis=0) if profiles else over
        return int(together.max(initial=0)), over

    peak, over = judged(order)
    tried: set[int] = set()
    for _ in range(moves):
        left = np.flatnonzero(over > 0)
        left = left[[i not in tried for i in left.tolist()]] if tried else left
        if not len(left):
            break
        at = int(left[np.argmax(over[left])])
        tried.add(at)
        best: tuple[int, list[int], np.ndarray] | None = None
        for lo, hi in _windows(len(order), at):
            trial = untangled_window(graph, order, lo, hi)
            if trial is None:
                continue
            trial_peak, found = judged(trial)
            total = int(found.sum())
            if trial_peak <= peak and total < (best[0] if best is not None else int(over.sum())):
                best = (total, trial, found)
        if best is not None:
            _, order, over = best
    return order


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
