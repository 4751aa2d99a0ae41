"""Worker processes (solver.workers, issue 22): the same answers in the same order, whatever
runs where; same seed and workers, same files."""

from __future__ import annotations

from npuopt.instances.generator import generate
from npuopt.solver.instance import parse_instance
from npuopt.solver.solve import SolveOptions, solve_instance
from npuopt.solver.workers import Workers, available_cores

from helpers import tiny


def _size_times(instance, factor, pause):
    import time

    time.sleep(pause)  # the later calls finish first: results must still come in order
    return instance.n_nodes * factor


def test_map_keeps_the_order_of_the_calls_on_two_processes():
    inst = tiny("example7")
    calls = [(k, 0.2 - 0.04 * k) for k in range(5)]
    with Workers(inst, 2) as workers:
        assert workers.map(_size_times, calls) == [7 * k for k in range(5)]
    assert Workers(inst, 1).map(_size_times, calls) == [7 * k for k in range(5)]
    assert available_cores() >= 1


def test_two_workers_give_valid_answers_and_the_same_ones_every_time():
    """Budgets are counts of work and results merge in call order: a run with two workers is
    reproducible (wall-clock deadlines aside, which these budgets never reach)."""
    inst = parse_instance(generate("flashattention", 3, nodes=500), name="fa")
    options = SolveOptions(time_limit_s=30, speed=0.25, seed=4, workers=2)
    first, again = solve_instance(inst, options), solve_instance(inst, options)
    for problem in (1, 2, 3):
        a, b = first.best(problem), again.best(problem)
        assert a is not None and b is not None and a.evaluation.valid
        assert a.solution == b.solution


def test_a_side_chain_runs_in_a_fresh_process_and_keeps_its_traffic_cap():
    """The Problem 3 side chains (solver.stages.timing.pipe_chain) run CP-SAT in spawned
    processes; what they return is valid, faster than the start and within the traffic cap,
    and the same on every run."""

    from npuopt.heuristics.placement import place
    from npuopt.solver.evaluate import evaluate
    from npuopt.solver.hardware import Hardware
    from npuopt.solver.stages.timing import pipe_chain

    inst = parse_instance(generate("conv", 2, nodes=300), name="c")
    hardware = Hardware(capacity={"L1": 2900})
    start = place(inst, inst.topological_order, hardware)
    judged = evaluate(inst, start, 3, hardware)
    assert judged.valid and judged.extra_traffic_units > 0
    cap = judged.extra_traffic_units
    args = (start, hardware, "residency", cap, 1.0, 11, 1e18, 0)
    with Workers(inst, 2, spawn=True) as side:
        found = side.start(pipe_chain, [args, args])()
    assert found[0] == found[1]
    solution, stop = found[0]
    assert stop == "budget"  # a budget, not the clock (1e18), ended it: reproducible
    if solution is not None:
        again = evaluate(inst, solution, 3, hardware)
        assert again.valid and again.extra_traffic_units <= cap
        assert again.makespan_cycles < judged.makespan_cycles


def test_the_portfolio_starts_only_the_generator_runs_that_fit_before_its_deadline():
    """A large graph at a short limit has no room for a generator run (issue 23: a 36k-node
    graph at 60 s); with room, the planned runs are all made and the deadline changes
    nothing."""
    import time

    from npuopt.solver.stages.order import portfolio

    inst = parse_instance(generate("conv", 2, nodes=600), name="c")
    options = SolveOptions(time_limit_s=60, speed=1.0)
    with Workers(inst, 1) as workers:
        assert portfolio(inst, options, workers, time.monotonic() - 1.0) == []
        planned = portfolio(inst, options, workers)
        assert len(planned) > 1
        assert portfolio(inst, options, workers, time.monotonic() + 600.0) == planned
        assert planned[0][0] == "cone-net0"  # first, beside the share


def test_cone_net_runs_beside_the_portfolio_share_without_displacing_a_run(monkeypatch):
    """The smaller graphs depend on the runs the share gives them (FlashAttention_Case1 on its
    20th): ``cone-net`` runs once more, first, and the rest are the runs planned without it."""
    import npuopt.solver.stages.order as order_stage
    from npuopt.heuristics.generators import GENERATORS
    from npuopt.solver.budgets import PORTFOLIO_VARIANTS

    inst = parse_instance(generate("conv", 2, nodes=600), name="c")
    options = SolveOptions(time_limit_s=60, speed=1.0)
    asked: list[list[tuple[str, int]]] = []

    class Recording(Workers):
        def map(self, task, calls):  # type: ignore[override]
            asked.append([tuple(call) for call in calls])
            return super().map(task, calls)

    with Recording(inst, 1) as workers:
        order_stage.portfolio(inst, options, workers)
    first, *rest = asked[0]
    assert first == ("cone-net", 0) and ("cone-net", 0) not in rest
    without = [
        (name, variant)
        for variant in range(PORTFOLIO_VARIANTS)
        for name in GENERATORS
        if name != "cone-net" and (name, variant) != ("cone", 0)
    ]
    assert rest == without[: len(rest)] and len(rest) >= 1


def test_the_list_scheduler_makes_the_same_runs_on_two_workers():
    """The plain runs and the restarts of :func:`order_heuristic` are the same whatever the
    worker count (issue 22: the same work in less time): same orders, same ranking, and the
    random generator left in the same state for the stages after it."""
    import numpy as np

    from npuopt.heuristics.ordering import order_heuristic
    from npuopt.solver.solution import op_order_of

    inst = parse_instance(generate("conv", 5, nodes=400), name="c")
    starts = [("reversed", list(reversed(op_order_of(inst, inst.topological_order))))]
    here, there = np.random.default_rng(3), np.random.default_rng(3)
    alone = order_heuristic(inst, here, starts=starts)
    with Workers(inst, 2) as workers:
        spread = order_heuristic(inst, there, starts=starts, runner=workers)
    assert len(alone) > 6
    assert [(r.name, r.start, r.solution) for r in alone] == [
        (r.name, r.start, r.solution) for r in spread
    ]
    assert here.integers(2**31) == there.integers(2**31)


def test_a_second_worker_plans_the_same_runs_and_finds_the_same_problem_1_and_2_answers():
    """The generator runs are spread over the workers, not multiplied by them, and the
    traversal search (started beside Problem 1's refinement with two workers) makes the same
    runs on its own random stream: Problems 1 and 2 get the one-worker answers."""
    from npuopt.solver.stages.order import portfolio
    from npuopt.solver.stages.placement import start_traversal

    inst = parse_instance(generate("conv", 2, nodes=600), name="c")
    options = SolveOptions(time_limit_s=60, speed=1.0)
    with Workers(inst, 1) as one, Workers(inst, 3) as three:
        assert portfolio(inst, options, one) == portfolio(inst, options, three)
        start = inst.topological_order
        alone = start_traversal(inst, options, start, one, 1e18)()
        spread = start_traversal(inst, options, start, three, 1e18)()
        beside = start_traversal(inst, options, start, three, 1e18, 1)()  # one worker left
    assert alone == spread == beside and len(alone[0]) == 3
    small = parse_instance(generate("matmul", 1, nodes=300), name="m")
    answers = [
        solve_instance(small, SolveOptions(time_limit_s=8, speed=0.25, seed=2, workers=w))
        for w in (1, 2)
    ]
    for problem in (1, 2):
        first, second = (a.best(problem) for a in answers)
        assert first is not None and second is not None
        assert first.solution == second.solution


def test_too_few_evaluations_per_unit_return_the_start_unannealed():
    """Below ANNEAL_MIN_EVALUATIONS per unit the traversal search makes one run, without
    annealing: its order is the start's (traversal_start), estimate and all."""
    from npuopt.heuristics.traversal import (
        TraversalParams,
        cluster_units_for,
        find_units,
        traversal_start,
    )
    from npuopt.solver.budgets import ANNEAL_MIN_EVALUATIONS
    from npuopt.solver.solution import op_order_of
    from npuopt.solver.stages.placement import start_traversal

    inst = parse_instance(generate("conv", 2, nodes=600), name="c")
    units = len(find_units(inst).members)
    start = inst.topological_order
    with Workers(inst, 1) as one:
        short = SolveOptions(time_limit_s=1, speed=0.05)
        runs, share = start_traversal(inst, short, start, one, 1e18)()
        long = SolveOptions(time_limit_s=60, speed=1.0)
        _, annealed = start_traversal(inst, long, start, one, 1e18)()
    assert share == 0 and len(runs) == 1 and len(runs[0]) == 1  # no runners-up either
    assert annealed >= ANNEAL_MIN_EVALUATIONS * units  # the longer limit anneals
    params = TraversalParams(max_cluster_units=cluster_units_for(0.1 * short.work_s))
    first, cost = traversal_start(inst, short.hardware, op_order_of(inst, start), params)
    assert runs[0][0][1] == cost


def _record_chain_budgets(monkeypatch) -> dict[str, list[float | None]]:
    """Record the budget each Problem 3 chain is given: this process's (``main``) and the side
    chains' (``side``); ``stage`` is left for the caller."""
    import npuopt.solver.stages.timing as timing

    given: dict[str, list[float | None]] = {"stage": [], "main": [], "side": []}
    main_chain, start_chains = timing._main_chain, timing.Workers.start

    def record_main(instance, result, options, start, budget, *rest):
        given["main"].append(budget)
        return main_chain(instance, result, options, start, budget, *rest)

    def record_side(self, task, calls):
        if task is timing.pipe_chain:
            given["side"].extend(call[4] for call in calls)
        return start_chains(self, task, calls)

    monkeypatch.setattr(timing, "_main_chain", record_main)
    monkeypatch.setattr(timing.Workers, "start", record_side)
    return given


def test_with_side_chains_every_chain_gets_the_same_reduced_share_of_the_budget(monkeypatch):
    """Chains beside each other slow each other down: with two workers the main chain and the
    side chain both get ``SIDE_CHAIN_RATE`` of the Problem 3 budget (and the summary records
    what the main chain was given), so that they end on it, not on the clock."""
    import pytest

    import npuopt.solver.solve as solve
    import npuopt.solver.stages.timing as timing
    from npuopt.solver.budgets import SIDE_CHAIN_RATE

    given = _record_chain_budgets(monkeypatch)
    stage = solve.refine_pipes

    def record_stage(instance, result, options, rng, started, pass_s, budget, report):
        given["stage"].append(budget)
        return stage(instance, result, options, rng, started, pass_s, budget, report)

    monkeypatch.setattr(solve, "refine_pipes", record_stage)
    # No re-offsetting passes (their work comes off the budget first) and a small graph's
    # small budget still gets a side chain.
    monkeypatch.setattr(timing, "_release", lambda *args: 0)
    monkeypatch.setattr(timing, "SIDE_CHAIN_MIN_WORK", 0.0)
    # Above FULL_PIPE_NODES, so that the LNS gets the whole budget.
    inst = parse_instance(generate("matmul", 1, nodes=700), name="m")
    result = solve_instance(inst, SolveOptions(time_limit_s=10, speed=1.0, seed=2, workers=2))
    assert SIDE_CHAIN_RATE < 1.0
    (full,), (reduced,) = given["stage"], given["main"]
    assert full > 0 and reduced == pytest.approx(SIDE_CHAIN_RATE * full)
    assert given["side"] == given["main"]  # one side chain, on the main chain's budget
    assert result.p3_lns is not None and result.p3_lns.budget == reduced


def test_fill_runs_a_side_chain_on_the_clock_beside_the_main_one(monkeypatch):
    """With ``fill`` and two workers, the chains after the budgeted ones run on the clock
    (budget None) on both cores."""
    import npuopt.solver.stages.timing as timing

    given = _record_chain_budgets(monkeypatch)
    monkeypatch.setattr(timing, "SIDE_CHAIN_MIN_WORK", 0.0)
    inst = parse_instance(generate("matmul", 1, nodes=700), name="m")
    options = SolveOptions(time_limit_s=16, speed=0.25, seed=2, workers=2, fill=True)
    result = solve_instance(inst, options)
    assert given["main"][-1] is None and given["side"][-1] is None
    assert len(given["main"]) == len(given["side"]) == 2  # budgeted, then on the clock
    assert result.p3_fill is not None and result.p3_fill.stop == "deadline"
