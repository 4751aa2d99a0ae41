"""Stream-grouped orders (heuristics.streams)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from npuopt.heuristics.placement import place
from npuopt.heuristics.streams import grouped_op_order, hoist_loads, stream_of
from npuopt.heuristics.traversal import estimate_traffic
from npuopt.instances.generator import generate
from npuopt.solver.evaluate import evaluate
from npuopt.solver.hardware import DEFAULT_HARDWARE
from npuopt.solver.instance import parse_instance
from npuopt.solver.solution import op_order_of, op_successors, schedule_from_op_order

from helpers import official
from strategies import HARDWARE, instances, random_topological_order


def _flash(rows: int, cols: int):
    data = generate("flashattention", 1, rows=rows, cols=cols)
    return parse_instance(data, name=f"flash_{rows}x{cols}", source="generated")


def _round_robin(instance, streams):
    """The ops of every stream taken in turn (their i-th ops, then their (i+1)-th ...), COPY_INs
    first: how a Problem 1 order sweeps one key/value block across all query rows."""
    seen: dict[int, int] = {}
    step = {}
    for v in op_order_of(instance, instance.topological_order):
        if v in streams:
            seen[streams[v]] = step[v] = seen.get(streams[v], -1) + 1
    ops = op_order_of(instance, instance.topological_order)
    return sorted(ops, key=lambda v: (step.get(v, -1), streams.get(v, -1)))


def test_flashattention_streams_are_its_query_rows():
    """The generator's FlashAttention: one stream per query row block, of equal size."""
    inst = _flash(3, 4)
    streams = stream_of(inst)
    sizes = [list(streams.values()).count(s) for s in set(streams.values())]
    assert len(sizes) == 3 and len(set(sizes)) == 1
    copy_ins = {v for v in inst.op_ids if inst.nodes[v].op == "COPY_IN"}
    assert set(streams) == set(inst.op_ids) - copy_ins


def test_groups_of_two_need_no_spill_where_all_rows_at_once_do():
    """4x4 FlashAttention with every row in flight (round robin) overflows UB and L1; two rows at
    a time fit. The estimate and the placement agree on which is cheaper."""
    inst = _flash(4, 4)
    streams = stream_of(inst)
    base = _round_robin(inst, streams)
    traffic = {}
    for size in (2, 4):
        op_order = grouped_op_order(inst, base, streams, size)
        placed = place(inst, schedule_from_op_order(inst, op_order), DEFAULT_HARDWARE, "rotate")
        result = evaluate(inst, placed, 2, DEFAULT_HARDWARE)
        assert result.valid, result.violations[:1]
        traffic[size] = (
            estimate_traffic(inst, op_order, DEFAULT_HARDWARE),
            result.extra_traffic_units,
        )
    assert traffic[4][0] > 0 and traffic[4][1] > 0
    assert traffic[2][0] < traffic[4][0] and traffic[2][1] < traffic[4][1]


def test_groups_run_one_after_another():
    """Leaving the COPY_INs aside, a group's streams finish before the next group's start."""
    inst = _flash(5, 3)
    streams = stream_of(inst)
    base = _round_robin(inst, streams)
    rank = {}
    for v in base:
        if v in streams:
            rank.setdefault(streams[v], len(rank))
    order = grouped_op_order(inst, base, streams, 2)
    groups = [rank[streams[v]] // 2 for v in order if v in streams]
    assert groups == sorted(groups) and groups[-1] == 2


@given(instances(), st.integers(1, 4), st.data())
def test_grouped_orders_respect_the_graph(inst, size, data):
    """From any valid base order: a permutation of the ops that respects every edge, or a
    ValueError when a COPY_IN waits for an op that the grouping moved after it."""
    streams = stream_of(inst)
    base = op_order_of(inst, random_topological_order(data.draw, inst))
    try:
        op_order = grouped_op_order(inst, base, streams, size)
    except ValueError:
        after = op_successors(inst)
        assert any(w not in streams for v in streams for w in after[v]), (
            "only a COPY_IN after a stream op can make the grouping fail"
        )
        return
    assert sorted(op_order) == sorted(inst.op_ids)
    order = schedule_from_op_order(inst, op_order)
    assert op_order_of(inst, order) == op_order  # no op had to be pulled forward
    at = {v: i for i, v in enumerate(order)}
    assert all(at[a] < at[b] for a, b in inst.edges)


def test_a_base_missing_ops_is_refused():
    inst = _flash(2, 2)
    streams = stream_of(inst)
    with pytest.raises(ValueError, match="every op once"):
        grouped_op_order(inst, sorted(streams), streams, 1)
    with pytest.raises(ValueError, match="at least 1"):
        grouped_op_order(inst, op_order_of(inst, inst.topological_order), streams, 0)


def test_flashattention_case1_groups_of_two():
    """The official case sweeps key/value blocks across its 8 query rows; in groups of two the
    estimate falls below half of the Problem 1 shape's (16,384 against 33,000 and more when this
    was written)."""
    inst = official("FlashAttention_Case1")
    streams = stream_of(inst)
    assert len(set(streams.values())) == 8
    base = op_order_of(inst, inst.topological_order)
    estimate = {
        size: estimate_traffic(inst, grouped_op_order(inst, base, streams, size), DEFAULT_HARDWARE)
        for size in (2, 8)
    }
    assert 2 * estimate[2] < estimate[8]


def _ops_before(order, v, streams):
    """Stream ops ahead of ``v`` in ``order``."""
    return sum(1 for u in order[: order.index(v)] if u in streams)


def test_hoisting_moves_loads_up_at_the_same_estimate():
    """4x4 FlashAttention in groups of two: COPY_INs move up (none down), the other ops keep
    their order, and the estimated traffic does not grow."""
    inst = _flash(4, 4)
    streams = stream_of(inst)
    grouped = grouped_op_order(inst, _round_robin(inst, streams), streams, 2)
    hoisted = hoist_loads(inst, grouped, DEFAULT_HARDWARE)
    assert sorted(hoisted) == sorted(grouped)
    assert [v for v in hoisted if v in streams] == [v for v in grouped if v in streams]
    loads = [v for v in grouped if v not in streams]
    ahead = [(_ops_before(hoisted, v, streams), _ops_before(grouped, v, streams)) for v in loads]
    assert all(now <= before for now, before in ahead)
    assert any(now < before for now, before in ahead)
    budget = estimate_traffic(inst, grouped, DEFAULT_HARDWARE)
    assert estimate_traffic(inst, hoisted, DEFAULT_HARDWARE) <= budget
    assert hoist_loads(inst, grouped, DEFAULT_HARDWARE, max_estimates=0) == grouped


@given(instances(), st.data())
def test_hoisted_orders_respect_the_graph(inst, data):
    base = op_order_of(inst, random_topological_order(data.draw, inst))
    hoisted = hoist_loads(inst, base, HARDWARE, max_lead=data.draw(st.integers(1, 40)))
    assert sorted(hoisted) == sorted(base)
    assert estimate_traffic(inst, hoisted, HARDWARE) <= estimate_traffic(inst, base, HARDWARE)
    order = schedule_from_op_order(inst, hoisted)
    assert op_order_of(inst, order) == hoisted
    at = {v: i for i, v in enumerate(order)}
    assert all(at[a] < at[b] for a, b in inst.edges)
