"""The generators: valid graphs for every family and seed, reproducible from the seed, sized by
--nodes, with the official cases' structure where the family copies one."""

from __future__ import annotations

from collections import Counter

import pytest

from npuopt.instances.generator import FAMILIES, OP_L1_UNITS, generate
from npuopt.solver.hardware import DEFAULT_HARDWARE
from npuopt.solver.instance import parse_instance


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


@pytest.mark.parametrize("family", FAMILIES)
def test_same_seed_same_graph(family):
    assert generate(family, seed=4, nodes=500) == generate(family, seed=4, nodes=500)
    if family not in ("matmul",):  # matmul's only randomness is a few cycles of jitter
        assert generate(family, seed=4, nodes=500) != generate(family, seed=5, nodes=500)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("nodes", [120, 1500])
def test_every_family_validates_and_fits(family, seed, nodes):
    """Every family and seed gives a graph the validator accepts, of about the size asked,
    whose ops each fit their memories (so Problem 2 is feasible), in program (id) order."""
    inst = parse_instance(generate(family, seed=seed, nodes=nodes))
    assert 0.3 * nodes <= inst.n_nodes <= 2.5 * nodes
    assert all(a < b for a, b in inst.edges)
    for v in inst.op_ids:
        need = Counter()
        for b in inst.bufs_of(v):
            need[inst.buffers[b].memory] += inst.buffers[b].size_units
        assert all(units <= DEFAULT_HARDWARE.capacity(m) for m, units in need.items())


def test_matmul_has_the_official_shape():
    """8 x 8 x 8 blocks: the node and op counts of Matmul_Case0 (4,160 nodes: 128 COPY_IN,
    1,024 MOVE, 512 MATMUL, 64 COPY_OUT; 128 L1, 512 L0A, 512 L0B, 64 L0C buffers)."""
    inst = parse_instance(generate("matmul", seed=0, m=8, n=8, k=8))
    assert inst.n_nodes == 4_160
    ops = Counter(inst.nodes[v].op for v in inst.op_ids)
    assert ops == {"COPY_IN": 128, "MOVE": 1_024, "MATMUL": 512, "COPY_OUT": 64}
    memories = Counter(buf.memory for buf in inst.buffers.values())
    assert memories == {"L1": 128, "L0A": 512, "L0B": 512, "L0C": 64}


def test_compose_chains_its_parts():
    """compose = matmul, then flashattention, then conv: each part's loads wait for the
    stores of the part before, so the graph is one piece and every part's ops appear."""
    inst = parse_instance(generate("compose", seed=2, nodes=900))
    ops = {inst.nodes[v].op for v in inst.op_ids}
    assert {"MATMUL", "ROWMAX", "CONV"} <= ops
    stores = {v for v in inst.op_ids if inst.nodes[v].op == "COPY_OUT"}
    crossing = [(a, b) for a, b in inst.edges if a in stores and inst.nodes[b].op == "COPY_IN"]
    assert crossing


def test_unknown_parameter_names_the_fields():
    with pytest.raises(ValueError, match="MatmulShape has no parameter 'q'; it has m, n, k"):
        generate("matmul", seed=0, q=3)


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
