"""The solve pipeline: Problem 1, 2 and 3 solutions for one instance within a time budget.

Stages share one deadline:

1. **P1** — the memory-aware list scheduler with each policy, then seeded restarts
   (:mod:`heuristics.ordering`). The best valid order is the Problem 1 answer.
2. **P2** — the best few distinct orders are placed with each placement policy
   (:mod:`heuristics.placement`) and reordered for the pipes with the placement kept
   (:mod:`heuristics.pipes`, which never changes traffic). The candidate with the least traffic,
   then the shortest makespan, is the Problem 2 answer.
3. **P3** — among all candidates whose traffic stays within ``(1 + traffic_slack)`` times the
   Problem 2 traffic, the shortest makespan.

Every value comes from :func:`solver.evaluate.evaluate`; nothing here trusts a heuristic's own
account. Later CP-SAT stages plug in behind the same functions without changing the CLI.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from heuristics.ordering import OrderingParams, order_heuristic
from heuristics.pipes import compact
from heuristics.placement import PLACEMENT_POLICIES, PlacementError, place
from solver.bounds import MakespanBound, OrderBound, makespan_bound, order_bound
from solver.evaluate import Evaluation, ReuseRule, evaluate
from solver.hardware import DEFAULT_HARDWARE, Hardware
from solver.instance import Instance
from solver.solution import Solution

log = logging.getLogger(__name__)

#: Distinct Problem 1 orders that go on to placement.
ORDERS_TO_PLACE = 3


@dataclass(frozen=True)
class SolveOptions:
    """What to solve and within which limits.

    Attributes
    ----------
    problems
        Problems to answer (the P1 stage always runs when P2 or P3 is asked: it supplies orders).
    time_limit_s
        Wall-clock budget for the whole instance.
    seed
        Seed of every random choice; same seed, same result.
    traffic_slack
        Problem 3 may use up to ``(1 + traffic_slack)`` times the Problem 2 traffic.
    hardware
        Capacities and layout rules.
    reuse_rule
        Reuse rule of the timing (SPEC section 4).
    """

    problems: tuple[int, ...] = (1, 2, 3)
    time_limit_s: float = 600.0
    seed: int = 0
    traffic_slack: float = 0.0
    hardware: Hardware = DEFAULT_HARDWARE
    reuse_rule: ReuseRule = "residency"


@dataclass(frozen=True)
class Candidate:
    """A solution with its evaluation and the method that produced it."""

    method: str
    solution: Solution
    evaluation: Evaluation


@dataclass
class CaseResult:
    """Everything the pipeline found for one instance."""

    case: str
    order_bound: OrderBound
    makespan_bound: MakespanBound
    p1: Candidate | None = None
    p2: Candidate | None = None
    p3: Candidate | None = None
    p3_bound: MakespanBound | None = None
    runtime_s: float = 0.0
    stage_s: dict[str, float] = field(default_factory=dict)

    def best(self, problem: int) -> Candidate | None:
        """The answer to ``problem``."""
        return {1: self.p1, 2: self.p2, 3: self.p3}[problem]


@dataclass(frozen=True)
class Progress:
    """A progress event: the stage just finished and a one-line account of it."""

    case: str
    stage: str
    message: str
    elapsed_s: float


ProgressFn = Callable[[Progress], None]


def solve_instance(
    instance: Instance, options: SolveOptions, progress: ProgressFn | None = None
) -> CaseResult:
    """Run the pipeline on one instance (see the module docstring)."""
    started = time.monotonic()
    deadline = started + options.time_limit_s
    rng = np.random.default_rng(options.seed)

    def report(stage: str, message: str) -> None:
        elapsed = time.monotonic() - started
        result.stage_s[stage] = elapsed - sum(result.stage_s.values())
        log.info("%s %s: %s", instance.name, stage, message)
        if progress is not None:
            progress(Progress(instance.name, stage, message, elapsed))

    result = CaseResult(instance.name, order_bound(instance), makespan_bound(instance))
    report("bounds", f"P1 >= {result.order_bound.units:,}, P3 >= {result.makespan_bound.cycles:,}")

    # P1: the list scheduler; restarts stop at a share of the budget.
    p1_deadline = started + 0.2 * options.time_limit_s
    runs = order_heuristic(instance, rng, OrderingParams(), deadline=p1_deadline)
    valid_runs = [r for r in runs if r.evaluation.valid]
    if valid_runs:
        best = valid_runs[0]
        result.p1 = Candidate(f"list-{best.policy}", best.solution, best.evaluation)
        report("P1", f"max V_stay {best.evaluation.max_v_stay_units:,} ({best.policy} policy)")
    else:
        report("P1", "no valid order found (L0 single residency could not be kept)")
    if not {2, 3} & set(options.problems):
        result.runtime_s = time.monotonic() - started
        return result

    # P2 and P3 candidates: a few distinct orders x placement policies, each compacted.
    orders: list[tuple[str, tuple[int, ...]]] = []
    for run in runs:
        if run.solution.order not in (o for _, o in orders):
            orders.append((f"list-{run.policy}", run.solution.order))
        if len(orders) == ORDERS_TO_PLACE:
            break
    if not orders:
        orders.append(("topological", instance.topological_order))
    candidates: list[Candidate] = []
    for method, order in orders:
        for policy in PLACEMENT_POLICIES:
            if candidates and time.monotonic() > deadline:
                break
            candidate = _place_and_compact(instance, order, options, f"{method}+{policy}")
            if candidate is not None:
                candidates.append(candidate)
    valid = [c for c in candidates if c.evaluation.valid]
    if not valid:
        report("P2", "no valid placement found")
        result.runtime_s = time.monotonic() - started
        return result
    result.p2 = min(valid, key=lambda c: c.evaluation.objective())
    e2 = result.p2.evaluation
    report(
        "P2",
        f"traffic {e2.extra_traffic_units:,} in {e2.spill_count:,} spills, "
        f"makespan {e2.makespan_cycles:,} ({result.p2.method})",
    )
    budget = (e2.extra_traffic_units or 0) * (1.0 + options.traffic_slack)
    within = [c for c in valid if (c.evaluation.extra_traffic_units or 0) <= budget]
    p3 = min(within, key=lambda c: (c.evaluation.makespan_cycles, c.evaluation.extra_traffic_units))
    result.p3 = Candidate(
        p3.method,
        p3.solution,
        evaluate(instance, p3.solution, 3, options.hardware, options.reuse_rule),
    )
    result.p3_bound = makespan_bound(instance, p3.solution)
    e3 = result.p3.evaluation
    report(
        "P3",
        f"makespan {e3.makespan_cycles:,} (bound {result.p3_bound.cycles:,}), "
        f"traffic {e3.extra_traffic_units:,} ({p3.method})",
    )
    result.runtime_s = time.monotonic() - started
    return result


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
