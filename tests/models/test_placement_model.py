"""CP-SAT placement with spill intervals (Problem 2, issue 5): forced spills, packing, layout
rules, infeasibility, windows, and agreement with the evaluator."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npuopt.heuristics.ordering import list_schedule, program_rank
from npuopt.heuristics.placement import PlacementError, place
from npuopt.instances.generator import generate
from npuopt.models.placement import solve_placement
from npuopt.solver.evaluate import evaluate, evaluate_order
from npuopt.solver.hardware import DEFAULT_HARDWARE, Hardware
from npuopt.solver.instance import Instance, parse_instance
from npuopt.solver.result import Status
from npuopt.solver.solution import Solution

from helpers import TINY, bank_hardware, tiny
from strategies import HARDWARE, instances, random_topological_order


def program_order(inst: Instance) -> Solution:
    return Solution(order=tuple(list_schedule(inst, "program", program_rank(inst))))


def check(inst: Instance, hardware: Hardware, result) -> None:
    """The model's solution is valid and its traffic is the evaluator's."""
    assert result.solution is not None
    judged = evaluate(inst, result.solution, 2, hardware)
    assert judged.valid, judged.violations
    assert judged.extra_traffic_units == result.objective
    assert judged.spill_count == result.info["spills"]


@pytest.mark.parametrize("name", TINY)
def test_every_fixture_placed_without_spills_at_contest_capacities(name):
    inst = tiny(name)
    result = solve_placement(inst, program_order(inst), DEFAULT_HARDWARE, time_limit_s=5)
    assert result.status is Status.OPTIMAL and result.objective == result.bound == 0
    check(inst, DEFAULT_HARDWARE, result)


def test_one_forced_spill():
    """forced_spill with UB = 150: COPY_IN writes b0 (100, COPY_IN-backed), VEC_B needs b1 (100)
    before VEC_A reads b0 again, so b0 must leave UB while VEC_B runs: one spill, traffic
    Size = 100 (COPY_IN-backed buffers are not written back). Nothing cheaper exists."""
    inst = tiny("forced_spill")
    small = Hardware(capacity={"UB": 150})
    result = solve_placement(inst, program_order(inst), small, time_limit_s=5)
    assert result.status is Status.OPTIMAL
    assert (result.objective, result.bound, result.info["spills"]) == (100, 100, 1)
    assert result.solution is not None and result.solution.spills[0].buf_id == 0
    check(inst, small, result)


def test_packing_not_spilling():
    """sequential with UB = 10: b0 and b1 (10 units each) are never live together, so both sit
    at offset 0 and nothing is spilled."""
    inst = tiny("sequential")
    small = Hardware(capacity={"UB": 10})
    result = solve_placement(inst, program_order(inst), small, time_limit_s=5)
    assert result.status is Status.OPTIMAL and result.objective == 0
    assert result.solution is not None and dict(result.solution.offsets) == {0: 0, 1: 0}
    check(inst, small, result)


def test_a_fixed_overlapping_placement_is_infeasible():
    """example7 in id order with b0 and b1 both at offset 0: EXP uses both, so their segments
    share positions 2..3 and addresses 0..4. With nothing free to move the model must refuse it;
    freeing b1 lets it move b1 to 5 (or beyond)."""
    inst = tiny("example7")
    overlapping = Solution(order=tuple(range(7)), offsets={0: 0, 1: 0})
    fixed = solve_placement(inst, overlapping, DEFAULT_HARDWARE, window=[], time_limit_s=5)
    assert fixed.status is Status.INFEASIBLE and fixed.solution is None
    moved = solve_placement(inst, overlapping, DEFAULT_HARDWARE, window=[1], time_limit_s=5)
    assert moved.status is Status.OPTIMAL and moved.objective == 0
    assert moved.solution is not None and moved.solution.offsets[0] == 0
    assert moved.solution.offsets[1] >= 5
    check(inst, DEFAULT_HARDWARE, moved)


def test_a_window_keeps_the_rest_of_the_incumbent():
    """reload_reuse with UB = 150 and the heuristic's answer (b0 spilled once): re-placing b1
    alone keeps b0's offset and its spill; the traffic stays 100."""
    inst = tiny("reload_reuse")
    small = Hardware(capacity={"UB": 150})
    incumbent = place(inst, program_order(inst).order, small)
    result = solve_placement(inst, incumbent, small, window=[1], time_limit_s=5)
    assert result.status is Status.OPTIMAL and result.objective == 100
    assert result.solution is not None
    assert result.solution.offsets[0] == incumbent.offsets[0]
    assert result.solution.spills == incumbent.spills
    check(inst, small, result)


def test_bank_rules_are_kept():
    """example7 under tests/data/bank_rules.toml (UB aligned to 32, 4 banks of 32 units,
    conflicts forbidden): EXP reads b0 and b1, so their offsets are distinct multiples of 32 in
    different banks; under ``minimise`` the model reports no conflict either."""
    inst = tiny("example7")
    hardware = bank_hardware()
    result = solve_placement(inst, program_order(inst), hardware, time_limit_s=5)
    assert result.status is Status.OPTIMAL and result.solution is not None
    offsets = result.solution.offsets
    assert offsets[0] % 32 == 0 and offsets[1] % 32 == 0
    assert (offsets[0] // 32) % 4 != (offsets[1] // 32) % 4
    check(inst, hardware, result)
    bank = hardware.banks["UB"].model_copy(update={"policy": "minimise"})
    soft = hardware.model_copy(update={"banks": {"UB": bank}})
    relaxed = solve_placement(inst, program_order(inst), soft, time_limit_s=5)
    assert relaxed.info["bank_conflicts"] == 0
    assert evaluate(inst, relaxed.solution, 2, soft).bank_conflicts == 0  # type: ignore[arg-type]


def op_overflows(inst: Instance, hardware: Hardware) -> bool:
    """Whether some op alone needs more of a memory than it has."""
    for v in inst.op_ids:
        need: dict[str, int] = {}
        for b in inst.bufs_of(v):
            buf = inst.buffers[b]
            need[buf.memory] = need.get(buf.memory, 0) + buf.size_units
        if any(units > hardware.capacity(m) for m, units in need.items()):
            return True
    return False


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_random_orders_agree_with_the_evaluator(data):
    """On random small instances and orders (capacities 24/24/12, so spills are common): the
    model is INFEASIBLE exactly when one op alone overflows a memory (any other buffer can be
    spilled around it); otherwise its answer is valid and its traffic is the evaluator's."""
    inst = data.draw(instances())
    order = tuple(random_topological_order(data.draw, inst))
    result = solve_placement(inst, Solution(order=order), HARDWARE, time_limit_s=5)
    if op_overflows(inst, HARDWARE):
        assert result.status is Status.INFEASIBLE
        return
    assert result.status is Status.OPTIMAL
    check(inst, HARDWARE, result)


@pytest.mark.parametrize(
    ("family", "nodes", "seed", "share"),
    [("conv", 100, 1, 0.8), ("conv", 100, 3, 0.7), ("compose", 140, 1, 0.7)],
)
def test_full_model_proves_the_optimum_the_heuristic_cannot_beat(family, nodes, seed, share):
    """Generated graphs of at most 150 nodes (conv: 108, compose: 141) with L1 cut to a share
    of the program order's peak: the full model proves its traffic optimal for that order within
    seconds, and the greedy placement of the same order is never cheaper (when it finds a
    placement at all)."""
    data = generate(family, seed=seed, nodes=nodes)
    assert len(data["Nodes"]) <= 150
    inst = parse_instance(data, name=f"{family}{seed}", source="gen")
    order = program_order(inst)
    peak = evaluate_order(inst, order.order).max_v_stay_units or 0
    tight = Hardware(capacity={"L1": int(share * peak)})
    assert not op_overflows(inst, tight)
    result = solve_placement(inst, order, tight, time_limit_s=30, deterministic=True)
    assert result.status is Status.OPTIMAL and result.objective == result.bound
    assert result.objective and result.objective > 0  # the cut capacity forces spills
    check(inst, tight, result)
    try:
        greedy = evaluate(inst, place(inst, order.order, tight), 2, tight)
    except PlacementError:
        return
    assert greedy.valid and (greedy.extra_traffic_units or 0) >= result.objective


def test_a_different_order_avoids_the_spill():
    """avoidable_spill with UB = 150: VEC_P writes b0 (100), VEC_R reads it later, VEC_Q uses b1
    (100) and depends on neither. In id order VEC_Q runs while b0 waits for VEC_R: 200 units in
    150, so b0 is spilled (not COPY_IN-backed: traffic 2 x 100 = 200), and that is optimal for
    this order. Re-ordering the nodes in the same model (VEC_Q before VEC_P, or after VEC_R)
    keeps the two buffers apart in time: traffic 0."""
    inst = tiny("avoidable_spill")
    small = Hardware(capacity={"UB": 150})
    fixed = solve_placement(inst, Solution(order=tuple(range(7))), small, time_limit_s=5)
    assert fixed.status is Status.OPTIMAL and fixed.objective == 200
    check(inst, small, fixed)
    assert fixed.solution is not None
    joint = solve_placement(inst, fixed.solution, small, (), reorder=range(7), time_limit_s=5)
    assert joint.status is Status.OPTIMAL and joint.objective == 0
    assert joint.info["reordered"] == 7
    check(inst, small, joint)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_reordering_a_run_stays_valid(data):
    """Random instances, random orders, and a random run of original nodes re-ordered with
    their buffers re-placed: the answer is valid, its traffic is the evaluator's, and it is no
    worse than the fixed-order optimum it started from."""
    inst = data.draw(instances())
    order = tuple(random_topological_order(data.draw, inst))
    start = solve_placement(inst, Solution(order=order), HARDWARE, time_limit_s=5)
    if start.status is not Status.OPTIMAL or start.solution is None:
        return
    first = data.draw(st.integers(0, inst.n_nodes - 1))
    size = data.draw(st.integers(1, inst.n_nodes))
    original = [v for v in start.solution.order if v < inst.n_nodes]
    run = original[first : first + size]
    joint = solve_placement(inst, start.solution, HARDWARE, (), reorder=run, time_limit_s=5)
    assert joint.status is Status.OPTIMAL
    check(inst, HARDWARE, joint)
    assert (joint.objective or 0) <= (start.objective or 0)
