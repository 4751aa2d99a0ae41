"""Problem 3 stage: re-time the answer within the traffic budget.

Among all candidates whose traffic stays within ``(1 + traffic_slack)`` times the Problem 2
traffic, the shortest makespan is moved to addresses that free up earlier
(:mod:`heuristics.prefetch`), re-timed by windowed LNS over the CP-SAT pipe model
(:mod:`models.pipes`; inside a window addresses are free and spills optional, within the
budget), re-sequenced by justification from its own times (:func:`heuristics.pipes.justify`)
and re-offset again. A faster answer at the Problem 2 traffic is a better Problem 2 answer too
(makespan breaks ties there).
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
from npuopt.solver.budgets import FULL_PIPE_NODES, P3_DEADLINE, P3_LNS, P3_WORK
from npuopt.solver.case import Candidate, CaseResult, SolveOptions, offer, traffic_room, wall_cap
from npuopt.solver.evaluate import evaluate
from npuopt.solver.instance import Instance
from npuopt.solver.lns import Repaired, Step, run_lns
from npuopt.solver.result import Status


def refine_pipes(
    instance: Instance,
    result: CaseResult,
    options: SolveOptions,
    rng: np.random.Generator,
    started: float,
    pass_s: float,
    extra: float,
    report: Callable[[str, str], None],
) -> None:
    """Problem 3 refinement of the chosen answer for its budget (``P3_WORK``, plus ``extra``
    handed over by earlier stages):
    windowed LNS over the CP-SAT pipe model, whose windows may drop or add spills within the
    traffic budget (:func:`_traffic_room`). Every faster
    answer is offered to the result at once. ``pass_s`` is what one whole-graph pass took
    (placing and evaluating a candidate): framing the start costs about as much, so the stage
    is skipped when less than that is left."""
    assert result.p3 is not None
    hardware, rule = options.hardware, options.reuse_rule
    deadline = started + P3_DEADLINE * options.time_limit_s
    if deadline - time.monotonic() < pass_s:
        return
    # Addresses that free up earlier (heuristics.prefetch) first: the LNS starts from there.
    _release(instance, result, options, result.p3, deadline, pass_s)
    start = pipe_frame(instance, result.p3.solution, hardware, rule)
    if start is None or deadline <= time.monotonic():
        return
    seed = int(rng.integers(2**31))
    method = f"{result.p3.method}+cp-sat-pipes"

    def keep(timed: PipeFrame) -> None:
        offer(result, Candidate(method, timed.solution, timed.evaluation), options)

    # From the configured limit, never from the clock: the same work on every run.
    budget = P3_WORK * options.work_s + extra
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
            traffic_room=traffic_room(result, options, incumbent.evaluation),
        )
        timed = pipe_frame(instance, answer.solution, hardware, rule) if answer.solution else None
        work = float(answer.info.get("deterministic_time", time_limit_s))
        return Repaired(timed, answer.status is Status.OPTIMAL, answer.status.value, work)

    shown = [start.makespan]

    def on_step(step: Step) -> None:
        # Gains in the tie-break alone (the sum of end times) are not news to the user.
        if step.outcome == "best" and step.after is not None and step.after[0] < shown[0]:
            shown[0] = step.after[0]
            report("P3-lns", f"makespan {step.after[0]:,}")

    result.p3_lns = run_lns(
        start,
        lambda timed: (timed.makespan, int(timed.end.sum())),
        pipe_neighbourhoods(),
        repair,
        np.random.default_rng(seed),
        deadline,
        replace(P3_LNS, work_budget=max(budget, 0.0)),
        lower_bound=(bound, 2**62),
        on_step=on_step,
        on_best=keep,
    )
    _justify(instance, result, options, deadline, pass_s)
    # Re-offsetting compacts (re-times from scratch), which may undo the LNS's work or beat it.
    _release(instance, result, options, result.p3, deadline, pass_s)


def _justify(
    instance: Instance,
    result: CaseResult,
    options: SolveOptions,
    deadline: float,
    pass_s: float,
) -> None:
    """Offer the Problem 3 answer re-sequenced by justification from its own times
    (:func:`heuristics.pipes.justify`) while that is faster, a round at a time while a
    whole-graph pass still fits before ``deadline``. After the 600 s LNS it cut
    FlashAttention_Case0 from 29,867 to 29,791 and Matmul_Case1 from 1,355,678 to 1,314,058
    (the stored answers of results/2026-11-23_pipeline-600s-traversals)."""
    while result.p3 is not None and deadline - time.monotonic() > pass_s:
        current = result.p3
        ends = current.evaluation.end_cycles
        if ends is None:
            return
        justified = justify(instance, current.solution, [int(e) for e in ends])
        judged = evaluate(instance, justified, 3, options.hardware, options.reuse_rule)
        if not judged.valid or judged.objective() >= current.evaluation.objective():
            return
        offer(result, Candidate(f"{current.method}+justify", justified, judged), options)


def _release(
    instance: Instance,
    result: CaseResult,
    options: SolveOptions,
    candidate: Candidate,
    deadline: float,
    pass_s: float,
) -> None:
    """Offer ``candidate`` with its segments moved to addresses that free up earlier
    (:func:`heuristics.prefetch.release_earlier`), when that is faster; skipped when less than
    two whole-graph passes are left before ``deadline``."""
    if deadline - time.monotonic() < 2 * pass_s:
        return
    released, judged = release_earlier(
        instance,
        candidate.solution,
        options.hardware,
        options.reuse_rule,
        deadline=deadline,
        judged=replace(candidate.evaluation, problem=3),  # judged under options.reuse_rule
    )
    if released is not candidate.solution:
        offer(result, Candidate(f"{candidate.method}+release", released, judged), options)
