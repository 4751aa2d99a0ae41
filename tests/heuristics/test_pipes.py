"""Problem 3 compaction: same placement and traffic, still valid, on fixtures and random cases."""

from __future__ import annotations

from hypothesis import given

from heuristics.ordering import list_schedule, program_rank
from heuristics.pipes import compact
from heuristics.placement import PlacementError, place
from solver.evaluate import evaluate
from solver.hardware import DEFAULT_HARDWARE
from solver.solution import Solution

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
    from solver.solution import Spill

    sol = Solution(order=(0, 1, 7, 8, 2, 3, 4, 5, 6), offsets={0: 0, 1: 5}, spills=(Spill(0, 100),))
    result = evaluate(inst, compact(inst, sol), 3)
    assert result.valid and result.extra_traffic_units == 5
    assert result.makespan_cycles <= 220


@given(instances())
def test_compaction_keeps_validity_and_traffic(inst):
    order = list_schedule(inst, "program", program_rank(inst))
    if order is None:
        return
    try:
        placed = place(inst, order, HARDWARE, "hybrid")
    except PlacementError:
        return
    before = evaluate(inst, placed, 2, HARDWARE)
    after_solution = compact(inst, placed)
    after = evaluate(inst, after_solution, 3, HARDWARE)
    assert after.valid, after.violations
    assert after.extra_traffic_units == before.extra_traffic_units
    assert after_solution.offsets == placed.offsets and after_solution.spills == placed.spills


def test_default_hardware_fixture_compaction():
    inst = tiny("reload_reuse")
    order = list_schedule(inst, "program", program_rank(inst))
    placed = place(inst, order, DEFAULT_HARDWARE)
    assert evaluate(inst, compact(inst, placed), 3).valid
