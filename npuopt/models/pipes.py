"""CP-SAT pipe scheduling (Problem 3): start times for a window of a placed solution.

The placement and the spill decisions of the incumbent are kept (so is the traffic) unless the
caller allows the traffic to change (below); the model chooses *when* each node of the window
runs, and the schedule written to the files is derived from those times. Formulation (after
the disjunctive job-shop models of the CP-SAT primer and OR-tools' ``rcpsp_sat``):

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
* with a traffic allowance (``traffic_room``), spills are optional intervals, as in the
  placement model: a spill of the window may be dropped (its two runs absent, its buffer's two
  segments one rectangle at the first one's address) and a segment lying wholly in the window
  may be split by a new spill in its longest idle gap (a SPILL_OUT run on MTE3 after the
  buffer's touches before the gap, a SPILL_IN run on MTE2 before those after it, the second
  half at an address of its own), within the allowance. Spills whose SPILL_OUT and SPILL_IN
  lie farther apart than a window spans stay as they are.

**Windows.** The window is closed under time: given some nodes, it holds every node whose
incumbent start lies between their earliest and latest start. Nodes that start earlier are
fixed (their end times are constants: pipe availability, lower bounds of their successors,
release times of the addresses they held); nodes that start later are not in the model, and the
evaluator's simulation places them after the window, in the incumbent's order. The objective is
the largest ``end_v + tail_v`` over the window, ``tail_v`` being the longest path after v in
the incumbent's precedence graph (the window's share of the makespan), then the sum of end times
(each spill taken counting as one more end, at the horizon).
With the window = everything, ``tail = 0`` and the objective is the makespan itself.

The schedule is the fixed prefix, then the window's nodes in a topological order of their
precedences, pipe sequences and address-reuse order by model start time, then the rest. Every
answer is re-judged by the evaluator; the model never claims a makespan it did not simulate.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from npuopt.models.common import STATUS, make_solver
from npuopt.solver.evaluate import (
    Evaluation,
    ReuseRule,
    Segment,
    evaluate,
    precedence_graphs,
    residency_segments,
)
from npuopt.solver.hardware import MEMORIES, Hardware
from npuopt.solver.instance import SPILL_IN_PIPE, SPILL_OUT_PIPE, Instance
from npuopt.solver.result import Result, Status
from npuopt.solver.solution import Solution, Spill, with_segment_offsets

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


class Unorderable(Exception):
    """The model's times admit no schedule (its precedences, pipe and reuse orders close a
    cycle): :func:`solve_pipes` then reports no solution."""


#: Most spills one window may add: those splitting the segments with the longest idle gaps.
MAX_NEW_SPILLS = 8


@dataclass(frozen=True)
class _SpillOption:
    """A spill the window decides on: an incumbent one (``index``) it may drop, or a new one
    (``index`` None) splitting ``first`` between two consecutive touches of its buffer.

    ``spill_out`` and ``spill_in`` are its nodes (a new spill's numbered after the incumbent's
    nodes); ``first`` is the segment its SPILL_OUT closes and ``second`` the one its SPILL_IN
    opens (for a new spill, the two halves of the segment it splits); ``traffic`` its DDR cost.
    A new spill's ``before`` and ``after`` are the touches of its buffer on either side of its
    gap (its spill edges, SPEC section 3).
    """

    index: int | None
    spill_out: int
    spill_in: int
    first: Segment
    second: Segment
    traffic: int
    before: tuple[int, ...] = ()
    after: tuple[int, ...] = ()


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
    graphs = precedence_graphs(instance, solution)
    pred, fixed_pred, cycles, pipe = graphs.pred, graphs.fixed, graphs.cycles, graphs.pipe
    start, end = judged.start_cycles, judged.end_cycles
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
    order = _by_start(solution.order, chained, start, _kinds(instance, solution))
    # Longest path after each node: pushed to the predecessors, latest node first.
    tails = [0] * len(pred)
    for v in reversed(order):
        reach = tails[v] + cycles[v]
        for u in pred[v]:
            if reach > tails[u]:
                tails[u] = reach
    tail = np.asarray(tails, dtype=np.int64)
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
    traffic_room: int | None = None,
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
    traffic_room
        ``None``: the spills are the incumbent's. Otherwise (with ``move_addresses``) the
        window's spills are optional intervals: a spill whose SPILL_OUT and SPILL_IN both lie in
        the window may be dropped (its buffer then holds the address it had before), and up to
        :data:`MAX_NEW_SPILLS` segments lying wholly in the window may be split by a new spill
        in their longest idle gap, while the traffic grows by at most ``traffic_room`` units.
        A present spill weighs like one more end at the horizon in the objective's second term,
        so a spill that saves no time is not taken.

    Returns
    -------
    Result
        ``solution`` is the re-timed schedule (same offsets and spills unless
        ``traffic_room`` let them change; spills keep their list order, new ones go last, and
        node ids follow SPEC section 3 for the new list); ``objective`` the
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
    pos = np.empty(len(order), dtype=np.int64)
    pos[np.asarray(order, dtype=np.int64)] = np.arange(len(order))
    segments = residency_segments(instance, frame.solution, pos)
    options: list[_SpillOption] = []
    if traffic_room is not None and move_addresses:
        options = _spill_options(instance, frame, segments, pos, set(free), traffic_room)
    incumbent = frame
    frame, segments = _with_new_spills(instance, frame, segments, options)
    model = cp_model.CpModel()
    model.clear_hints()
    present = {}
    for option in options:
        on = model.new_bool_var(f"spill{option.spill_out}")
        present[option.spill_out] = present[option.spill_in] = on
        model.add_hint(on, option.index is not None)
    timed = free + [v for o in options if o.index is None for v in (o.spill_out, o.spill_in)]
    x = _variables(model, frame, timed, fixed, whole)
    _precedences(model, frame, timed, x, present)
    _pipes(model, frame, order[:lo], timed, x, present)
    offsets = _memory(
        model, instance, frame, segments, pos, fixed, x, move_addresses, options, present
    )
    if options:
        kept = sum(o.traffic for o in options if o.index is not None)
        model.add(
            sum(present[o.spill_out] * o.traffic for o in options) <= kept + (traffic_room or 0)
        )
    makespan, weight = _objective(model, frame, timed, x, whole, present)
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
    address = {seg.start: solver.value(o) for seg, o in offsets.items()}
    times = {v: solver.value(x[v]) for v in timed}
    taken = {o.spill_out for o in options if solver.value(present[o.spill_out])}
    try:
        solution = _respilled(instance, frame, incumbent, lo, hi, options, taken, address, times)
    except Unorderable:
        # Known gap (spills optional, ops that take no cycles): segments that touch at one
        # cycle on a shared address while a zero-cycle path runs from the later one's start to
        # the earlier one's end; no schedule realises the model's times. Not on the official
        # cases (every op there takes cycles).
        info["unorderable"] = 1
        return Result(Status.UNKNOWN, bound=bound, runtime_s=time.monotonic() - started, info=info)
    return Result(
        status,
        solution=solution,
        objective=int(solver.value(makespan)),
        bound=bound,
        runtime_s=time.monotonic() - started,
        info=info,
    )


def _spill_options(
    instance: Instance,
    frame: PipeFrame,
    segments: Sequence[Segment],
    pos: np.ndarray,
    inside: set[int],
    room: int,
) -> list[_SpillOption]:
    """The spills a window decides on. An incumbent spill may be dropped when both its nodes
    lie in the window and the segment it reopens may move (to the address of the one it
    closes). A new spill may split a segment lying wholly in the window, in the longest idle
    gap (incumbent time) between two consecutive touches of its buffer, when its traffic fits
    ``room`` plus what the droppable spills would give back; the :data:`MAX_NEW_SPILLS` longest
    gaps are offered. No segment takes part in two options."""
    n = instance.n_nodes
    hardware = frame.hardware
    closing = {seg.end: seg for seg in segments}
    opening = {seg.start: seg for seg in segments}

    def may_move(seg: Segment) -> bool:
        return seg.start in inside and hardware.bank(seg.memory) is None

    options: list[_SpillOption] = []
    used: set[Segment] = set()
    for k, spill in enumerate(frame.solution.spills):
        out, back = n + 2 * k, n + 2 * k + 1
        if out not in inside or back not in inside:
            continue
        first, second = closing[out], opening[back]
        if first in used or second in used or not may_move(second):
            continue
        traffic = instance.buffers[spill.buf_id].spill_traffic_units
        options.append(_SpillOption(k, out, back, first, second, traffic))
        used.update((first, second))
    room += sum(o.traffic for o in options)
    gaps: list[tuple[int, int, Segment, list[int], int]] = []
    for seg in segments:
        buf = instance.buffers[seg.buf_id]
        if seg in used or seg.end not in inside or not may_move(seg):
            continue
        if buf.spill_traffic_units > room:
            continue
        lo, hi = pos[seg.start], pos[seg.end]
        touches = sorted(
            [seg.start, seg.end, *(u for u in buf.users if lo < pos[u] < hi)],
            key=pos.__getitem__,
        )
        longest, at = max(
            (int(frame.start[b]) - int(frame.end[a]), -i)
            for i, (a, b) in enumerate(zip(touches, touches[1:], strict=False))
        )
        if longest > 0:
            gaps.append((longest, -int(lo), seg, touches, 1 - at))
    gaps.sort(key=lambda g: g[:2], reverse=True)
    base = len(frame.solution.order)
    for _, _, seg, touches, cut in gaps[:MAX_NEW_SPILLS]:
        out, back = base, base + 1
        base += 2
        first = Segment(seg.buf_id, seg.memory, seg.offset_units, seg.size_units, seg.start, out)
        second = Segment(seg.buf_id, seg.memory, seg.offset_units, seg.size_units, back, seg.end)
        traffic = instance.buffers[seg.buf_id].spill_traffic_units
        options.append(
            _SpillOption(
                None, out, back, first, second, traffic, tuple(touches[:cut]), tuple(touches[cut:])
            )
        )
    return options


def _with_new_spills(
    instance: Instance,
    frame: PipeFrame,
    segments: list[Segment],
    options: Sequence[_SpillOption],
) -> tuple[PipeFrame, list[Segment]]:
    """The frame and the segments with the new spills of ``options`` in: their nodes' cycles,
    pipes, tails and spill edges (every touch of the buffer before the gap precedes the
    SPILL_OUT, the SPILL_IN every touch after it), each split segment replaced by its halves.
    Unchanged when no option is new."""
    new = [o for o in options if o.index is None]
    if not new:
        return frame, segments
    cycles, pipe = list(frame.cycles), list(frame.pipe)
    fixed_pred = list(frame.fixed_pred)
    tail = list(frame.tail)
    start, end = list(frame.start), list(frame.end)
    split = {}
    for o in new:
        buf = instance.buffers[o.first.buf_id]
        whole = Segment(
            buf.buf_id,
            buf.memory,
            o.first.offset_units,
            buf.size_units,
            o.first.start,
            o.second.end,
        )
        split[whole] = o
        cycles += [buf.spill_out_cycles, buf.spill_in_cycles]
        pipe += [SPILL_OUT_PIPE, SPILL_IN_PIPE]
        fixed_pred += [list(o.before), [o.spill_out]]
        for w in o.after:
            fixed_pred[w] = [*fixed_pred[w], o.spill_in]
        back_tail = max(int(frame.tail[w]) + frame.cycles[w] for w in o.after)
        tail += [buf.spill_in_cycles + back_tail, back_tail]
        start += [0, 0]
        end += [0, 0]
    extended = replace(
        frame,
        cycles=cycles,
        pipe=pipe,
        fixed_pred=fixed_pred,
        tail=np.asarray(tail, dtype=np.int64),
        start=np.asarray(start, dtype=np.int64),
        end=np.asarray(end, dtype=np.int64),
    )
    halves = []
    for seg in segments:
        if seg in split:
            halves += [split[seg].first, split[seg].second]
        else:
            halves.append(seg)
    return extended, halves


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
    incumbent, which the hint gives, always exists; tight domains keep presolve short). A new
    spill's nodes may lie anywhere up to that value: absent, they only mark a point of a
    segment."""
    limit = _incumbent_reach(frame, free, whole)
    known = len(frame.solution.order)
    x = {}
    for v in free:
        earliest = max((int(frame.end[u]) for u in frame.fixed_pred[v] if u in fixed), default=0)
        tail = 0 if whole else int(frame.tail[v])
        latest = max(earliest, limit - frame.cycles[v] - tail) if v < known else limit
        x[v] = model.new_int_var(earliest, latest, f"s{v}")
    return x


def _incumbent_reach(frame: PipeFrame, free: Sequence[int], whole: bool) -> int:
    """The objective's first term at the incumbent: ``max(end + tail)`` over the window."""
    if whole:
        return frame.makespan
    known = len(frame.solution.order)  # a window's new spills have no incumbent times
    return max(int(frame.end[v]) + int(frame.tail[v]) for v in free if v < known)


def _precedences(
    model: cp_model.CpModel,
    frame: PipeFrame,
    timed: Sequence[int],
    x: Mapping[int, cp_model.IntVar],
    present: Mapping[int, cp_model.IntVar],
) -> None:
    """Graph and spill edges inside the window, and each segment's start before its end (reuse
    edges are left to the rectangles). An edge at an optional spill's node holds when the
    spill is taken; an absent spill's two nodes are one mark (``s_out = s_in``), where its
    buffer's two segments meet."""
    for v in timed:
        for u in set(frame.fixed_pred[v]):
            if u not in x:
                continue
            after = model.add(x[v] >= x[u] + frame.cycles[u])
            if u in present and present[u] is present.get(v):
                if frame.pipe[u] == SPILL_OUT_PIPE:  # the spill's own SPILL_OUT -> SPILL_IN
                    after.only_enforce_if(present[u])
                    model.add(x[v] == x[u]).only_enforce_if(~present[u])
                continue
            literals = [present[w] for w in (u, v) if w in present]
            if literals:
                after.only_enforce_if(literals)


def _pipes(
    model: cp_model.CpModel,
    frame: PipeFrame,
    prefix: Sequence[int],
    timed: Sequence[int],
    x: Mapping[int, cp_model.IntVar],
    present: Mapping[int, cp_model.IntVar],
) -> None:
    """One NoOverlap per pipe over the window; fixed nodes make the pipe busy until their end.
    A zero-cycle node z may not start strictly inside another node u's run on its pipe: for each
    such pair, ``s_z <= s_u`` or ``s_z >= s_u + Cycles_u`` (the order puts z first on a tie).
    An optional spill's runs are optional intervals, present with the spill."""
    busy: dict[str, int] = {}
    for v in prefix:
        pipe = frame.pipe[v]
        if pipe is not None:
            busy[pipe] = max(busy.get(pipe, 0), int(frame.end[v]))
    on_pipe: dict[str, list[int]] = {}
    for v in timed:
        pipe = frame.pipe[v]
        if pipe is not None:
            on_pipe.setdefault(pipe, []).append(v)
    for pipe, nodes in on_pipe.items():
        intervals = []
        for v in nodes:
            ready = model.add(x[v] >= busy.get(pipe, 0))
            if v in present:
                ready.only_enforce_if(present[v])
            if frame.cycles[v] > 0 and v in present:
                intervals.append(
                    model.new_optional_fixed_size_interval_var(
                        x[v], frame.cycles[v], present[v], f"run{v}"
                    )
                )
            elif frame.cycles[v] > 0:
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
                literals = [present[w] for w in (z, u) if w in present]
                model.add(x[z] <= x[u]).only_enforce_if([before, *literals])
                model.add(x[z] >= x[u] + frame.cycles[u]).only_enforce_if([~before, *literals])


def _memory(
    model: cp_model.CpModel,
    instance: Instance,
    frame: PipeFrame,
    segments: Sequence[Segment],
    pos: np.ndarray,
    fixed: set[int],
    x: Mapping[int, cp_model.IntVar],
    move_addresses: bool,
    options: Sequence[_SpillOption] = (),
    present: Mapping[int, cp_model.IntVar] | None = None,
) -> dict[Segment, cp_model.LinearExpr]:
    """Segments touching the window as (time x address) rectangles; return the offset
    expression of each segment that may move.

    Addresses released by fixed segments bound the start of the window segments that reuse
    them. When some segment may move, the fixed segments it could meet are rectangles too:
    those of the prefix still held when the window may start, and those spanning the window.
    The segment an optional spill closes ends with its SPILL_OUT's run, or at the spill's mark
    when the spill is absent; the one it opens then starts at the same mark and address: the
    two make one segment.
    """
    hardware = frame.hardware
    horizon = _incumbent_reach(frame, list(x), whole=False) + 1
    tops = _tops(segments)
    earliest = min(
        max((int(frame.end[u]) for u in frame.fixed_pred[v] if u in fixed), default=0) for v in x
    )
    taken = present or {}
    closes = {o.spill_out for o in options}
    opens = {o.spill_in for o in options}
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
    box_of: dict[Segment, tuple[Any, ...]] = {}  # each window segment's entry in ``placed``

    def add_box(seg: Segment, begin: cp_model.LinearExprT, finish: cp_model.LinearExprT) -> None:
        xs, ys = boxes[seg.memory]
        flat = not (isinstance(begin, int) and isinstance(finish, int)) and (
            seg.end in closes or seg.start in opens or _may_be_flat(instance, frame, seg, pos)
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
        box_of[seg] = (begin, finish, address, seg.size_units, flat)
        placed[seg.memory].append(box_of[seg])

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
        if seg.end in closes:
            out, on = seg.end, taken[seg.end]
            finish = model.new_int_var(0, horizon, f"until{out}")
            model.add(finish == x[out] + frame.cycles[out]).only_enforce_if(on)
            model.add(finish == x[out]).only_enforce_if(~on)
        if seg.start in x and seg not in movable and seg.memory in released:
            units = released[seg.memory][seg.offset_units : seg.offset_units + seg.size_units]
            if len(units) and int(units.max()) > 0:
                model.add(x[seg.start] >= int(units.max()))
        add_box(seg, begin, finish)
    for option in options:  # an absent spill leaves its buffer where it was
        on = taken[option.spill_out]
        kept = offsets.get(option.first, option.first.offset_units)
        model.add(offsets[option.second] == kept).only_enforce_if(~on)
        # Its two boxes then only touch at the spill's mark, where a flat box could sit inside
        # the one segment they make: flat boxes keep out of the whole of it.
        begin, _, address, size, _ = box_of[option.first]
        finish = box_of[option.second][1]
        halves = (box_of[option.first], box_of[option.second])
        for other in placed[option.first.memory]:
            s0, s1, sa, ss, flat = other
            if flat and not any(other is half for half in halves):
                model.add_bool_or(
                    [
                        on,
                        _holds(model, s1 <= begin),
                        _holds(model, finish <= s0),
                        _holds(model, address + size <= sa),
                        _holds(model, sa + ss <= address),
                    ]
                )
    for xs, ys in boxes.values():
        if len(xs) > 1:
            model.add_no_overlap_2d(xs, ys)
    # NoOverlap2D lets a zero-width box sit anywhere; the simulation orders every segment on an
    # address before or after the others. So a box that may be flat is kept out of the others'
    # time span on a shared address explicitly (touching is fine: it sorts first on a tie),
    # unless one op uses both buffers inside both segments: then they are resident together
    # and only other addresses will do.
    segment_of = {id(entry): seg for seg, entry in box_of.items()}
    for option in options:  # a new spill's halves share the ops of the segment they split
        if option.index is None:
            first, second = option.first, option.second
            whole = replace(first, end=second.end)
            segment_of[id(box_of[first])] = segment_of[id(box_of[second])] = whole
    for memory_boxes in placed.values():
        for i, (b0, b1, ba, bs, flat) in enumerate(memory_boxes):
            if not flat:
                continue
            for j, (s0, s1, sa, ss, _) in enumerate(memory_boxes):
                if j == i:
                    continue
                apart = [_holds(model, ba + bs <= sa), _holds(model, sa + ss <= ba)]
                pair = (segment_of.get(id(memory_boxes[i])), segment_of.get(id(memory_boxes[j])))
                if not _share_an_op(instance, pair, pos):
                    apart += [_holds(model, b1 <= s0), _holds(model, s1 <= b0)]
                model.add_bool_or(apart)
    return offsets


def _share_an_op(
    instance: Instance, pair: tuple[Segment | None, Segment | None], pos: np.ndarray
) -> bool:
    """Whether one op uses both segments' buffers between each one's start and end (incumbent
    positions)."""
    first, second = pair
    if first is None or second is None or first.buf_id == second.buf_id:
        return False
    shared = set(instance.buffers[first.buf_id].users) & set(instance.buffers[second.buf_id].users)
    return any(all(pos[s.start] < pos[u] < pos[s.end] for s in (first, second)) for u in shared)


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
    timed: Sequence[int],
    x: Mapping[int, cp_model.IntVar],
    whole: bool,
    present: Mapping[int, cp_model.IntVar],
) -> tuple[cp_model.IntVar, int]:
    """Minimise ``max(end + tail)`` over the window, then the sum of end times, a present
    optional spill counting as one more end at the horizon; return the first objective and its
    weight."""
    limit = _incumbent_reach(frame, timed, whole)
    reach = model.new_int_var(0, limit, "makespan")
    ends = []
    for v in timed:
        tail = 0 if whole else int(frame.tail[v])
        bound = model.add(reach >= x[v] + frame.cycles[v] + tail)
        if v in present:
            bound.only_enforce_if(present[v])
        else:
            ends.append(x[v] + frame.cycles[v])
    spills = list({id(on): on for on in present.values()}.values())
    weight = (len(ends) + len(spills)) * (limit + 1) + 1  # above any second term
    model.minimize(weight * reach + sum(ends) + limit * sum(spills))
    return reach, weight


def _respilled(
    instance: Instance,
    frame: PipeFrame,
    incumbent: PipeFrame,
    lo: int,
    hi: int,
    options: Sequence[_SpillOption],
    taken: set[int],
    address: Mapping[int, int],
    times: Mapping[int, int],
) -> Solution:
    """The solution of a window solve: the incumbent's segments at their new ``address``
    (keyed by the node opening each), the spills the model dropped left out of the list and
    the new ones it took (``taken``: SPILL_OUT nodes) appended, node ids renumbered to match
    (SPEC section 3), and the window's nodes ordered by the model's ``times``."""
    n, known = instance.n_nodes, len(incumbent.solution.order)
    order = incumbent.solution.order
    free = list(order[lo : hi + 1])
    moved = with_segment_offsets(
        instance, incumbent.solution, {v: a for v, a in address.items() if v < known}
    )
    dropped = {o.index for o in options if o.index is not None and o.spill_out not in taken}
    added = [o for o in options if o.index is None and o.spill_out in taken]
    if not dropped and not added:
        window = _window_order(
            instance, moved, free, times, frame.fixed_pred, frame.pipe, frame.cycles, frame.start
        )
        return Solution(
            order=(*order[:lo], *window, *order[hi + 1 :]),
            offsets=moved.offsets,
            spills=moved.spills,
        )
    keep = [k for k in range(len(moved.spills)) if k not in dropped]
    ids = {v: v for v in range(n)}
    for i, k in enumerate(keep):
        ids[n + 2 * k], ids[n + 2 * k + 1] = n + 2 * i, n + 2 * i + 1
    for j, o in enumerate(added, start=len(keep)):
        ids[o.spill_out], ids[o.spill_in] = n + 2 * j, n + 2 * j + 1
    spills = [moved.spills[k] for k in keep]
    spills += [Spill(o.first.buf_id, address[o.spill_in]) for o in added]
    total = n + 2 * len(spills)
    pipe: list[str | None] = [None] * total
    cycles = [0] * total
    start = np.zeros(total, dtype=np.int64)
    for v, w in ids.items():
        pipe[w], cycles[w], start[w] = frame.pipe[v], frame.cycles[v], frame.start[v]
    inside = [v for v in free if v in ids]
    inside += [v for o in added for v in (o.spill_out, o.spill_in)]
    window_nodes = [ids[v] for v in inside]
    # Precedences are only read inside the window.
    pred = {ids[v]: [ids[u] for u in frame.fixed_pred[v] if u in ids] for v in inside}
    for o in options:  # a dropped spill's two segments are one: it opens before it closes
        if o.index in dropped and ids[o.second.end] in pred:
            pred[ids[o.second.end]].append(ids[o.first.start])
    at = {ids[v]: t for v, t in times.items() if v in ids}
    kind = _kinds(instance, Solution(order=(), spills=tuple(spills)))
    # A first order of the window, for the segment pairing (ALLOC, SPILL_OUT, SPILL_IN, FREE in
    # turn) that the final one is built from.
    draft = _topological(window_nodes, pred, lambda v: (at[v], kind[v], v))
    prefix = [ids[v] for v in order[:lo]]
    suffix = [ids[v] for v in order[hi + 1 :]]
    drafted = Solution(
        order=(*prefix, *draft, *suffix), offsets=moved.offsets, spills=tuple(spills)
    )
    window = _window_order(instance, drafted, window_nodes, at, pred, pipe, cycles, start)
    return Solution(order=(*prefix, *window, *suffix), offsets=moved.offsets, spills=tuple(spills))


def _window_order(
    instance: Instance,
    solution: Solution,
    free: Sequence[int],
    times: Mapping[int, int],
    fixed_pred: Sequence[Sequence[int]] | Mapping[int, Sequence[int]],
    pipes: Sequence[str | None],
    cycles: Sequence[int],
    start: np.ndarray,
) -> list[int]:
    """The window's nodes in an order the model's times justify: a topological order of the
    precedences inside the window (``fixed_pred``), each pipe's sequence by start time and, per
    address unit, the segments by start time; ties go to segment ends, then ops, then segment
    starts. ``solution``'s schedule pairs each buffer's events into segments (only); ``start``
    gives the start of the nodes before the window."""
    inside = set(free)
    pred: dict[int, set[int]] = {v: {u for u in fixed_pred[v] if u in inside} for v in free}
    by_pipe: dict[str, list[int]] = {}
    for v in free:
        pipe = pipes[v]
        if pipe is not None:
            by_pipe.setdefault(pipe, []).append(v)
    kind = _kinds(instance, solution)
    rank = {v: (times[v], kind[v], i) for i, v in enumerate(free)}
    for nodes in by_pipe.values():
        # A zero-cycle node starting with another one goes first (the model allows exactly that).
        nodes.sort(key=lambda v: (times[v], cycles[v] > 0, *rank[v][1:]))
        # Zero-cycle nodes starting together form one block that the pipe leaves unordered
        # (any order simulates the same; the graph and reuse edges decide it); every node of a
        # block follows every node of the block before.
        blocks: list[list[int]] = []
        for v in nodes:
            if (
                blocks
                and cycles[v] == 0
                and cycles[blocks[-1][0]] == 0
                and times[blocks[-1][0]] == times[v]
            ):
                blocks[-1].append(v)
            else:
                blocks.append([v])
        for earlier, later in zip(blocks, blocks[1:], strict=False):
            for b in later:
                pred[b].update(earlier)
    # Reuse order inside the window, from the model's times and addresses: sweep segments by
    # start (the positions only identify the segments).
    n_total = len(solution.order)
    pos = np.empty(n_total, dtype=np.int64)
    pos[np.asarray(solution.order, dtype=np.int64)] = np.arange(n_total)
    segments = [
        s
        for s in residency_segments(instance, solution, pos)
        if s.start in inside or s.end in inside
    ]

    def seg_rank(seg: Segment) -> tuple[int, int, int, int]:
        # Segments opened before the window come first, at their fixed start. Of two segments
        # opened at one time on a shared address one takes no time (see _memory): it goes first.
        if seg.start not in inside:
            return (int(start[seg.start]), -1, -1, -1)
        ends = times[seg.end] + cycles[seg.end] if seg.end in inside else 2**62
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


def _by_start(
    order: Sequence[int], pred: list[list[int]], start: np.ndarray, kind: list[int]
) -> list[int]:
    """The nodes of ``order`` by start cycle, then kind, then position in ``order``, each after
    its predecessors (Kahn's algorithm with that key): when the plain sort already respects
    every predecessor, as it does unless zero-cycle nodes tie, it is that order."""
    nodes = np.asarray(order, dtype=np.int64)
    ranked = nodes[np.lexsort((np.arange(len(nodes)), np.asarray(kind)[nodes], start[nodes]))]
    out = ranked.tolist()
    rank = [0] * len(pred)
    for r, v in enumerate(out):
        rank[v] = r
    if all(rank[u] < rank[v] for v in out for u in pred[v]):
        return out
    return _topological(list(order), pred, rank.__getitem__)


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
        raise Unorderable("window precedences must be acyclic")
    return out
