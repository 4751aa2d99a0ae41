"""Problem 2 stage: orders to place, each placed with every policy, and the best refined.

Orders come from a traversal search (:mod:`heuristics.traversal`: simulated annealing over the
order of L0-connected units, on an address-free traffic estimate, from the list scheduler's
best order), from stream grouping (:mod:`heuristics.streams`: a few independent computations at
a time, built on the Problem 1 orders, the topological one and every generator's, their
COPY_INs hoisted as far as the estimate allows) and from Problem 1 (the list scheduler's best
order, untangled where live memory exceeds a capacity (:mod:`heuristics.untangle`), and the
refined one). Each is placed with each placement policy
(:mod:`heuristics.placement`) and reordered for the pipes with the placement kept
(:mod:`heuristics.pipes`). The best is refined by the CP-SAT placement model
(:mod:`models.placement`): the full model on small instances, then windowed LNS, whose windows
re-place buffers or re-order a run of nodes and re-place their buffers in the same model.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace

import numpy as np

from npuopt.heuristics.neighbourhoods import Reorder, placement_neighbourhoods, traffic_key
from npuopt.heuristics.pipes import compact
from npuopt.heuristics.placement import (
    PLACEMENT_POLICIES,
    PlacementError,
    place,
)
from npuopt.heuristics.streams import grouped_op_order, hoist_loads, stream_of
from npuopt.heuristics.structure import op_graph
from npuopt.heuristics.traversal import (
    TraversalParams,
    anneal_from,
    cluster_units_for,
    estimate_traffic,
    evaluations_for,
    find_units,
    traversal_start,
)
from npuopt.heuristics.untangle import untangle_excess
from npuopt.models.placement import solve_placement
from npuopt.solver.bounds import traffic_bound
from npuopt.solver.budgets import (
    ANNEAL_MIN_EVALUATIONS,
    FULL_PLACEMENT_BUFFERS,
    HOIST_LEADS,
    HOIST_SHARE,
    ORDERS_TO_PLACE,
    P2_DEADLINE,
    P2_LNS,
    P2_TO_P3_WORK,
    P2_WORK,
    P3_RATE,
    STREAM_GROUPS,
    STREAM_ORDERS,
    STREAM_SHARE,
    TRAVERSAL_RUNS,
    TRAVERSAL_SHARE,
    placement_s,
    runners_up,
)
from npuopt.solver.case import Candidate, CaseResult, SolveOptions, offer, wall_cap
from npuopt.solver.evaluate import Evaluation, evaluate, evaluate_order
from npuopt.solver.hardware import Hardware
from npuopt.solver.instance import Instance
from npuopt.solver.lns import Repaired, Step, run_lns
from npuopt.solver.result import Status
from npuopt.solver.solution import Solution, op_order_of, schedule_from_op_order
from npuopt.solver.stages.order import OrderStage
from npuopt.solver.workers import Workers

log = logging.getLogger(__name__)


def placement_stage(
    instance: Instance,
    options: SolveOptions,
    result: CaseResult,
    started: float,
    report: Callable[[str, str], None],
    rng: np.random.Generator,
    p1: OrderStage,
    workers: Workers,
    searching: Traversals | None = None,
) -> tuple[float, float]:
    """Run the Problem 2 stage (module docstring), recording its candidates and answer in
    ``result``; ``searching`` is the traversal search when it started earlier (from the list
    scheduler's best order, :func:`start_traversal`). Returns the Problem 3 work it handed on
    (deterministic seconds) and the longest whole-graph pass it timed (placing and evaluating
    one candidate)."""
    deadline = started + options.time_limit_s
    impossible = instance.placement_error(options.hardware)
    if impossible is not None:  # the CLI and the API refuse such a graph before solving
        report("P2", f"no placement exists: {impossible}")
        return 0.0, 0.0
    result.p2_bound = traffic_bound(instance, options.hardware)
    report("bounds", f"P2 traffic >= {result.p2_bound.units:,}")

    # The list scheduler's best order comes first: the traversal search starts from it. The
    # refined Problem 1 order follows; it keeps residency low by running less at once.
    orders: list[tuple[str, tuple[int, ...]]] = []
    listed = [(run.name, run.solution.order) for run in p1.runs]
    refined = [(result.p1.method, result.p1.solution.order)] if result.p1 is not None else []
    for method, order in listed[:1] + refined + listed[1:]:
        if len(orders) < ORDERS_TO_PLACE and order not in (o for _, o in orders):
            orders.append((method, order))
    if not orders:
        orders.append(("topological", instance.topological_order))
    # The first untangled where memory overflows (heuristics.untangle): the parts of a window
    # that share nothing but loads, one after another, leave less to spill (Conv_Case1's
    # Problem 1 order: live units above capacity, summed over its ops, 652,055 -> 30,746).
    orders[0] = _untangled(instance, options, *orders[0])
    # A placed answer at once, before any search: an interrupt from here on leaves valid
    # Problem 2 and 3 files (the greedy placement cannot fail on a placeable graph).
    first = f"{orders[0][0]}+{PLACEMENT_POLICIES[0]}"
    placed = {(orders[0][1], PLACEMENT_POLICIES[0])}
    began = time.monotonic()
    quick = _place_and_compact(instance, orders[0][1], options, first)
    pass_s = time.monotonic() - began
    if quick is not None and quick.evaluation.valid:
        offer(result, quick, options)
        report("P2-first", f"traffic {quick.evaluation.extra_traffic_units:,} ({quick.method})")
    found = searching or start_traversal(instance, options, orders[0][1], workers, deadline)
    traversals, second, annealed = _traversal_orders(instance, found, report)
    for traversal in reversed(traversals):
        if traversal not in (o for _, o in orders):
            orders.insert(0, ("traversal", traversal))
    orders[:0] = _stream_orders(instance, options, orders, p1.starts, report, workers)
    # Last, the orders each annealing run held best before its last (the estimate is a proxy;
    # one of them often places with less traffic, docs/decisions.md "Runners-up").
    known = len(orders)
    for runner_up in second:
        if runner_up not in (o for _, o in orders):
            orders.append(("traversal-runner-up", runner_up))
    placing = len(orders) - known  # a runner-up that repeats a listed order is not placed again
    # Each candidate is a whole-graph pass (place, compact, evaluate twice), one per worker at
    # a time; the next batch starts only if it fits before the Problem 2 deadline too, leaving
    # Problem 3 its share.
    p2_deadline = started + P2_DEADLINE * options.time_limit_s
    pending = [
        (order, options, f"{method}+{policy}")
        for method, order in orders
        for policy in PLACEMENT_POLICIES
        if (order, policy) not in placed
    ]
    for at in range(0, len(pending), workers.count):
        began = time.monotonic()
        if result.candidates and began + pass_s > p2_deadline:
            break
        batch = pending[at : at + workers.count]
        for candidate in workers.map(_place_and_compact, batch):
            if candidate is not None and candidate.evaluation.valid:
                result.candidates.append(candidate)
        pass_s = max(pass_s, time.monotonic() - began)
    if not result.candidates:
        report("P2", "no valid placement found")
        return 0.0, pass_s
    result.p2 = min(result.candidates, key=lambda c: c.evaluation.objective())
    result.note()
    handed = 0.0
    if not annealed and workers.count == 1:
        # The search's share went unused (with more workers it ran beside Problem 1).
        handed += P3_RATE * TRAVERSAL_SHARE * options.work_s
    # So did the placements planned for runners-up the runs did not have or that repeat an
    # order (the same count on every run: it depends on the orders alone).
    missing = TRAVERSAL_RUNS * runners_up(options.work_s, instance.n_nodes) - placing
    handed += P3_RATE * placement_s(max(missing, 0), instance.n_nodes, workers.count)
    if options.method == "full":
        handed += P2_TO_P3_WORK * refine_placement(instance, result, options, rng, started, report)
    e2 = result.p2.evaluation
    report(
        "P2",
        f"traffic {e2.extra_traffic_units:,} in {e2.spill_count:,} spills, "
        f"makespan {e2.makespan_cycles:,} ({result.p2.method})",
    )
    return handed, pass_s


def _untangled(
    instance: Instance, options: SolveOptions, method: str, order: tuple[int, ...]
) -> tuple[str, tuple[int, ...]]:
    """``order`` untangled against the capacities (:func:`heuristics.untangle.untangle_excess`)
    and named so, or as it was when that changes nothing or the untangled schedule breaks a
    rule of Problem 1 (untangling can move one part's L0 buffer into the lifetime of another
    part's buffer of that memory: single residency is not one of its constraints)."""
    ops = op_order_of(instance, order)
    found = untangle_excess(instance, op_graph(instance), ops, options.hardware.capacity_units)
    if tuple(found) == ops:
        return method, order
    try:
        untangled = schedule_from_op_order(instance, found)
    except ValueError:
        return method, order
    if not evaluate_order(instance, untangled).valid:
        return method, order
    return f"{method}+untangled", untangled


#: Seeds of the traversal search come from a random stream of their own (``(seed, this)``),
#: so that the search may start before the Problem 1 refinement draws from the main one.
TRAVERSAL_STREAM = 1

#: The traversal search under way: waits for its runs' orders and estimates (each run's best
#: first, then the orders it held best before, :attr:`TraversalParams.elite`), and the
#: evaluations each run had.
Traversals = Callable[[], tuple[list[list[tuple[list[int], int]]], int]]


def start_traversal(
    instance: Instance,
    options: SolveOptions,
    start: Sequence[int],
    workers: Workers,
    end: float,
    width: int | None = None,
) -> Traversals:
    """The traversal search of Problem 2 (:mod:`heuristics.traversal`: simulated annealing
    over the order of L0-connected units from ``start``, an op order), on its share of the time
    limit budgeted in evaluations so the run is reproducible: ``TRAVERSAL_RUNS`` runs with their
    own seeds, each on its share of the evaluations, the same runs whatever the worker count;
    none goes on past ``end`` (``time.monotonic()``).

    With several workers the runs start at once on ``width`` of them (all but one when this
    process goes on with Problem 1's refinement meanwhile) and the function returned waits for
    them; with one, they run when it is called. It returns each run's unit order and
    estimate.

    When the runs would get fewer than ``ANNEAL_MIN_EVALUATIONS`` evaluations per unit, one
    run returns the start (the best of the greedy and clustered orders) without annealing: so
    few moves found nothing better on any graph measured, and the time goes to the stages
    after."""
    evaluations = evaluations_for(instance, TRAVERSAL_SHARE * options.work_s)
    share = max(1, evaluations // TRAVERSAL_RUNS)
    rng = np.random.default_rng([options.seed, TRAVERSAL_STREAM])
    seeds = [int(seed) for seed in rng.integers(2**31, size=TRAVERSAL_RUNS)]
    if share < ANNEAL_MIN_EVALUATIONS * len(find_units(instance).members):
        share, seeds = 0, seeds[:1]
    params = TraversalParams(
        max_evaluations=share,
        max_cluster_units=cluster_units_for(0.1 * options.work_s),
        elite=1 + runners_up(options.work_s, instance.n_nodes),
    )
    ops = op_order_of(instance, start)
    # The count is the budget; the clock only stops a search the count misjudged.
    cap = 2 * TRAVERSAL_SHARE * options.time_limit_s
    if workers.count == 1:
        return lambda: (
            traversal_runs(
                instance, options.hardware, ops, params, seeds, min(end, time.monotonic() + cap)
            ),
            share,
        )
    stop = min(end, time.monotonic() + cap)
    width = min(width or workers.count, len(seeds))
    calls = [(options.hardware, ops, params, seeds[k::width], stop) for k in range(width)]
    started = workers.start(traversal_runs, calls)

    def collected() -> tuple[list[list[tuple[list[int], int]]], int]:
        # Back in seed order: run j is run j // width of task j % width.
        answers = started()
        return [answers[j % width][j // width] for j in range(len(seeds))], share

    return collected


def traversal_runs(
    instance: Instance,
    hardware: Hardware,
    ops: Sequence[int],
    params: TraversalParams,
    seeds: Sequence[int],
    stop: float,
) -> list[list[tuple[list[int], int]]]:
    """Annealing runs from the traversal start of ``ops``, one per seed, one after another (a
    task a worker process can run on its own)."""
    first, cost = traversal_start(instance, hardware, ops, params)
    return [anneal_from(instance, hardware, first, cost, seed, params, stop) for seed in seeds]


def _traversal_orders(
    instance: Instance,
    found: Traversals,
    report: Callable[[str, str], None],
) -> tuple[list[tuple[int, ...]], list[tuple[int, ...]], bool]:
    """The traversal search's orders (:func:`start_traversal`): each run's best, lowest
    estimate first, then the runs' runners-up, lowest estimate first (every one goes on to
    placement); and whether it annealed."""
    runs, share = found()
    best = sorted((run[0] for run in runs), key=lambda found: found[1])
    estimates = ", ".join(f"{estimate:,}" for _, estimate in best)
    how = f"{len(runs)} x {share:,} evaluations" if share else "too few evaluations to anneal"
    seconds = sorted((f for run in runs for f in run[1:]), key=lambda found: found[1])
    extra = f", {len(seconds)} runners-up" if seconds else ""
    report("P2-order", f"traversal search: estimated traffic {estimates} ({how}{extra})")
    return _schedules(instance, best), _schedules(instance, seconds), share > 0


def _schedules(
    instance: Instance, op_orders: Sequence[tuple[list[int], int]]
) -> list[tuple[int, ...]]:
    """The schedules of ``op_orders`` (with their estimates), skipping those none keeps."""
    orders: list[tuple[int, ...]] = []
    for op_order, _ in op_orders:
        try:
            orders.append(schedule_from_op_order(instance, op_order))
        except ValueError:
            continue  # no schedule keeps the order (single residency): not a candidate
    return orders


def _stream_orders(
    instance: Instance,
    options: SolveOptions,
    orders: Sequence[tuple[str, tuple[int, ...]]],
    starts: Sequence[tuple[str, Sequence[int]]],
    report: Callable[[str, str], None],
    workers: Workers,
) -> list[tuple[str, tuple[int, ...]]]:
    """Stream-grouped orders (:mod:`heuristics.streams`) from the Problem 1 orders (the list
    scheduler's and the refined one), the topological one and the generators' (``starts``),
    ``STREAM_GROUPS`` streams at a time, each group's streams as the base ran them and merged
    to share their loads: the ``STREAM_ORDERS`` of least estimated traffic
    (:func:`heuristics.traversal.estimate_traffic`) that beat every order in ``orders``, within
    ``STREAM_SHARE`` of the limit (as an estimate count). None when the graph is one stream."""
    streams = stream_of(instance)
    count = len(set(streams.values()))
    if count < 2:
        return []
    hardware = options.hardware
    to_beat = min(
        (estimate_traffic(instance, op_order_of(instance, o), hardware) for _, o in orders),
        default=None,
    )
    bases: list[tuple[str, Sequence[int]]] = [
        (m, op_order_of(instance, o)) for m, o in orders if m != "traversal"
    ]
    bases.append(("topological", op_order_of(instance, instance.topological_order)))
    bases += list(starts)
    plan = [
        (interleave, size, name, base)
        for name, base in bases
        for size in sorted({g for g in STREAM_GROUPS if g < count} | {count})
        for interleave in (True, False)
    ]
    budget = evaluations_for(instance, STREAM_SHARE * options.work_s)
    chosen = plan[:budget]
    # One task per base (its group sizes, merged and plain): few, so cheap to ship.
    tasks: dict[str, list[tuple[int, bool]]] = {}
    for interleave, size, name, _ in chosen:
        tasks.setdefault(name, []).append((size, interleave))
    base_of = dict(bases)
    answers = workers.map(
        _grouped_estimates,
        [(base_of[name], streams, todo, hardware) for name, todo in tasks.items()],
    )
    found: list[tuple[int, str, tuple[int, ...]]] = []
    for name, estimates in zip(tasks, answers, strict=True):
        for (size, interleave), (estimate, op_order) in zip(tasks[name], estimates, strict=True):
            if op_order is not None and (to_beat is None or estimate < to_beat):
                merged = "merged" if interleave else ""
                found.append((estimate, f"streams{size}{merged}-{name}", op_order))
    found.sort(key=lambda f: f[0])
    kept: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = []  # method, ops, schedule
    for estimate, method, op_order in found:
        if len(kept) == STREAM_ORDERS:
            break
        if op_order in (ops for _, ops, _ in kept):
            continue
        try:
            kept.append((method, op_order, schedule_from_op_order(instance, op_order)))
        except ValueError:
            continue  # the order leaves a node unscheduled
        report("P2-order", f"{method}: estimated traffic {estimate:,} ({count} streams)")
    # The same orders with their COPY_INs as early as the estimate allows, placed first.
    tries = [(method, ops, lead) for method, ops, _ in kept for lead in HOIST_LEADS]
    each = evaluations_for(instance, HOIST_SHARE * options.work_s) // max(len(tries), 1)
    hoisted: list[tuple[str, tuple[int, ...]]] = []
    seen = {ops for _, ops, _ in kept}
    settled = workers.map(hoist_loads, [(ops, hardware, lead, each) for _, ops, lead in tries])
    for (method, _, lead), early in zip(tries, settled, strict=True):
        if early in seen:
            continue
        seen.add(early)
        try:
            order = schedule_from_op_order(instance, early)
        except ValueError:
            continue
        hoisted.append((f"{method}-hoisted{lead}", order))
    return hoisted + [(method, order) for method, _, order in kept]


def _grouped_estimates(
    instance: Instance,
    base: Sequence[int],
    streams: dict[int, int],
    todo: Sequence[tuple[int, bool]],
    hardware: Hardware,
) -> list[tuple[int, tuple[int, ...] | None]]:
    """Estimated traffic and op order of ``base`` grouped each way of ``todo`` (group size,
    merged or not); ``None`` for a grouping no order realises."""
    out: list[tuple[int, tuple[int, ...] | None]] = []
    for size, interleave in todo:
        try:
            op_order = grouped_op_order(instance, base, streams, size, interleave)
        except ValueError:
            out.append((0, None))  # a COPY_IN waits for a stream op of a later group
            continue
        out.append((estimate_traffic(instance, op_order, hardware), op_order))
    return out


def _place_and_compact(
    instance: Instance, order: tuple[int, ...], options: SolveOptions, method: str
) -> Candidate | None:
    try:
        placed = place(instance, order, options.hardware, method.rsplit("+", 1)[1])
    except PlacementError as exc:
        log.warning("%s: %s", method, exc)
        return None
    first = evaluate(instance, placed, 2, options.hardware, options.reuse_rule)
    if not first.valid:
        log.warning("%s: placement invalid: %s", method, first.violations[:1])
        return Candidate(method, placed, first)
    compacted = compact(instance, placed)
    evaluation = evaluate(instance, compacted, 2, options.hardware, options.reuse_rule)
    if not evaluation.valid:  # compaction keeps validity by construction; never trust it blindly
        log.warning("%s: compaction broke validity: %s", method, evaluation.violations[:1])
        return Candidate(method, placed, first)
    if evaluation.objective() > first.objective():  # a list schedule is no guarantee
        return Candidate(method, placed, first)
    return Candidate(f"{method}+compact", compacted, evaluation)


def refine_placement(
    instance: Instance,
    result: CaseResult,
    options: SolveOptions,
    rng: np.random.Generator,
    started: float,
    report: Callable[[str, str], None],
) -> float:
    """Problem 2 refinement of the best placement for its budget (``P2_WORK``): the
    full CP-SAT placement model on small instances, then windowed LNS (re-placement and
    re-ordering windows). Every improvement is judged by the evaluator and offered to the
    result at once, as it is and pipe-compacted.

    Returns the budget left when nothing was left to find (no spills; the full model's
    optimum for the order; traffic at its bound), else 0."""
    assert result.p2 is not None
    deadline = started + P2_DEADLINE * options.time_limit_s
    # From the configured limit, never from the clock: the same work on every run.
    budget = P2_WORK * options.work_s
    if not result.p2.solution.spills:
        return budget
    if deadline <= time.monotonic():
        return 0.0
    hardware = options.hardware
    seed = int(rng.integers(2**31))
    method = f"{result.p2.method}+cp-sat-placement"

    def valid(solution: Solution | None) -> bool:
        """Whether the evaluator accepts a model's answer (valid by construction; never
        trusted blindly: on a jittered conv graph with the tightest memories the model once
        spilled one buffer twice over the same stretch, and the pipe compaction of that
        answer failed)."""
        if solution is None:
            return False
        judged = evaluate(instance, solution, 2, hardware, options.reuse_rule)
        last[:] = [(solution, judged)]
        if not judged.valid:
            log.warning("placement model gave an invalid solution: %s", judged.violations[:1])
        return judged.valid

    last: list[tuple[Solution, Evaluation]] = []  # the answer valid() judged last

    def judge(solution: Solution) -> Evaluation:
        if last and last[0][0] is solution:  # an improvement keep() gets right after valid()
            return last[0][1]
        return evaluate(instance, solution, 2, hardware, options.reuse_rule)

    def keep(solution: Solution) -> None:
        """Offer a valid answer as it is and pipe-compacted."""
        for variant, suffix in ((solution, ""), (compact(instance, solution), "+compact")):
            judged = judge(variant)
            if judged.valid:
                offer(result, Candidate(method + suffix, variant, judged), options)

    start = result.p2.solution
    if len(instance.buffers) <= FULL_PLACEMENT_BUFFERS:
        full = solve_placement(
            instance,
            start,
            hardware,
            time_limit_s=budget,
            seed=seed,
            deterministic=True,
            params=wall_cap(deadline),
        )
        budget -= float(full.info.get("deterministic_time", 0.0))
        if full.bound is not None:
            result.p2_order_bound = full.bound
        better = full.solution is not None and traffic_key(instance, full.solution) < traffic_key(
            instance, start
        )
        rejected = better and not valid(full.solution)  # then its optimality proves nothing
        if better and not rejected and full.solution is not None:
            start = full.solution
            keep(start)
        if full.status is Status.OPTIMAL and not rejected:
            return max(budget, 0.0)  # nothing left to find for this order: hand it on

    def repair(
        incumbent: Solution, window: Collection[int], time_limit_s: float, seed: int
    ) -> Repaired[Solution]:
        reorder = isinstance(window, Reorder)  # original nodes, not buffers
        answer = solve_placement(
            instance,
            incumbent,
            hardware,
            () if reorder else window,
            reorder=window if reorder else (),
            time_limit_s=time_limit_s,
            seed=seed,
            deterministic=True,
            params=wall_cap(deadline),
        )
        work = float(answer.info.get("deterministic_time", time_limit_s))
        fresh = answer.solution is not None and answer.solution != incumbent
        if fresh and not valid(answer.solution):
            return Repaired(None, False, "invalid", work)
        return Repaired(answer.solution, answer.status is Status.OPTIMAL, answer.status.value, work)

    def on_step(step: Step) -> None:
        if step.outcome == "best" and step.after is not None:
            report("P2-lns", f"traffic {step.after[0]:,} in {step.after[1]:,} spills")

    result.p2_lns = run_lns(
        start,
        lambda s: traffic_key(instance, s),
        placement_neighbourhoods(instance, hardware),
        repair,
        np.random.default_rng(seed),
        deadline,
        replace(P2_LNS, work_budget=max(budget, 0.0)),
        lower_bound=(result.p2_bound.units if result.p2_bound else 0, 2**62),
        on_step=on_step,
        on_best=keep,
    )
    # No stall rule here: at 600 s the P2 LNS cut no traffic on any official case, but a stall
    # after 40% of its budget lost the generated conv36k's one cut (54,176; 54,560 without it,
    # results/2026-11-23_pipeline-600s-grid), which came later.
    return max(budget - result.p2_lns.work, 0.0) if result.p2_lns.proven_optimal else 0.0
