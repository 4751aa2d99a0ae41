"""CP-SAT placement with optional spills (Problem 2), for an order of the original nodes that
is fixed or, inside a window, re-ordered in the same model.

Every residency segment is a rectangle in a ``NoOverlap2D`` per memory: x is its stretch of the
schedule, y its address range ``[offset, offset + Size)``, the memory's capacity the strip height
(2D strip packing, as nncase places buffers; MiniMalloc solves the same fixed-time problem).

**x axis.** The original node of rank r (its place among the original nodes of the incumbent)
sits at ``3r``; a SPILL_OUT placed after rank r at ``3r + 1``; a SPILL_IN placed before rank
``r + 1`` at ``3r + 2``. Within one gap every SPILL_OUT thus comes before every SPILL_IN, which
only shortens overlaps, and the schedule built from a model solution lists them that way.

**Split buffers.** A buffer of the window is cut at its *touches* ``t_0 = ALLOC < t_1 < ... <
t_m = FREE`` (its users in between). In each gap g between ``t_g`` and ``t_{g+1}`` it may be
spilled once: a boolean, a SPILL_OUT rank ``so_g`` in ``[t_g, t_{g+1})`` and a SPILL_IN rank
``si_g`` in ``(so_g, t_{g+1}]``. Its rectangles per gap: one from ``3 t_g`` to the SPILL_OUT (or
to the next touch) at offset ``o_g``, and, when spilled, an optional one from the SPILL_IN to the
next touch at ``o_{g+1}``; without a spill ``o_{g+1} = o_g``. No use falls inside a spill, so
the spill edges of SPEC section 3 hold by construction. Buffers outside the window keep the
incumbent's segments as fixed rectangles.

**Re-ordering (order and placement together).** Original nodes given in ``reorder`` get a
rank variable among the ranks they hold (``AllDifferent``, graph edges as precedences, as in
the ordering model); a buffer's touches keep their order, so its gaps and optional spills keep
their meaning while their ends move, and its rectangles stretch or shrink with the order. An
order that needs fewer spills is then found in the same model, not just a better packing.

**Objective.** Traffic (``Size`` per spill of a COPY_IN-backed buffer, else ``2 Size``), then
bank conflicts (when a memory's bank policy is ``minimise``), then the number of spills (fewer
spills, fewer ``+150``-cycle transfers on MTE2/MTE3: the makespan proxy). Weights make the order
exact, so ``floor(bound / weight)`` bounds the traffic. Offsets are multiples of the alignment;
under a ``forbid`` bank policy two buffers of one op never share a bank. Hints come from the
incumbent (cleared first).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from npuopt.models.common import STATUS, make_solver
from npuopt.solver.evaluate import residency_segments
from npuopt.solver.hardware import MEMORIES, Hardware
from npuopt.solver.instance import Instance
from npuopt.solver.result import Result, Status
from npuopt.solver.solution import Solution, Spill

#: CP-SAT settings of re-ordering windows (overridable through ``params``).
_REORDER_PARAMS = {"cp_model_presolve": "false", "linearization_level": "0"}


@dataclass(frozen=True)
class _Incumbent:
    """The incumbent on the model's x axis."""

    original: list[int]  # original nodes in schedule order
    rank: dict[int, int]  # original node -> rank
    coord: dict[int, int]  # every node of the schedule -> x coordinate
    spills_of: dict[int, list[tuple[int, int, int]]]  # buffer -> [(so rank, si rank, offset)]


def _incumbent(instance: Instance, solution: Solution) -> _Incumbent:
    n = instance.n_nodes
    original = [v for v in solution.order if v < n]
    rank = {v: r for r, v in enumerate(original)}
    coord: dict[int, int] = {}
    last = -1
    spills_of: dict[int, list[tuple[int, int, int]]] = {}
    so_rank: dict[int, int] = {}
    for v in solution.order:
        if v < n:
            last = rank[v]
            coord[v] = 3 * last
        elif (v - n) % 2 == 0:  # SPILL_OUT after rank `last`
            coord[v] = 3 * last + 1
            so_rank[(v - n) // 2] = last
        else:  # SPILL_IN before rank `last + 1`
            coord[v] = 3 * last + 2
            k = (v - n) // 2
            spill = solution.spills[k]
            spills_of.setdefault(spill.buf_id, []).append(
                (so_rank[k], last + 1, spill.new_offset_units)
            )
    return _Incumbent(original, rank, coord, spills_of)


@dataclass
class _Gap:
    """The stretch of a buffer between two touches, and its optional spill."""

    start: int  # incumbent rank of t_g
    end: int  # incumbent rank of t_{g+1}
    first: cp_model.LinearExprT  # rank of t_g in the model (a variable when t_g moves)
    last: cp_model.LinearExprT  # rank of t_{g+1} in the model
    spill: cp_model.IntVar
    so: cp_model.IntVar
    si: cp_model.IntVar


@dataclass
class _Vars:
    rank: dict[int, cp_model.IntVar] = field(default_factory=dict)  # node -> rank, moving nodes
    touches: dict[int, list[int]] = field(default_factory=dict)  # buffer -> touching nodes
    offsets: dict[int, list[cp_model.IntVar]] = field(default_factory=dict)  # slot per touch
    gaps: dict[int, list[_Gap]] = field(default_factory=dict)
    x_boxes: dict[str, list[cp_model.IntervalVar]] = field(default_factory=dict)
    y_boxes: dict[str, list[cp_model.IntervalVar]] = field(default_factory=dict)
    conflicts: list[cp_model.IntVar] = field(default_factory=list)


def solve_placement(
    instance: Instance,
    incumbent: Solution,
    hardware: Hardware,
    window: Collection[int] | None = None,
    *,
    reorder: Collection[int] = (),
    time_limit_s: float = 10.0,
    seed: int = 0,
    workers: int = 1,
    deterministic: bool = False,
    log: bool = False,
    params: Mapping[str, str] | None = None,
) -> Result:
    """Re-place the buffers of ``window`` (every buffer when ``None``), spills included, and
    re-order the original nodes of ``reorder`` among the ranks they hold.

    Parameters
    ----------
    instance, hardware
        The instance and its memories.
    incumbent
        A Problem 2 solution: its order of original nodes is kept, and so are the segments of
        the buffers outside the window. With ``window=None`` only its order matters (and its
        placement, if it has one, as a hint: a Problem 1 solution will do).
    window
        BufIds free to get new offsets and new spill decisions.
    reorder
        Original node ids free to move (order and placement in one model). They take each
        other's ranks, in any order the graph edges allow that keeps, for every buffer, the
        order of its touches (ALLOC, users, FREE); the buffers they touch join ``window``.
    time_limit_s, seed, workers, deterministic, log, params
        As for :func:`models.ordering.solve_order`.

    Returns
    -------
    Result
        ``objective`` is the traffic of the returned solution; ``bound`` a proven lower bound
        on the traffic *of this window problem* (for the full model: of every placement of this
        order of the original nodes). ``info`` holds the window size, the spill count (the
        whole solution's) and the bank conflicts of the window's ops.
    """
    started = time.monotonic()
    inc = _incumbent(instance, incumbent)
    free = set(instance.buffers) if window is None else set(window) & set(instance.buffers)
    moving = sorted({v for v in reorder if 0 <= v < instance.n_nodes}, key=inc.rank.__getitem__)
    for v in moving:
        if instance.is_op(v):
            free.update(instance.bufs_of(v))
        else:
            free.add(instance.buffer_of_node[v])  # type: ignore[arg-type]
    model = cp_model.CpModel()
    x = _Vars(x_boxes={m: [] for m in MEMORIES}, y_boxes={m: [] for m in MEMORIES})
    _order_variables(model, instance, inc, moving, x)
    _variables(model, instance, hardware, inc, free, x)
    _fixed_segments(model, instance, incumbent, inc, free, x)
    _constraints(model, instance, hardware, incumbent, inc, free, x)
    traffic, spills, weight = _objective(model, instance, x)
    _hint(model, instance, hardware, incumbent, inc, free, x)

    solver = make_solver(
        time_limit_s=time_limit_s,
        seed=seed,
        workers=workers,
        deterministic=deterministic,
        log=log,
        # Re-ordering windows spend most of their time in presolve (FlashAttention_Case0, 35
        # nodes: 3 of 3.1 deterministic seconds); without it and the LP they close in ~1.
        params={**(_REORDER_PARAMS if moving else {}), **(params or {})},
    )
    status = STATUS[solver.solve(model)]
    fixed_traffic = sum(
        instance.buffers[b].spill_traffic_units * len(kept)
        for b, kept in inc.spills_of.items()
        if b not in free
    )
    info: dict[str, int | float | str] = {
        "window": len(free),
        "reordered": len(moving),
        "deterministic_time": solver.deterministic_time,
    }
    bound = None
    if status is not Status.UNKNOWN:
        bound = fixed_traffic + max(0, int(solver.best_objective_bound)) // weight
    if not status.has_solution:
        return Result(status, bound=bound, runtime_s=time.monotonic() - started, info=info)
    fixed_spills = sum(len(kept) for b, kept in inc.spills_of.items() if b not in free)
    info["spills"] = fixed_spills + int(solver.value(spills))
    info["bank_conflicts"] = sum(solver.value(c) for c in x.conflicts)
    return Result(
        status,
        solution=_build(instance, hardware, incumbent, inc, free, x, solver),
        objective=fixed_traffic + int(solver.value(traffic)),
        bound=bound,
        runtime_s=time.monotonic() - started,
        info=info,
    )


def _order_variables(
    model: cp_model.CpModel, instance: Instance, inc: _Incumbent, moving: list[int], x: _Vars
) -> None:
    """A rank per moving node, among the ranks the moving nodes hold; graph edges between
    moving nodes are precedences, edges to fixed nodes bound the domains."""
    if not moving:
        return
    slots = [inc.rank[v] for v in moving]
    inside = set(moving)
    for v in moving:
        after = max((inc.rank[u] for u in instance.predecessors[v] if u not in inside), default=-1)
        before = min(
            (inc.rank[w] for w in instance.successors[v] if w not in inside),
            default=len(inc.original),
        )
        domain = [r for r in slots if after < r < before]
        x.rank[v] = model.new_int_var_from_domain(cp_model.Domain.from_values(domain), f"r{v}")
    if len(moving) > 1:
        model.add_all_different(list(x.rank.values()))
    for v in moving:
        for u in instance.predecessors[v]:
            if u in inside:
                model.add(x.rank[u] < x.rank[v])


def _variables(
    model: cp_model.CpModel,
    instance: Instance,
    hardware: Hardware,
    inc: _Incumbent,
    free: set[int],
    x: _Vars,
) -> None:
    """Offsets per touch, spill decisions per gap, and the rectangles of the free buffers."""

    def rank(v: int) -> cp_model.LinearExprT:
        return x.rank[v] if v in x.rank else inc.rank[v]

    def lowest(v: int) -> int:
        return inc.rank[v] if v not in x.rank else min(inc.rank[u] for u in x.rank)

    def highest(v: int) -> int:
        return inc.rank[v] if v not in x.rank else max(inc.rank[u] for u in x.rank)

    for b in sorted(free):
        buf = instance.buffers[b]
        touches = sorted({buf.alloc, buf.free, *buf.users}, key=inc.rank.__getitem__)
        align, size = hardware.alignment(buf.memory), buf.size_units
        slots = (hardware.capacity(buf.memory) - size) // align
        offsets = [model.new_int_var(0, slots, f"o{b}_{g}") for g in range(len(touches))]
        gaps = []
        for g in range(len(touches) - 1):
            a, z = touches[g], touches[g + 1]
            first, last_rank = rank(a), rank(z)
            if a in x.rank or z in x.rank:  # a buffer's touches keep their order
                model.add(first < last_rank)
            last = g == len(touches) - 2  # the FREE's own position belongs to the segment
            spill = model.new_bool_var(f"s{b}_{g}")
            so = model.new_int_var(lowest(a), highest(z) - 1, f"so{b}_{g}")
            si = model.new_int_var(lowest(a) + 1, highest(z), f"si{b}_{g}")
            model.add(so >= first)
            model.add(so <= last_rank - 1)
            model.add(si <= last_rank)
            gaps.append(_Gap(inc.rank[a], inc.rank[z], first, last_rank, spill, so, si))
            # Resident from the touch to the SPILL_OUT (inclusive), or up to the next touch.
            end = 3 * last_rank + (1 if last else 0)
            top = 3 * highest(z) + (1 if last else 0)
            left_end = model.new_int_var(3 * lowest(a) + 1, top, f"le{b}_{g}")
            model.add(left_end == 3 * so + 2).only_enforce_if(spill)
            model.add(left_end == end).only_enforce_if(~spill)
            left_size = model.new_int_var(1, top - 3 * lowest(a), f"ls{b}_{g}")
            x.x_boxes[buf.memory].append(
                model.new_interval_var(3 * first, left_size, left_end, f"lx{b}_{g}")
            )
            x.y_boxes[buf.memory].append(
                model.new_fixed_size_interval_var(offsets[g] * align, size, f"ly{b}_{g}")
            )
            # When spilled: resident again from the SPILL_IN to the next touch, at o_{g+1}.
            right_size = model.new_int_var(0, top - 3 * lowest(a), f"rs{b}_{g}")
            x.x_boxes[buf.memory].append(
                model.new_optional_interval_var(3 * si - 1, right_size, end, spill, f"rx{b}_{g}")
            )
            x.y_boxes[buf.memory].append(
                model.new_optional_fixed_size_interval_var(
                    offsets[g + 1] * align, size, spill, f"ry{b}_{g}"
                )
            )
        x.touches[b], x.offsets[b], x.gaps[b] = touches, offsets, gaps


def _fixed_segments(
    model: cp_model.CpModel,
    instance: Instance,
    incumbent: Solution,
    inc: _Incumbent,
    free: set[int],
    x: _Vars,
) -> None:
    """The incumbent's segments of buffers outside the window, as constant rectangles: only
    those that meet the span of the window's buffers of the same memory."""
    if len(free) == len(instance.buffers):
        return
    spans: dict[str, tuple[int, int]] = {}  # memory -> x range of its free buffers
    moved = [inc.rank[v] for v in x.rank]
    for b, touches in x.touches.items():
        memory = instance.buffers[b].memory
        ranks = [inc.rank[v] for v in touches] + (moved if set(touches) & x.rank.keys() else [])
        first, last = 3 * min(ranks), 3 * max(ranks) + 1
        lo, hi = spans.get(memory, (first, last))
        spans[memory] = (min(lo, first), max(hi, last))
    everything = (0, 3 * len(inc.original))  # nothing free: check the whole incumbent
    n_total = len(incumbent.order)
    pos = np.empty(n_total, dtype=np.int64)
    pos[np.asarray(incumbent.order, dtype=np.int64)] = np.arange(n_total)
    for seg in residency_segments(instance, incumbent, pos):
        if seg.buf_id in free or (free and seg.memory not in spans):
            continue
        lo, hi = spans.get(seg.memory, everything)
        x0, x1 = inc.coord[seg.start], inc.coord[seg.end] + 1
        if x1 <= lo or x0 >= hi:
            continue
        x.x_boxes[seg.memory].append(model.new_fixed_size_interval_var(x0, x1 - x0, "fx"))
        x.y_boxes[seg.memory].append(
            model.new_fixed_size_interval_var(seg.offset_units, seg.size_units, "fy")
        )


def _constraints(
    model: cp_model.CpModel,
    instance: Instance,
    hardware: Hardware,
    incumbent: Solution,
    inc: _Incumbent,
    free: set[int],
    x: _Vars,
) -> None:
    for b, gaps in x.gaps.items():
        offsets = x.offsets[b]
        for g, gap in enumerate(gaps):
            model.add(gap.si > gap.so)
            model.add(offsets[g + 1] == offsets[g]).only_enforce_if(~gap.spill)
            # No spill: pin the split point (it means nothing then; fewer symmetric solutions).
            model.add(gap.so == gap.first).only_enforce_if(~gap.spill)
            model.add(gap.si == gap.first + 1).only_enforce_if(~gap.spill)
    for memory in MEMORIES:
        if len(x.x_boxes[memory]) > 1:
            model.add_no_overlap_2d(x.x_boxes[memory], x.y_boxes[memory])
    _bank_rules(model, instance, hardware, incumbent, inc, free, x)


def _bank_rules(
    model: cp_model.CpModel,
    instance: Instance,
    hardware: Hardware,
    incumbent: Solution,
    inc: _Incumbent,
    free: set[int],
    x: _Vars,
) -> None:
    """SPEC section 5: two buffers of one op in a banked memory must not (``forbid``) or should
    not (``minimise``) start in the same bank. Only ops that use a buffer of the window."""
    banked = {m for m in MEMORIES if hardware.bank(m) is not None}
    if not banked:
        return
    fixed_offset = _fixed_offsets_at_uses(instance, incumbent, inc, free)
    bank_var: dict[tuple[int, int], cp_model.IntVar | int] = {}

    def bank_at(b: int, op: int) -> cp_model.IntVar | int:
        memory = instance.buffers[b].memory
        rules = hardware.bank(memory)
        assert rules is not None
        if b not in free:
            return rules.bank_of(fixed_offset[b, op])
        if (b, op) not in bank_var:
            touch = x.touches[b].index(op)
            align = hardware.alignment(memory)
            offset = x.offsets[b][touch]
            top = hardware.capacity(memory)
            row = model.new_int_var(0, top // rules.bank_width_units, f"row{b}_{op}")
            model.add_division_equality(row, offset * align, rules.bank_width_units)
            bank = model.new_int_var(0, rules.banks - 1, f"bank{b}_{op}")
            model.add_modulo_equality(bank, row, rules.banks)
            bank_var[b, op] = bank
        return bank_var[b, op]

    for op in instance.op_ids:
        uses = [b for b in instance.bufs_of(op) if instance.buffers[b].memory in banked]
        if not any(b in free for b in uses):
            continue
        for i, a in enumerate(uses):
            for c in uses[i + 1 :]:
                same_memory = instance.buffers[a].memory == instance.buffers[c].memory
                if not same_memory or (a not in free and c not in free):
                    continue
                rules = hardware.bank(instance.buffers[a].memory)
                assert rules is not None
                bank_a, bank_c = bank_at(a, op), bank_at(c, op)
                if rules.policy == "forbid":
                    model.add(bank_a != bank_c)
                else:
                    same = model.new_bool_var(f"conflict{a}_{c}_{op}")
                    model.add(bank_a != bank_c).only_enforce_if(~same)
                    x.conflicts.append(same)


def _fixed_offsets_at_uses(
    instance: Instance, incumbent: Solution, inc: _Incumbent, free: set[int]
) -> dict[tuple[int, int], int]:
    """Offset of each buffer outside the window at each of its uses, in the incumbent."""
    out: dict[tuple[int, int], int] = {}
    for b, buf in instance.buffers.items():
        if b in free:
            continue
        reloads = sorted(inc.spills_of.get(b, []))
        for u in buf.users:
            offset = incumbent.offsets[b]
            for _, si, new in reloads:  # (moving nodes never touch a buffer outside the window)
                if si <= inc.rank[u]:
                    offset = new
            out[b, u] = offset
    return out


def _objective(
    model: cp_model.CpModel, instance: Instance, x: _Vars
) -> tuple[cp_model.LinearExpr, cp_model.LinearExpr, int]:
    """Minimise traffic, then bank conflicts, then spills; return the traffic and spill
    expressions and the traffic's weight."""
    spill_vars = [gap.spill for gaps in x.gaps.values() for gap in gaps]
    traffic = cp_model.LinearExpr.weighted_sum(
        spill_vars,
        [instance.buffers[b].spill_traffic_units for b, gaps in x.gaps.items() for _ in gaps],
    )
    spills = cp_model.LinearExpr.sum(spill_vars)
    conflicts = cp_model.LinearExpr.sum(x.conflicts)
    conflict_weight = len(spill_vars) + 1  # above any spill count
    weight = conflict_weight * (len(x.conflicts) + 1)  # above any conflicts-and-spills sum
    model.minimize(weight * traffic + conflict_weight * conflicts + spills)
    return traffic, spills, weight


def _hint(
    model: cp_model.CpModel,
    instance: Instance,
    hardware: Hardware,
    incumbent: Solution,
    inc: _Incumbent,
    free: set[int],
    x: _Vars,
) -> None:
    """The incumbent's offsets and spills as a hint, where they fit this model's shape."""
    model.clear_hints()
    for v, var in x.rank.items():
        model.add_hint(var, inc.rank[v])
    for b in free:
        if b not in incumbent.offsets:  # an order alone (a Problem 1 solution): no hint
            continue
        align = hardware.alignment(instance.buffers[b].memory)
        reloads = {(so, si): offset for so, si, offset in inc.spills_of.get(b, [])}
        offset = incumbent.offsets[b]
        for g, gap in enumerate(x.gaps[b]):
            model.add_hint(x.offsets[b][g], offset // align)
            hit = next(((so, si) for so, si in reloads if gap.start <= so < gap.end), None)
            if hit is not None:
                model.add_hint(gap.spill, 1)
                model.add_hint(gap.so, hit[0])
                model.add_hint(gap.si, min(max(hit[1], hit[0] + 1), gap.end))
                offset = reloads[hit]
            else:
                model.add_hint(gap.spill, 0)
                model.add_hint(gap.so, gap.start)
                model.add_hint(gap.si, gap.start + 1)
        model.add_hint(x.offsets[b][-1], offset // align)


def _build(
    instance: Instance,
    hardware: Hardware,
    incumbent: Solution,
    inc: _Incumbent,
    free: set[int],
    x: _Vars,
    solver: cp_model.CpSolver,
) -> Solution:
    """The solution the model's values describe: the original nodes at their ranks (the
    incumbent's, or the model's for moving nodes) with each spill's nodes at its ranks (after
    rank r: SPILL_OUTs, then SPILL_INs), spills listed in schedule order."""
    spills: list[tuple[int, int, int, int]] = []  # (so rank, si rank, buffer, new offset)
    offsets = dict(incumbent.offsets)
    for b in free:
        align = hardware.alignment(instance.buffers[b].memory)
        offsets[b] = solver.value(x.offsets[b][0]) * align
        for g, gap in enumerate(x.gaps[b]):
            if solver.value(gap.spill):
                new = solver.value(x.offsets[b][g + 1]) * align
                spills.append((solver.value(gap.so), solver.value(gap.si), b, new))
    for b, kept in inc.spills_of.items():
        if b not in free:
            spills.extend((so, si, b, offset) for so, si, offset in kept)
    spills.sort()
    n = instance.n_nodes
    outs: dict[int, list[int]] = {}  # rank -> SPILL_OUTs after it
    ins: dict[int, list[int]] = {}  # rank -> SPILL_INs after it (before the next rank)
    for k, (so, si, _, _) in enumerate(spills):
        outs.setdefault(so, []).append(n + 2 * k)
        ins.setdefault(si - 1, []).append(n + 2 * k + 1)
    original = list(inc.original)
    for v, var in x.rank.items():
        original[solver.value(var)] = v
    order: list[int] = []
    for r, v in enumerate(original):
        order.append(v)
        order.extend(outs.get(r, ()))
        order.extend(ins.get(r, ()))
    return Solution(
        order=tuple(order),
        offsets=offsets,
        spills=tuple(Spill(b, offset) for _, _, b, offset in spills),
    )
