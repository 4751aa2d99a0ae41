"""The exact evaluator: the only source of objective values (SPEC sections 2 to 5).

It imports no solver. :func:`evaluate` judges a :class:`~solver.solution.Solution` for Problem 1, 2
or 3 and returns an :class:`Evaluation` carrying every violation found (up to a cap, with the total
count) and the objective values.

How the rules are implemented
-----------------------------
*Spill edges* (SPEC section 3) are built spill by spill in list order, each against the schedule
positions: a user of the buffer placed before the SPILL_OUT gets ``u -> SPILL_OUT``, any later one
``SPILL_IN -> u``. Every edge, original or added, is then checked against the schedule.

*Residency segments* run from an ALLOC or SPILL_IN to the next SPILL_OUT or FREE of the same buffer
in schedule order. A buffer's events must alternate ``ALLOC (SPILL_OUT SPILL_IN)* FREE``: a second
SPILL_OUT while the buffer is already in DDR is reported (SPEC leaves nesting open; on hardware it
would write back data that is not on chip).

*Reuse edges* are not materialised. Sweeping the schedule, each address unit remembers the latest
end time of the segments that released it; a segment starting later must start after the maximum
over its units. That is exactly the time the full set of reuse edges ``end(r) -> start(s)`` gives,
because all of them point from earlier to later schedule positions. Under the ``literal`` rule the
same is done with each buffer's whole lifetime at its initial offset, from FREE to ALLOC only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

import numpy as np

from npuopt.solver.hardware import (
    COUNTED_MEMORIES,
    DEFAULT_HARDWARE,
    L0_MEMORIES,
    MEMORIES,
    BankModel,
    Hardware,
)
from npuopt.solver.instance import SPILL_IN_PIPE, SPILL_OUT_PIPE, Instance
from npuopt.solver.solution import Solution

ReuseRule = Literal["residency", "literal"]
REUSE_RULES: tuple[str, ...] = ("residency", "literal")
#: Violations kept in an :class:`Evaluation`; the count covers all of them.
DEFAULT_VIOLATION_CAP = 100


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken rule.

    Attributes
    ----------
    kind
        ``schedule``, ``edge``, ``spill_edge``, ``spill``, ``l0_residency``, ``offset``,
        ``capacity``, ``alignment``, ``overlap`` or ``bank``.
    message
        One line naming the nodes, buffers and positions involved.
    """

    kind: str
    message: str


@dataclass(frozen=True)
class Evaluation:
    """What the evaluator found for one solution.

    Attributes
    ----------
    problem
        1, 2 or 3.
    valid
        True when no violation was found.
    violations
        The first violations found, at most the cap given to :func:`evaluate`.
    violation_count
        Number of violations found in all.
    max_v_stay_units
        Problem 1 objective: peak of live L1+UB units along the order.
    peak_units
        Peak units per memory: live (Problem 1) or resident (Problems 2 and 3).
    extra_traffic_units, spill_count
        Problems 2/3: extra DDR traffic of the spills and their number.
    makespan_cycles
        Problems 2/3: the largest end time of the pipe simulation.
    pipe_busy_cycles
        Problems 2/3: total cycles per pipe, spill nodes included.
    bank_conflicts
        Problems 2/3: conflicting buffer pairs summed over ops (0 without bank models).
    reuse_rule
        Reuse rule used for the timing.
    start_cycles, end_cycles
        Problems 2/3: start and end time of every node, indexed by node id.
    """

    problem: int
    valid: bool
    violations: tuple[Violation, ...]
    violation_count: int
    max_v_stay_units: int | None = None
    peak_units: Mapping[str, int] = field(default_factory=dict)
    extra_traffic_units: int | None = None
    spill_count: int | None = None
    makespan_cycles: int | None = None
    pipe_busy_cycles: Mapping[str, int] = field(default_factory=dict)
    bank_conflicts: int = 0
    reuse_rule: str = "residency"
    start_cycles: np.ndarray | None = None
    end_cycles: np.ndarray | None = None

    def objective(self) -> tuple[int, ...]:
        """The problem's objective as a tuple to minimise (lexicographic)."""
        if self.problem == 1:
            return (self.max_v_stay_units or 0,)
        traffic, makespan = self.extra_traffic_units or 0, self.makespan_cycles or 0
        return (traffic, makespan) if self.problem == 2 else (makespan, traffic)


class _Collector:
    """Collects violations up to a cap while counting all of them.

    A message may be given as a callable, formatted only when it is kept (and then at once, so it
    may read state that changes later): badly broken solutions can have millions of violations
    and formatting them all would dominate the run.
    """

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.kept: list[Violation] = []
        self.count = 0

    @property
    def full(self) -> bool:
        return len(self.kept) >= self.cap

    def add(self, kind: str, message: str | Callable[[], str]) -> None:
        self.count += 1
        if not self.full:
            self.kept.append(Violation(kind, message if isinstance(message, str) else message()))


def evaluate(
    instance: Instance,
    solution: Solution,
    problem: int,
    hardware: Hardware = DEFAULT_HARDWARE,
    reuse_rule: ReuseRule = "residency",
    max_violations: int = DEFAULT_VIOLATION_CAP,
) -> Evaluation:
    """Evaluate ``solution`` for Problem ``problem`` (1, 2 or 3).

    Problems 2 and 3 are judged by the same rules; they differ in the objective
    (:meth:`Evaluation.objective`) and in the traffic budget the pipeline enforces.
    """
    if problem == 1:
        return evaluate_order(instance, solution.order, max_violations)
    if problem in (2, 3):
        return evaluate_placement(instance, solution, problem, hardware, reuse_rule, max_violations)
    raise ValueError(f"problem must be 1, 2 or 3, not {problem}")


def _positions(order: Sequence[int], n_total: int, out: _Collector) -> np.ndarray | None:
    """Schedule position of every node, or ``None`` (with violations) if not a permutation."""
    problems = 0
    if len(order) != n_total:
        out.add("schedule", f"schedule has {len(order)} nodes, expected {n_total}")
        problems += 1
    pos = np.full(n_total, -1, dtype=np.int64)
    for p, v in enumerate(order):
        if not 0 <= v < n_total:
            out.add("schedule", f"position {p}: node {v} does not exist")
            problems += 1
        elif pos[v] >= 0:
            out.add("schedule", f"position {p}: node {v} already scheduled at position {pos[v]}")
            problems += 1
        else:
            pos[v] = p
    if problems:
        missing = np.flatnonzero(pos < 0)
        if len(missing):
            out.add("schedule", f"{len(missing)} node(s) never scheduled, first node {missing[0]}")
        return None
    return pos


def _edge_message(a: int, b: int, pos: np.ndarray) -> str:
    return (
        f"edge {a} -> {b} broken: node {b} at position {pos[b]} comes before node {a} "
        f"at position {pos[a]}"
    )


def _check_graph_edges(instance: Instance, pos: np.ndarray, out: _Collector) -> None:
    edges = instance.edge_array()
    if not len(edges):
        return
    bad = np.flatnonzero(pos[edges[:, 0]] >= pos[edges[:, 1]])
    for i in bad:
        a, b = int(edges[i, 0]), int(edges[i, 1])
        out.add("edge", partial(_edge_message, a, b, pos))


# -- Problem 1 ---------------------------------------------------------------------------------


def evaluate_order(
    instance: Instance, order: Sequence[int], max_violations: int = DEFAULT_VIOLATION_CAP
) -> Evaluation:
    """Evaluate a Problem 1 schedule: validity, ``max V_stay``, peaks, L0 single residency."""
    out = _Collector(max_violations)
    pos = _positions(order, instance.n_nodes, out)
    if pos is None:
        return Evaluation(1, False, tuple(out.kept), out.count)
    _check_graph_edges(instance, pos, out)
    buffers = instance.buffers
    buffer_of = instance.buffer_of_node
    live_units = dict.fromkeys(MEMORIES, 0)
    peak = dict.fromkeys(MEMORIES, 0)
    live_l0: dict[str, dict[int, int]] = {m: {} for m in L0_MEMORIES}  # memory -> {buf: position}
    v_stay = max_v_stay = 0
    for p, v in enumerate(order):
        b = buffer_of[v]
        if b is None:
            continue
        buf = buffers[b]
        mem = buf.memory
        is_alloc = v == buf.alloc
        if is_alloc and pos[buf.free] < p:
            out.add("edge", f"buffer {b}: FREE node {buf.free} comes before its ALLOC node {v}")
        sign = 1 if is_alloc else -1
        live_units[mem] += sign * buf.size_units
        peak[mem] = max(peak[mem], live_units[mem])
        if mem in COUNTED_MEMORIES:
            v_stay += sign * buf.size_units
            max_v_stay = max(max_v_stay, v_stay)
        if mem in L0_MEMORIES:
            if is_alloc:
                live = live_l0[mem]
                if live:  # one violation per ALLOC into an occupied L0 memory
                    out.add("l0_residency", partial(_l0_message, mem, b, p, live))
                live[b] = p
            else:
                live_l0[mem].pop(b, None)
    return Evaluation(
        problem=1,
        valid=out.count == 0,
        violations=tuple(out.kept),
        violation_count=out.count,
        max_v_stay_units=max_v_stay,
        peak_units=peak,
    )


def _l0_message(memory: str, b: int, p: int, live: Mapping[int, int]) -> str:
    other, since = next(iter(live.items()))
    more = f" and {len(live) - 1} more" if len(live) > 1 else ""
    return (
        f"{memory}: buffer {b} allocated at position {p} while buffer {other} is live "
        f"(allocated at position {since}){more}"
    )


# -- Problems 2 and 3 --------------------------------------------------------------------------


@dataclass(frozen=True)
class ExtendedGraph:
    """The graph of a Problem 2/3 solution: original nodes, spill nodes and spill edges.

    Attributes
    ----------
    n_total
        ``N + 2K`` nodes.
    pred
        Predecessors of every node, original and spill edges together.
    pipe
        Pipe of every node (``None`` for ALLOC/FREE).
    cycles
        Cycles of every node.
    buffer_of
        For ALLOC, FREE and spill nodes, their buffer; ``None`` for the original op nodes.
    """

    n_total: int
    pred: list[list[int]]
    pipe: list[str | None]
    cycles: list[int]
    buffer_of: list[int | None]


def extended_graph(
    instance: Instance, solution: Solution, pos: np.ndarray, out: _Collector | None = None
) -> ExtendedGraph:
    """Add the spill nodes and the spill edges of SPEC section 3 to the instance graph.

    Spill edges depend on the schedule: ``pos`` gives each node's position. When ``out`` is
    given, every spill edge the schedule breaks is reported to it.
    """
    n = instance.n_nodes
    n_total = n + 2 * len(solution.spills)
    pred: list[list[int]] = [list(p) for p in instance.predecessors]
    pred.extend([] for _ in range(n_total - n))
    pipe: list[str | None] = [instance.pipe_of(v) for v in range(n)]
    cycles: list[int] = instance.cycles.tolist()
    buffer_of: list[int | None] = list(instance.buffer_of_node)
    users: dict[int, list[int]] = {}
    for k, spill in enumerate(solution.spills):
        b = spill.buf_id
        buf = instance.buffers[b]
        so, si = n + 2 * k, n + 2 * k + 1
        pipe += [SPILL_OUT_PIPE, SPILL_IN_PIPE]
        cycles += [buf.spill_out_cycles, buf.spill_in_cycles]
        buffer_of += [b, b]
        pred[so].append(buf.alloc)
        pred[si].append(so)
        pred[buf.free].append(si)
        if out is not None:
            for a, c, what in (
                (
                    buf.alloc,
                    so,
                    f"SPILL_OUT node {so} of buffer {b} comes before its ALLOC node {buf.alloc}",
                ),
                (so, si, f"SPILL_IN node {si} of buffer {b} comes before its SPILL_OUT node {so}"),
                (
                    si,
                    buf.free,
                    f"buffer {b} is freed (node {buf.free}) before its SPILL_IN node {si}",
                ),
            ):
                if pos[a] >= pos[c]:
                    out.add("spill_edge", what)
        so_pos, si_pos = pos[so], pos[si]
        so_users = users.setdefault(b, list(buf.users))
        for u in so_users:
            if pos[u] < so_pos:
                pred[so].append(u)
            else:
                pred[u].append(si)
                if out is not None and pos[u] <= si_pos:
                    out.add(
                        "spill_edge",
                        f"node {u} uses buffer {b} at position {pos[u]}, between its SPILL_OUT "
                        f"(node {so}, position {so_pos}) and SPILL_IN "
                        f"(node {si}, position {si_pos})",
                    )
        so_users += [so, si]
    return ExtendedGraph(n_total, pred, pipe, cycles, buffer_of)


@dataclass(frozen=True)
class Segment:
    """A stretch of schedule during which a buffer occupies ``[offset, offset + size)``.

    Attributes
    ----------
    buf_id, memory, offset_units, size_units
        The buffer, its memory and the address range it holds.
    start
        Node opening the segment (ALLOC or SPILL_IN).
    end
        Node closing it (SPILL_OUT or FREE).
    """

    buf_id: int
    memory: str
    offset_units: int
    size_units: int
    start: int
    end: int


#: A buffer's events must follow ALLOC (SPILL_OUT SPILL_IN)* FREE in schedule order.
_NEXT_EVENT = {
    "unallocated": ("ALLOC",),
    "resident": ("SPILL_OUT", "FREE"),
    "in DDR": ("SPILL_IN",),
    "freed": (),
    "broken": (),
}
_STATE_AFTER = {"ALLOC": "resident", "SPILL_OUT": "in DDR", "SPILL_IN": "resident", "FREE": "freed"}


def residency_segments(
    instance: Instance, solution: Solution, pos: np.ndarray, out: _Collector | None = None
) -> list[Segment]:
    """Residency segments of every buffer (SPEC section 3), in BufId order.

    ``pos`` gives each node's schedule position. When ``out`` is given, every buffer whose events
    break the ``ALLOC (SPILL_OUT SPILL_IN)* FREE`` alternation is reported to it.
    """
    out = out or _Collector(0)
    n = instance.n_nodes
    spills_of: dict[int, list[int]] = {}
    for k, spill in enumerate(solution.spills):
        spills_of.setdefault(spill.buf_id, []).append(k)
    segments: list[Segment] = []
    for b, buf in instance.buffers.items():
        offset = solution.offsets[b]
        ks = spills_of.get(b)
        if not ks:
            if pos[buf.free] < pos[buf.alloc]:  # no segment: the buffer is never resident
                out.add("edge", f"buffer {b}: FREE node {buf.free} comes before its ALLOC node")
                continue
            segments.append(Segment(b, buf.memory, offset, buf.size_units, buf.alloc, buf.free))
            continue
        # (position, kind, node, offset of the segment it opens)
        events = [
            (pos[buf.alloc], "ALLOC", buf.alloc, offset),
            (pos[buf.free], "FREE", buf.free, 0),
        ]
        for k in ks:
            events.append((pos[n + 2 * k], "SPILL_OUT", n + 2 * k, 0))
            events.append(
                (pos[n + 2 * k + 1], "SPILL_IN", n + 2 * k + 1, solution.spills[k].new_offset_units)
            )
        events.sort()
        state = "unallocated"
        for i, (p, kind, node, seg_offset) in enumerate(events):
            expected = _NEXT_EVENT[state]
            if kind not in expected and state != "broken":
                out.add(
                    "spill",
                    f"buffer {b}: {kind} node {node} at position {p} where "
                    f"{' or '.join(expected) or 'nothing'} was expected",
                )
                state = "broken"  # report the first deviation of a buffer only
            elif state != "broken":
                state = _STATE_AFTER[kind]
            if kind in ("ALLOC", "SPILL_IN"):
                closing = next((e for e in events[i + 1 :] if e[1] in ("SPILL_OUT", "FREE")), None)
                if closing is not None:
                    segments.append(
                        Segment(b, buf.memory, seg_offset, buf.size_units, node, closing[2])
                    )
    return segments


def _check_offsets(
    instance: Instance, solution: Solution, hardware: Hardware, out: _Collector
) -> bool:
    """Every buffer has an offset and every offset obeys capacity and alignment."""
    buffers = instance.buffers  # once: each read of the property costs a model lookup
    missing = [b for b in buffers if b not in solution.offsets]
    if missing:
        out.add("offset", f"{len(missing)} buffer(s) have no offset, first buffer {missing[0]}")
    unknown = [b for b in solution.offsets if b not in buffers]
    if unknown:
        out.add("offset", f"offset given for unknown buffer {unknown[0]}")
    bad_spills = [s.buf_id for s in solution.spills if s.buf_id not in buffers]
    if bad_spills:
        out.add("spill", f"spill of unknown buffer {bad_spills[0]}")
    if missing or bad_spills:
        return False
    placed = [(b, o, "offset") for b, o in solution.offsets.items() if b in buffers]
    placed += [
        (s.buf_id, s.new_offset_units, f"spill {k} new offset")
        for k, s in enumerate(solution.spills)
    ]
    for b, offset, what in placed:
        buf = buffers[b]
        capacity = hardware.capacity(buf.memory)
        if offset < 0 or offset + buf.size_units > capacity:
            out.add(
                "capacity",
                f"buffer {b} ({buf.memory}, Size {buf.size_units}): {what} {offset} does not fit "
                f"capacity {capacity}",
            )
        align = hardware.alignment(buf.memory)
        if offset % align:
            out.add(
                "alignment",
                f"buffer {b} ({buf.memory}): {what} {offset} is not a multiple of {align}",
            )
    return True


def evaluate_placement(
    instance: Instance,
    solution: Solution,
    problem: int = 2,
    hardware: Hardware = DEFAULT_HARDWARE,
    reuse_rule: ReuseRule = "residency",
    max_violations: int = DEFAULT_VIOLATION_CAP,
) -> Evaluation:
    """Evaluate a Problem 2/3 solution: spills, residency, layout rules, timing and traffic."""
    if reuse_rule not in REUSE_RULES:
        raise ValueError(f"reuse_rule must be one of {REUSE_RULES}, not {reuse_rule!r}")
    out = _Collector(max_violations)
    n = instance.n_nodes
    if not _check_offsets(instance, solution, hardware, out):
        return Evaluation(problem, False, tuple(out.kept), out.count, reuse_rule=reuse_rule)
    pos = _positions(solution.order, n + 2 * len(solution.spills), out)
    if pos is None:
        return Evaluation(problem, False, tuple(out.kept), out.count, reuse_rule=reuse_rule)
    _check_graph_edges(instance, pos, out)
    graph = extended_graph(instance, solution, pos, out)
    segments = residency_segments(instance, solution, pos, out)
    starts_at = {s.start: s for s in segments}
    ends_at: dict[int, list[Segment]] = {}
    for s in segments:
        ends_at.setdefault(s.end, []).append(s)

    buffers = instance.buffers
    # Address arrays cover every unit any segment touches, out-of-capacity ones included (those
    # segments are already reported, and can still overlap each other). `shift` maps offset 0.
    lowest = dict.fromkeys(MEMORIES, 0)
    highest = {m: hardware.capacity(m) for m in MEMORIES}
    for s in segments:
        lowest[s.memory] = min(lowest[s.memory], s.offset_units)
        highest[s.memory] = max(highest[s.memory], s.offset_units + s.size_units)
    shift = {m: -lowest[m] for m in MEMORIES}
    # Per address unit: segments resident now, and the latest end time of a segment that used it.
    count = {m: np.zeros(highest[m] + shift[m], dtype=np.int32) for m in MEMORIES}
    release = {m: np.zeros(highest[m] + shift[m], dtype=np.int64) for m in MEMORIES}
    active: dict[str, dict[int, Segment]] = {m: {} for m in MEMORIES}
    resident = dict.fromkeys(MEMORIES, 0)
    peak = dict.fromkeys(MEMORIES, 0)
    literal = reuse_rule == "literal"
    current_offset = dict(solution.offsets)
    banked = {m: bank for m in MEMORIES if (bank := hardware.bank(m)) is not None}
    bank_conflicts = 0

    start = np.zeros(graph.n_total, dtype=np.int64)
    end = np.zeros(graph.n_total, dtype=np.int64)
    pipe_free: dict[str, int] = {}
    pred, pipes, cycles = graph.pred, graph.pipe, graph.cycles
    end_list = [0] * graph.n_total  # Python ints: faster than numpy scalars in the loop

    def span(mem: str, offset: int, size: int) -> slice:
        return slice(offset + shift[mem], offset + size + shift[mem])

    for p, v in enumerate(solution.order):
        t = 0
        for u in pred[v]:
            if end_list[u] > t:
                t = end_list[u]
        pipe = pipes[v]
        if pipe is not None:
            t = max(t, pipe_free.get(pipe, 0))
        seg = starts_at.get(v)
        if literal:
            b = graph.buffer_of[v]
            if b is not None and v == buffers[b].alloc:
                buf = buffers[b]
                units = release[buf.memory][span(buf.memory, solution.offsets[b], buf.size_units)]
                if len(units):
                    t = max(t, int(units.max()))
        elif seg is not None:
            units = release[seg.memory][span(seg.memory, seg.offset_units, seg.size_units)]
            if len(units):
                t = max(t, int(units.max()))
        e = t + cycles[v]
        start[v], end[v], end_list[v] = t, e, e
        if pipe is not None:
            pipe_free[pipe] = e

        if seg is not None:
            mem, sl = seg.memory, span(seg.memory, seg.offset_units, seg.size_units)
            if count[mem][sl].any():  # one violation per segment placed over resident ones
                out.add("overlap", partial(_overlap_message, seg, p, active, pos))
            count[mem][sl] += 1
            active[mem][id(seg)] = seg
            resident[mem] += seg.size_units
            peak[mem] = max(peak[mem], resident[mem])
            current_offset[seg.buf_id] = seg.offset_units
        for closed in ends_at.get(v, ()):
            mem, sl = closed.memory, span(closed.memory, closed.offset_units, closed.size_units)
            count[mem][sl] -= 1
            active[mem].pop(id(closed), None)
            resident[mem] -= closed.size_units
            if not literal:
                np.maximum(release[mem][sl], e, out=release[mem][sl])
        if literal and v < n:
            b = graph.buffer_of[v]
            if b is not None and v == buffers[b].free:
                buf = buffers[b]
                sl = span(buf.memory, solution.offsets[b], buf.size_units)
                np.maximum(release[buf.memory][sl], e, out=release[buf.memory][sl])

        if banked and v < n and graph.buffer_of[v] is None:
            bank_conflicts += _bank_conflicts(instance, v, current_offset, banked, out)

    busy: dict[str, int] = {}
    for v in range(graph.n_total):
        pipe = pipes[v]
        if pipe is not None:
            busy[pipe] = busy.get(pipe, 0) + cycles[v]
    traffic = sum(buffers[s.buf_id].spill_traffic_units for s in solution.spills)
    start.setflags(write=False)
    end.setflags(write=False)
    return Evaluation(
        problem=problem,
        valid=out.count == 0,
        violations=tuple(out.kept),
        violation_count=out.count,
        peak_units=peak,
        extra_traffic_units=traffic,
        spill_count=len(solution.spills),
        makespan_cycles=int(end.max()) if len(end) else 0,
        pipe_busy_cycles=dict(sorted(busy.items())),
        bank_conflicts=bank_conflicts,
        reuse_rule=reuse_rule,
        start_cycles=start,
        end_cycles=end,
    )


def _overlap_message(
    seg: Segment, p: int, active: Mapping[str, Mapping[int, Segment]], pos: np.ndarray
) -> str:
    lo, hi = seg.offset_units, seg.offset_units + seg.size_units
    hit = [
        o
        for o in active[seg.memory].values()
        if o.offset_units < hi and lo < o.offset_units + o.size_units
    ]
    first = hit[0]
    more = f" and {len(hit) - 1} more" if len(hit) > 1 else ""
    return (
        f"{seg.memory}: buffer {seg.buf_id} [{lo}, {hi}) resident from node {seg.start} at "
        f"position {p} overlaps buffer {first.buf_id} "
        f"[{first.offset_units}, {first.offset_units + first.size_units}) resident since node "
        f"{first.start} at position {pos[first.start]}{more}"
    )


def _bank_conflicts(
    instance: Instance,
    v: int,
    current_offset: Mapping[int, int],
    banked: Mapping[str, BankModel],
    out: _Collector,
) -> int:
    """Count (and, under ``forbid``, report) same-bank buffer pairs of op ``v``."""
    by_memory: dict[str, list[int]] = {}
    for b in instance.bufs_of(v):
        mem = instance.buffers[b].memory
        if mem in banked:
            by_memory.setdefault(mem, []).append(b)
    conflicts = 0
    for mem, bufs in by_memory.items():
        model = banked[mem]
        for i, a in enumerate(bufs):
            for c in bufs[i + 1 :]:
                bank_a = model.bank_of(current_offset[a])
                if bank_a == model.bank_of(current_offset[c]):
                    conflicts += 1
                    if model.policy == "forbid":
                        out.add(
                            "bank",
                            f"node {v} ({instance.nodes[v].op}): buffers {a} and {c} start in the "
                            f"same {mem} bank {bank_a}",
                        )
    return conflicts


def precedence_graph(
    instance: Instance, solution: Solution
) -> tuple[list[list[int]], list[int], list[str | None]]:
    """Predecessors, cycles and pipe of every node under ``solution``'s placement and spills.

    The predecessors are the graph edges, the spill edges, each segment's start before its end,
    and the residency-aware reuse edges (SPEC section 4: per address unit, the segment that
    held it before ends before the next one starts). Any order that respects them keeps the
    solution valid with the same traffic; the schedule of a valid solution is one such order.
    """
    graphs = precedence_graphs(instance, solution)
    return graphs.pred, graphs.cycles, graphs.pipe


@dataclass(frozen=True)
class PrecedenceGraphs:
    """:func:`precedence_graph` and its part that holds whatever the addresses: ``fixed`` has
    the graph and spill edges and each segment's start before its end, ``pred`` adds the
    reuse edges."""

    pred: list[list[int]]
    fixed: list[list[int]]
    cycles: list[int]
    pipe: list[str | None]


def precedence_graphs(instance: Instance, solution: Solution) -> PrecedenceGraphs:
    """:func:`precedence_graph` with and without its reuse edges, from one pass."""
    n_total = instance.n_nodes + 2 * len(solution.spills)
    pos = np.empty(n_total, dtype=np.int64)
    pos[np.asarray(solution.order, dtype=np.int64)] = np.arange(n_total)
    graph = extended_graph(instance, solution, pos)
    fixed = graph.pred  # built for this call: extended with the segments in place
    segments = residency_segments(instance, solution, pos)
    for seg in segments:
        fixed[seg.end].append(seg.start)
    pred = [list(p) for p in fixed]
    segments.sort(key=lambda s: pos[s.start])
    by_memory: dict[str, np.ndarray] = {}
    ends: list[int] = []
    for index, seg in enumerate(segments):
        last = by_memory.get(seg.memory)
        top = seg.offset_units + seg.size_units
        if last is None or len(last) < top:
            grown = np.full(max(top, 1), -1, dtype=np.int64)
            if last is not None:
                grown[: len(last)] = last
            by_memory[seg.memory] = last = grown
        units = last[seg.offset_units : top]
        for previous in np.unique(units[units >= 0]):
            pred[seg.start].append(ends[previous])
        units[:] = index
        ends.append(seg.end)
    return PrecedenceGraphs(pred, fixed, graph.cycles, graph.pipe)
