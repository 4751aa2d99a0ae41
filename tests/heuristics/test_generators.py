"""Order generators (heuristics.generators): valid op orders, read from structure alone."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from npuopt.heuristics.generators import (
    GENERATORS,
    blocks_order,
    cone_order,
    generator_runs,
    structure_of,
)
from npuopt.heuristics.ordering import list_schedule, program_rank, rank_of
from npuopt.instances.generator import FAMILIES, generate
from npuopt.instances.transform import renumber
from npuopt.solver.evaluate import evaluate_order
from npuopt.solver.instance import graph_data, parse_instance
from npuopt.solver.solution import op_profile

from helpers import assert_keeps_paths, official
from strategies import instances


def _p1(instance, op_order):
    order = list_schedule(instance, "program", rank_of(instance, op_order))
    assert order is not None
    judged = evaluate_order(instance, tuple(order))
    assert judged.valid
    return judged.max_v_stay_units


@settings(max_examples=60, deadline=None)
@given(instances())
def test_every_generator_gives_an_order_of_the_ops_that_keeps_every_path(inst):
    structure = structure_of(inst)
    for generator in GENERATORS.values():
        for variant in (0, 1):
            assert_keeps_paths(inst, generator(inst, structure, variant))


@pytest.mark.parametrize("family", FAMILIES)
def test_generators_give_the_same_peak_on_a_renumbered_copy(family):
    """Issue 21: a generator's order, scheduled, has the same peak whatever the ids."""
    graph = generate(family, seed=5, nodes=700)
    a, b = parse_instance(graph), parse_instance(renumber(graph, seed=9))
    sa, sb = structure_of(a), structure_of(b)
    for name, generator in GENERATORS.items():
        assert _p1(a, generator(a, sa, 0)) == _p1(b, generator(b, sb, 0)), name


def test_cone_order_beats_the_id_order_on_a_layered_random_graph():
    """A layered random DAG written layer by layer: its ids keep every layer's outputs live at
    once (3,112 units), the cone order finishes consumers first (1,288)."""
    inst = parse_instance(generate("random", 0, nodes=600))
    by_ids = evaluate_order(inst, tuple(list_schedule(inst, "program", program_rank(inst))))
    assert _p1(inst, cone_order(inst, structure_of(inst))) < by_ids.max_v_stay_units


def test_cone_order_finds_the_proven_optimum_of_conv_case0():
    """Issue 21: Conv_Case0's optimum, 6,912 (proven by the relaxed sub-instance bound), from
    structure alone; its file's ids give 7,488 and a random renumbering of them 41,554."""
    inst = official("Conv_Case0")
    assert _p1(inst, cone_order(inst, structure_of(inst))) == 6912


def test_variants_and_granularity():
    inst = parse_instance(generate("flashattention", 1, nodes=500))
    structure = structure_of(inst)
    orders = {tuple(cone_order(inst, structure, v, g)) for v in range(4) for g in ("unit", "op")}
    assert len(orders) > 1  # the tie-break variants really differ
    with pytest.raises(ValueError, match="granularity"):
        cone_order(inst, structure, 0, "block")


def test_generator_runs_scale_with_the_graph():
    small = parse_instance(generate("conv", 1, nodes=300))
    large = parse_instance(generate("conv", 1, nodes=3000))
    assert generator_runs(small, 10) > generator_runs(large, 10) >= 1
    assert generator_runs(large, 0) == 1


def test_blocks_order_regroups_a_generated_flashattention_graph():
    """The ``blocks`` generator returns its ``cone-chain`` base unless a regrouping lowers the
    estimated peak; on this graph it does for every variant (2,462 or 2,590 -> 2,442)."""
    inst = parse_instance(generate("flashattention", 2, nodes=900))
    structure = structure_of(inst)
    for variant in range(3):
        base = cone_order(inst, structure, variant, by_height=True)
        order = blocks_order(inst, structure, variant)
        assert_keeps_paths(inst, order)
        assert op_profile(inst, order).max() < op_profile(inst, base).max()


def test_blocks_order_with_a_buffer_no_op_uses():
    """Two streams share a load; a UB buffer is allocated and freed with no user (valid input):
    the estimate counts it as never live instead of failing."""
    ops = [("COPY_IN", "MTE2", [0]), ("ADD", "VECTOR", [0, 1]), ("MUL", "VECTOR", [0, 2])]
    sizes = {0: ("L1", 4), 1: ("UB", 4), 2: ("UB", 4), 3: ("UB", 8)}
    nodes = [
        {"Id": i, "Op": op, "Pipe": pipe, "Cycles": 1, "Bufs": bufs}
        for i, (op, pipe, bufs) in enumerate(ops)
    ]
    edges = [[0, 1], [0, 2]]
    for b, (memory, size) in sizes.items():
        alloc, free = len(nodes), len(nodes) + 1
        for kind in ("ALLOC", "FREE"):
            nodes.append({"Id": len(nodes), "Op": kind, "BufId": b, "Size": size, "Type": memory})
        edges.append([alloc, free])
        for v, (_, _, bufs) in enumerate(ops):
            if b in bufs:
                edges += [[alloc, v], [v, free]]
    inst = parse_instance({"Nodes": nodes, "Edges": edges})
    order = blocks_order(inst, structure_of(inst))
    assert_keeps_paths(inst, order)
    # The load with one stream's UB buffer, then with the other's; the unused one never counts.
    assert op_profile(inst, order).max() == 8


def test_blocks_order_runs_flashattention_case1_a_block_at_a_time():
    """Issue 21: FlashAttention_Case1's rows finishing each key/value block in turn, found
    from structure: 7,714 from the cone-chain order's 8,752, the same on a renumbered copy (the
    file's own ids give 7,588)."""
    inst = official("FlashAttention_Case1")
    renamed = parse_instance(renumber(graph_data(inst), seed=3))
    peaks = []
    for instance in (inst, renamed):
        structure = structure_of(instance)
        chain = _p1(instance, cone_order(instance, structure, 2, by_height=True))
        peaks.append((chain, _p1(instance, blocks_order(instance, structure, 2))))
    assert peaks == [(8752, 7714), (8752, 7714)]


def test_cone_net_counts_what_a_unit_frees():
    """W writes A (50) and B (1). X reads A last and writes C (10); Y reads B and writes D (5);
    Z reads B, C and D. The plain cost takes Y first (it opens 5, X opens 10) and X runs with
    A, B, C and D live (66); counting frees, X (opens 10, frees 50) runs first (61)."""

    def buffer(i, op, buf, size):
        return {"Id": i, "Op": op, "BufId": buf, "Size": size, "Type": "UB"}

    def op(i, bufs):
        return {"Id": i, "Op": "VEC", "Pipe": "VECTOR", "Cycles": 1, "Bufs": bufs}

    nodes = [
        *(buffer(i, "ALLOC", b, s) for i, b, s in ((0, 0, 50), (1, 1, 1))),
        op(2, [0, 1]),  # W
        buffer(3, "ALLOC", 2, 10),
        op(4, [0, 2]),  # X
        buffer(5, "FREE", 0, 50),
        buffer(6, "ALLOC", 3, 5),
        op(7, [1, 3]),  # Y
        op(8, [1, 2, 3]),  # Z
        *(buffer(i, "FREE", b, s) for i, b, s in ((9, 1, 1), (10, 2, 10), (11, 3, 5))),
    ]
    edges = [[0, 2], [1, 2], [2, 4], [3, 4], [4, 5], [2, 7], [6, 7], [4, 8], [7, 8]]
    edges += [[8, 9], [8, 10], [8, 11]]
    inst = parse_instance({"Nodes": nodes, "Edges": edges})
    structure = structure_of(inst)
    assert cone_order(inst, structure) == [2, 7, 4, 8] and _p1(inst, [2, 7, 4, 8]) == 66
    assert cone_order(inst, structure, net=True) == [2, 4, 7, 8]
    assert _p1(inst, GENERATORS["cone-net"](inst, structure, 0)) == 61
