"""The solve pipeline: valid answers on every fixture, the traffic budget, the time limit."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest

import npuopt.solver.stages.placement as placement_stage
from npuopt.heuristics.ordering import list_schedule, program_rank
from npuopt.heuristics.placement import place
from npuopt.instances.generator import generate
from npuopt.instances.transform import renumber
from npuopt.solver.bounds import TrafficBound, makespan_bound, order_bound
from npuopt.solver.budgets import P2_WORK
from npuopt.solver.evaluate import evaluate, evaluate_order
from npuopt.solver.hardware import Hardware
from npuopt.solver.instance import Instance, parse_instance
from npuopt.solver.solution import Solution, Spill
from npuopt.solver.solve import (
    Candidate,
    CaseResult,
    Progress,
    SolveOptions,
    refine_timing,
    solve_instance,
)
from npuopt.solver.stages.placement import refine_placement

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
    assert (
        len(p1) == 1
        and p1[0].startswith("max V_stay 10 (list-")
        and p1[0].endswith("proven optimal (forced-live)")
    )
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


def _placed_case(bound_units: int) -> tuple[Instance, CaseResult, SolveOptions]:
    """forced_spill with UB = 150 (one 100-unit COPY_IN-backed buffer must go: traffic 100)
    placed by the list scheduler's order, with a Problem 2 traffic bound of ``bound_units``."""
    inst = tiny("forced_spill")
    options = SolveOptions(time_limit_s=10, hardware=Hardware(capacity={"UB": 150}))
    result = CaseResult(inst.name, order_bound(inst), makespan_bound(inst))
    placed = place(inst, inst.topological_order, options.hardware)
    judged = evaluate(inst, placed, 2, options.hardware)
    assert judged.valid and judged.extra_traffic_units == 100
    result.p2 = Candidate("start", placed, judged)
    result.p2_bound = TrafficBound(bound_units, -1)
    return inst, result, options


def test_a_p2_lns_at_its_bound_hands_its_budget_on(monkeypatch):
    """The one forced spill meets the traffic bound: the LNS stops at once and the budget goes
    to Problem 3 (it used to be dropped)."""
    monkeypatch.setattr(placement_stage, "FULL_PLACEMENT_BUFFERS", 0)  # the LNS alone
    inst, result, options = _placed_case(100)
    spare = refine_placement(
        inst, result, options, np.random.default_rng(0), time.monotonic(), lambda s, m: None
    )
    assert result.p2_lns is not None and result.p2_lns.proven_optimal
    assert spare == pytest.approx(P2_WORK * options.work_s)


def test_a_p2_lns_that_may_still_cut_traffic_keeps_its_budget(monkeypatch):
    """With a weak bound the LNS spends its whole budget: a later step may still cut traffic
    (the generated conv36k's one cut came after 40% of it)."""
    monkeypatch.setattr(placement_stage, "FULL_PLACEMENT_BUFFERS", 0)
    inst, result, options = _placed_case(0)
    started = time.monotonic() - 6.5  # one second before the P2 deadline (7.5 s of 10)
    spare = refine_placement(
        inst, result, options, np.random.default_rng(0), started, lambda s, m: None
    )
    assert result.p2_lns is not None and len(result.p2_lns.steps) > 10
    assert not result.p2_lns.stalled and spare == 0.0


def test_the_full_placement_models_optimum_hands_the_p2_budget_on():
    inst, result, options = _placed_case(0)
    spare = refine_placement(
        inst, result, options, np.random.default_rng(0), time.monotonic(), lambda s, m: None
    )
    assert result.p2_lns is None and result.p2_order_bound == 100
    assert 0 < spare < P2_WORK * options.work_s


def test_timing_alone_from_a_stored_answer_drops_a_spill_that_costs_time():
    """avoidable_spill with its buffer 0 spilled around VEC_Q (770 cycles, traffic 200):
    Problem 3 alone drops the spill (its traffic budget is the start's), 70 cycles, traffic 0,
    which is then the Problem 2 answer too. A start the evaluator rejects is refused."""
    inst = tiny("avoidable_spill")
    n = inst.n_nodes
    start = Solution(
        order=(0, 1, n, 2, 3, 4, n + 1, 5, 6), offsets={0: 0, 1: 0}, spills=(Spill(0, 0),)
    )
    result = refine_timing(inst, start, SolveOptions(problems=(3,), time_limit_s=5))
    assert result.p3 is not None and result.p2 is not None
    judged = evaluate(inst, result.p3.solution, 3)
    assert judged.valid and judged.makespan_cycles == 70 and judged.extra_traffic_units == 0
    assert result.p2.evaluation.extra_traffic_units == 0
    with pytest.raises(ValueError, match="not a valid answer"):
        refine_timing(inst, Solution(order=start.order, offsets={0: 0, 1: 0}), SolveOptions())


@pytest.mark.parametrize("family", ["conv", "flashattention", "matmul", "random"])
def test_a_renumbered_copy_gets_the_same_answers(family):
    """Issue 21: node ids and BufIds are names. A renumbered copy (random topological ids,
    permuted BufIds, shuffled Bufs lists) has the same canonical instance, so the heuristic
    pipeline gives it the same values, and every file is valid on the copy's own ids."""
    graph = generate(family, seed=2, nodes=400)
    copy_graph = renumber(graph, seed=5)
    options = SolveOptions(time_limit_s=10, method="heuristics")
    ours = solve_instance(parse_instance(graph), options)
    theirs = solve_instance(parse_instance(copy_graph), options)
    copy = parse_instance(copy_graph)
    for problem in (1, 2, 3):
        a, b = ours.best(problem), theirs.best(problem)
        assert a is not None and b is not None
        assert a.evaluation.objective() == b.evaluation.objective()
        judged = (
            evaluate_order(copy, b.solution.order)
            if problem == 1
            else evaluate(copy, b.solution, problem)
        )
        assert judged.valid and judged.objective() == b.evaluation.objective()


@pytest.mark.parametrize("status", ["FEASIBLE", "OPTIMAL"])
def test_an_invalid_answer_of_the_placement_model_is_never_used(monkeypatch, status):
    """The placement model once spilled one buffer twice over the same stretch (the jitter
    benchmark, a 1,500-node conv on its tightest memories), and compacting that answer for the
    pipes crashed the solve. Every model answer is judged before it is used: neither the full
    model's nor a window's invalid answer becomes the incumbent or a candidate."""
    from dataclasses import replace

    from npuopt.solver.result import Result, Status

    inst, result, options = _placed_case(0)
    start = result.p2.solution
    kept = tuple(v for v in start.order if v < inst.n_nodes)
    broken = replace(start, order=kept, spills=())  # no spill: more than UB holds
    assert not evaluate(inst, broken, 2, options.hardware).valid
    answer = Result(Status[status], broken, 0)  # an optimum turned down proves nothing
    monkeypatch.setattr(placement_stage, "solve_placement", lambda *a, **k: answer)
    monkeypatch.setattr(placement_stage, "traffic_key", lambda i, s: (s is not broken, 0))
    refine_placement(
        inst, result, options, np.random.default_rng(0), time.monotonic(), lambda s, m: None
    )
    assert result.p2.solution == start
    assert all(c.solution is not broken for c in result.candidates)
    assert result.p2_lns is not None and result.p2_lns.best == start
    assert result.p2_lns.steps and all(s.status == "invalid" for s in result.p2_lns.steps)


def test_the_p2_stage_places_each_runner_up_once_and_hands_on_the_time_of_the_rest(monkeypatch):
    """The traversal search's runners-up go on to placement with every policy, after every
    other order, each distinct one once; those a run did not return, or that repeat an order
    already listed, hand their planned placement time on to Problem 3."""
    from npuopt.heuristics.ordering import OrderingRun
    from npuopt.heuristics.placement import PLACEMENT_POLICIES
    from npuopt.heuristics.traversal import TraversalParams, anneal_from, traversal_start
    from npuopt.solver.budgets import P3_RATE, TRAVERSAL_RUNS, placement_s, runners_up
    from npuopt.solver.solution import op_order_of
    from npuopt.solver.stages.order import OrderStage
    from npuopt.solver.stages.placement import placement_stage as run_stage
    from npuopt.solver.workers import Workers

    inst = parse_instance(generate("flashattention", 1, nodes=500), name="f")
    hardware = Hardware(capacity={"L1": 2048, "UB": 512})  # placeable, with spills
    options = SolveOptions(time_limit_s=600, speed=1.0, method="heuristics", hardware=hardware)
    planned = runners_up(options.work_s, inst.n_nodes)
    assert planned >= 3  # a small graph on a long limit: several a run
    ops = op_order_of(inst, inst.topological_order)
    first, cost = traversal_start(inst, hardware, ops, TraversalParams())
    params = TraversalParams(max_evaluations=400, elite=3)
    run = anneal_from(inst, hardware, first, cost, 5, params)
    assert len(run) == 3
    # Fewer runs than the plan's, each fewer runners-up than planned; the second returns the
    # first's first runner-up as its best and, as its own runners-up, orders listed before.
    runs = [run, [run[1], run[2], run[0]]]
    assert len(runs) < TRAVERSAL_RUNS
    placed: list[str] = []
    real = placement_stage._place_and_compact

    def spy(instance, order, opts, method):
        placed.append(method)
        return real(instance, order, opts, method)

    monkeypatch.setattr(placement_stage, "_place_and_compact", spy)
    result = CaseResult("f", order_bound(inst), makespan_bound(inst))
    order = list_schedule(inst, "program", program_rank(inst))
    assert order is not None
    listed = Solution(order=tuple(order), offsets={}, spills=())
    p1 = OrderStage([OrderingRun("program", False, listed, evaluate_order(inst, order))], [], 0.0)
    with Workers(inst, 1) as workers:
        handed, _ = run_stage(
            inst,
            options,
            result,
            time.monotonic(),
            lambda stage, message: None,
            np.random.default_rng(0),
            p1,
            workers,
            lambda: (runs, 400),
        )
    # Distinct orders: the two bests (run[0], run[1]) are listed as traversal orders; the one
    # runner-up left to place is run[2] (run[1] and run[0] repeat listed orders).
    runner_ups = [m for m in placed if m.startswith("traversal-runner-up+")]
    assert sorted(runner_ups) == sorted(f"traversal-runner-up+{p}" for p in PLACEMENT_POLICIES)
    assert placed[-len(runner_ups) :] == runner_ups  # after every other order
    missing = TRAVERSAL_RUNS * planned - 1
    assert handed == pytest.approx(P3_RATE * placement_s(missing, inst.n_nodes, 1))


def test_fill_gives_the_time_the_budgets_leave_to_one_more_p3_chain_on_the_clock():
    """At the lowest speed factor the budgets are a quarter of the limit's and the budgeted
    run ends early, on its budget; with fill, one more chain runs from its answer on the
    clock to the plan's end of the LNS, so the answer is never slower."""
    from npuopt.solver.report import case_summary

    inst = parse_instance(generate("flashattention", 1, nodes=500), name="f")
    hardware = Hardware(capacity={"L1": 2048, "UB": 512})
    options = SolveOptions(time_limit_s=16, speed=0.25, hardware=hardware)
    budgeted = solve_instance(inst, options)
    assert budgeted.p3_lns is not None and budgeted.p3_lns.stop == "budget"
    assert budgeted.p3_fill is None
    filled = solve_instance(inst, replace(options, fill=True))
    assert filled.p3_fill is not None and filled.p3_fill.stop == "deadline"
    assert filled.p3_fill.steps and filled.runtime_s > budgeted.runtime_s + 1
    assert filled.p3 is not None and budgeted.p3 is not None
    assert filled.p3.evaluation.makespan_cycles <= budgeted.p3.evaluation.makespan_cycles
    assert evaluate(inst, filled.p3.solution, 3, hardware=hardware).valid
    assert case_summary(filled)["p3"]["fill"]["lns_stop"] == "deadline"
