"""Bounds: reference figures of issue 2 and brute-force checks on random DAGs."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from instances import OFFICIAL_CASES
from solver.bounds import (
    critical_path,
    forced_live_units,
    makespan_bound,
    op_local_bound,
    order_bound,
)
from solver.evaluate import evaluate
from solver.solution import Solution

from helpers import official, tiny
from strategies import HARDWARE, instances, placements, random_topological_order

REFERENCE = {  # case: (max pipe load, busiest pipe, op-local V_stay bound)
    "Conv_Case0": (348_677, "CUBE", 3_072),
    "FlashAttention_Case0": (25_600, "VECTOR", 384),
    "FlashAttention_Case1": (104_960, "VECTOR", 384),
    "Matmul_Case0": (65_536, "CUBE", 128),
    "Matmul_Case1": (524_288, "CUBE", 128),
}


@pytest.mark.parametrize("name", OFFICIAL_CASES)
def test_reference_bounds(name):
    inst = official(name)
    load, pipe, op_local = REFERENCE[name]
    bound = makespan_bound(inst)
    assert (max(bound.pipe_loads.values()), bound.busiest_pipe) == (load, pipe)
    assert op_local_bound(inst) == op_local
    # FINDINGS: on these cases the forced-live bound equals the op-local one.
    assert order_bound(inst).units == op_local


def test_example_bounds():
    """EXP uses b0 and b1 (UB, 5 each): op-local 10. Critical path COPY_IN 15 + EXP 30 +
    COPY_OUT 15 = 60; busiest pipe VECTOR 30; with one spill of b0, MTE2 carries 15 + 160."""
    inst = tiny("example7")
    assert order_bound(inst).units == 10
    assert makespan_bound(inst).cycles == 60
    assert makespan_bound(inst).critical_path_cycles == 60


def _graph(inst):
    g = nx.DiGraph()
    g.add_nodes_from(range(inst.n_nodes))
    g.add_edges_from(inst.edges)
    return g


@given(instances())
def test_forced_live_matches_brute_force(inst):
    g = _graph(inst)
    expected = []
    for v in range(inst.n_nodes):
        up, down = nx.ancestors(g, v) | {v}, nx.descendants(g, v) | {v}
        expected.append(
            sum(
                buf.size_units
                for buf in inst.buffers.values()
                if buf.memory in ("L1", "UB") and buf.alloc in up and buf.free in down
            )
        )
    assert forced_live_units(inst).tolist() == expected


@given(instances(), st.data())
def test_forced_live_bound_is_valid(inst, data):
    """No order respecting the edges has a max V_stay below the forced-live bound."""
    order = random_topological_order(data.draw, inst)
    result = evaluate(inst, Solution(order=tuple(order)), 1)
    assert result.max_v_stay_units >= order_bound(inst).units


@given(instances())
def test_critical_path_matches_networkx(inst):
    """Node weights as edge weights: u -> v weighs cycles(u), and v -> sink weighs cycles(v)."""
    g = nx.DiGraph()
    for a, b in inst.edges:
        g.add_edge(a, b, w=int(inst.cycles[a]))
    for v in range(inst.n_nodes):
        g.add_edge(v, "sink", w=int(inst.cycles[v]))
    assert critical_path(inst) == nx.dag_longest_path_length(g, weight="w")


@given(placements(disjoint=True))
def test_makespan_bound_holds_for_valid_solutions(case):
    inst, sol = case
    result = evaluate(inst, sol, 2, HARDWARE)
    if result.valid:
        assert result.makespan_cycles >= makespan_bound(inst, sol).cycles
