"""Structural classes, op units and weak components (heuristics.structure): nothing here may
depend on how the nodes are numbered."""

from __future__ import annotations

import pytest

from npuopt.heuristics.structure import op_units, structural_classes, weak_components
from npuopt.instances.generator import FAMILIES, generate
from npuopt.instances.transform import renumbering, union
from npuopt.solver.instance import parse_instance

from helpers import tiny


@pytest.mark.parametrize("family", FAMILIES)
def test_classes_follow_the_nodes_through_a_renumbering(family):
    """The class of a node is the class of its image: classes are names of structure, not of
    ids."""
    graph = generate(family, seed=3, nodes=500)
    copy, image = renumbering(graph, seed=11)
    ours, theirs = (
        structural_classes(parse_instance(graph)),
        structural_classes(parse_instance(copy)),
    )
    assert all(ours[v] == theirs[image[v]] for v in range(len(ours)))


def test_classes_tell_apart_what_differs_and_join_what_is_alike():
    """example7: the two COPY_INs of equal size and cycles, loading buffers used alike, share a
    class; an ALLOC never shares one with an op or a FREE."""
    inst = tiny("example7")
    classes = structural_classes(inst)
    kinds = {}
    for v in range(inst.n_nodes):
        kinds.setdefault(classes[v], set()).add(inst.nodes[v].op)
    assert all(len(ops) == 1 for ops in kinds.values())  # a class is one kind of node


def test_op_units_group_ops_through_l0_buffers():
    """Matmul: an output block's MATMULs, MOVEs and COPY_OUT share L0 buffers: one unit each;
    the COPY_INs (L1 only) are alone."""
    inst = parse_instance(generate("matmul", 1, m=2, n=3, k=2))
    units = op_units(inst)
    assert sorted(map(len, units)).count(1) == sum(
        1 for v in inst.op_ids if inst.nodes[v].op == "COPY_IN"
    )
    big = [u for u in units if len(u) > 1]
    assert len(big) == 2 * 3  # one per output block
    assert sorted(u for unit in units for u in unit) == sorted(inst.op_ids)


def test_weak_components_of_a_union_are_its_parts():
    a, b = generate("conv", 1, nodes=200), generate("flashattention", 1, nodes=300)
    inst = parse_instance(union([a, b, a], seed=2))
    parts = weak_components(inst)
    assert sorted(map(len, parts)) == sorted([len(a["Nodes"]), len(a["Nodes"]), len(b["Nodes"])])
    assert [len(p) for p in parts] == sorted((len(p) for p in parts), reverse=True)
    assert len(weak_components(parse_instance(a))) == 1
