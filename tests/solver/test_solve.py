"""The solve pipeline: valid answers on every fixture, the traffic budget, the time limit."""

from __future__ import annotations

import time

import pytest

from heuristics.ordering import list_schedule, program_rank
from instances.generator import generate
from solver.evaluate import evaluate, evaluate_order
from solver.hardware import Hardware
from solver.instance import parse_instance
from solver.solve import Progress, SolveOptions, solve_instance

from helpers import TINY, tiny


@pytest.mark.parametrize("name", TINY)
def test_every_fixture_gets_three_valid_answers(name):
    inst = tiny(name)
    result = solve_instance(inst, SolveOptions(time_limit_s=10))
    for problem in (1, 2, 3):
        candidate = result.best(problem)
        assert candidate is not None
        again = evaluate(inst, candidate.solution, problem)
        assert again.valid and again.objective() == candidate.evaluation.objective()
    assert result.p2 is not None and result.p3 is not None
    traffic = result.p2.evaluation.extra_traffic_units or 0
    assert (result.p3.evaluation.extra_traffic_units or 0) <= traffic  # slack 0: no more


def test_p3_traffic_stays_within_the_p2_budget():
    """forced_spill with UB = 150: the chain COPY_IN -> VEC_B -> VEC_A keeps b0 (100) live while
    VEC_B needs b1 (100), so b0 must be spilled once (COPY_IN-backed: traffic 100) in any order.
    P3 may not spill more."""
    inst = tiny("forced_spill")
    options = SolveOptions(time_limit_s=10, hardware=Hardware(capacity={"UB": 150}))
    result = solve_instance(inst, options)
    assert result.p2 is not None and result.p3 is not None
    assert result.p2.evaluation.extra_traffic_units == 100
    assert result.p2.solution.spills[0].buf_id == 0
    assert result.p3.evaluation.extra_traffic_units <= result.p2.evaluation.extra_traffic_units
    assert result.p3.evaluation.makespan_cycles <= result.p2.evaluation.makespan_cycles


def test_problem_1_only_skips_placement():
    result = solve_instance(tiny("example7"), SolveOptions(problems=(1,), time_limit_s=10))
    assert result.p1 is not None and result.p2 is None and result.p3 is None


def test_progress_reports_each_stage():
    events: list[Progress] = []
    solve_instance(tiny("example7"), SolveOptions(time_limit_s=10), events.append)
    stages = [e.stage for e in events]
    assert stages[0] == "bounds" and stages[-2:] == ["P2", "P3"]
    # The heuristic's answer meets the op-local bound (10): one report, which says so, and no
    # refinement.
    p1 = [e.message for e in events if e.stage == "P1"]
    assert p1 == ["max V_stay 10 (program policy), proven optimal (forced-live)"]
    assert "P1-lns" not in stages
    assert all(e.case == "example7" for e in events)


def test_stage_times_add_up_across_repeated_reports():
    """Stages report several times (P1, bounds, the LNS stages): each report adds the time
    since the previous one to its stage. An overwrite used to drop a stage's earlier share
    and hand it to the next stage (Matmul_Case0's summary said 117 s for 'bounds')."""
    events: list[Progress] = []
    result = solve_instance(tiny("respill"), SolveOptions(time_limit_s=10), events.append)
    assert len({e.stage for e in events}) < len(events)  # some stage reported twice
    expected: dict[str, float] = {}
    previous = 0.0
    for event in events:
        expected[event.stage] = expected.get(event.stage, 0.0) + event.elapsed_s - previous
        previous = event.elapsed_s
    assert result.stage_s == pytest.approx(expected, abs=1e-6)


def test_same_seed_same_answers():
    inst = tiny("respill")
    first = solve_instance(inst, SolveOptions(seed=3, time_limit_s=10))
    again = solve_instance(inst, SolveOptions(seed=3, time_limit_s=10))
    for problem in (1, 2, 3):
        assert first.best(problem).solution == again.best(problem).solution  # type: ignore[union-attr]


def test_tiny_time_limit_still_answers():
    """A zero budget still runs one pass of each stage: an answer, late, beats no answer."""
    started = time.monotonic()
    result = solve_instance(tiny("example7"), SolveOptions(time_limit_s=0))
    assert result.p3 is not None and result.p3.evaluation.valid
    assert time.monotonic() - started < 5


def test_heuristics_method_skips_the_cp_sat_refinement():
    """``--method heuristics`` is the baseline row: the list scheduler's answer is final."""
    events: list[Progress] = []
    result = solve_instance(
        tiny("example7"), SolveOptions(time_limit_s=10, method="heuristics"), events.append
    )
    assert [e.stage for e in events].count("P1") == 1
    assert result.p1 is not None and result.p1.method.startswith("list-")
    assert result.p1_lns is None and result.p3 is not None and result.p3.evaluation.valid


def test_full_method_proves_small_placements_optimal_for_their_order():
    """A generated conv graph of 108 nodes with L1 cut to 80% of the program order's peak:
    the heuristics need spills; the full model then runs on the chosen order (under
    FULL_PLACEMENT_BUFFERS) and proves the answer's traffic optimal for that order.
    The global traffic bound (forced-live) stays a valid, smaller number."""
    inst = parse_instance(generate("conv", seed=3, nodes=80), name="conv3", source="gen")
    order = list_schedule(inst, "program", program_rank(inst))
    peak = evaluate_order(inst, order).max_v_stay_units or 0
    tight = Hardware(capacity={"L1": int(0.8 * peak)})
    result = solve_instance(inst, SolveOptions(time_limit_s=8, hardware=tight))
    assert result.p2 is not None and result.p2.evaluation.valid
    traffic = result.p2.evaluation.extra_traffic_units
    assert traffic and result.p2_order_bound == traffic
    assert result.p2_bound is not None and result.p2_bound.units <= traffic


def test_frontier_is_non_dominated():
    """The (traffic, makespan) points summary.json reports: sorted by traffic, each strictly
    faster than the one before (otherwise it would be dominated)."""
    inst = tiny("forced_spill")
    result = solve_instance(
        inst, SolveOptions(time_limit_s=5, hardware=Hardware(capacity={"UB": 150}))
    )
    points = result.frontier
    assert points and points == sorted(points)
    assert all(a[1] > b[1] and a[0] < b[0] for a, b in zip(points, points[1:], strict=False))
    assert result.p3 is not None
    e3 = result.p3.evaluation
    assert (e3.extra_traffic_units, e3.makespan_cycles) in points
