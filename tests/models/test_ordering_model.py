"""CP-SAT ordering model (Problem 1): optimality against brute force, windows, infeasibility."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npuopt.heuristics.ordering import list_schedule, program_rank
from npuopt.models.ordering import OrderingData, solve_order
from npuopt.solver.evaluate import evaluate_order
from npuopt.solver.instance import parse_instance
from npuopt.solver.result import Status
from npuopt.solver.solution import op_order_of

from helpers import TINY, brute_force_optimum, tiny
from strategies import instances


def small_instances():
    return instances().filter(lambda inst: inst.n_nodes <= 10)


@settings(max_examples=60)
@given(small_instances())
def test_full_model_matches_brute_force(inst):
    """On graphs of at most 10 nodes the full model's proven optimum is the true optimum."""
    start = list_schedule(inst, "program", program_rank(inst))
    expected = brute_force_optimum(inst)
    if start is None:  # no valid order exists (e.g. an op with two new L0A buffers)
        assert expected is None
        return
    result = solve_order(OrderingData(inst), op_order_of(inst, start), time_limit_s=10)
    assert result.status is Status.OPTIMAL
    assert result.objective == expected
    check = evaluate_order(inst, result.solution.order)
    assert check.valid and check.max_v_stay_units == result.objective


@settings(max_examples=40)
@given(instances(), st.data())
def test_window_optimum_matches_enumeration(inst, data):
    """A window's optimum equals the best of every re-ordering of the window's ops over the
    slots they hold (the other ops fixed)."""
    start = list_schedule(inst, "program", program_rank(inst))
    if start is None:
        return
    ops = list(op_order_of(inst, start))
    k = data.draw(st.integers(1, min(5, len(ops))))
    first = data.draw(st.integers(0, len(ops) - k))
    window = ops[first : first + k]
    best = None
    for perm in itertools.permutations(window):
        candidate = ops[:first] + list(perm) + ops[first + k :]
        from npuopt.solver.solution import schedule_from_op_order

        try:
            schedule = schedule_from_op_order(inst, candidate)
        except ValueError:
            continue
        result = evaluate_order(inst, schedule)
        if result.valid and (best is None or result.max_v_stay_units < best):
            best = result.max_v_stay_units
    got = solve_order(OrderingData(inst), ops, window, time_limit_s=10)
    assert got.status is Status.OPTIMAL
    assert got.objective == best
    assert evaluate_order(inst, got.solution.order).max_v_stay_units == got.objective


@pytest.mark.parametrize("name", TINY)
def test_model_objective_equals_evaluator(name):
    inst = tiny(name)
    start = list_schedule(inst, "program", program_rank(inst))
    result = solve_order(OrderingData(inst), op_order_of(inst, start), time_limit_s=5)
    assert result.status is Status.OPTIMAL
    check = evaluate_order(inst, result.solution.order)
    assert check.valid and check.max_v_stay_units == result.objective


def test_lower_bound_above_the_optimum_is_infeasible():
    """In l0_pair every order peaks at exactly 100 (buffer a, 100 units of L1, is live while
    either MOVE runs; L0 does not count). The window's peak is the cumulative's capacity, so a
    demanded peak of at least 101 cannot be met by any order: INFEASIBLE."""
    inst = tiny("l0_pair")
    start = op_order_of(inst, list_schedule(inst, "program", program_rank(inst)))
    result = solve_order(OrderingData(inst), start, time_limit_s=5, lower_bound=101)
    assert result.status is Status.INFEASIBLE


def test_fixed_bad_orders_are_infeasible():
    """With every op fixed (empty window) the model checks the order: l0_pair in the op order
    MOVE1, MOVE2 is fine (ALLOC d goes after FREE c), but an order that breaks an edge, or the
    good order demanded below its peak, is INFEASIBLE."""
    inst = tiny("l0_pair")
    data = OrderingData(inst)
    assert solve_order(data, [3, 4], window=set()).status is Status.OPTIMAL
    assert solve_order(data, [4, 3], window=set()).status is Status.OPTIMAL  # no edge 3 -> 4
    chain = tiny("respill")  # COPY_IN 1 -> V1 2 -> V2 3
    assert solve_order(OrderingData(chain), [2, 1, 3], window=set()).status is Status.INFEASIBLE
    assert solve_order(data, [3, 4], window=set(), lower_bound=101).status is Status.INFEASIBLE


def test_overlapping_l0_buffers_in_a_fixed_order_are_infeasible():
    """Two MOVEs each writing an L0A buffer read by one MATMUL: in the op order MOVE1, MOVE2,
    MATMUL both L0A buffers are live at once, which breaks single residency."""
    nodes = [
        {"Id": 0, "Op": "ALLOC", "BufId": 0, "Size": 8, "Type": "L0A"},
        {"Id": 1, "Op": "ALLOC", "BufId": 1, "Size": 8, "Type": "L0A"},
        {"Id": 2, "Op": "MOVE", "Pipe": "MTE1", "Cycles": 1, "Bufs": [0]},
        {"Id": 3, "Op": "MOVE", "Pipe": "MTE1", "Cycles": 1, "Bufs": [1]},
        {"Id": 4, "Op": "USE", "Pipe": "CUBE", "Cycles": 1, "Bufs": [0]},
        {"Id": 5, "Op": "USE", "Pipe": "CUBE", "Cycles": 1, "Bufs": [1]},
        {"Id": 6, "Op": "FREE", "BufId": 0, "Size": 8, "Type": "L0A"},
        {"Id": 7, "Op": "FREE", "BufId": 1, "Size": 8, "Type": "L0A"},
    ]
    edges = [[0, 2], [2, 4], [4, 6], [1, 3], [3, 5], [5, 7], [0, 6], [1, 7]]
    inst = parse_instance({"Nodes": nodes, "Edges": edges})
    data = OrderingData(inst)
    assert solve_order(data, [2, 4, 3, 5], window=set()).status is Status.OPTIMAL
    assert solve_order(data, [2, 3, 4, 5], window=set()).status is Status.INFEASIBLE
    assert solve_order(data, [2, 3, 4, 5], time_limit_s=5).status is Status.OPTIMAL


@pytest.mark.parametrize("tie_break", [True, False])
def test_bound_is_in_peak_units(tie_break):
    """The returned bound bounds the peak, whatever objective weights the model uses."""
    inst = tiny("reload_reuse")
    start = op_order_of(inst, list_schedule(inst, "program", program_rank(inst)))
    result = solve_order(OrderingData(inst), start, time_limit_s=5, tie_break=tie_break)
    assert result.status is Status.OPTIMAL
    assert result.bound == result.info["local_peak"] == result.objective
