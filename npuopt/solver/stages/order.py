"""Problem 1 stage: the generators' orders through the list scheduler, then buffer compaction,
the relaxed-sub-instance bound and windowed LNS over the CP-SAT ordering model.

The list scheduler (:mod:`heuristics.ordering`) runs every policy on the node-id rank (the
canonical order, :mod:`solver.canonical`) and on each generator's order
(:mod:`heuristics.generators`), then seeded restarts; the best valid order is refined by buffer
compaction (:mod:`heuristics.compaction`), then by windowed LNS over the ordering model
(:mod:`models.ordering`, :mod:`solver.lns`), and a last compaction descent. On small instances
the full model runs first for a proven bound; the bound reported is the best of that, the
forced-live and grid bounds and the relaxed sub-instances' (:mod:`solver.bounds`). When
Problems 2/3 follow, the LNS stops when its key stalls and hands the rest of its budget on; an
answer that meets its bound (Matmul's grid bound) skips the refinement and hands all of it on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace

import numpy as np

from npuopt.heuristics.compaction import Compactor, compact_order, descend, moves_for
from npuopt.heuristics.generators import (
    FIRST_GENERATOR,
    GENERATORS,
    NODES_PER_SECOND,
    Structure,
    generator_runs,
    generator_task,
)
from npuopt.heuristics.neighbourhoods import ordering_neighbourhoods, peak_key
from npuopt.heuristics.ordering import OrderingParams, OrderingRun, order_heuristic
from npuopt.models.cuts import closure_cut_bound
from npuopt.models.ordering import OrderingData, solve_order
from npuopt.solver.bounds import peak_ops, relaxed_instance
from npuopt.solver.budgets import (
    CLOSING_DESCENT,
    COMPACTION_ALONE_SHARE,
    COMPACTION_SHARE,
    FULL_MODEL_OPS,
    P1_ALONE_DEADLINE,
    P1_ALONE_WORK,
    P1_DEADLINE,
    P1_LNS,
    P1_STALL_MIN,
    P1_STALL_SHARE,
    P1_TO_P3_WORK,
    P1_WORK,
    P3_RATE,
    PORTFOLIO_SHARE,
    PORTFOLIO_VARIANTS,
    RELAXED_OPS,
    RELAXED_SHARE,
    cuts_for,
)
from npuopt.solver.case import Candidate, CaseResult, SolveOptions, wall_cap
from npuopt.solver.evaluate import evaluate_order
from npuopt.solver.instance import Instance
from npuopt.solver.lns import Repaired, Step, run_lns
from npuopt.solver.result import Status
from npuopt.solver.solution import Solution, op_order_of, schedule_from_op_order
from npuopt.solver.workers import Workers

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OrderStage:
    """What the Problem 1 stage leaves to the next ones.

    Attributes
    ----------
    runs
        The list scheduler's runs, best first.
    starts
        The generators' op orders, by name (the Problem 2 stream orders start from them too).
    handed
        Problem 3 work (deterministic seconds) the stage did not need.
    """

    runs: list[OrderingRun]
    starts: list[tuple[str, list[int]]]
    handed: float


def order_stage(
    instance: Instance,
    options: SolveOptions,
    result: CaseResult,
    started: float,
    report: Callable[[str, str], None],
    structure: Structure,
    rng: np.random.Generator,
    workers: Workers,
    listed: Callable[[list[OrderingRun], bool], None] | None = None,
) -> OrderStage:
    """Run the Problem 1 stage (module docstring), recording its answer in ``result``;
    ``listed`` is called with the list scheduler's runs (best first), and whether a refinement
    follows in this process, before that refinement."""
    alone = set(options.problems) == {1}
    p1_deadline = started + (P1_ALONE_DEADLINE if alone else P1_DEADLINE) * options.time_limit_s
    starts = portfolio(instance, options, workers, p1_deadline)
    runs = order_heuristic(
        instance, rng, OrderingParams(), deadline=p1_deadline, starts=starts, runner=workers
    )
    valid_runs = [r for r in runs if r.evaluation.valid]
    value = (valid_runs[0].evaluation.max_v_stay_units or 0) if valid_runs else 0
    proven = value <= result.p1_bound_units
    if listed is not None:
        listed(runs, bool(valid_runs) and not proven and options.method == "full")
    handed = 0.0  # Problem 3 work (deterministic s) handed on by stages that ended early
    if valid_runs:
        best = valid_runs[0]
        result.p1 = Candidate(best.name, best.solution, best.evaluation)
        result.note()
        note = f", proven optimal ({result.p1_bound_source})" if proven else ""
        report("P1", f"max V_stay {value:,} ({best.name}, of {len(runs)} runs){note}")
        work = (P1_ALONE_WORK if alone else P1_WORK) * options.work_s
        share = COMPACTION_ALONE_SHARE if alone else COMPACTION_SHARE
        if proven:
            # Matmul's grid bound: Problem 3 gets the refinement's budget and the
            # compaction's share of the limit, at the pipe model's rate.
            handed = P1_TO_P3_WORK * work + P3_RATE * share * options.work_s
        elif options.method == "full":
            stall = None if alone else max(P1_STALL_SHARE * work, P1_STALL_MIN)
            moves = moves_for(instance, share * options.work_s)
            compactor = Compactor(instance)
            _compact_order(compactor, result, rng, moves, p1_deadline, report)
            used = _relaxed_bound(
                instance, result, options, RELAXED_SHARE * work, p1_deadline, report
            )
            data = OrderingData(instance, compactor.succ)
            spare = refine_order(data, result, rng, work - used, p1_deadline, stall, report)
            handed = P1_TO_P3_WORK * spare
            closing = max(1, int(CLOSING_DESCENT * moves))
            _compact_order(compactor, result, None, closing, p1_deadline, report)
    else:
        report("P1", "no valid order found (L0 single residency could not be kept)")
    return OrderStage(runs, starts, handed)


def portfolio(
    instance: Instance, options: SolveOptions, workers: Workers, deadline: float | None = None
) -> list[tuple[str, list[int]]]:
    """The order generators' op orders (:mod:`heuristics.generators`), each variant in turn
    while the share ``PORTFOLIO_SHARE`` of the limit lasts (as a run count, so a run is
    reproducible; the same runs whatever the worker count, spread over the workers). The
    ``cone`` order with variant 0 is the canonical order itself (the node ids), which the list
    scheduler runs anyway.

    Only the runs that fit in Problem 1's share of the limit start, the list scheduler's plain
    runs of the canonical order (one per policy, which come first) left room: a run of either
    costs about ``n / NODES_PER_SECOND`` seconds of the reference machine, so a 36k-node graph
    at a 60 s limit has no room for one, while at 600 s every planned run fits long before.
    That cut is planned (the same on every run); ``deadline`` (``time.monotonic()``) cuts
    again by the clock, which only acts on a machine running late."""
    runs = generator_runs(instance, PORTFOLIO_SHARE * options.work_s)
    each = instance.n_nodes / NODES_PER_SECOND  # reference seconds a run
    first = -(-len(OrderingParams().policies) // workers.count)  # batches of plain runs
    # Room in reference seconds: by plan (the same on every run), and by the clock, which only
    # cuts on a machine running late.
    rooms = [P1_DEADLINE * options.work_s]
    if deadline is not None:
        rooms.append((deadline - time.monotonic()) * options.speed)
    for room in rooms:
        runs = min(runs, int(max(0.0, room - first * each) / each) * workers.count)
    # ``cone-net`` runs once, first, beside the share: the largest graphs get two or three runs
    # at 600 s and it is their best start, while the smaller ones depend on the runs the share
    # already gives them (FlashAttention_Case1 on ``blocks`` variant 2, run 20 of 21).
    extra = [(FIRST_GENERATOR, 0)] if runs else []
    plan = extra + [
        (name, variant)
        for variant in range(PORTFOLIO_VARIANTS)
        for name in GENERATORS
        if name != FIRST_GENERATOR and (name, variant) != ("cone", 0)
    ][:runs]
    starts: list[tuple[str, list[int]]] = []
    seen: set[tuple[int, ...]] = set()
    for (name, variant), order in zip(plan, workers.map(generator_task, plan), strict=True):
        if tuple(order) not in seen:
            seen.add(tuple(order))
            starts.append((f"{name}{variant}", order))
    return starts


def _compact_order(
    compactor: Compactor,
    result: CaseResult,
    rng: np.random.Generator | None,
    moves: int,
    deadline: float,
    report: Callable[[str, str], None],
) -> None:
    """Buffer compaction of the Problem 1 answer for ``moves`` moves: iterated (seeded from
    ``rng``) or, without ``rng``, a plain descent. The evaluator judges what it keeps."""
    assert result.p1 is not None
    instance = compactor.instance
    ops = op_order_of(instance, result.p1.solution.order)
    before = result.p1.evaluation.max_v_stay_units
    method = f"{result.p1.method}+compaction"

    def keep(op_order: list[int]) -> None:
        order = schedule_from_op_order(instance, op_order)
        _keep_if_better(instance, result, Solution(order=order), method, ties=True)

    if rng is None:
        found = descend(compactor, ops, moves, deadline)
    else:
        seeded = np.random.default_rng(int(rng.integers(2**31)))
        found = compact_order(instance, ops, seeded, moves, deadline, compactor, keep)
    keep(found.op_order)
    after = result.p1.evaluation.max_v_stay_units
    report("P1-compact", f"max V_stay {before:,} -> {after:,} ({found.moves:,} moves)")


def _relaxed_bound(
    instance: Instance,
    result: CaseResult,
    options: SolveOptions,
    budget: float,
    deadline: float,
    report: Callable[[str, str], None],
) -> float:
    """Raise the Problem 1 bound with relaxed sub-instances around the answer's peak
    (:func:`solver.bounds.relaxed_instance`), each solved to optimality by the full ordering
    model, larger ones while they close and ``budget`` (deterministic seconds) lasts.

    Returns the budget used."""
    assert result.p1 is not None
    ops = op_order_of(instance, result.p1.solution.order)
    left, tried = budget, 0
    for size in RELAXED_OPS:
        chosen = peak_ops(instance, ops, size)
        if len(chosen) <= tried:
            continue  # no larger than the last sub-instance tried (the ops ran out)
        if left <= 0 or time.monotonic() >= deadline:
            break
        tried = len(chosen)
        sub, new_id = relaxed_instance(instance, chosen)
        answer = solve_order(
            OrderingData(sub),
            [new_id[v] for v in chosen],
            time_limit_s=left,
            seed=options.seed,
            tie_break=False,  # a plain peak objective: its bound is the peak bound
            deterministic=True,
            params=wall_cap(deadline),
        )
        left -= float(answer.info.get("deterministic_time", left))
        if answer.bound is not None and answer.bound > result.p1_bound_units:
            result.p1_bound_units = answer.bound
            result.p1_bound_source = f"relaxed sub-instance of {len(chosen)} ops"
        if answer.status is not Status.OPTIMAL:
            break  # a larger one would not close either
    report("P1-bound", f"max V_stay >= {result.p1_bound_units:,} ({result.p1_bound_source})")
    return budget - max(left, 0.0)


def closure_bound(
    instance: Instance,
    options: SolveOptions,
    result: CaseResult,
    started: float,
    report: Callable[[str, str], None],
) -> None:
    """Raise the Problem 1 bound with closure cuts (:func:`models.cuts.closure_cut_bound`)
    at as many nodes as ``CUT_SHARE`` of the limit cuts, once every answer is in (the stages
    before leave that time: the answers do not wait for it), unless the answer is proven
    optimal already. Stops at the limit."""
    if result.p1 is None:
        return
    value = result.p1.evaluation.max_v_stay_units or 0
    cuts = cuts_for(options.work_s, instance.n_nodes)
    if value <= result.p1_bound_units or cuts <= 0:
        return
    units, done = closure_cut_bound(instance, cuts, started + options.time_limit_s)
    if units > result.p1_bound_units:
        result.p1_bound_units = units
        result.p1_bound_source = f"closure cut (best of {done:,} nodes)"
    report("P1-cut", f"max V_stay >= {result.p1_bound_units:,} ({result.p1_bound_source})")


def refine_order(
    data: OrderingData,
    result: CaseResult,
    rng: np.random.Generator,
    budget: float,
    deadline: float,
    stall: float | None,
    report: Callable[[str, str], None],
) -> float:
    """Problem 1 refinement for ``budget`` deterministic seconds (``deadline`` stops a slow
    machine): on small instances the full model first (it may prove the optimum outright),
    then windowed LNS, which stops early when its key (peak, positions at the peak) has not
    dropped for ``stall``.

    Returns the budget left when the answer was proven optimal or the LNS stalled, else 0
    (on Conv_Case0 the relaxed bound proves the start optimal: 90% of the budget is left)."""
    assert result.p1 is not None
    instance = data.instance
    seed = int(rng.integers(2**31))
    ops = op_order_of(instance, result.p1.solution.order)
    proven = False
    if len(ops) <= FULL_MODEL_OPS:
        full = solve_order(
            data,
            ops,
            None,
            time_limit_s=max(1.0, 0.6 * budget),
            seed=seed,
            lower_bound=result.p1_bound_units,
            tie_break=False,  # a plain peak objective: its bound is the peak bound
            deterministic=True,
            params=wall_cap(deadline),
        )
        budget -= float(full.info.get("deterministic_time", 0.0))
        if full.bound is not None and full.bound > result.p1_bound_units:
            result.p1_bound_units, result.p1_bound_source = full.bound, "cp-sat full model"
        _keep_if_better(instance, result, full.solution, "cp-sat full model")
        proven = full.status is Status.OPTIMAL
    if proven:
        spare = max(budget, 0.0)
    else:
        _lns_order(instance, result, data, seed, deadline, budget, stall, report)
        assert result.p1_lns is not None
        done = result.p1_lns.stalled or result.p1_lns.proven_optimal
        spare = max(budget - result.p1_lns.work, 0.0) if done else 0.0
    value = result.p1.evaluation.max_v_stay_units or 0
    note = " (proven optimal)" if value <= result.p1_bound_units else ""
    steps = (
        f"; LNS {len(result.p1_lns.steps)} steps {result.p1_lns.outcomes()}"
        if result.p1_lns
        else ""
    )
    report(
        "P1",
        f"max V_stay {value:,}, bound {result.p1_bound_units:,} ({result.p1_bound_source})"
        f"{note}{steps}",
    )
    return spare


def _lns_order(
    instance: Instance,
    result: CaseResult,
    data: OrderingData,
    seed: int,
    deadline: float,
    budget: float,
    stall: float | None,
    report: Callable[[str, str], None],
) -> None:
    """Windowed LNS over the ordering model from the current Problem 1 answer, for ``budget``
    units of deterministic work (the wall-clock ``deadline`` caps it; ``stall`` ends it when
    the peak stops dropping)."""
    assert result.p1 is not None
    bound = result.p1_bound_units
    method = f"{result.p1.method}+lns"

    def repair(
        ops: tuple[int, ...], window: Collection[int], time_limit_s: float, seed: int
    ) -> Repaired[tuple[int, ...]]:
        answer = solve_order(
            data,
            ops,
            window,
            time_limit_s=time_limit_s,
            seed=seed,
            lower_bound=bound,
            deterministic=True,
            params=wall_cap(deadline),
        )
        candidate = op_order_of(instance, answer.solution.order) if answer.solution else None
        work = float(answer.info.get("deterministic_time", time_limit_s))
        return Repaired(candidate, answer.status is Status.OPTIMAL, answer.status.value, work)

    def on_step(step: Step) -> None:
        if step.outcome == "best" and step.after is not None:
            report(
                "P1-lns", f"max V_stay {step.after[0]:,} ({step.after[1]} positions at the peak)"
            )

    def keep(ops: tuple[int, ...]) -> None:
        # Same peak with fewer positions at it counts: a better start for anyone refining it.
        order = schedule_from_op_order(instance, ops)
        _keep_if_better(instance, result, Solution(order=order), method, ties=True)

    result.p1_lns = run_lns(
        op_order_of(instance, result.p1.solution.order),
        lambda ops: peak_key(instance, ops),
        ordering_neighbourhoods(instance),
        repair,
        np.random.default_rng(seed),
        deadline,
        replace(P1_LNS, work_budget=max(budget, 0.0), stall_work=stall),
        lower_bound=(bound, instance.n_nodes),
        on_step=on_step,
        on_best=keep,
    )


def _keep_if_better(
    instance: Instance,
    result: CaseResult,
    solution: Solution | None,
    method: str,
    ties: bool = False,
) -> None:
    """Replace the Problem 1 answer when the evaluator finds ``solution`` valid and better (or,
    with ``ties``, no worse)."""
    if solution is None or result.p1 is None:
        return
    evaluation = evaluate_order(instance, solution.order)
    new, old = evaluation.objective(), result.p1.evaluation.objective()
    if evaluation.valid and (new < old or (ties and new == old)):
        result.p1 = Candidate(method, solution, evaluation)
        result.note()
