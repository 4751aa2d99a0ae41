"""The conv generator: valid graphs, reproducible from the seed, sized by --nodes."""

from __future__ import annotations

import pytest

from instances.generator import OP_L1_UNITS, generate
from solver.instance import parse_instance


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("nodes", [150, 600, 3000])
def test_generated_graphs_validate_and_fit(seed, nodes):
    inst = parse_instance(generate("conv", seed=seed, nodes=nodes))
    assert 0.5 * nodes <= inst.n_nodes <= 2.5 * nodes
    for v in inst.op_ids:  # every op fits L1, so Problem 2 is feasible
        l1 = sum(
            inst.buffers[b].size_units for b in inst.bufs_of(v) if inst.buffers[b].memory == "L1"
        )
        assert l1 <= OP_L1_UNITS
    assert {"COPY_IN", "MOVE", "CONV", "COPY_OUT"} <= {inst.nodes[v].op for v in inst.op_ids}


def test_same_seed_same_graph():
    assert generate("conv", seed=4, nodes=500) == generate("conv", seed=4, nodes=500)
    assert generate("conv", seed=4, nodes=500) != generate("conv", seed=5, nodes=500)


def test_ids_follow_program_order():
    """Node-id order is a topological order, as in the official cases."""
    inst = parse_instance(generate("conv", seed=1, nodes=800))
    assert all(a < b for a, b in inst.edges)


def test_unknown_family():
    with pytest.raises(ValueError, match="unknown family"):
        generate("lstm", seed=0)


@pytest.mark.slow
def test_conv_case1_scale():
    """About Conv_Case1's size (36,086 nodes, 85,653 edges)."""
    inst = parse_instance(generate("conv", seed=3, nodes=36_000))
    assert 34_000 <= inst.n_nodes <= 38_000
    assert 80_000 <= len(inst.edges) <= 95_000
