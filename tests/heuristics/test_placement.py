"""Problem 2 placement: valid offsets and spills on fixtures and random instances."""

from __future__ import annotations

import pytest
from hypothesis import given

from npuopt.heuristics.ordering import list_schedule, program_rank
from npuopt.heuristics.placement import PLACEMENT_POLICIES, PlacementError, place
from npuopt.solver.evaluate import evaluate
from npuopt.solver.hardware import DEFAULT_HARDWARE, Hardware
from npuopt.solver.instance import parse_instance

from helpers import TINY, tiny
from strategies import HARDWARE, instances


@pytest.mark.parametrize("name", TINY)
@pytest.mark.parametrize("policy", PLACEMENT_POLICIES)
def test_every_policy_places_every_fixture(name, policy):
    inst = tiny(name)
    order = list_schedule(inst, "program", program_rank(inst))
    result = evaluate(inst, place(inst, order, DEFAULT_HARDWARE, policy), 2)
    assert result.valid, result.violations
    assert result.spill_count == 0  # the default capacities hold every fixture


def test_forced_spill_of_the_cheapest_victim():
    """reload_reuse with UB = 150: b0 and b1 hold 100 units each and no op uses both.

    In program order b0 is written (COPY_IN), then ALLOC b1 needs 100 units while b0 holds 100
    of 150. b0 is the only victim: one spill, traffic 100 (COPY_IN-backed: Size once), and it is
    reloaded before VEC_B once FREE(b1) has made room.
    """
    inst = tiny("reload_reuse")
    small = Hardware(capacity={"UB": 150})
    order = list_schedule(inst, "program", program_rank(inst))
    solution = place(inst, order, small)
    result = evaluate(inst, solution, 2, small)
    assert result.valid, result.violations
    assert (result.spill_count, result.extra_traffic_units) == (1, 100)
    assert solution.spills[0].buf_id == 0


def test_packing_not_spilling():
    """sequential: b0 and b1 (10 each) never live together, so UB = 10 holds both at offset 0."""
    inst = tiny("sequential")
    small = Hardware(capacity={"UB": 10})
    solution = place(inst, list(range(6)), small)
    result = evaluate(inst, solution, 2, small)
    assert result.valid and result.spill_count == 0
    assert dict(solution.offsets) == {0: 0, 1: 0}


def test_op_larger_than_its_memory_is_refused():
    """EXP uses b0 and b1 (5 each): with UB = 8 no placement exists."""
    inst = tiny("example7")
    with pytest.raises(PlacementError, match="uses 10 units of UB, more than its capacity 8"):
        place(inst, list(range(7)), Hardware(capacity={"UB": 8}))


def test_fragmentation_is_resolved_by_moving_a_pinned_buffer():
    """UB = 20 holds d (8), c (4) and e (8) side by side: [0, 8), [8, 12), [12, 20).

    X uses c and a new b (8). Every 8-unit window overlaps c or another buffer, and c is pinned
    (X needs it). Whatever the placer spills to make room, possibly c itself (then reloaded
    before X), the result must be valid."""
    nodes = [
        {"Id": 0, "Op": "ALLOC", "BufId": 0, "Size": 8, "Type": "UB"},  # d
        {"Id": 1, "Op": "ALLOC", "BufId": 1, "Size": 4, "Type": "UB"},  # c
        {"Id": 2, "Op": "ALLOC", "BufId": 2, "Size": 8, "Type": "UB"},  # e
        {"Id": 3, "Op": "W", "Pipe": "VECTOR", "Cycles": 5, "Bufs": [0, 1, 2]},
        {"Id": 4, "Op": "ALLOC", "BufId": 3, "Size": 8, "Type": "UB"},  # b
        {"Id": 5, "Op": "X", "Pipe": "VECTOR", "Cycles": 5, "Bufs": [1, 3]},
        {"Id": 6, "Op": "Y", "Pipe": "VECTOR", "Cycles": 5, "Bufs": [0, 2]},
        {"Id": 7, "Op": "FREE", "BufId": 3, "Size": 8, "Type": "UB"},
        {"Id": 8, "Op": "FREE", "BufId": 1, "Size": 4, "Type": "UB"},
        {"Id": 9, "Op": "FREE", "BufId": 0, "Size": 8, "Type": "UB"},
        {"Id": 10, "Op": "FREE", "BufId": 2, "Size": 8, "Type": "UB"},
    ]
    edges = [
        [0, 3],
        [1, 3],
        [2, 3],
        [3, 5],
        [4, 5],
        [5, 7],
        [5, 8],
        [3, 6],
        [5, 6],
        [6, 9],
        [6, 10],
        [0, 9],
        [1, 8],
        [2, 10],
        [4, 7],
    ]
    inst = parse_instance({"Nodes": nodes, "Edges": edges})
    hw = Hardware(capacity={"UB": 20})
    for policy in PLACEMENT_POLICIES:
        result = evaluate(inst, place(inst, list(range(11)), hw, policy), 2, hw)
        assert result.valid, (policy, result.violations)


@given(instances())
def test_random_instances_place_validly(inst):
    order = list_schedule(inst, "program", program_rank(inst))
    if order is None:
        return
    for policy in PLACEMENT_POLICIES:
        try:
            solution = place(inst, order, HARDWARE, policy)
        except PlacementError as exc:
            assert "more than its capacity" in str(exc)
            return
        result = evaluate(inst, solution, 2, HARDWARE)
        assert result.valid, (policy, result.violations)
