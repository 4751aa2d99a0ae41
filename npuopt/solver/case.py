"""What one solve run holds: its options, the candidates it judged and its case result, and how
an answer is offered to the result and settled at the end (shared by the stages of
:mod:`solver.stages` and by :mod:`solver.solve`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from npuopt.models.pipes import PipeFrame
from npuopt.solver.bounds import MakespanBound, OrderBound, TrafficBound, makespan_bound
from npuopt.solver.evaluate import Evaluation, ReuseRule
from npuopt.solver.hardware import DEFAULT_HARDWARE, Hardware
from npuopt.solver.instance import Instance
from npuopt.solver.lns import LnsResult
from npuopt.solver.solution import Solution

Method = Literal["full", "heuristics"]
#: The values ``SolveOptions.method`` takes.
METHODS: tuple[Method, ...] = ("full", "heuristics")


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
    method
        ``"full"``: heuristics, then CP-SAT refinement; ``"heuristics"``: the pure-Python warm
        starts alone (the baseline row of every table).
    spent_s
        Seconds of the limit used before solving (process start-up, loading the graph). The
        deadlines count from then; the work budgets are sized from the whole limit, so the
        run does the same work whatever the start-up took.
    speed
        The machine's speed factor (:mod:`solver.speed`): every work budget is sized for
        ``time_limit_s * speed`` seconds of the reference machine. The CLI measures it; same
        seed and same speed, same result.
    workers
        Processes for the independent work (:mod:`npuopt.solver.workers`): generator runs,
        annealing runs, placement passes, hoisting and stream estimates. The generator and
        annealing runs scale with it, so answers depend on it; 1 runs everything in this
        process. Same seed, speed and workers, same result.
    fill
        Once Problem 3's chains have spent their work budgets, run them again from the fastest
        answer, on the clock alone, up to its planned end (``budgets.P3_END`` of the limit):
        the limit is used on a machine faster than its speed factor says, but the answer then
        depends on the machine's load (same seed, not always the same files).
    """

    problems: tuple[int, ...] = (1, 2, 3)
    time_limit_s: float = 600.0
    seed: int = 0
    traffic_slack: float = 0.0
    hardware: Hardware = DEFAULT_HARDWARE
    reuse_rule: ReuseRule = "residency"
    method: Method = "full"
    spent_s: float = 0.0
    speed: float = 1.0
    workers: int = 1
    fill: bool = False

    @property
    def work_s(self) -> float:
        """The limit in seconds of the reference machine: what the work budgets are sized
        from (the deadlines use ``time_limit_s``)."""
        return self.time_limit_s * self.speed


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
    p1_bound_units: int = 0
    p1_bound_source: str = "forced-live"
    p1_lns: LnsResult[tuple[int, ...]] | None = None
    p2_bound: TrafficBound | None = None
    p2_order_bound: int | None = None
    p2_lns: LnsResult[Solution] | None = None
    p3_lns: LnsResult[PipeFrame] | None = None
    #: With ``SolveOptions.fill``: the chain that ran on the clock after the budgeted ones.
    p3_fill: LnsResult[PipeFrame] | None = None
    frontier: list[tuple[int, int]] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)  # valid Problem 2/3 answers seen
    interrupted: str | None = None  # what stopped the run early, if anything
    #: For a graph of independent parts (:mod:`solver.parts`): each part's own line.
    parts: list[dict[str, object]] = field(default_factory=list)
    runtime_s: float = 0.0
    stage_s: dict[str, float] = field(default_factory=dict)
    #: (seconds since the start, problem, value) each time an answer improved.
    history: list[tuple[float, int, int]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def best(self, problem: int) -> Candidate | None:
        """The answer to ``problem``."""
        return {1: self.p1, 2: self.p2, 3: self.p3}[problem]

    def note(self) -> None:
        """Record the current answers' values in ``history`` where they changed."""
        elapsed = round(time.monotonic() - self.started, 3)
        for problem in (1, 2, 3):
            candidate = self.best(problem)
            if candidate is None:
                continue
            value = candidate.evaluation.objective()[0]
            last = [v for _, p, v in self.history if p == problem]
            if not last or value != last[-1]:
                self.history.append((elapsed, problem, value))


@dataclass(frozen=True)
class Progress:
    """A progress event: the stage just finished and a one-line account of it."""

    case: str
    stage: str
    message: str
    elapsed_s: float


ProgressFn = Callable[[Progress], None]


class Interrupted(Exception):
    """Raised (by a signal handler) to stop a solve early; the solve keeps what it found."""


def traffic_room(result: CaseResult, options: SolveOptions, incumbent: Evaluation) -> int:
    """How much traffic a Problem 3 step may add to ``incumbent`` and stay within the budget
    (``1 + traffic_slack`` times the Problem 2 answer's traffic, which drops whenever a step
    finds less)."""
    assert result.p2 is not None
    budget = (result.p2.evaluation.extra_traffic_units or 0) * (1.0 + options.traffic_slack)
    return max(0, int(budget) - (incumbent.extra_traffic_units or 0))


def fastest_within_budget(result: CaseResult, options: SolveOptions) -> Candidate | None:
    """The Problem 3 answer among the candidates: the shortest makespan whose traffic stays
    within ``(1 + traffic_slack)`` times the Problem 2 answer's."""
    if result.p2 is None:
        return None
    budget = (result.p2.evaluation.extra_traffic_units or 0) * (1.0 + options.traffic_slack)
    within = [c for c in result.candidates if (c.evaluation.extra_traffic_units or 0) <= budget]
    p3 = min(within, key=lambda c: (c.evaluation.makespan_cycles, c.evaluation.extra_traffic_units))
    return Candidate(p3.method, p3.solution, replace(p3.evaluation, problem=3))


def offer(result: CaseResult, candidate: Candidate, options: SolveOptions) -> None:
    """Record a valid Problem 2/3 candidate at once (an interrupted run keeps it): it becomes
    the Problem 2 answer if it ranks first there, and the Problem 3 answer is again the
    fastest candidate within the traffic budget."""
    result.candidates.append(candidate)
    as_p2 = replace(candidate.evaluation, problem=2)
    if result.p2 is None or as_p2.objective() < result.p2.evaluation.objective():
        result.p2 = Candidate(candidate.method, candidate.solution, as_p2)
    result.p3 = fastest_within_budget(result, options)
    result.note()


def settle(instance: Instance, options: SolveOptions, result: CaseResult) -> None:
    """Fill in what the answers imply once a run ends (normally or interrupted): the Problem 2
    and 3 answers from the candidates, the frontier, the Problem 3 bound."""
    if result.candidates:
        ranked = [
            Candidate(c.method, c.solution, replace(c.evaluation, problem=2))
            for c in result.candidates
        ]
        best2 = min(ranked, key=lambda c: c.evaluation.objective())
        if result.p2 is None or best2.evaluation.objective() < result.p2.evaluation.objective():
            result.p2 = best2
        # Problem 2's traffic may have dropped since: the budget is checked again.
        result.p3 = fastest_within_budget(result, options)
        result.frontier = frontier(result.candidates)
    if result.p3 is not None:
        result.p3_bound = makespan_bound(instance, result.p3.solution)
    result.note()


def wall_cap(deadline: float) -> dict[str, str]:
    """CP-SAT's wall-clock limit so that a sub-solve never runs past its stage's deadline (the
    deterministic budget decides when the machine keeps up; this only stops a lagging one)."""
    return {"max_time_in_seconds": f"{max(0.1, deadline - time.monotonic()):.3f}"}


def frontier(candidates: Sequence[Candidate]) -> list[tuple[int, int]]:
    """Non-dominated (traffic, makespan) points among the candidates, by traffic."""
    points = sorted(
        {
            (c.evaluation.extra_traffic_units or 0, c.evaluation.makespan_cycles or 0)
            for c in candidates
            if c.evaluation.valid
        }
    )
    frontier: list[tuple[int, int]] = []
    for traffic, makespan in points:
        if not frontier or makespan < frontier[-1][1]:
            frontier.append((traffic, makespan))
    return frontier
