"""CP-SAT pipe scheduling (Problem 3): start times for a window of a placed solution.

The placement and the spill decisions of the incumbent are kept (so is the traffic); the model
chooses *when* each node of the window runs, and the schedule written to the files is derived
from those times. Formulation (after the disjunctive job-shop models of the CP-SAT primer and
OR-tools' ``rcpsp_sat``):

* each node v of the window has a start ``s_v`` and runs ``Cycles`` on its pipe: one
  ``NoOverlap`` per pipe (a cumulative of capacity 1). A zero-cycle pipe node (a SPILL_OUT of a
  COPY_IN-backed buffer) starts before or after each other run on its pipe, never inside one:
  a zero-length interval could otherwise sit inside another one, which the in-order simulation
  does not allow;
* graph edges and spill edges are precedences ``s_v >= s_u + Cycles_u``;
* every residency segment that starts or ends in the window is a rectangle in (time x address)
  per memory, from its start node's start to its end node's end, in a ``NoOverlap2D``: address
  reuse is a timing constraint, in the order the model picks, not the incumbent's fixed edge.
  Segments that start inside the window may also move to another address (same traffic,
  same spills): false dependencies through a reused address disappear. One that ends after
  the window may only take addresses clear of the segments opened after the window before
  it closes (those keep their addresses).

**Windows.** The window is closed under time: given some nodes, it holds every node whose
incumbent start lies between their earliest and latest start. Nodes that start earlier are
fixed (their end times are constants: pipe availability, lower bounds of their successors,
release times of the addresses they held); nodes that start later are not in the model, and the
evaluator's simulation places them after the window, in the incumbent's order. The objective is
the largest ``end_v + tail_v`` over the window, ``tail_v`` being the longest path after v in
the incumbent's precedence graph (the window's share of the makespan), then the sum of end times.
With the window = everything, ``tail = 0`` and the objective is the makespan itself.

The schedule is the fixed prefix, then the window's nodes in a topological order of their
precedences, pipe sequences and address-reuse order by model start time, then the rest. Every
answer is re-judged by the evaluator; the model never claims a makespan it did not simulate.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from models.common import STATUS, make_solver
from solver.evaluate import (
    Evaluation,
    ReuseRule,
    Segment,
    evaluate,
    extended_graph,
    precedence_graph,
    residency_segments,
)
from solver.hardware import MEMORIES, Hardware
from solver.instance import Instance
from solver.result import Result, Status
from solver.solution import Solution, with_segment_offsets

#: Start of the boxes of segments opened before the window. The schedule puts the prefix first,
#: so on a shared address a window segment comes after them, whatever its time: their boxes
#: reach back before any time the model can choose.
_PREFIX = -1
#: Kind order among nodes starting at the same cycle: segment ends (FREE, SPILL_OUT) release
#: addresses before segment starts (ALLOC, SPILL_IN) take them.
_ENDS_FIRST = {"end": 0, "op": 1, "start": 2}
#: CP-SAT settings of this model (overridable through ``params``). Measured on Conv_Case0
#: (2,662 nodes): with the LP relaxation and presolve on, the first solution takes 60 s; without,
#: 8 s (precedences and no-overlaps propagate well). With CP-SAT's default search, a window solve
#: after the hint spends its time raising the objective's bound one unit per conflict, work
#: CP-SAT hardly counts as deterministic time: 9 windows of 80-200 nodes took 47-79 s of wall
#: clock for 0.4 deterministic s each, several 10 s for 0.04 (the wall-clock cap), on
#: Matmul_Case0, FlashAttention_Case1 and Conv_Case0's 600 s answers. Quick restarts (with the
#: hint) take 15-18 s for the same windows and improve 3-5 of 9 windows instead of 0-2.
_PARAMS = {
    "linearization_level": "0",
    "cp_model_presolve": "false",
    "search_branching": "PORTFOLIO_WITH_QUICK_RESTART_SEARCH",
}


@dataclass(frozen=True)
class PipeFrame:
    """The incumbent in time: what every window solve reads, built once per incumbent.

    Attributes
    ----------
    solution
        The incumbent, its order normalised by start time (same simulation, same files
        otherwise).
    start, end
        Simulated start and end cycle of every node.
    pred
        Precedence graph (graph, spill, segment and reuse edges) of the incumbent.
    fixed_pred
        The part of ``pred`` that holds whatever the times and addresses: graph and spill edges
        and each segment's start before its end (reuse edges left out).
    cycles, pipe
        Cycles and pipe of every node (spill nodes included).
    tail
        Longest path after each node along ``pred`` (its own cycles excluded).
    makespan
        The incumbent's makespan.
    hardware
        Capacities and layout rules (for moving addresses).
    evaluation
        The evaluator's account of the incumbent (Problem 3).
    """

    solution: Solution
    start: np.ndarray
    end: np.ndarray
    pred: list[list[int]]
    fixed_pred: list[list[int]]
    cycles: list[int]
    pipe: list[str | None]
    tail: np.ndarray
    makespan: int
    hardware: Hardware
    evaluation: Evaluation


def frame(
    instance: Instance, solution: Solution, hardware: Hardware, reuse_rule: ReuseRule = "residency"
) -> PipeFrame | None:
    """The time frame of a valid solution (``None`` when the evaluator rejects it)."""
    judged = evaluate(instance, solution, 3, hardware, reuse_rule)
    if not judged.valid or judged.start_cycles is None or judged.end_cycles is None:
        return None
    pred, cycles, pipe = precedence_graph(instance, solution)
    n_total = len(solution.order)
    pos = np.empty(n_total, dtype=np.int64)
    pos[np.asarray(solution.order, dtype=np.int64)] = np.arange(n_total)
    fixed_pred = [list(ps) for ps in extended_graph(instance, solution, pos).pred]
    for seg in residency_segments(instance, solution, pos):
        fixed_pred[seg.end].append(seg.start)
    start, end = judged.start_cycles, judged.end_cycles
    kind = _kinds(instance, solution)
    position = {v: p for p, v in enumerate(solution.order)}
    # Each pipe's sequence must survive the sort (a zero-cycle node may share its start with
    # the next node on its pipe): chain it into the precedences the sort obeys.
    chained = [list(ps) for ps in pred]
    last_on: dict[str, int] = {}
    for v in solution.order:
        unit = pipe[v]
        if unit is not None:
            if unit in last_on:
                chained[v].append(last_on[unit])
            last_on[unit] = v
    order = _topological(
        list(solution.order), chained, lambda v: (int(start[v]), kind[v], position[v])
    )
    succ: list[list[int]] = [[] for _ in pred]
    for v, ps in enumerate(pred):
        for u in set(ps):
            succ[u].append(v)
    tail = np.zeros(len(pred), dtype=np.int64)
    for v in reversed(order):
        tail[v] = max((tail[w] + cycles[w] for w in succ[v]), default=0)
    normalised = Solution(order=tuple(order), offsets=solution.offsets, spills=solution.spills)
    return PipeFrame(
        normalised,
        start,
        end,
        pred,
        fixed_pred,
        cycles,
        pipe,
        tail,
        int(judged.makespan_cycles or 0),
        hardware,
        judged,
    )


def solve_pipes(
    instance: Instance,
    frame: PipeFrame,
    window: Collection[int] | None = None,
    *,
    move_addresses: bool = True,
    time_limit_s: float = 10.0,
    seed: int = 0,
    workers: int = 1,
    deterministic: bool = False,
    log: bool = False,
    params: Mapping[str, str] | None = None,
) -> Result:
    """Re-time the nodes of ``window`` (closed under time, see the module docstring), and
    with ``move_addresses`` re-place the segments that start inside it.

    Parameters
    ----------
    instance
        The instance.
    frame
        :func:`frame` of the incumbent.
    window
        Nodes (original or spill ids) to free; every node whose incumbent start lies between
        their earliest and latest start joins them. ``None``: every node.
    move_addresses
        Give the segments that start in the window an offset variable (aligned, in
        capacity, clear of later segments for one that outlives the window; memories with a
        bank model keep theirs): the traffic stays the same, the spills the same, only where
        a segment sits changes.
    time_limit_s, seed, workers, deterministic, log, params
        As for :func:`models.ordering.solve_order`.

    Returns
    -------
    Result
        ``solution`` is the re-timed schedule (same offsets and spills); ``objective`` the
        model's value of its objective (for the full window: the makespan, which the
        evaluator's simulation of ``solution`` never exceeds); ``bound`` CP-SAT's bound on it,
        a bound on the makespan only for the full window and only for this placement.
    """
    started = time.monotonic()
    order = list(frame.solution.order)
    if window is None:
        lo, hi = 0, len(order) - 1
    else:
        chosen = [v for v in window if 0 <= v < len(order)]
        if not chosen:
            return Result(Status.UNKNOWN, runtime_s=0.0, info={"window": 0})
        t0 = min(int(frame.start[v]) for v in chosen)
        t1 = max(int(frame.start[v]) for v in chosen)
        starts = frame.start[np.asarray(order, dtype=np.int64)]
        # The normalised order is sorted by start: the window is one run of it.
        lo = int(np.searchsorted(starts, t0, side="left"))
        hi = int(np.searchsorted(starts, t1, side="right")) - 1
    free = order[lo : hi + 1]
    if not free:  # the order is not sorted by start (a frame timed under another reuse rule)
        return Result(Status.UNKNOWN, runtime_s=time.monotonic() - started, info={"window": 0})
    fixed = set(order[:lo])
    whole = lo == 0 and hi == len(order) - 1
    model = cp_model.CpModel()
    model.clear_hints()
    x = _variables(model, frame, free, fixed, whole)
    _precedences(model, frame, free, fixed, x)
    _pipes(model, frame, order, lo, hi, x)
    offsets = _memory(model, instance, frame, free, fixed, x, move_addresses)
    makespan, weight = _objective(model, frame, free, x, whole)
    for v in free:  # the incumbent (its offsets were hinted with their variables)
        model.add_hint(x[v], int(frame.start[v]))

    solver = make_solver(
        time_limit_s=time_limit_s,
        seed=seed,
        workers=workers,
        deterministic=deterministic,
        log=log,
        params={**_PARAMS, **(params or {})},
    )
    status = STATUS[solver.solve(model)]
    info: dict[str, int | float | str] = {
        "window": len(free),
        "deterministic_time": solver.deterministic_time,
    }
    bound = int(solver.best_objective_bound) // weight if status is not Status.UNKNOWN else None
    if not status.has_solution:
        return Result(status, bound=bound, runtime_s=time.monotonic() - started, info=info)
    moved = with_segment_offsets(
        instance, frame.solution, {seg.start: solver.value(o) for seg, o in offsets.items()}
    )
    times = {v: solver.value(x[v]) for v in free}
    schedule = order[:lo] + _window_order(instance, frame, moved, free, times) + order[hi + 1 :]
    return Result(
        status,
        solution=Solution(order=tuple(schedule), offsets=moved.offsets, spills=moved.spills),
        objective=int(solver.value(makespan)),
        bound=bound,
        runtime_s=time.monotonic() - started,
        info=info,
    )


def _kinds(instance: Instance, solution: Solution) -> list[int]:
    """Tie-break rank of every node: segment ends, ops, segment starts."""
    n = instance.n_nodes
    kind = [_ENDS_FIRST["op"]] * (n + 2 * len(solution.spills))
    for buf in instance.buffers.values():
        kind[buf.alloc] = _ENDS_FIRST["start"]
        kind[buf.free] = _ENDS_FIRST["end"]
    for k in range(len(solution.spills)):
        kind[n + 2 * k] = _ENDS_FIRST["end"]
        kind[n + 2 * k + 1] = _ENDS_FIRST["start"]
    return kind


def _variables(
    model: cp_model.CpModel, frame: PipeFrame, free: Sequence[int], fixed: set[int], whole: bool
) -> dict[int, cp_model.IntVar]:
    """Start of each free node: from its fixed predecessors' ends to the latest start that
    keeps ``end + tail`` within the incumbent's own value (an answer no worse than the
    incumbent, which the hint gives, always exists; tight domains keep presolve short)."""
    limit = _incumbent_reach(frame, free, whole)
    x = {}
    for v in free:
        earliest = max((int(frame.end[u]) for u in frame.fixed_pred[v] if u in fixed), default=0)
        tail = 0 if whole else int(frame.tail[v])
        latest = max(earliest, limit - frame.cycles[v] - tail)
        x[v] = model.new_int_var(earliest, latest, f"s{v}")
    return x


def _incumbent_reach(frame: PipeFrame, free: Sequence[int], whole: bool) -> int:
    """The objective's first term at the incumbent: ``max(end + tail)`` over the window."""
    if whole:
        return frame.makespan
    return max(int(frame.end[v]) + int(frame.tail[v]) for v in free)


def _precedences(
    model: cp_model.CpModel,
    frame: PipeFrame,
    free: Sequence[int],
    fixed: set[int],
    x: Mapping[int, cp_model.IntVar],
) -> None:
    """Graph and spill edges inside the window, and each segment's start before its end (reuse
    edges are left to the rectangles)."""
    for v in free:
        for u in set(frame.fixed_pred[v]):
            if u in x:
                model.add(x[v] >= x[u] + frame.cycles[u])


def _pipes(
    model: cp_model.CpModel,
    frame: PipeFrame,
    order: Sequence[int],
    lo: int,
    hi: int,
    x: Mapping[int, cp_model.IntVar],
) -> None:
    """One NoOverlap per pipe over the window; fixed nodes make the pipe busy until their end.
    A zero-cycle node z may not start strictly inside another node u's run on its pipe: for each
    such pair, ``s_z <= s_u`` or ``s_z >= s_u + Cycles_u`` (the order puts z first on a tie)."""
    busy: dict[str, int] = {}
    for v in order[:lo]:
        pipe = frame.pipe[v]
        if pipe is not None:
            busy[pipe] = max(busy.get(pipe, 0), int(frame.end[v]))
    on_pipe: dict[str, list[int]] = {}
    for v in order[lo : hi + 1]:
        pipe = frame.pipe[v]
        if pipe is not None:
            on_pipe.setdefault(pipe, []).append(v)
    for pipe, nodes in on_pipe.items():
        intervals = []
        for v in nodes:
            model.add(x[v] >= busy.get(pipe, 0))
            if frame.cycles[v] > 0:
                intervals.append(
                    model.new_fixed_size_interval_var(x[v], frame.cycles[v], f"run{v}")
                )
        if len(intervals) > 1:
            model.add_no_overlap(intervals)
        running = [u for u in nodes if frame.cycles[u] > 0]
        for z in nodes:
            if frame.cycles[z] > 0:
                continue
            for u in running:
                before = model.new_bool_var(f"z{z}before{u}")
                model.add(x[z] <= x[u]).only_enforce_if(before)
                model.add(x[z] >= x[u] + frame.cycles[u]).only_enforce_if(~before)


def _memory(
    model: cp_model.CpModel,
    instance: Instance,
    frame: PipeFrame,
    free: Sequence[int],
    fixed: set[int],
    x: Mapping[int, cp_model.IntVar],
    move_addresses: bool,
) -> dict[Segment, cp_model.LinearExpr]:
    """Segments touching the window as (time x address) rectangles; return the offset
    expression of each segment that may move.

    Addresses released by fixed segments bound the start of the window segments that reuse
    them. When some segment may move, the fixed segments it could meet are rectangles too:
    those of the prefix still held when the window may start, and those spanning the window.
    """
    solution, hardware = frame.solution, frame.hardware
    n_total = len(solution.order)
    pos = np.empty(n_total, dtype=np.int64)
    pos[np.asarray(solution.order, dtype=np.int64)] = np.arange(n_total)
    segments = residency_segments(instance, solution, pos)
    horizon = _incumbent_reach(frame, free, whole=False) + 1
    tops = _tops(segments)
    earliest = min(
        max((int(frame.end[u]) for u in frame.fixed_pred[v] if u in fixed), default=0) for v in free
    )
    movable = {
        seg
        for seg in segments
        if move_addresses and seg.start in x and hardware.bank(seg.memory) is None
    }
    later = [s for s in segments if s.start not in x and s.start not in fixed]
    slots_of = {seg: _clear_slots(seg, later, pos, hardware) for seg in movable if seg.end not in x}
    moving_memories = {seg.memory for seg in movable}
    released: dict[str, np.ndarray] = {}
    boxes: dict[str, tuple[list[cp_model.IntervalVar], list[cp_model.IntervalVar]]] = {
        m: ([], []) for m in MEMORIES
    }
    offsets: dict[Segment, cp_model.LinearExpr] = {}
    # (begin, finish, address, size, may be zero-width) of every box, per memory.
    placed: dict[str, list[tuple[cp_model.LinearExprT, cp_model.LinearExprT, Any, int, bool]]]
    placed = {m: [] for m in MEMORIES}

    def add_box(seg: Segment, begin: cp_model.LinearExprT, finish: cp_model.LinearExprT) -> None:
        xs, ys = boxes[seg.memory]
        flat = not (isinstance(begin, int) and isinstance(finish, int)) and _may_be_flat(
            instance, frame, seg, pos
        )
        if isinstance(begin, int) and isinstance(finish, int):
            xs.append(model.new_fixed_size_interval_var(begin, finish - begin, "held"))
        else:
            length = model.new_int_var(0, horizon, f"len{seg.buf_id}_{seg.start}")
            xs.append(model.new_interval_var(begin, length, finish, f"t{seg.buf_id}_{seg.start}"))
        if seg in movable:
            align = hardware.alignment(seg.memory)
            if seg in slots_of:
                domain = cp_model.Domain.from_values(slots_of[seg])
                slot = model.new_int_var_from_domain(domain, f"o{seg.buf_id}_{seg.start}")
            else:
                slots = (hardware.capacity(seg.memory) - seg.size_units) // align
                slot = model.new_int_var(0, slots, f"o{seg.buf_id}_{seg.start}")
            offsets[seg] = slot * align
            ys.append(model.new_fixed_size_interval_var(slot * align, seg.size_units, "at"))
            model.add_hint(slot, seg.offset_units // align)
        else:
            ys.append(model.new_fixed_size_interval_var(seg.offset_units, seg.size_units, "at"))
        address = offsets.get(seg, seg.offset_units)
        placed[seg.memory].append((begin, finish, address, seg.size_units, flat))

    # Units still held by a segment opened in the prefix: its box covers them from _PREFIX on.
    still_held = {m: np.zeros(tops.get(m, 1), dtype=bool) for m in moving_memories}
    for seg in segments:
        if seg.start in fixed and seg.end in fixed:
            held_until = int(frame.end[seg.end])
            units = released.setdefault(seg.memory, np.zeros(tops[seg.memory], np.int64))
            span = units[seg.offset_units : seg.offset_units + seg.size_units]
            np.maximum(span, held_until, out=span)
        elif seg.start in fixed and seg.memory in moving_memories:
            still_held[seg.memory][seg.offset_units : seg.offset_units + seg.size_units] = True
            if seg.end not in x:
                add_box(seg, _PREFIX, horizon)  # spans the whole window
    # Segments closed in the prefix, as boxes from _PREFIX to when each address frees. Boxes per
    # address run, not per segment: segments that held one address in turn would overlap once
    # all reach back to _PREFIX.
    for memory in sorted(moving_memories & released.keys()):
        free_at = np.where(still_held[memory], 0, released[memory])
        for lo, hi, until in _runs(free_at):
            if until > earliest:
                xs, ys = boxes[memory]
                xs.append(model.new_fixed_size_interval_var(_PREFIX, until - _PREFIX, "held"))
                ys.append(model.new_fixed_size_interval_var(lo, hi - lo, "at"))
                placed[memory].append((_PREFIX, until, lo, hi - lo, False))
    for seg in segments:
        if seg.start not in x and seg.end not in x:
            continue
        begin: cp_model.LinearExprT = x.get(seg.start, _PREFIX)
        finish: cp_model.LinearExprT = (
            x[seg.end] + frame.cycles[seg.end] if seg.end in x else horizon
        )
        if seg.start in x and seg not in movable and seg.memory in released:
            units = released[seg.memory][seg.offset_units : seg.offset_units + seg.size_units]
            if len(units) and int(units.max()) > 0:
                model.add(x[seg.start] >= int(units.max()))
        add_box(seg, begin, finish)
    for xs, ys in boxes.values():
        if len(xs) > 1:
            model.add_no_overlap_2d(xs, ys)
    # NoOverlap2D lets a zero-width box sit anywhere; the simulation orders every segment on an
    # address before or after the others. So a box that may be flat is kept out of the others'
    # time span on a shared address explicitly (touching is fine: it sorts first on a tie).
    for memory_boxes in placed.values():
        for i, (b0, b1, ba, bs, flat) in enumerate(memory_boxes):
            if not flat:
                continue
            for j, (s0, s1, sa, ss, _) in enumerate(memory_boxes):
                if j != i:
                    model.add_bool_or(
                        [
                            _holds(model, b1 <= s0),
                            _holds(model, s1 <= b0),
                            _holds(model, ba + bs <= sa),
                            _holds(model, sa + ss <= ba),
                        ]
                    )
    return offsets


def _clear_slots(
    seg: Segment, later: Sequence[Segment], pos: np.ndarray, hardware: Hardware
) -> list[int]:
    """Aligned slots (offset / alignment) that a segment opened in the window and closed after
    it may move to: those clear of every ``later`` segment (opened after the window) of its
    memory that opens before it closes. Those keep their addresses and the window cannot
    re-time them, so an address they share with it would break the placement. The
    incumbent's slot is always among them (the incumbent is valid)."""
    capacity, align = hardware.capacity(seg.memory), hardware.alignment(seg.memory)
    change = np.zeros(capacity + 1, dtype=np.int64)
    for other in later:
        if other.memory == seg.memory and pos[other.start] < pos[seg.end]:
            change[other.offset_units] += 1
            change[other.offset_units + other.size_units] -= 1
    taken = np.r_[0, np.cumsum(np.cumsum(change[:-1]) > 0)]
    offsets = np.arange(0, capacity - seg.size_units + 1, align)
    clear = taken[offsets + seg.size_units] == taken[offsets]
    return [int(o) // align for o in offsets[clear]]


def _holds(model: cp_model.CpModel, relation: Any) -> cp_model.IntVar | bool:
    """A literal that implies ``relation`` (a linear relation, or a constant truth value)."""
    if isinstance(relation, bool | np.bool_):
        return bool(relation)
    literal = model.new_bool_var("")
    model.add(relation).only_enforce_if(literal)
    return literal


def _may_be_flat(instance: Instance, frame: PipeFrame, seg: Segment, pos: np.ndarray) -> bool:
    """Whether a segment can take no time: its opening and closing nodes take none, and so does
    every user of the buffer between them."""
    if frame.cycles[seg.start] or frame.cycles[seg.end]:
        return False
    lo, hi = pos[seg.start], pos[seg.end]
    return not any(frame.cycles[u] and lo < pos[u] < hi for u in instance.buffers[seg.buf_id].users)


def _runs(values: np.ndarray) -> list[tuple[int, int, int]]:
    """Maximal runs ``[lo, hi)`` of equal non-zero values, with their value."""
    runs = []
    edges = np.flatnonzero(np.diff(values)) + 1
    for lo, hi in zip(np.r_[0, edges], np.r_[edges, len(values)], strict=True):
        if values[lo]:
            runs.append((int(lo), int(hi), int(values[lo])))
    return runs


def _tops(segments: Sequence[Segment]) -> dict[str, int]:
    """One past the highest unit any segment of each memory holds."""
    tops: dict[str, int] = {}
    for s in segments:
        tops[s.memory] = max(tops.get(s.memory, 1), s.offset_units + s.size_units)
    return tops


def _objective(
    model: cp_model.CpModel,
    frame: PipeFrame,
    free: Sequence[int],
    x: Mapping[int, cp_model.IntVar],
    whole: bool,
) -> tuple[cp_model.IntVar, int]:
    """Minimise ``max(end + tail)`` over the window, then the sum of end times; return the
    first objective and its weight."""
    limit = _incumbent_reach(frame, free, whole)
    reach = model.new_int_var(0, limit, "makespan")
    ends = []
    for v in free:
        tail = 0 if whole else int(frame.tail[v])
        model.add(reach >= x[v] + frame.cycles[v] + tail)
        ends.append(x[v] + frame.cycles[v])
    weight = len(free) * (limit + 1) + 1  # above any sum of end times
    model.minimize(weight * reach + sum(ends))
    return reach, weight


def _window_order(
    instance: Instance,
    frame: PipeFrame,
    solution: Solution,
    free: Sequence[int],
    times: Mapping[int, int],
) -> list[int]:
    """The window's nodes in an order the model's times justify: a topological order of the
    precedences inside the window, each pipe's sequence by start time and, per address unit,
    the segments by start time; ties go to segment ends, then ops, then segment starts."""
    inside = set(free)
    pred: dict[int, set[int]] = {v: {u for u in frame.fixed_pred[v] if u in inside} for v in free}
    by_pipe: dict[str, list[int]] = {}
    for v in free:
        pipe = frame.pipe[v]
        if pipe is not None:
            by_pipe.setdefault(pipe, []).append(v)
    kind = _kinds(instance, frame.solution)
    rank = {v: (times[v], kind[v], i) for i, v in enumerate(free)}
    for nodes in by_pipe.values():
        # A zero-cycle node starting with another one goes first (the model allows exactly that).
        nodes.sort(key=lambda v: (times[v], frame.cycles[v] > 0, *rank[v][1:]))
        # Zero-cycle nodes starting together form one block that the pipe leaves unordered
        # (any order simulates the same; the graph and reuse edges decide it); every node of a
        # block follows every node of the block before.
        blocks: list[list[int]] = []
        for v in nodes:
            if (
                blocks
                and frame.cycles[v] == 0
                and frame.cycles[blocks[-1][0]] == 0
                and times[blocks[-1][0]] == times[v]
            ):
                blocks[-1].append(v)
            else:
                blocks.append([v])
        for earlier, later in zip(blocks, blocks[1:], strict=False):
            for b in later:
                pred[b].update(earlier)
    # Reuse order inside the window, from the model's times and addresses: sweep segments by
    # start (the schedule is the frame's: the positions only identify the segments).
    n_total = len(solution.order)
    pos = np.empty(n_total, dtype=np.int64)
    pos[np.asarray(frame.solution.order, dtype=np.int64)] = np.arange(n_total)
    segments = [
        s
        for s in residency_segments(instance, solution, pos)
        if s.start in inside or s.end in inside
    ]

    def seg_rank(seg: Segment) -> tuple[int, int, int, int]:
        # Segments opened before the window come first, at their fixed start. Of two segments
        # opened at one time on a shared address one takes no time (see _memory): it goes first.
        if seg.start not in inside:
            return (int(frame.start[seg.start]), -1, -1, -1)
        ends = times[seg.end] + frame.cycles[seg.end] if seg.end in inside else 2**62
        return (rank[seg.start][0], ends, *rank[seg.start][1:])

    segments.sort(key=seg_rank)
    tops = _tops(segments)
    holder: dict[str, np.ndarray] = {}
    for seg in segments:
        units = holder.setdefault(seg.memory, np.full(tops[seg.memory], -1, np.int64))
        span = units[seg.offset_units : seg.offset_units + seg.size_units]
        if seg.start in inside:
            for previous in np.unique(span[span >= 0]):
                if int(previous) in inside:
                    pred[seg.start].add(int(previous))
        span[:] = seg.end
    return _topological(list(free), {v: list(p) for v, p in pred.items()}, rank.__getitem__)


def _topological(nodes: list[int], pred, key) -> list[int]:  # type: ignore[no-untyped-def]
    """Kahn's algorithm over ``nodes`` (predecessors outside them ignored), smallest ``key``
    first among the ready ones."""
    inside = set(nodes)
    missing = {v: len({u for u in pred[v] if u in inside}) for v in nodes}
    succ: dict[int, list[int]] = {v: [] for v in nodes}
    for v in nodes:
        for u in {u for u in pred[v] if u in inside}:
            succ[u].append(v)
    ready = [(key(v), v) for v in nodes if missing[v] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, v = heapq.heappop(ready)
        out.append(v)
        for w in succ[v]:
            missing[w] -= 1
            if missing[w] == 0:
                heapq.heappush(ready, (key(w), w))
    if len(out) != len(nodes):
        raise AssertionError("window precedences must be acyclic")
    return out
