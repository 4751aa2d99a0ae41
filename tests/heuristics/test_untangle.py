"""Untangling (heuristics.untangle): independent parts of a window run one after another."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npuopt.heuristics.generators import GENERATORS, generator_task, structure_of
from npuopt.heuristics.structure import op_graph
from npuopt.heuristics.untangle import untangle, untangle_excess, untangled_window
from npuopt.instances.generator import generate
from npuopt.instances.transform import renumber
from npuopt.solver.case import SolveOptions
from npuopt.solver.evaluate import evaluate_order
from npuopt.solver.hardware import Hardware
from npuopt.solver.instance import parse_instance
from npuopt.solver.solution import op_profile, schedule_from_op_order
from npuopt.solver.stages.placement import _untangled

from helpers import assert_keeps_paths, official
from strategies import instances


def _two_parts():
    """A load L writes S (1), read by a1 and b1; a1 writes A (10), read by a2; b1 writes B
    (10), read by b2. Interleaved (L a1 b1 a2 b2), A and B are live together (21 at b1); part
    after part (L a1 a2 b1 b2), A is gone before B opens (11)."""

    def buffer(i, op, buf, size):
        return {"Id": i, "Op": op, "BufId": buf, "Size": size, "Type": "UB"}

    def op(i, name, pipe, bufs):
        return {"Id": i, "Op": name, "Pipe": pipe, "Cycles": 1, "Bufs": bufs}

    nodes = [
        buffer(0, "ALLOC", 0, 1),
        op(1, "COPY_IN", "MTE2", [0]),  # L
        buffer(2, "ALLOC", 1, 10),
        op(3, "VEC", "VECTOR", [0, 1]),  # a1
        buffer(4, "ALLOC", 2, 10),
        op(5, "VEC", "VECTOR", [0, 2]),  # b1
        op(6, "VEC", "VECTOR", [1]),  # a2
        op(7, "VEC", "VECTOR", [2]),  # b2
        *(buffer(i, "FREE", b, s) for i, b, s in ((8, 0, 1), (9, 1, 10), (10, 2, 10))),
    ]
    edges = [[0, 1], [1, 3], [1, 5], [2, 3], [4, 5], [3, 6], [5, 7], [3, 8], [5, 8]]
    edges += [[6, 9], [7, 10]]
    return parse_instance({"Nodes": nodes, "Edges": edges})


def test_untangle_runs_independent_parts_one_after_another():
    inst = _two_parts()
    graph = op_graph(inst)
    tangled = [1, 3, 5, 6, 7]
    assert op_profile(inst, tangled).max() == 21
    found = untangle(inst, graph, tangled)
    assert found == [1, 3, 6, 5, 7]
    assert op_profile(inst, found).max() == 11
    # Without the load, the same parts; a window of one part is left alone.
    assert untangled_window(graph, tangled, 1, 5) == found
    assert untangled_window(graph, tangled, 3, 4) is None
    assert untangled_window(graph, tangled, 0, 2) is None


def test_untangle_excess_lowers_what_overflows_a_capacity():
    """With UB at 10 units, the interleaved order has 1 + 11 + 10 live units above it at a1,
    b1 and a2; part after part, 1 at each of L's users and a2."""
    inst = _two_parts()
    graph = op_graph(inst)
    found = untangle_excess(inst, graph, [1, 3, 5, 6, 7], {"UB": 10})
    assert found == [1, 3, 6, 5, 7]
    # Nothing above capacity, nothing to do; a memory without a capacity is not looked at.
    assert untangle_excess(inst, graph, [1, 3, 5, 6, 7], {"UB": 21}) == [1, 3, 5, 6, 7]
    assert untangle_excess(inst, graph, [1, 3, 5, 6, 7], {"L1": 1}) == [1, 3, 5, 6, 7]


def test_untangling_may_break_l0_residency_and_problem_2_then_keeps_its_order():
    """A MOVE fills X (L0A), read by a1 and b1; a2 uses Y (L0A). Untangled, a1 a2 b1 b2 opens
    Y while X waits for b1: not a valid Problem 1 schedule, so Problem 2 keeps the order."""

    def buffer(i, op, buf, size, memory):
        return {"Id": i, "Op": op, "BufId": buf, "Size": size, "Type": memory}

    def op(i, pipe, bufs):
        return {"Id": i, "Op": "VEC", "Pipe": pipe, "Cycles": 1, "Bufs": bufs}

    nodes = [
        *(buffer(0, "ALLOC", 0, 1, "L0A"), op(1, "MTE1", [0])),
        *(buffer(2, "ALLOC", 1, 10, "UB"), op(3, "VECTOR", [0, 1])),
        *(buffer(4, "ALLOC", 2, 10, "UB"), op(5, "VECTOR", [0, 2])),
        *(buffer(6, "ALLOC", 3, 1, "L0A"), op(7, "VECTOR", [1, 3]), op(8, "VECTOR", [2])),
        *(buffer(i, "FREE", b, s, m) for i, b, s, m in ((9, 0, 1, "L0A"), (10, 1, 10, "UB"))),
        *(buffer(i, "FREE", b, s, m) for i, b, s, m in ((11, 2, 10, "UB"), (12, 3, 1, "L0A"))),
    ]
    edges = [[0, 1], [1, 3], [1, 5], [2, 3], [4, 5], [3, 7], [6, 7], [5, 8], [3, 9], [5, 9]]
    edges += [[7, 10], [8, 11], [7, 12]]
    inst = parse_instance({"Nodes": nodes, "Edges": edges})
    tangled = [1, 3, 5, 7, 8]
    found = untangle(inst, op_graph(inst), tangled)
    assert found == [1, 3, 7, 5, 8]
    assert not evaluate_order(inst, schedule_from_op_order(inst, found)).valid
    order = schedule_from_op_order(inst, tangled)
    options = SolveOptions(hardware=Hardware(capacity={"UB": 10}))
    assert _untangled(inst, options, "listed", order) == ("listed", order)


@settings(max_examples=80, deadline=None)
@given(instances(), st.integers(0, 2**16))
def test_untangle_keeps_every_path_and_never_raises_the_peak(inst, seed):
    graph = op_graph(inst)
    # A random order of the ops that keeps every path (ready ops drawn at random).
    rng = random.Random(seed)
    left = {v: len(graph.pred[v]) for v in inst.op_ids}
    ready = [v for v, k in left.items() if k == 0]
    order: list[int] = []
    while ready:
        v = ready.pop(rng.randrange(len(ready)))
        order.append(v)
        for w in graph.succ[v]:
            left[w] -= 1
            if left[w] == 0:
                ready.append(w)
    peak = op_profile(inst, order).max(initial=0)
    for found in (untangle(inst, graph, order), untangle_excess(inst, graph, order, {"UB": 6})):
        assert_keeps_paths(inst, found)
        assert op_profile(inst, found).max(initial=0) <= peak


def test_portfolio_runs_are_untangled_and_name_free():
    """Issue 21: a portfolio run (generator, then untangling) has the same peak whatever the
    ids, and never a higher one than the generator's own order."""
    graph = generate("conv", seed=3, nodes=700)
    a, b = parse_instance(graph), parse_instance(renumber(graph, seed=4))
    structure = structure_of(a)
    for name in ("cone", "cone-net", "blocks"):
        for variant in (0, 1):
            found = generator_task(a, name, variant)
            assert_keeps_paths(a, found)
            peak = op_profile(a, found).max()
            assert peak <= op_profile(a, GENERATORS[name](a, structure, variant)).max()
            assert peak == op_profile(b, generator_task(b, name, variant)).max()


@pytest.mark.slow
def test_untangle_runs_conv_case1_position_by_position():
    """Conv_Case1's ``cone-net`` order takes twelve independent positions output channel by
    output channel (5,586 by first and last use); untangled, 4,800."""
    inst = official("Conv_Case1")
    structure = structure_of(inst)
    raw = GENERATORS["cone-net"](inst, structure, 0)
    assert op_profile(inst, raw).max() == 5586
    assert op_profile(inst, untangle(inst, structure.graph, raw)).max() == 4800
