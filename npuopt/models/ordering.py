"""CP-SAT residency-minimising ordering (Problem 1), on a window of ops or on all of them.

Formulation (op nodes only: for a fixed op order, ALLOCs just in time and FREEs as soon as ready
are optimal, so a buffer lives from its first user's position to its last user's):

* each op in the window gets a position among the positions the window's ops hold in the
  incumbent (``AllDifferent``); ops outside the window keep theirs. Precedences between ops
  (paths through buffer nodes included) bound the domains and order window ops;
* each L1/UB buffer whose lifetime can change is an interval ``[first user, last user + 1)`` in a
  cumulative whose capacity is the variable ``local_peak``; buffers that cannot change add a
  constant profile. Only positions between the window's first and last slot can change, so the
  cumulative covers that span and the profile outside it is a constant;
* each L0 memory's buffers overlapping the span lie on a ``NoOverlap`` line (single residency);
* redundant: ``max(local_peak, outside) >= lower_bound`` (e.g. the forced-live bound).

The objective is the window's own peak, ``local_peak``; the global value is
``max(local_peak, outside peak, largest unused buffer)``. With the window = every op this is the
full model and CP-SAT's bound is a proven global bound.

Variables, constraints and objective are built apart (after PyJobShop's CP-SAT layout); warm
starts are hints from the incumbent (hints cleared first).
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from npuopt.models.common import STATUS, make_solver
from npuopt.solver.hardware import COUNTED_MEMORIES, L0_MEMORIES
from npuopt.solver.instance import Instance
from npuopt.solver.result import Result, Status
from npuopt.solver.solution import (
    Solution,
    buffer_lifetimes,
    op_profile,
    op_successors,
    schedule_from_op_order,
    unused_buffer_units,
)


class OrderingData:
    """What the model reads about an instance, built once and shared by every window solve.

    Attributes
    ----------
    instance
        The instance.
    op_pred, op_succ
        Op-level predecessors (successors) of each op: ops with a path to (from) it whose inner
        nodes are buffer nodes only.

    Pass ``successors`` (:func:`solver.solution.op_successors` of the instance) when the caller
    has computed it already (0.24 s at 36k nodes).
    """

    def __init__(
        self, instance: Instance, successors: Sequence[Sequence[int]] | None = None
    ) -> None:
        self.instance = instance
        is_op = [instance.is_op(v) for v in range(instance.n_nodes)]
        op_pred: dict[int, set[int]] = {v: set() for v in instance.op_ids}
        if successors is None:
            successors = op_successors(instance)
        for u in instance.op_ids:
            for w in successors[u]:
                op_pred[w].add(u)
        self.op_pred = {v: tuple(sorted(p)) for v, p in op_pred.items()}
        op_succ: dict[int, list[int]] = {v: [] for v in instance.op_ids}
        for v, preds in self.op_pred.items():
            for u in preds:
                op_succ[u].append(v)
        self.op_succ = {v: tuple(s) for v, s in op_succ.items()}
        self.unused_units = unused_buffer_units(instance)
        # A user that precedes (follows) every other user of a buffer is its first (last) one in
        # any order: the model can then use its position directly instead of a min (max).
        rank = {v: i for i, v in enumerate(v for v in instance.topological_order if is_op[v])}
        self.first_user: dict[int, int] = {}
        self.last_user: dict[int, int] = {}
        for b, buf in instance.buffers.items():
            if len(buf.users) < 2:
                continue
            users = sorted(buf.users, key=rank.__getitem__)
            if _reaches_all(users[0], users[1:], rank, self.op_succ, forward=True):
                self.first_user[b] = users[0]
            if _reaches_all(users[-1], users[:-1], rank, self.op_pred, forward=False):
                self.last_user[b] = users[-1]


def _reaches_all(
    source: int,
    targets: list[int],
    rank: Mapping[int, int],
    step: Mapping[int, Sequence[int]],
    *,
    forward: bool,
) -> bool:
    """Whether ``source`` reaches every target along ``step`` (successors when ``forward``,
    predecessors otherwise), searching only up to the farthest target's topological rank."""
    limit = max(rank[t] for t in targets) if forward else min(rank[t] for t in targets)
    left, seen, stack = set(targets), {source}, [source]
    while stack and left:
        for w in step[stack.pop()]:
            if w in seen or (rank[w] > limit if forward else rank[w] < limit):
                continue
            seen.add(w)
            left.discard(w)
            stack.append(w)
    return not left


@dataclass
class _Vars:
    position: dict[int, cp_model.IntVar]
    first: dict[int, cp_model.LinearExpr | int]
    last: dict[int, cp_model.LinearExpr | int]
    local_peak: cp_model.IntVar


@dataclass(frozen=True)
class _Window:
    ops: list[int]  # op order of the incumbent
    position: dict[int, int]  # incumbent positions
    free: list[int]  # ops free to move
    slots: list[int]  # positions they share
    lo: int
    hi: int
    lifetimes: dict[int, tuple[int, int]]  # incumbent (first, last) per used buffer
    profile: np.ndarray  # incumbent live L1+UB units per position


def solve_order(
    data: OrderingData,
    op_order: Sequence[int],
    window: Collection[int] | None = None,
    *,
    time_limit_s: float = 10.0,
    seed: int = 0,
    workers: int = 1,
    lower_bound: int = 0,
    tie_break: bool = True,
    deterministic: bool = False,
    log: bool = False,
    params: Mapping[str, str] | None = None,
) -> Result:
    """Re-order the ops of ``window`` (all ops when ``None``) to minimise the peak.

    Parameters
    ----------
    data
        :class:`OrderingData` of the instance.
    op_order
        The incumbent order of every op node (a valid one).
    window
        Op ids free to move; the others keep their incumbent positions. An empty window fixes
        every op: the model then checks the incumbent (INFEASIBLE when it breaks a precedence
        or L0 single residency, or cannot meet ``lower_bound``).
    time_limit_s, seed, workers, log
        CP-SAT limits and settings.
    deterministic
        Limit by CP-SAT's deterministic time instead of wall-clock time: with ``workers=1`` and
        a fixed seed the answer is then the same on every run, whatever the machine's load.
    lower_bound
        A proven bound on the global peak (e.g. the forced-live bound), added as a constraint.
    tie_break
        Among orders with the same window peak, prefer shorter lifetimes (the sum of size x
        lifetime of the window's L1/UB buffers): when the peak cannot drop, the window still
        moves towards orders where it can.
    params
        Further CP-SAT parameters, by name (passed straight through).

    Returns
    -------
    Result
        ``objective`` is the global ``max V_stay`` of the returned order; ``bound`` is CP-SAT's
        bound on the window's own peak (a global bound only for the full model).
        ``info`` holds ``local_peak``, ``outside_peak`` and the window size.
    """
    started = time.monotonic()
    win = _window(data, op_order, window)
    model = cp_model.CpModel()
    x = _variables(model, data, win)
    outside = _constraints(model, data, win, x, lower_bound)
    scale = _objective(model, data, win, x, tie_break)
    _hint(model, win, x)

    solver = make_solver(
        time_limit_s=time_limit_s,
        seed=seed,
        workers=workers,
        deterministic=deterministic,
        log=log,
        params=params,
    )
    status = STATUS[solver.solve(model)]
    info: dict[str, int | float | str] = {
        "window": len(win.free),
        "outside_peak": outside,
        "deterministic_time": solver.deterministic_time,
    }
    # The objective is local_peak * scale + tie-break <= (local_peak + 1) * scale - 1, so
    # floor(bound / scale) bounds the window's peak.
    bound = int(solver.best_objective_bound) // scale if status is not Status.UNKNOWN else None
    if not status.has_solution:
        return Result(status, bound=bound, runtime_s=time.monotonic() - started, info=info)
    new_position = dict(win.position)
    for v in win.free:
        new_position[v] = solver.value(x.position[v])
    order = sorted(win.ops, key=new_position.__getitem__)
    local = solver.value(x.local_peak)
    info["local_peak"] = local
    return Result(
        status,
        solution=Solution(order=schedule_from_op_order(data.instance, order)),
        objective=max(local, outside, data.unused_units),
        bound=bound,
        runtime_s=time.monotonic() - started,
        info=info,
    )


def _window(data: OrderingData, op_order: Sequence[int], window: Collection[int] | None) -> _Window:
    ops = list(op_order)
    position = {v: p for p, v in enumerate(ops)}
    free = sorted(
        ops if window is None else set(window) & position.keys(), key=position.__getitem__
    )
    slots = [position[v] for v in free]
    lo, hi = (slots[0], slots[-1]) if slots else (0, len(ops) - 1)
    return _Window(
        ops=ops,
        position=position,
        free=free,
        slots=slots,
        lo=lo,
        hi=hi,
        lifetimes=buffer_lifetimes(data.instance, position),
        profile=op_profile(data.instance, ops),
    )


def _variables(model: cp_model.CpModel, data: OrderingData, win: _Window) -> _Vars:
    inst = data.instance
    free = set(win.free)
    position: dict[int, cp_model.IntVar] = {}
    reach: dict[int, tuple[int, int]] = {}  # smallest and largest slot each position may take
    for v in win.free:
        # Ops outside the window that must come before or after v bound its domain.
        earliest = max((win.position[u] for u in data.op_pred[v] if u not in free), default=-1)
        latest = min(
            (win.position[w] for w in data.op_succ[v] if w not in free), default=len(win.ops)
        )
        domain = [s for s in win.slots if earliest < s < latest]
        position[v] = model.new_int_var_from_domain(cp_model.Domain.from_values(domain), f"pos{v}")
        reach[v] = (domain[0], domain[-1])
    first: dict[int, cp_model.LinearExpr | int] = {}
    last: dict[int, cp_model.LinearExpr | int] = {}
    for b, buf in inst.buffers.items():
        if not buf.users or not free.intersection(buf.users):
            continue
        fixed = [win.position[u] for u in buf.users if u not in free]
        moving = [u for u in buf.users if u in free]
        head, tail = data.first_user.get(b), data.last_user.get(b)
        first[b] = (
            position[head]
            if head in free
            else _extreme(
                model, position, reach, moving, min(fixed, default=None), True, f"first{b}"
            )
        )
        last[b] = (
            position[tail]
            if tail in free
            else _extreme(
                model, position, reach, moving, max(fixed, default=None), False, f"last{b}"
            )
        )
    span = win.profile[win.lo : win.hi + 1]
    span_peak = int(span.max()) if len(span) else 0
    local_peak = model.new_int_var(0, max(span_peak, 0), "local_peak")
    return _Vars(position, first, last, local_peak)


def _extreme(
    model: cp_model.CpModel,
    position: Mapping[int, cp_model.IntVar],
    reach: Mapping[int, tuple[int, int]],
    moving: list[int],
    fixed: int | None,
    lowest: bool,
    name: str,
) -> cp_model.LinearExpr | int:
    """min (``lowest``) or max of the positions of ops ``moving`` and an optional constant."""
    lo = min(reach[v][0] for v in moving)
    hi = max(reach[v][1] for v in moving)
    if fixed is not None:
        if (fixed < lo) if lowest else (fixed > hi):
            return fixed  # a fixed user outside every moving one's reach decides it
        lo, hi = min(lo, fixed), max(hi, fixed)
    if len(moving) == 1 and fixed is None:
        return position[moving[0]]
    terms: list[cp_model.LinearExprT] = [position[v] for v in moving]
    if fixed is not None:
        terms.append(fixed)
    var = model.new_int_var(lo, hi, name)
    if lowest:
        model.add_min_equality(var, terms)
    else:
        model.add_max_equality(var, terms)
    return var


def _constraints(
    model: cp_model.CpModel, data: OrderingData, win: _Window, x: _Vars, lower_bound: int
) -> int:
    """Add the constraints; return the (constant) peak outside the window's span."""
    inst = data.instance
    if len(x.position) > 1:
        model.add_all_different(list(x.position.values()))
    free = set(win.free)
    if not free:  # verification: the incumbent's own precedences must hold
        for v in win.ops:
            if any(win.position[u] > win.position[v] for u in data.op_pred[v]):
                model.add_bool_or([])  # false: the fixed order breaks an edge
    for v in win.free:
        for u in data.op_pred[v]:
            if u in free:
                model.add(x.position[u] < x.position[v])

    lo, hi = win.lo, win.hi
    intervals: list[cp_model.IntervalVar] = []
    demands: list[int] = []
    fixed_profile = np.zeros(max(hi - lo + 1, 0), dtype=np.int64)
    l0_intervals: dict[str, list[cp_model.IntervalVar]] = {m: [] for m in L0_MEMORIES}
    for b, buf in inst.buffers.items():
        if not buf.users:
            continue
        counted = buf.memory in COUNTED_MEMORIES
        if b in x.first:
            start = _clip(x.first[b], lo, hi + 1, low=True)
            end = _clip(x.last[b] + 1, lo, hi + 1, low=False)
            size = model.new_int_var(0, hi - lo + 1, f"len{b}")
            interval = model.new_interval_var(start, size, end, f"live{b}")
            if counted:
                intervals.append(interval)
                demands.append(buf.size_units)
            elif buf.memory in L0_MEMORIES:
                l0_intervals[buf.memory].append(interval)
            continue
        first, last = win.lifetimes[b]
        if last < lo or first > hi:
            continue
        if counted:
            fixed_profile[max(first, lo) - lo : min(last, hi) - lo + 1] += buf.size_units
        elif buf.memory in L0_MEMORIES:
            start, end = max(first, lo), min(last, hi) + 1
            l0_intervals[buf.memory].append(
                model.new_fixed_size_interval_var(start, end - start, f"l0fixed{b}")
            )
    # The constant part of the profile, as runs of equal demand.
    t = 0
    while t < len(fixed_profile):
        run = t
        while run + 1 < len(fixed_profile) and fixed_profile[run + 1] == fixed_profile[t]:
            run += 1
        if fixed_profile[t]:
            intervals.append(model.new_fixed_size_interval_var(lo + t, run - t + 1, f"fixed{t}"))
            demands.append(int(fixed_profile[t]))
        t = run + 1
    if intervals:
        model.add_cumulative(intervals, demands, x.local_peak)
    for memory_intervals in l0_intervals.values():
        if len(memory_intervals) > 1:
            model.add_no_overlap(memory_intervals)

    outside_parts = [win.profile[:lo], win.profile[hi + 1 :]]
    outside = max((int(p.max()) for p in outside_parts if len(p)), default=0)
    if max(outside, data.unused_units) < lower_bound:
        model.add(x.local_peak >= lower_bound)  # the peak can only be inside the window
    return outside


def _objective(
    model: cp_model.CpModel, data: OrderingData, win: _Window, x: _Vars, tie_break: bool
) -> int:
    """Minimise the window peak, then (optionally) the size-weighted lifetimes in the window.

    Returns the peak's weight in the objective, to turn the objective's bound into one on the
    peak.
    """
    if not tie_break:
        model.minimize(x.local_peak)
        return 1
    terms, worst = [], 0
    for b, first in x.first.items():
        buf = data.instance.buffers[b]
        if buf.memory in COUNTED_MEMORIES:
            terms.append(buf.size_units * (x.last[b] - first))
            worst += buf.size_units * (win.hi - win.lo + 1)
    model.minimize(x.local_peak * (worst + 1) + sum(terms))
    return worst + 1


def _clip(expr: cp_model.LinearExprT, lo: int, hi: int, *, low: bool) -> cp_model.LinearExprT:
    """Clip a constant to the span; variables already live inside it."""
    if isinstance(expr, int | np.integer):
        return max(int(expr), lo) if low else min(int(expr), hi)
    return expr


def _hint(model: cp_model.CpModel, win: _Window, x: _Vars) -> None:
    model.clear_hints()
    for v, var in x.position.items():
        model.add_hint(var, win.position[v])
    span = win.profile[win.lo : win.hi + 1]
    if len(span):
        model.add_hint(x.local_peak, int(span.max()))
