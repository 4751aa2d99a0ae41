"""Problem 3 stage: re-time the answer within the traffic budget.

Among all candidates whose traffic stays within ``(1 + traffic_slack)`` times the Problem 2
traffic, the shortest makespan is moved to addresses that free up earlier
(:mod:`heuristics.prefetch`), re-timed by windowed LNS over the CP-SAT pipe model
(:mod:`models.pipes`; inside a window addresses are free and spills optional, within the
budget), re-sequenced by justification from its own times (:func:`heuristics.pipes.justify`)
and re-offset again. A faster answer at the Problem 2 traffic is a better Problem 2 answer too
(makespan breaks ties there).

The LNS ends on its work budget, so that a run is reproducible; on a machine faster than its
speed factor says, that leaves part of the limit unused (FlashAttention_Case0 at 600 s ended at
350 s on the 1.68 machine of 2026-11-28). ``--fill`` (:attr:`SolveOptions.fill`) gives that
time to the chains once more, on the clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import replace

import numpy as np

from npuopt.heuristics.neighbourhoods import pipe_neighbourhoods
from npuopt.heuristics.pipes import justify
from npuopt.heuristics.prefetch import release_earlier
from npuopt.models.pipes import PipeFrame, solve_pipes
from npuopt.models.pipes import frame as pipe_frame
from npuopt.solver.bounds import makespan_bound
from npuopt.solver.budgets import (
    FRAME_NODE_S,
    FULL_PIPE_NODES,
    JUSTIFY_ROUNDS,
    P3_DEADLINE,
    P3_END,
    P3_LNS,
    SIDE_CHAIN_MIN_WORK,
    SIDE_CHAIN_RATE,
    pass_work,
    passes_for,
)
from npuopt.solver.case import Candidate, CaseResult, SolveOptions, offer, traffic_room, wall_cap
from npuopt.solver.evaluate import ReuseRule, evaluate
from npuopt.solver.hardware import Hardware
from npuopt.solver.instance import Instance
from npuopt.solver.lns import LnsResult, Repair, Repaired, Step, run_lns
from npuopt.solver.result import Status
from npuopt.solver.solution import Solution
from npuopt.solver.workers import Workers


def refine_pipes(
    instance: Instance,
    result: CaseResult,
    options: SolveOptions,
    rng: np.random.Generator,
    started: float,
    pass_s: float,
    budget: float,
    report: Callable[[str, str], None],
) -> None:
    """Problem 3 refinement of the chosen answer for its ``budget`` (deterministic seconds of
    the pipe model, each LNS step's whole-graph work counted in, :func:`budgets.pass_work`):
    windowed LNS over the CP-SAT pipe model, whose windows may drop or add spills within the
    traffic budget (:func:`_traffic_room`). Every faster
    answer is offered to the result at once. ``pass_s`` is what one whole-graph pass took
    (placing and evaluating a candidate): framing the start costs about as much, so the stage
    is skipped when less than that is left.

    With more than one worker (``options.workers``), each other worker runs an LNS chain of its
    own from the same start, with its own seed and the same budget (:func:`pipe_chain`, in a
    fresh process: CP-SAT's threads do not survive a fork), and the fastest answer of all the
    chains is kept: the same work per chain (``SIDE_CHAIN_RATE`` of what is left of ``budget``: the
    chains slow each other down), so the same answers on every run. With ``options.fill`` the
    chains run once more after that, from the fastest answer, on the clock alone up to
    ``P3_END`` of the limit (:func:`_chains` with no budget)."""
    assert result.p3 is not None
    hardware, rule = options.hardware, options.reuse_rule
    deadline = started + P3_DEADLINE * options.time_limit_s
    if deadline - time.monotonic() < pass_s:
        return
    # Addresses that free up earlier (heuristics.prefetch) first: the LNS starts from there.
    nodes = len(result.p3.solution.order)
    trials = _release(
        instance, result, options, result.p3, deadline, pass_s, passes_for(options.work_s, nodes)
    )
    budget -= pass_work(trials, nodes)
    start = pipe_frame(instance, result.p3.solution, hardware, rule)
    if start is None or deadline <= time.monotonic():
        return
    seed = int(rng.integers(2**31))
    method = f"{result.p3.method}+cp-sat-pipes"

    def keep(timed: PipeFrame) -> None:
        offer(result, Candidate(method, timed.solution, timed.evaluation), options)

    bound = makespan_bound(instance, start.solution).cycles
    if len(start.solution.order) <= FULL_PIPE_NODES:
        full = solve_pipes(
            instance,
            start,
            time_limit_s=budget,
            seed=seed,
            deterministic=True,
            params=wall_cap(deadline),
            traffic_room=traffic_room(result, options, start.evaluation),
        )
        budget -= float(full.info.get("deterministic_time", 0.0))
        timed = pipe_frame(instance, full.solution, hardware, rule) if full.solution else None
        if timed is not None and timed.makespan < start.makespan:
            start = timed
            keep(start)
        if full.status is Status.OPTIMAL:
            budget = 0.0  # optimal for this placement: nothing left to find

    # The side chains end before the main one, so that waiting for them leaves the
    # justification and re-offsetting below their passes (docs/decisions.md, "Workers").
    early = deadline - 3 * pass_s - P3_LNS.step_time_s
    chains = (instance, result, options, method, bound, keep, report)
    result.p3_lns = _chains(*chains, start, budget, seed, deadline, early)
    fill_end = started + P3_END * options.time_limit_s
    proven = result.p3_lns.proven_optimal
    if options.fill and not proven and fill_end - time.monotonic() >= P3_LNS.step_time_s:
        # What the budgets left of the plan, on the clock (SolveOptions.fill).
        again = pipe_frame(instance, result.p3.solution, hardware, rule)
        if again is not None:
            result.p3_fill = _chains(*chains, again, None, seed + 1, fill_end, fill_end)
    # The passes after the LNS share what the plan leaves them (P3_PASSES_END).
    passes = passes_for(options.work_s, len(result.p3.solution.order), after=True)
    passes -= _justify(instance, result, options, deadline, pass_s, min(passes, JUSTIFY_ROUNDS))
    # Re-offsetting compacts (re-times from scratch), which may undo the LNS's work or beat it.
    _release(instance, result, options, result.p3, deadline, pass_s, passes)


def _chains(
    instance: Instance,
    result: CaseResult,
    options: SolveOptions,
    method: str,
    bound: int,
    keep: Callable[[PipeFrame], None],
    report: Callable[[str, str], None],
    start: PipeFrame,
    budget: float | None,
    seed: int,
    deadline: float,
    early: float,
) -> LnsResult[PipeFrame]:
    """This process's chain (:func:`_main_chain`) and, with more than one worker, one more
    chain per other worker on its own seed (:func:`pipe_chain`, ending by ``early``), each on
    ``budget`` (``SIDE_CHAIN_RATE`` of it when they run: the chains slow each other down) or,
    when it is None, on the clock alone; the side chains' answers are offered once the main
    chain ends, as ``method`` + ``-side``. Returns the main chain's log."""
    hardware, rule = options.hardware, options.reuse_rule
    side: Workers | None = None
    collect: Callable[[], list[tuple[Solution | None, str]]] | None = None
    if options.workers > 1 and (budget is None or budget >= SIDE_CHAIN_MIN_WORK):
        assert result.p2 is not None
        if budget is not None:
            budget *= SIDE_CHAIN_RATE
        cap = int((result.p2.evaluation.extra_traffic_units or 0) * (1.0 + options.traffic_slack))
        seeds = np.random.default_rng(seed).integers(2**31, size=options.workers - 1)
        side = Workers(instance, options.workers - 1, spawn=True)
        calls = [(start.solution, hardware, rule, cap, budget, int(s), early, bound) for s in seeds]
        collect = side.start(pipe_chain, calls)
    try:
        found_here = _main_chain(
            instance, result, options, start, budget, seed, deadline, bound, keep, report
        )
        for found, stop in collect() if collect is not None else ():
            # A budgeted chain the clock stopped may differ from run to run: its answer is
            # not used (one on the clock alone is used: the run is on the clock anyway).
            if found is None or (stop == "deadline" and budget is not None):
                continue
            timed = pipe_frame(instance, found, hardware, rule)
            if timed is not None and timed.evaluation.valid:
                offer(
                    result, Candidate(f"{method}-side", timed.solution, timed.evaluation), options
                )
    finally:
        if side is not None:
            side.close(now=True)
    return found_here


def _main_chain(
    instance: Instance,
    result: CaseResult,
    options: SolveOptions,
    start: PipeFrame,
    budget: float | None,
    seed: int,
    deadline: float,
    bound: int,
    keep: Callable[[PipeFrame], None],
    report: Callable[[str, str], None],
) -> LnsResult[PipeFrame]:
    """This process's LNS chain of :func:`refine_pipes` (``budget`` None: on the clock alone):
    every better answer offered at once, its traffic room read from the result as Problem 2's
    answer improves."""
    repair = _repair(
        instance,
        options.hardware,
        options.reuse_rule,
        deadline,
        lambda incumbent: traffic_room(result, options, incumbent.evaluation),
    )
    shown = [start.makespan]

    def on_step(step: Step) -> None:
        # Gains in the tie-break alone (the sum of end times) are not news to the user.
        if step.outcome == "best" and step.after is not None and step.after[0] < shown[0]:
            shown[0] = step.after[0]
            report("P3-lns", f"makespan {step.after[0]:,}")

    return _chain(start, repair, seed, deadline, budget, bound, on_step, keep)


def pipe_chain(
    instance: Instance,
    solution: Solution,
    hardware: Hardware,
    rule: ReuseRule,
    traffic_cap: int,
    budget: float | None,
    seed: int,
    deadline: float,
    bound: int,
) -> tuple[Solution | None, str]:
    """One more LNS chain of :func:`refine_pipes` from ``solution`` on its own seed, as a worker
    runs it: the traffic of every step stays within ``traffic_cap``. Returns the fastest
    answer it found (``None`` when it found none faster) and why the chain stopped
    (:attr:`solver.lns.LnsResult.stop`)."""
    start = pipe_frame(instance, solution, hardware, rule)
    if start is None:
        return None, "steps"
    repair = _repair(
        instance,
        hardware,
        rule,
        deadline,
        lambda incumbent: max(0, traffic_cap - (incumbent.evaluation.extra_traffic_units or 0)),
    )
    found = _chain(start, repair, seed, deadline, budget, bound)
    return (found.best.solution if found.best.makespan < start.makespan else None), found.stop


def _chain(
    start: PipeFrame,
    repair: Repair[PipeFrame],
    seed: int,
    deadline: float,
    budget: float | None,
    bound: int,
    on_step: Callable[[Step], None] | None = None,
    on_best: Callable[[PipeFrame], None] | None = None,
) -> LnsResult[PipeFrame]:
    """One P3 LNS chain from ``start`` (``budget`` None: on the clock alone): makespan first,
    then the sum of end times."""
    return run_lns(
        start,
        lambda timed: (timed.makespan, int(timed.end.sum())),
        pipe_neighbourhoods(),
        repair,
        np.random.default_rng(seed),
        deadline,
        replace(P3_LNS, work_budget=None if budget is None else max(budget, 0.0)),
        lower_bound=(bound, 2**62),
        on_step=on_step,
        on_best=on_best,
    )


def _repair(
    instance: Instance,
    hardware: Hardware,
    rule: ReuseRule,
    deadline: float,
    room: Callable[[PipeFrame], int],
) -> Callable[[PipeFrame, Collection[int], float, int], Repaired[PipeFrame]]:
    """The LNS repair of the Problem 3 chains: the pipe model on a window of the incumbent,
    its spills optional within ``room(incumbent)`` units of traffic."""

    def repair(
        incumbent: PipeFrame, window: Collection[int], time_limit_s: float, seed: int
    ) -> Repaired[PipeFrame]:
        answer = solve_pipes(
            instance,
            incumbent,
            window,
            time_limit_s=time_limit_s,
            seed=seed,
            deterministic=True,
            params=wall_cap(deadline),
            traffic_room=room(incumbent),
        )
        timed = pipe_frame(instance, answer.solution, hardware, rule) if answer.solution else None
        work = float(answer.info.get("deterministic_time", time_limit_s))
        work += pass_work(1, len(incumbent.solution.order), FRAME_NODE_S)
        return Repaired(timed, answer.status is Status.OPTIMAL, answer.status.value, work)

    return repair


def _justify(
    instance: Instance,
    result: CaseResult,
    options: SolveOptions,
    deadline: float,
    pass_s: float,
    rounds: int,
) -> int:
    """Offer the Problem 3 answer re-sequenced by justification from its own times
    (:func:`heuristics.pipes.justify`) while that is faster, up to ``rounds`` rounds, a round
    at a time while a whole-graph pass still fits before ``deadline`` (what it gains:
    docs/decisions.md, "Justification"). Returns the rounds made."""
    for made in range(rounds):
        if result.p3 is None or deadline - time.monotonic() <= pass_s:
            return made
        current = result.p3
        ends = current.evaluation.end_cycles
        if ends is None:
            return made
        justified = justify(instance, current.solution, [int(e) for e in ends])
        judged = evaluate(instance, justified, 3, options.hardware, options.reuse_rule)
        if not judged.valid or judged.objective() >= current.evaluation.objective():
            return made + 1
        offer(result, Candidate(f"{current.method}+justify", justified, judged), options)
    return rounds


def _release(
    instance: Instance,
    result: CaseResult,
    options: SolveOptions,
    candidate: Candidate,
    deadline: float,
    pass_s: float,
    trials: int,
) -> int:
    """Offer ``candidate`` with its segments moved to addresses that free up earlier
    (:func:`heuristics.prefetch.release_earlier`, at most ``trials`` whole-graph trials), when
    that is faster; skipped when less than two whole-graph passes are left before
    ``deadline``. Returns the trials made."""
    if trials <= 0 or deadline - time.monotonic() < 2 * pass_s:
        return 0
    released, judged, made = release_earlier(
        instance,
        candidate.solution,
        options.hardware,
        options.reuse_rule,
        max_trials=trials,
        deadline=deadline,
        judged=replace(candidate.evaluation, problem=3),  # judged under options.reuse_rule
    )
    if released is not candidate.solution:
        offer(result, Candidate(f"{candidate.method}+release", released, judged), options)
    return made
