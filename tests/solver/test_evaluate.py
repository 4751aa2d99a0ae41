"""The exact evaluator on hand-worked cases and the reference figures of issue 2."""

from __future__ import annotations

import pytest

from npuopt.instances import OFFICIAL_CASES
from npuopt.solver.evaluate import evaluate
from npuopt.solver.hardware import Hardware
from npuopt.solver.instance import parse_instance
from npuopt.solver.solution import Solution, Spill

from helpers import bank_hardware, official, tiny

ID_ORDER_V_STAY = {
    "Conv_Case0": 133_031,
    "FlashAttention_Case0": 35_592,
    "FlashAttention_Case1": 134_288,
    "Matmul_Case0": 16_384,
    "Matmul_Case1": 65_536,
    "Conv_Case1": 383_112,
}


def kinds(evaluation):
    return {v.kind for v in evaluation.violations}


@pytest.mark.parametrize("name", OFFICIAL_CASES)
def test_id_order_respects_every_edge(name):
    """Issue 2 reference: node-id order respects every edge; its max V_stay is fixed per case.

    It allocates every buffer up front, so it also keeps several L0 buffers live at once: SPEC
    section 2 makes that a violation, and those are the only ones the evaluator reports.
    """
    inst = official(name)
    result = evaluate(inst, Solution(order=range(inst.n_nodes)), 1)
    assert kinds(result) == {"l0_residency"}
    assert result.max_v_stay_units == ID_ORDER_V_STAY[name]


# -- the statement's example ----------------------------------------------------------------


def test_example_id_order_makespan_60():
    """COPY_IN 0-15 on MTE2, EXP 15-45 on VECTOR, COPY_OUT 45-60 on MTE3: makespan 60."""
    inst = tiny("example7")
    result = evaluate(inst, Solution(order=range(7), offsets={0: 0, 1: 5}), 2)
    assert result.valid
    assert result.makespan_cycles == 60
    assert (result.extra_traffic_units, result.spill_count) == (0, 0)
    assert result.pipe_busy_cycles == {"MTE2": 15, "MTE3": 15, "VECTOR": 30}
    assert result.start_cycles.tolist() == [0, 0, 0, 15, 45, 45, 60]
    assert result.peak_units["UB"] == 10


def test_example_with_one_spill_makespan_220():
    """Spill b0 right after its COPY_IN (SPILL_OUT 7, SPILL_IN 8, new offset 100).

    b0 is COPY_IN-backed: traffic = Size = 5, SPILL_OUT takes 0 cycles, SPILL_IN 2*5+150 = 160.
    COPY_IN 0-15; SPILL_OUT at 15 (0 cycles); SPILL_IN on MTE2 15-175; EXP needs the reload:
    175-205; COPY_OUT waits for EXP: 205-220. Makespan 220.
    """
    inst = tiny("example7")
    sol = Solution(order=(0, 1, 7, 8, 2, 3, 4, 5, 6), offsets={0: 0, 1: 5}, spills=(Spill(0, 100),))
    result = evaluate(inst, sol, 2)
    assert result.valid, result.violations
    assert (result.extra_traffic_units, result.spill_count, result.makespan_cycles) == (5, 1, 220)
    assert result.pipe_busy_cycles == {"MTE2": 175, "MTE3": 15, "VECTOR": 30}


def test_example_overlapping_offsets_are_invalid():
    """b0 and b1 both at offset 0 while both live: one overlap."""
    inst = tiny("example7")
    result = evaluate(inst, Solution(order=range(7), offsets={0: 0, 1: 0}), 2)
    assert not result.valid
    assert kinds(result) == {"overlap"}
    assert "buffer 1 [0, 5)" in result.violations[0].message


def test_adjacent_ranges_do_not_overlap():
    """[0, 5) and [5, 10) share no unit."""
    result = evaluate(tiny("example7"), Solution(order=range(7), offsets={0: 5, 1: 0}), 2)
    assert result.valid


def test_use_between_spill_out_and_spill_in():
    """EXP placed between b0's SPILL_OUT and SPILL_IN breaks the edge SPILL_IN -> EXP."""
    inst = tiny("example7")
    sol = Solution(order=(0, 1, 7, 2, 3, 8, 4, 5, 6), offsets={0: 0, 1: 5}, spills=(Spill(0, 100),))
    result = evaluate(inst, sol, 2)
    assert not result.valid
    assert kinds(result) == {"spill_edge"}
    assert "node 3 uses buffer 0" in result.violations[0].message


def test_reload_after_free_is_a_spill_edge_violation():
    """SPILL_IN after FREE(b0): the edge SPILL_IN -> FREE is broken."""
    inst = tiny("example7")
    sol = Solution(order=(0, 1, 7, 2, 3, 4, 8, 5, 6), offsets={0: 0, 1: 5}, spills=(Spill(0, 100),))
    result = evaluate(inst, sol, 2)
    assert "spill_edge" in kinds(result)
    assert any("freed (node 4) before its SPILL_IN node 8" in v.message for v in result.violations)


def test_graph_edge_violation_and_not_a_permutation():
    inst = tiny("example7")
    broken = evaluate(inst, Solution(order=(1, 0, 2, 3, 4, 5, 6), offsets={0: 0, 1: 5}), 2)
    assert kinds(broken) == {"edge"}
    assert "edge 0 -> 1" in broken.violations[0].message
    short = evaluate(inst, Solution(order=(0, 1, 2), offsets={0: 0, 1: 5}), 2)
    assert kinds(short) == {"schedule"} and short.makespan_cycles is None
    twice = evaluate(inst, Solution(order=(0, 1, 1, 2, 3, 4, 5)), 1)
    assert not twice.valid and "already scheduled" in twice.violations[0].message


@pytest.mark.parametrize("problem", [1, 2, 3])
def test_free_before_alloc_without_an_edge_between_them(problem):
    """A buffer without users and without an ALLOC -> FREE edge, freed before it is
    allocated: every problem reports it (Problems 2 and 3 used to raise IndexError)."""
    hardware = Hardware(capacity={"UB": 24})
    nodes = [
        {"Id": 0, "Op": "ALLOC", "BufId": 0, "Size": 4, "Type": "UB"},
        {"Id": 1, "Op": "FREE", "BufId": 0, "Size": 4, "Type": "UB"},
        {"Id": 2, "Op": "OP", "Pipe": "VECTOR", "Cycles": 10, "Bufs": []},
    ]
    inst = parse_instance({"Nodes": nodes, "Edges": []}, hardware=hardware)
    judged = evaluate(inst, Solution(order=(1, 2, 0), offsets={0: 0}), problem, hardware)
    assert not judged.valid and kinds(judged) == {"edge"}
    assert "FREE node 1 comes before its ALLOC node" in judged.violations[0].message


def test_missing_offset_and_unknown_spill_buffer():
    inst = tiny("example7")
    missing = evaluate(inst, Solution(order=range(7), offsets={0: 0}), 2)
    assert kinds(missing) == {"offset"}
    unknown = evaluate(
        inst, Solution(order=range(9), offsets={0: 0, 1: 5}, spills=(Spill(4, 0),)), 2
    )
    assert kinds(unknown) == {"spill"}


def test_capacity():
    """UB holds 1024 units: b1 (Size 5) at 1020 ends at 1025 > 1024."""
    result = evaluate(tiny("example7"), Solution(order=range(7), offsets={0: 0, 1: 1020}), 2)
    assert kinds(result) == {"capacity"}


# -- repeated spills, reuse edges, pipe waits, reuse rules -----------------------------------


def test_repeated_spills_of_one_buffer():
    """b0 (UB, 10, COPY_IN-backed) spilled twice; schedule 0,1,5,6,2,7,8,3,4.

    Spill 0: SPILL_OUT 5, SPILL_IN 6 (new offset 50); spill 1: SPILL_OUT 7, SPILL_IN 8 (offset 0).
    COPY_IN 0-20 (MTE2); SO5 at 20 (0 cycles); SI6 on MTE2 20-190 (2*10+150 = 170); V1 190-200;
    SO7 waits for V1 (edge V1 -> SO7): 200; SI8 200-370; V2 needs SI8: 370-380. FREE at 380.
    Traffic 2 * 10 = 20 (COPY_IN-backed: Size per spill).
    """
    inst = tiny("respill")
    sol = Solution(
        order=(0, 1, 5, 6, 2, 7, 8, 3, 4), offsets={0: 0}, spills=(Spill(0, 50), Spill(0, 0))
    )
    result = evaluate(inst, sol, 2)
    assert result.valid, result.violations
    assert (result.extra_traffic_units, result.spill_count, result.makespan_cycles) == (20, 2, 380)
    assert result.start_cycles.tolist() == [0, 0, 190, 370, 380, 20, 20, 200, 200]


def test_nested_spills_are_reported():
    """SO5, SO7, SI8, SI6: every spill edge holds, but b0 is spilled while already in DDR."""
    inst = tiny("respill")
    sol = Solution(
        order=(0, 1, 5, 7, 8, 6, 2, 3, 4), offsets={0: 0}, spills=(Spill(0, 50), Spill(0, 0))
    )
    result = evaluate(inst, sol, 2)
    assert kinds(result) == {"spill"}
    assert "SPILL_OUT node 7" in result.violations[0].message


def test_reload_into_freed_space_waits_for_the_free():
    """b0 reloaded at offset 100, where b1 lived until FREE(b1) at t=500 (a reuse edge).

    COPY_IN 0-10; SO7 at 10 (0 cycles); VEC_A 0-500 on b1; FREE(b1) at 500. SI8 at [100, 200)
    must wait for FREE(b1): 500-850 (2*100+150 = 350); VEC_B 850-860. Makespan 860.
    Reloading at offset 0 instead (b0's own old space, released by SO7 at 10): SI8 10-360;
    VEC_B waits for VECTOR until 500: 500-510. Makespan 510.
    """
    inst = tiny("reload_reuse")
    order = (0, 1, 7, 2, 3, 4, 8, 5, 6)
    into_b1 = evaluate(
        inst, Solution(order=order, offsets={0: 0, 1: 100}, spills=(Spill(0, 100),)), 2
    )
    assert into_b1.valid, into_b1.violations
    assert into_b1.makespan_cycles == 860
    assert into_b1.start_cycles[8] == 500
    own = evaluate(inst, Solution(order=order, offsets={0: 0, 1: 100}, spills=(Spill(0, 0),)), 2)
    assert own.makespan_cycles == 510


def test_literal_rule_ignores_segments_opened_by_spills():
    """Same case as above under the literal rule: the reload creates no reuse edge, so SI8 runs
    10-360 and VEC_B 500-510: makespan 510 instead of 860."""
    inst = tiny("reload_reuse")
    sol = Solution(
        order=(0, 1, 7, 2, 3, 4, 8, 5, 6), offsets={0: 0, 1: 100}, spills=(Spill(0, 100),)
    )
    assert evaluate(inst, sol, 2, reuse_rule="literal").makespan_cycles == 510
    assert evaluate(inst, sol, 2, reuse_rule="residency").makespan_cycles == 860


@pytest.mark.parametrize("rule", ["residency", "literal"])
def test_reuse_edge_free_to_alloc(rule):
    """b1 at b0's offset after FREE(b0): reuse edge FREE(b0) -> ALLOC(b1) under both rules.

    P1 holds VECTOR 0-50 and FREE(b0) is at 50, so ALLOC(b1) waits until 50 and P2 (MTE3) runs
    50-55: makespan 55. With b1 at offset 10 nothing links the two: P2 runs 0-5, makespan 50.
    """
    inst = tiny("sequential")
    shared = evaluate(inst, Solution(order=range(6), offsets={0: 0, 1: 0}), 2, reuse_rule=rule)
    assert shared.valid and shared.makespan_cycles == 55
    apart = evaluate(inst, Solution(order=range(6), offsets={0: 0, 1: 10}), 2, reuse_rule=rule)
    assert apart.valid and apart.makespan_cycles == 50


def test_zero_cycle_spill_out_waits_for_its_pipe():
    """b0 (COPY_IN-backed) spilled after a 100-cycle COPY_OUT holds MTE3 from 5 to 105.

    COPY_IN 0-10 (MTE2); VEC 0-5; COPY_OUT 5-105 (MTE3); SO8 (0 cycles) waits for MTE3: 105;
    SI9 105-275 (2*10+150 = 170); VEC2 275-280. Makespan 280.
    """
    inst = tiny("spill_out_waits")
    sol = Solution(
        order=(0, 1, 2, 3, 4, 5, 8, 9, 6, 7), offsets={0: 0, 1: 16}, spills=(Spill(0, 0),)
    )
    result = evaluate(inst, sol, 2)
    assert result.valid, result.violations
    assert result.start_cycles[8] == result.end_cycles[8] == 105
    assert result.makespan_cycles == 280
    assert result.pipe_busy_cycles["MTE3"] == 100


# -- layout rules ---------------------------------------------------------------------------


def test_alignment_violation():
    """UB alignment 32: offset 40 is not a multiple (it lies in bank 1, so no bank conflict)."""
    result = evaluate(
        tiny("example7"), Solution(order=range(7), offsets={0: 0, 1: 40}), 2, bank_hardware()
    )
    assert kinds(result) == {"alignment"}
    assert "buffer 1" in result.violations[0].message


def test_bank_conflict_forbidden_and_counted():
    """EXP uses b0 and b1 in UB (4 banks of 32): offsets 0 and 128 are both in bank 0 (a
    conflict); 0 and 32 are in banks 0 and 1 (none)."""
    inst = tiny("example7")
    hw = bank_hardware()
    clash = evaluate(inst, Solution(order=range(7), offsets={0: 0, 1: 128}), 2, hw)
    assert kinds(clash) == {"bank"} and clash.bank_conflicts == 1
    assert "node 3 (EXP): buffers 0 and 1" in clash.violations[0].message
    fine = evaluate(inst, Solution(order=range(7), offsets={0: 0, 1: 32}), 2, hw)
    assert fine.valid and fine.bank_conflicts == 0
    counted = Hardware(banks={"UB": {"banks": 4, "bank_width": 32, "policy": "minimise"}})
    soft = evaluate(inst, Solution(order=range(7), offsets={0: 0, 1: 128}), 2, counted)
    assert soft.valid and soft.bank_conflicts == 1


def test_bank_uses_offset_after_reload():
    """After b0 is reloaded at 128, EXP sees b0 in bank 0 again only if b1 is in bank 0."""
    inst = tiny("example7")
    sol = Solution(
        order=(0, 1, 7, 8, 2, 3, 4, 5, 6), offsets={0: 32, 1: 0}, spills=(Spill(0, 128),)
    )
    result = evaluate(inst, sol, 2, bank_hardware())
    assert result.bank_conflicts == 1


# -- Problem 1 ------------------------------------------------------------------------------


def test_p1_l0_single_residency():
    """l0_pair: a (L1, 100) used by two MOVEs, each with its own L0A buffer (50).

    Order 0,1,3,5,2,4,6,7 frees c before allocating d: valid, max V_stay 100 (L0 not counted),
    peak L0A 50. Id order 0..7 allocates d while c is live: one L0 violation.
    """
    inst = tiny("l0_pair")
    good = evaluate(inst, Solution(order=(0, 1, 3, 5, 2, 4, 6, 7)), 1)
    assert good.valid
    assert good.max_v_stay_units == 100
    assert good.peak_units["L0A"] == 50 and good.peak_units["L1"] == 100
    bad = evaluate(inst, Solution(order=range(8)), 1)
    assert kinds(bad) == {"l0_residency"} and bad.violation_count == 1
    assert "buffer 2 allocated at position 2 while buffer 1 is live" in bad.violations[0].message


def test_violations_are_capped_but_counted():
    """Reversed id order of Matmul_Case0 breaks every edge; only the cap is kept."""
    inst = tiny("l0_pair")
    result = evaluate(inst, Solution(order=range(7, -1, -1)), 1, max_violations=3)
    assert len(result.violations) == 3
    assert result.violation_count > 3
