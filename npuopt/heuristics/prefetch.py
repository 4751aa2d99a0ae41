"""Address choices that let loads start early (Problem 3, traffic unchanged).

On a placed and compacted solution the pipes often wait for an *address*: a SPILL_IN or a
COPY_IN cannot start before the residency segment that held its address range last has ended
(the reuse edges of SPEC section 4). On Conv_Case0 the cube pipe idles 79k of its 110k idle
cycles on such reloads. Another free range may be released much earlier.

:func:`release_earlier` sweeps the segments in schedule order and moves each one whose start is
held back by its range's previous occupant to the aligned range, free throughout the segment's
span, whose previous occupants end earliest (by the current timing); the evaluator judges the
result in the current order and re-timed by :func:`~heuristics.pipes.compact`. It repeats while
the makespan drops. Offsets only move: spills, and so the traffic, stay as they are. Pure
Python and numpy.
"""

from __future__ import annotations

import time

import numpy as np

from npuopt.heuristics.pipes import compact
from npuopt.solver.evaluate import Evaluation, ReuseRule, evaluate, residency_segments
from npuopt.solver.hardware import Hardware
from npuopt.solver.instance import Instance
from npuopt.solver.solution import Solution, with_segment_offsets


def release_earlier(
    instance: Instance,
    solution: Solution,
    hardware: Hardware,
    reuse_rule: ReuseRule = "residency",
    *,
    rounds: int = 8,
    max_trials: int | None = None,
    deadline: float | None = None,
    judged: Evaluation | None = None,
) -> tuple[Solution, Evaluation, int]:
    """Re-offset segments held back by address reuse, compact, keep while the makespan drops.

    A sweep proposes its moves in sweep order; any prefix of them is valid (each move was
    checked against the earlier ones), so when all of them do not help, the first half is
    tried, then the first quarter, and so on. Each trial is judged twice: in the current
    order (the loads run as soon as their pipe and the new range allow, and whatever an
    earlier re-timing achieved stays) and compacted (re-timed from scratch). Returns the best
    solution found, its Problem 3 evaluation (``solution`` itself, judged, when nothing
    helps) and the number of trials made, at most ``max_trials`` (the caller's budget: a trial
    is a whole-graph pass). ``deadline`` (``time.monotonic()``): a trial starts only if the
    slowest one so far still fits before it (a safety net for a machine running late).
    ``judged``: the evaluation of ``solution`` under ``reuse_rule`` when the caller has it (on a
    100k-node graph one costs 2 s).
    """
    best = solution
    best_eval = judged if judged is not None else evaluate(instance, best, 3, hardware, reuse_rule)
    trials = 0
    if not best_eval.valid:
        return best, best_eval, trials
    slowest = 0.0  # the slowest trial so far: the next one starts only if that much is left
    for _ in range(rounds):
        moves = _sweep(instance, best, best_eval, hardware)
        improved = False
        while moves and not improved:
            began = time.monotonic()
            if max_trials is not None and trials >= max_trials:
                return best, best_eval, trials
            if deadline is not None and began + slowest > deadline:
                return best, best_eval, trials
            trials += 1
            moved = with_segment_offsets(instance, best, dict(moves))
            for candidate in (moved, compact(instance, moved)):
                judged = evaluate(instance, candidate, 3, hardware, reuse_rule)
                if (
                    judged.valid
                    and judged.extra_traffic_units == best_eval.extra_traffic_units
                    and judged.objective() < best_eval.objective()
                ):
                    best, best_eval, improved = candidate, judged, True
            moves = moves[: len(moves) // 2]
            slowest = max(slowest, time.monotonic() - began)
        if not improved:
            break
    return best, best_eval, trials


#: A proposed move: (node opening the segment, i.e. its ALLOC or SPILL_IN, new offset).
Move = tuple[int, int]


def _sweep(
    instance: Instance, solution: Solution, judged: Evaluation, hardware: Hardware
) -> list[Move]:
    """One sweep (see the module docstring): the moves, in sweep order."""
    assert judged.start_cycles is not None and judged.end_cycles is not None
    start_t, end_t = judged.start_cycles, judged.end_cycles
    n_total = len(solution.order)
    pos = np.empty(n_total, dtype=np.int64)
    pos[np.asarray(solution.order, dtype=np.int64)] = np.arange(n_total)
    segments = residency_segments(instance, solution, pos)
    offset = np.array([s.offset_units for s in segments], dtype=np.int64)
    size = np.array([s.size_units for s in segments], dtype=np.int64)
    first = np.array([pos[s.start] for s in segments], dtype=np.int64)
    last = np.array([pos[s.end] for s in segments], dtype=np.int64)
    moves: list[Move] = []
    for memory in sorted({s.memory for s in segments}):
        members = np.array([i for i, s in enumerate(segments) if s.memory == memory])
        capacity, align = hardware.capacity(memory), hardware.alignment(memory)
        released = np.zeros(capacity, dtype=np.int64)  # when each unit's last holder ended
        by_end = members[np.argsort(last[members], kind="stable")]
        done = 0
        for i in members[np.argsort(first[members], kind="stable")]:
            while done < len(by_end) and last[by_end[done]] < first[i]:
                j = by_end[done]
                released[offset[j] : offset[j] + size[j]] = end_t[segments[j].end]
                done += 1
            w = int(size[i])
            if w > capacity:
                continue
            current = int(released[offset[i] : offset[i] + w].max(initial=0))
            if current == 0 or start_t[segments[i].start] > current:
                continue  # not held back by its address range
            span = members[(first[members] <= last[i]) & (last[members] >= first[i])]
            span = span[span != i]
            busy = np.zeros(capacity + 1, dtype=np.int64)
            np.add.at(busy, offset[span], 1)
            np.add.at(busy, offset[span] + size[span], -1)
            taken = np.concatenate(([0], np.cumsum(np.cumsum(busy)[:capacity] > 0)))
            free = taken[w:] - taken[: capacity - w + 1] == 0  # per start unit o
            ready = _window_max(released, w)
            candidates = np.flatnonzero(free & (np.arange(capacity - w + 1) % align == 0))
            if not len(candidates):
                continue
            o = int(candidates[np.argmin(ready[candidates])])
            if ready[o] < current:
                offset[i] = o
                moves.append((segments[i].start, o))
    return moves


def _window_max(values: np.ndarray, w: int) -> np.ndarray:
    """``out[o] = values[o : o + w].max()`` for every full window (van Herk / Gil-Werman)."""
    n = len(values)
    blocks = -(-n // w)
    padded = np.zeros(blocks * w, dtype=values.dtype)
    padded[:n] = values
    grid = padded.reshape(blocks, w)
    prefix = np.maximum.accumulate(grid, axis=1).ravel()
    suffix = np.maximum.accumulate(grid[:, ::-1], axis=1)[:, ::-1].ravel()
    o = np.arange(n - w + 1)
    return np.maximum(suffix[o], prefix[o + w - 1])
