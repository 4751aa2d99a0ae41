"""Problem 3 compaction: same placement and traffic, still valid, on fixtures and random cases."""

from __future__ import annotations

from hypothesis import given

from npuopt.heuristics.ordering import list_schedule, program_rank
from npuopt.heuristics.pipes import _bottom_levels, _non_delay, compact, constraints, justify
from npuopt.heuristics.placement import PlacementError, place
from npuopt.solver.evaluate import evaluate, precedence_graph
from npuopt.solver.hardware import DEFAULT_HARDWARE
from npuopt.solver.solution import Solution

from helpers import tiny
from strategies import HARDWARE, instances


def test_compaction_overlaps_independent_pipes():
    """sequential with b0 at 0 and b1 at 10: P1 (VECTOR, 50) and P2 (MTE3, 5) are independent,
    so whatever the input order, the compacted makespan is max(50, 5) = 50. With both at
    offset 0 the reuse edge FREE(b0) -> ALLOC(b1) must survive: 50 + 5 = 55."""
    inst = tiny("sequential")
    apart = compact(inst, Solution(order=range(6), offsets={0: 0, 1: 10}))
    assert evaluate(inst, apart, 3).makespan_cycles == 50
    shared = compact(inst, Solution(order=range(6), offsets={0: 0, 1: 0}))
    result = evaluate(inst, shared, 3)
    assert result.valid and result.makespan_cycles == 55


def test_compaction_keeps_spills_valid():
    """The statement's example with its one spill stays valid and keeps traffic 5."""
    inst = tiny("example7")
    from npuopt.solver.solution import Spill

    sol = Solution(order=(0, 1, 7, 8, 2, 3, 4, 5, 6), offsets={0: 0, 1: 5}, spills=(Spill(0, 100),))
    result = evaluate(inst, compact(inst, sol), 3)
    assert result.valid and result.extra_traffic_units == 5
    assert result.makespan_cycles <= 220


def _placed(inst) -> Solution | None:
    """The list scheduler's order placed by the hybrid policy (``None`` when either fails)."""
    order = list_schedule(inst, "program", program_rank(inst))
    if order is None:
        return None
    try:
        return place(inst, order, HARDWARE, "hybrid")
    except PlacementError:
        return None


@given(instances())
def test_compaction_and_justification_keep_validity_and_traffic(inst):
    placed = _placed(inst)
    if placed is None:
        return
    before = evaluate(inst, placed, 3, HARDWARE)
    for after_solution in (
        compact(inst, placed),
        justify(inst, placed, [int(e) for e in before.end_cycles]),
    ):
        after = evaluate(inst, after_solution, 3, HARDWARE)
        assert after.valid, after.violations
        assert after.extra_traffic_units == before.extra_traffic_units
        assert after_solution.offsets == placed.offsets
        assert after_solution.spills == placed.spills


def test_compaction_waits_for_a_late_node_only_when_nothing_else_is_ready():
    """Regression (issue 6). late_ready: COPY_IN (MTE2, 10) -> VEC_LATE (VECTOR, 5) and
    COPY (MTE3, 1) -> VEC_EARLY (VECTOR, 5), buffers apart. VEC_LATE is known (its predecessor
    placed) before VEC_EARLY but ready only at 10; VEC_EARLY is ready at 1. Non-delay: VECTOR
    runs VEC_EARLY 1-6, then VEC_LATE 10-15, makespan 15. The list scheduler once took VEC_LATE
    as startable when VECTOR freed (at 0) and put it first: 10-15, then 15-20."""
    inst = tiny("late_ready")
    placed = Solution(order=(4, 6, 0, 2, 1, 3, 5, 7), offsets={0: 0, 1: 10})
    result = evaluate(inst, compact(inst, placed), 3)
    assert result.valid and result.makespan_cycles == 15


def test_justification_finds_a_delay_that_pays():
    """delay_pays: COPY_IN A (MTE2, 1) -> VEC_B (VECTOR, 1) -> COPY_IN C (MTE2, 4), and VEC_D
    (VECTOR, 3) alone. Non-delay, VECTOR starts D at 0 (B is not ready): B 3-4, C 4-8, makespan
    8. Waiting one cycle for B is better: A 0-1, B 1-2, C 2-6 beside D 2-5, makespan 6. The
    backward pass runs C first (it ends last), then B before A: read in reverse, exactly that
    schedule."""
    inst = tiny("delay_pays")
    placed = Solution(order=(4, 6, 0, 3, 1, 2, 5, 7), offsets={0: 0, 1: 10})
    assert evaluate(inst, placed, 3).makespan_cycles == 8
    result = evaluate(inst, compact(inst, placed), 3)
    assert result.valid and result.makespan_cycles == 6


def test_justify_from_a_schedules_own_times():
    """delay_pays in its non-delay order (makespan 8, ends A 1, D 3, B 4, C 8): justified from
    those times, the backward pass takes C, then B, then A, and the answer is 6; the
    placement is kept."""
    inst = tiny("delay_pays")
    placed = Solution(order=(4, 6, 0, 3, 1, 2, 5, 7), offsets={0: 0, 1: 10})
    judged = evaluate(inst, placed, 3)
    justified = justify(inst, placed, [int(e) for e in judged.end_cycles])
    result = evaluate(inst, justified, 3)
    assert result.valid and result.makespan_cycles == 6
    assert justified.offsets == placed.offsets and justified.spills == placed.spills


def _idle_with_work_ready(inst, solution) -> list[str]:
    """Each time a pipe of ``solution``'s simulation idles from ``t`` on while a node it runs
    later had all its predecessors done by ``t`` (a non-delay schedule never does)."""
    judged = evaluate(inst, solution, 3, HARDWARE)
    start, end = judged.start_cycles, judged.end_cycles
    pred, _, pipe = precedence_graph(inst, solution)
    ready = {v: max((int(end[u]) for u in pred[v]), default=0) for v in solution.order}
    runs: dict[str, list[int]] = {}
    for v in solution.order:
        if pipe[v] is not None:
            runs.setdefault(pipe[v], []).append(v)
    found = []
    for unit, nodes in runs.items():
        free_at = 0
        for i, v in enumerate(nodes):
            if start[v] > free_at:
                waiting = [w for w in nodes[i:] if ready[w] <= free_at]
                found += [f"{unit} idles at {free_at}, {w} ready" for w in waiting]
            free_at = int(end[v])
    return found


@given(instances())
def test_list_schedule_is_non_delay(inst):
    """In the simulation of the forward list schedule no pipe waits while work of its own is
    ready (the official cases showed the issue-6 fault this way: 9 such waits on
    FlashAttention_Case0's answer, 21 on Matmul_Case0's). The justified schedules may wait."""
    placed = _placed(inst)
    if placed is None:
        return
    held = constraints(inst, placed)
    order, _ = _non_delay(held, _bottom_levels(placed.order, held.succ, held.cycles))
    forward = Solution(order=tuple(order), offsets=placed.offsets, spills=placed.spills)
    assert _idle_with_work_ready(inst, forward) == []


def test_default_hardware_fixture_compaction():
    inst = tiny("reload_reuse")
    order = list_schedule(inst, "program", program_rank(inst))
    placed = place(inst, order, DEFAULT_HARDWARE)
    assert evaluate(inst, compact(inst, placed), 3).valid
