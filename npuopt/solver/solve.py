"""The solve pipeline: Problem 1, 2 and 3 solutions for one instance within a time budget.

:func:`solve_instance` renames the graph by its structure (:mod:`solver.canonical`), so that
node ids and BufIds decide nothing, splits it into independent parts (:mod:`solver.parts`) when
it has several, and runs the stages on each, one module each:

1. **P1** (:mod:`solver.stages.order`): the order generators' portfolio through the
   memory-aware list scheduler, then buffer compaction and windowed LNS over the CP-SAT
   ordering model, with the relaxed-sub-instance bound;
2. **P2** (:mod:`solver.stages.placement`): traversal-search, stream-grouped and Problem 1
   orders, each placed with every policy and compacted for the pipes, the best refined by
   windowed LNS over the CP-SAT placement model;
3. **P3** (:mod:`solver.stages.timing`): the fastest answer within the traffic budget,
   re-timed by windowed LNS over the CP-SAT pipe model and justified.

With ``method="heuristics"`` the CP-SAT refinements are skipped. Budgets and shares of the limit
are in :mod:`solver.budgets`. Every value comes from :func:`solver.evaluate.evaluate`; nothing
here trusts a model's own account. Answers come back in the user's ids.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from npuopt.heuristics.generators import Structure, remember_structure
from npuopt.heuristics.ordering import OrderingRun
from npuopt.heuristics.pipes import compact
from npuopt.solver.bounds import TrafficBound, makespan_bound, order_bound
from npuopt.solver.budgets import COMPOSE_NODE_S, COMPOSE_SHARE, p3_budget
from npuopt.solver.canonical import Canonical, canonicalize
from npuopt.solver.case import (
    METHODS,
    Candidate,
    CaseResult,
    Interrupted,
    Method,
    Progress,
    ProgressFn,
    SolveOptions,
    fastest_within_budget,
    offer,
    settle,
)
from npuopt.solver.evaluate import evaluate, evaluate_order
from npuopt.solver.instance import Instance
from npuopt.solver.parts import Part, in_sequence, side_by_side, split
from npuopt.solver.solution import Solution
from npuopt.solver.stages.order import closure_bound, order_stage
from npuopt.solver.stages.placement import Traversals, placement_stage, start_traversal
from npuopt.solver.stages.timing import refine_pipes
from npuopt.solver.workers import Workers

log = logging.getLogger(__name__)

__all__ = [
    "METHODS",
    "Candidate",
    "CaseResult",
    "Interrupted",
    "Method",
    "Progress",
    "ProgressFn",
    "SolveOptions",
    "refine_timing",
    "solve_instance",
]


def solve_instance(
    instance: Instance, options: SolveOptions, progress: ProgressFn | None = None
) -> CaseResult:
    """Run the pipeline on one instance (see the module docstring).

    The instance is solved under canonical names (:mod:`solver.canonical`), so that its node
    ids and BufIds decide nothing; the answers come back in the user's ids.

    An interrupt (``KeyboardInterrupt``, or :class:`Interrupted` from a SIGTERM handler) ends
    the run early: the result then holds the best answers found so far (every one judged by
    the evaluator) and ``interrupted`` names the cause.
    """
    began = time.monotonic()
    parts = split(instance)
    if len(parts) > 1:
        return _solve_parts(instance, parts, options, progress)
    try:
        canonical = canonicalize(instance)
    except (KeyboardInterrupt, Interrupted) as exc:
        result = CaseResult(instance.name, order_bound(instance), makespan_bound(instance))
        result.interrupted = "SIGINT" if isinstance(exc, KeyboardInterrupt) else str(exc)
        return result
    spent = options.spent_s + time.monotonic() - began
    named = _solve_named(canonical.instance, replace(options, spent_s=spent), progress, canonical)
    try:
        return _restored(named, canonical)
    except (KeyboardInterrupt, Interrupted) as exc:  # the answers are kept all the same
        named.interrupted = "SIGINT" if isinstance(exc, KeyboardInterrupt) else str(exc)
        return _restored(named, canonical)


def compose_reserve(instance: Instance, options: SolveOptions) -> float:
    """Seconds of the limit kept for putting a graph's parts together: the share
    ``COMPOSE_SHARE`` of the limit, or the time the whole-graph evaluations and compactions
    take at this size (``COMPOSE_NODE_S`` a node), whichever is more, but never more than half
    of the limit. From the limit alone, not the clock: the parts' budgets follow from it."""
    limit = max(options.time_limit_s, 0.0)
    needed = instance.n_nodes * COMPOSE_NODE_S / options.speed
    return min(max(limit * COMPOSE_SHARE, needed), limit / 2)


def _solve_parts(
    instance: Instance, parts: Sequence[Part], options: SolveOptions, progress: ProgressFn | None
) -> CaseResult:
    """Each part (:mod:`solver.parts`) solved on its own for its share of the limit (by node
    count), the answers then put one after another; for Problems 2 and 3 the parts' addresses
    also side by side where memory allows, re-sequenced for the pipes, the faster kept.

    The shares are fixed in advance, so that the same parts get the same budgets on every run.
    A part that starts late (the loading, or earlier parts that overran on a machine slower
    than its speed factor) keeps its budget and loses the delay from its deadlines only."""
    started = time.monotonic() - options.spent_s
    solved: list[CaseResult] = []
    interrupted: str | None = None
    total = sum(p.instance.n_nodes for p in parts)
    planned = options.time_limit_s - compose_reserve(instance, options)
    due = started  # when the next part starts by plan
    for part in parts:
        share = planned * part.instance.n_nodes / total
        late = max(time.monotonic() - due, 0.0)
        due += share
        sub = solve_instance(
            part.instance, replace(options, time_limit_s=share, spent_s=late), progress
        )
        solved.append(sub)
        if sub.interrupted:
            interrupted = sub.interrupted
            break
    # After an interrupt, the parts without an answer get the greedy stages' quick one, so
    # that the whole still has an answer to write.
    for index, part in enumerate(parts):
        found = solved[index] if index < len(solved) else None
        if found is None or any(found.best(p) is None for p in options.problems):
            quick = solve_instance(
                part.instance,
                replace(options, time_limit_s=0.0, spent_s=0.0, method="heuristics", workers=1),
            )
            if found is None:
                solved.append(quick)
            else:
                found.p1 = found.p1 or quick.p1
                found.p2 = found.p2 or quick.p2
                found.p3 = found.p3 or quick.p3
    result = CaseResult(instance.name, order_bound(instance), makespan_bound(instance))
    result.p1_bound_units = result.order_bound.units
    result.p1_bound_source = result.order_bound.source
    result.started = started
    result.interrupted = interrupted
    result.parts = [_part_line(sub) for sub in solved]
    for sub in solved:
        for stage, seconds in sub.stage_s.items():
            result.stage_s[stage] = result.stage_s.get(stage, 0.0) + seconds
    best_part = max(solved, key=lambda sub: sub.p1_bound_units)
    result.p1_bound_units = max(result.p1_bound_units, best_part.p1_bound_units)
    if best_part.p1_bound_units >= result.order_bound.units:
        result.p1_bound_source = f"largest part bound ({best_part.p1_bound_source})"
    hardware, rule = options.hardware, options.reuse_rule

    def composed(problem: int) -> list[Solution] | None:
        found = [sub.best(problem) for sub in solved]
        return [c.solution for c in found if c is not None] if all(found) else None

    try:
        if (ones := composed(1)) is not None:
            solution = in_sequence(instance, parts, ones)
            result.p1 = Candidate("parts", solution, evaluate_order(instance, solution.order))
            result.note()
        if {2, 3} & set(options.problems):
            bounds = [sub.p2_bound for sub in solved]
            if all(bounds):
                result.p2_bound = TrafficBound(sum(b.units for b in bounds if b), -1)
            done: list[list[Solution]] = []
            for problem in (2, 3):
                answers = composed(problem)
                if answers is None or answers in done:  # each part's P3 is often its P2
                    continue
                done.append(answers)
                sequence = in_sequence(instance, parts, answers)
                beside = side_by_side(instance, parts, answers, hardware)
                tries = [
                    ("parts", sequence),
                    ("parts+compact", compact(instance, sequence)),
                    ("parts+beside+compact", compact(instance, beside)),
                ]
                for method, solution in tries:
                    judged = evaluate(instance, solution, 3, hardware, rule)
                    if judged.valid:
                        offer(result, Candidate(method, solution, judged), options)
    except (KeyboardInterrupt, Interrupted) as exc:
        result.interrupted = "SIGINT" if isinstance(exc, KeyboardInterrupt) else str(exc)
    settle(instance, options, result)
    result.runtime_s = time.monotonic() - started
    return result


def _part_line(result: CaseResult) -> dict[str, object]:
    """A part's answers for the whole's summary."""
    line: dict[str, object] = {"case": result.case, "interrupted": result.interrupted}
    for problem in (1, 2, 3):
        candidate = result.best(problem)
        if candidate is not None:
            e = candidate.evaluation
            line[f"p{problem}"] = (
                e.max_v_stay_units
                if problem == 1
                else {
                    "extra_traffic_units": e.extra_traffic_units,
                    "makespan_cycles": e.makespan_cycles,
                }
            )
    line["p1_bound_units"] = result.p1_bound_units
    return line


def _restored(result: CaseResult, canonical: Canonical) -> CaseResult:
    """``result`` (found under canonical names) with every answer in the user's ids."""

    def back(candidate: Candidate | None) -> Candidate | None:
        if candidate is None:
            return None
        return Candidate(
            candidate.method,
            canonical.restore(candidate.solution),
            canonical.restore_evaluation(candidate.evaluation),
        )

    restored = replace(result)
    restored.p1, restored.p2, restored.p3 = back(result.p1), back(result.p2), back(result.p3)
    restored.candidates = [c for c in map(back, result.candidates) if c is not None]
    return restored


def _solve_named(
    instance: Instance,
    options: SolveOptions,
    progress: ProgressFn | None,
    canonical: Canonical,
) -> CaseResult:
    """The pipeline on ``instance`` as named (the canonical instance, see
    :func:`solve_instance`)."""
    started = time.monotonic() - options.spent_s  # deadlines count from the real start

    def report(stage: str, message: str) -> None:
        elapsed = time.monotonic() - started
        # Time since the previous report goes to this stage (a stage may report many times).
        since = elapsed - sum(result.stage_s.values())
        result.stage_s[stage] = result.stage_s.get(stage, 0.0) + since
        log.info("%s %s: %s", instance.name, stage, message)
        if progress is not None:
            progress(Progress(instance.name, stage, message, elapsed))

    result = CaseResult(instance.name, order_bound(instance), makespan_bound(instance))
    result.p1_bound_units = result.order_bound.units
    result.p1_bound_source = result.order_bound.source
    remember_structure(instance, canonical.structure)
    workers = Workers(instance, options.workers)
    try:
        _pipeline(instance, options, result, started, report, canonical.structure, workers)
        # Last, in the time the stages leave before the limit: no answer waits for it.
        closure_bound(instance, options, result, started, report)
    except (KeyboardInterrupt, Interrupted) as exc:
        result.interrupted = "SIGINT" if isinstance(exc, KeyboardInterrupt) else str(exc)
        log.warning("%s: interrupted (%s); keeping the best found", instance.name, exc)
        workers.close(now=True)
        settle(instance, options, result)
    finally:
        workers.close()
    result.runtime_s = time.monotonic() - started
    return result


def refine_timing(instance: Instance, solution: Solution, options: SolveOptions) -> CaseResult:
    """Problem 3 alone from a stored answer: its Problem 3 refinement (re-offsetting, the pipe
    model's windowed LNS, justification) with the budget of an ``options.time_limit_s`` run,
    the traffic budget that of ``solution`` (it stands for the Problem 2 answer). Chained, it
    shows where the LNS levels off (benchmarks/p3_rounds.py). Like :func:`solve_instance`, it
    works under canonical names and answers in the user's ids."""
    judged = evaluate(instance, solution, 3, options.hardware, options.reuse_rule)
    if not judged.valid:
        raise ValueError(f"the start is not a valid answer: {judged.violations[:1]}")
    canonical = canonicalize(instance)
    named = _refine_named(canonical.instance, canonical.adopt(solution), options)
    return _restored(named, canonical)


def _refine_named(instance: Instance, solution: Solution, options: SolveOptions) -> CaseResult:
    judged = evaluate(instance, solution, 3, options.hardware, options.reuse_rule)
    result = CaseResult(instance.name, order_bound(instance), makespan_bound(instance))
    start = Candidate("start", solution, judged)
    result.candidates.append(start)
    result.p2 = result.p3 = start
    refine_pipes(
        instance,
        result,
        options,
        np.random.default_rng(options.seed),
        time.monotonic() - options.spent_s,
        0.0,
        p3_budget(options.work_s, instance.n_nodes, alone=True),
        lambda stage, message: None,
    )
    settle(instance, options, result)
    return result


def _pipeline(
    instance: Instance,
    options: SolveOptions,
    result: CaseResult,
    started: float,
    report: Callable[[str, str], None],
    structure: Structure,
    workers: Workers,
) -> None:
    rng = np.random.default_rng(options.seed)
    report("bounds", f"P1 >= {result.order_bound.units:,}, P3 >= {result.makespan_bound.cycles:,}")
    early: list[Traversals] = []

    def listed(runs: list[OrderingRun], refining: bool) -> None:
        """With several workers, Problem 2's traversal search starts from the list scheduler's
        best order at once, on the workers this process leaves free while it refines Problem
        1 (all of them when it does not)."""
        placeable = instance.placement_error(options.hardware) is None
        if workers.count > 1 and {2, 3} & set(options.problems) and placeable:
            start = runs[0].solution.order if runs else instance.topological_order
            end = started + options.time_limit_s
            width = workers.count - 1 if refining else workers.count
            early.append(start_traversal(instance, options, start, workers, end, width))

    p1 = order_stage(instance, options, result, started, report, structure, rng, workers, listed)
    if not {2, 3} & set(options.problems):
        return
    handed, pass_s = placement_stage(
        instance, options, result, started, report, rng, p1, workers, early[0] if early else None
    )
    if result.p2 is None:
        return
    result.p3 = fastest_within_budget(result, options)
    result.note()
    if options.method == "full":
        # From the configured limit and the graph, never from the clock: the same work on
        # every run.
        budget = p3_budget(options.work_s, instance.n_nodes, workers.count) + p1.handed + handed
        refine_pipes(instance, result, options, rng, started, pass_s, budget, report)
    settle(instance, options, result)
    assert result.p3 is not None and result.p3_bound is not None
    e3 = result.p3.evaluation
    report(
        "P3",
        f"makespan {e3.makespan_cycles:,} (bound {result.p3_bound.cycles:,}), "
        f"traffic {e3.extra_traffic_units:,} ({result.p3.method})",
    )
