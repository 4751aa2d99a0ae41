"""Figures of a solution and of a solve, drawn with matplotlib.

Every function draws on the ``ax`` it is given (a new figure's axes when ``None``) and returns
that axes; none calls ``show()``, so they work headless and inside notebooks alike.

* :func:`gantt` - the pipe chart: one row per pipe, a bar per node from start to end (as the
  contest statement's figure 5); spill nodes in their own colour;
* :func:`memory_map` - one memory in (time x address): a rectangle per residency segment,
  segments opened or closed by a spill hatched;
* :func:`vstay_curve` - live L1 + UB units along the schedule (Problem 1's objective);
* :func:`frontier` - the non-dominated (traffic, makespan) points of a solve;
* :func:`progress` - each problem's best value over the time of a solve.

The figures read the evaluator's account of the solution, never a model's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from npuopt.solver.evaluate import evaluate, residency_segments
from npuopt.solver.hardware import COUNTED_MEMORIES, DEFAULT_HARDWARE, Hardware
from npuopt.solver.instance import SPILL_IN_PIPE, SPILL_OUT_PIPE, Instance
from npuopt.solver.solution import Solution

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def _axes(ax: Axes | None) -> Axes:
    """``ax``, or the axes of a new figure made without pyplot: no backend is chosen and no
    window can open (``ax.get_figure().savefig`` writes it)."""
    if ax is not None:
        return ax
    from matplotlib.figure import Figure

    return Figure(figsize=(10, 4)).subplots()


def _timed(instance: Instance, solution: Solution, hardware: Hardware) -> Any:
    judged = evaluate(instance, solution, 3 if solution.offsets else 1, hardware)
    if not solution.offsets or judged.start_cycles is None:
        raise ValueError("the solution needs offsets and must be valid to be drawn in time")
    return judged


def gantt(
    instance: Instance,
    solution: Solution,
    ax: Axes | None = None,
    hardware: Hardware = DEFAULT_HARDWARE,
) -> Axes:
    """Pipe chart of a Problem 2/3 solution."""
    ax = _axes(ax)
    judged = _timed(instance, solution, hardware)
    n = instance.n_nodes
    rows: dict[str, list[tuple[int, int, bool]]] = {}
    for v in solution.order:
        if v < n:
            pipe = instance.pipe_of(v)
            spill = False
        else:
            pipe = SPILL_OUT_PIPE if (v - n) % 2 == 0 else SPILL_IN_PIPE
            spill = True
        if pipe is None:
            continue
        start, end = int(judged.start_cycles[v]), int(judged.end_cycles[v])
        rows.setdefault(pipe, []).append((start, end - start, spill))
    names = sorted(rows)
    for y, pipe in enumerate(names):
        plain = [(s, d) for s, d, spill in rows[pipe] if not spill]
        spilled = [(s, d) for s, d, spill in rows[pipe] if spill]
        ax.broken_barh(plain, (y - 0.4, 0.8), facecolors="tab:blue")
        if spilled:
            ax.broken_barh(spilled, (y - 0.4, 0.8), facecolors="tab:red")
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("cycle")
    ax.set_title(f"{instance.name}: pipes (makespan {judged.makespan_cycles:,}; red: spills)")
    return ax


def memory_map(
    instance: Instance,
    solution: Solution,
    memory: str,
    ax: Axes | None = None,
    hardware: Hardware = DEFAULT_HARDWARE,
) -> Axes:
    """One memory in (time x address): a rectangle per residency segment."""
    from matplotlib.patches import Rectangle

    ax = _axes(ax)
    judged = _timed(instance, solution, hardware)
    n_total = len(solution.order)
    pos = np.empty(n_total, dtype=np.int64)
    pos[np.asarray(solution.order, dtype=np.int64)] = np.arange(n_total)
    n = instance.n_nodes
    for seg in residency_segments(instance, solution, pos):
        if seg.memory != memory:
            continue
        start = int(judged.start_cycles[seg.start])
        end = max(int(judged.end_cycles[seg.end]), start + 1)
        spilled = seg.start >= n or seg.end >= n
        ax.add_patch(
            Rectangle(
                (start, seg.offset_units),
                end - start,
                seg.size_units,
                facecolor="tab:orange" if spilled else "tab:green",
                edgecolor="black",
                linewidth=0.3,
                hatch="//" if spilled else None,
                alpha=0.8,
            )
        )
    ax.set_xlim(0, max(int(judged.makespan_cycles or 0), 1))
    ax.set_ylim(0, hardware.capacity(memory))
    ax.set_xlabel("cycle")
    ax.set_ylabel(f"{memory} address")
    ax.set_title(f"{instance.name}: {memory} (hatched: segments a spill opens or closes)")
    return ax


def vstay_curve(instance: Instance, solution: Solution, ax: Axes | None = None) -> Axes:
    """Live L1 + UB units after each node of the schedule (spill nodes ignored)."""
    ax = _axes(ax)
    live, curve = 0, []
    for v in solution.order:
        b = instance.buffer_of_node[v] if v < instance.n_nodes else None
        if b is not None and instance.buffers[b].memory in COUNTED_MEMORIES:
            size = instance.buffers[b].size_units
            live += size if v == instance.buffers[b].alloc else -size
        curve.append(live)
    ax.plot(range(len(curve)), curve, linewidth=0.8)
    peak = max(curve, default=0)
    ax.axhline(peak, color="tab:red", linewidth=0.5, linestyle="--")
    ax.set_xlabel("schedule position")
    ax.set_ylabel("live L1 + UB units")
    ax.set_title(f"{instance.name}: V_stay (max {peak:,})")
    return ax


def frontier(points: Sequence[tuple[int, int]], ax: Axes | None = None) -> Axes:
    """Non-dominated (traffic, makespan) points, as a staircase."""
    ax = _axes(ax)
    ordered = sorted(points)
    if ordered:
        traffic, makespan = zip(*ordered, strict=True)
        ax.step(traffic, makespan, where="post", marker="o")
    ax.set_xlabel("extra traffic (units)")
    ax.set_ylabel("makespan (cycles)")
    ax.set_title("traffic / makespan frontier")
    return ax


def progress(history: Sequence[tuple[float, int, int]], ax: Axes | None = None) -> Axes:
    """Each problem's best value over the time of a solve, relative to its first value."""
    ax = _axes(ax)
    for problem in (1, 2, 3):
        points = [(t, value) for t, p, value in history if p == problem]
        if not points:
            continue
        first = points[0][1] or 1
        times = [t for t, _ in points]
        values = [value / first for _, value in points]
        ax.step(times, values, where="post", label=f"Problem {problem} (first {first:,})")
    ax.set_xlabel("seconds")
    ax.set_ylabel("best / first")
    ax.legend()
    ax.set_title("best value over time")
    return ax
