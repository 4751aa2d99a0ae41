"""Renamings: the same graph under other ids (renumber) and graphs side by side (union)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from npuopt.instances.generator import FAMILIES, generate
from npuopt.instances.transform import random_topological_order, renumber, union
from npuopt.solver.instance import parse_instance


def _shape(graph):
    """What renaming keeps: the multiset of node contents with names taken out, and the edge
    count."""
    kinds = Counter(
        (
            n["Op"],
            n.get("Pipe"),
            n.get("Cycles"),
            n.get("Size"),
            n.get("Type"),
            len(n.get("Bufs", ())),
        )
        for n in graph["Nodes"]
    )
    return kinds, len({tuple(e) for e in graph["Edges"]})


@pytest.mark.parametrize("family", FAMILIES)
def test_renumber_keeps_the_graph_and_numbers_topologically(family):
    graph = generate(family, seed=2, nodes=400)
    copy = renumber(graph, seed=7)
    parse_instance(copy)  # still valid
    assert _shape(copy) == _shape(graph)
    assert all(a < b for a, b in copy["Edges"])  # ids are a topological order
    assert copy != graph
    assert renumber(graph, seed=7) == copy  # seeded
    assert renumber(graph, seed=8) != copy


def test_renumber_maps_buffers_consistently():
    """Every op still uses buffers of the sizes it used, and each buffer's ALLOC/FREE agree."""
    graph = generate("conv", seed=1, nodes=300)
    copy = parse_instance(renumber(graph, seed=3))
    original = parse_instance(graph)
    assert sorted(
        (b.memory, b.size_units, len(b.users), b.copy_in_backed) for b in copy.buffers.values()
    ) == sorted(
        (b.memory, b.size_units, len(b.users), b.copy_in_backed) for b in original.buffers.values()
    )


def test_union_holds_both_parts_with_no_edge_between():
    a, b = generate("conv", seed=1, nodes=200), generate("matmul", seed=1, nodes=300)
    both = union([a, b], seed=4)
    inst = parse_instance(both)
    assert inst.n_nodes == len(a["Nodes"]) + len(b["Nodes"])
    assert len(inst.buffers) == len(parse_instance(a).buffers) + len(parse_instance(b).buffers)
    shape_a, shape_b, shape = _shape(a), _shape(b), _shape(both)
    assert shape[0] == shape_a[0] + shape_b[0] and shape[1] == shape_a[1] + shape_b[1]
    # The ids interleave: the parts' id ranges overlap.
    conv = [n["Id"] for n in both["Nodes"] if n.get("Op") == "CONV"]
    matmul = [n["Id"] for n in both["Nodes"] if n.get("Op") == "MATMUL"]
    assert min(conv) < max(matmul) and min(matmul) < max(conv)


def test_union_needs_a_graph():
    with pytest.raises(ValueError, match="at least one"):
        union([], seed=0)


@settings(max_examples=50, deadline=None)
@given(st.integers(2, 30), st.integers(0, 2**31 - 1))
def test_random_topological_order_respects_edges(n, seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    edges = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.2]
    order = random_topological_order(n, edges, np.random.default_rng(seed))
    position = {v: p for p, v in enumerate(order)}
    assert sorted(order) == list(range(n))
    assert all(position[a] < position[b] for a, b in edges)


def test_random_topological_order_refuses_a_cycle():
    import numpy as np

    with pytest.raises(ValueError, match="cycle"):
        random_topological_order(3, [(0, 1), (1, 2), (2, 0)], np.random.default_rng(0))
