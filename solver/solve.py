"""The solve pipeline: Problem 1, 2 and 3 solutions for one instance within a time budget.

Stages share one deadline:

1. **P1** — the memory-aware list scheduler with each policy, then seeded restarts
   (:mod:`heuristics.ordering`); the best valid order is then refined by buffer compaction
   (:mod:`heuristics.compaction`: moves that pull one buffer's users together across the whole
   order), then by windowed LNS over the CP-SAT ordering model (:mod:`models.ordering`,
   :mod:`solver.lns`), each for its share of the limit, and a last compaction descent. On small
   instances the full model runs first for a proven bound; the bound reported is the best of
   that, the forced-live and grid bounds and the relaxed sub-instances' (:mod:`solver.bounds`).
   In the pipeline the LNS stops when its key stalls and leaves the rest of its budget to P3;
   a heuristic answer that already meets its bound (Matmul's grid bound) skips the refinement
   and leaves it all.
2. **P2** — a traversal search (:mod:`heuristics.traversal`: simulated annealing over the order
   of L0-connected units, on an address-free traffic estimate, from the list scheduler's best
   order) proposes an order; it, the best few list-scheduler orders and the refined Problem 1
   order are placed with each placement policy (:mod:`heuristics.placement`) and reordered for
   the pipes with the placement kept (:mod:`heuristics.pipes`). The best is refined
   by the CP-SAT placement model (:mod:`models.placement`): the full model on small instances,
   then windowed LNS, whose windows re-place buffers or re-order a run of
   nodes and re-place their buffers in the same model.
3. **P3** — among all candidates whose traffic stays within ``(1 + traffic_slack)`` times the
   Problem 2 traffic, the shortest makespan, re-timed by windowed LNS over the CP-SAT pipe model
   (:mod:`models.pipes`), then re-sequenced by justification from its own times
   (:func:`heuristics.pipes.justify`). A faster answer at the Problem 2 traffic is a better
   Problem 2 answer too (makespan breaks ties there).

With ``method="heuristics"`` the CP-SAT refinements are skipped. Every value comes from
:func:`solver.evaluate.evaluate`; nothing here trusts a model's own account.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np

from heuristics.compaction import Compactor, compact_order, descend, moves_for
from heuristics.generators import GENERATORS, Structure, generator_runs
from heuristics.neighbourhoods import (
    Reorder,
    ordering_neighbourhoods,
    peak_key,
    pipe_neighbourhoods,
    placement_neighbourhoods,
    traffic_key,
)
from heuristics.ordering import OrderingParams, order_heuristic
from heuristics.pipes import compact, justify
from heuristics.placement import PLACEMENT_POLICIES, PlacementError, place
from heuristics.prefetch import release_earlier
from heuristics.streams import grouped_op_order, hoist_loads, stream_of
from heuristics.traversal import (
    TraversalParams,
    cluster_units_for,
    estimate_traffic,
    evaluations_for,
    search_traversal,
)
from models.ordering import OrderingData, solve_order
from models.pipes import PipeFrame, solve_pipes
from models.pipes import frame as pipe_frame
from models.placement import solve_placement
from solver.bounds import (
    MakespanBound,
    OrderBound,
    TrafficBound,
    makespan_bound,
    order_bound,
    peak_ops,
    relaxed_instance,
    traffic_bound,
)
from solver.canonical import Canonical, canonicalize
from solver.evaluate import Evaluation, ReuseRule, evaluate, evaluate_order
from solver.hardware import DEFAULT_HARDWARE, Hardware
from solver.instance import Instance
from solver.lns import LnsParams, LnsResult, Repaired, Step, run_lns
from solver.parts import Part, in_sequence, side_by_side, split
from solver.result import Status
from solver.solution import Solution, op_order_of, schedule_from_op_order

log = logging.getLogger(__name__)

Method = Literal["full", "heuristics"]
#: The values ``SolveOptions.method`` takes.
METHODS: tuple[Method, ...] = ("full", "heuristics")

#: Distinct Problem 1 orders that go on to placement (the list scheduler's best and the refined
#: one, or the scheduler's next when those coincide), after the traversal search's. In the 600 s
#: runs every P2 answer came from a traversal order or, on FlashAttention_Case1, the refined P1
#: order; the other list-scheduler orders never won, and their placement passes now go to more
#: traversal orders (``TRAVERSAL_RUNS``).
ORDERS_TO_PLACE = 2
# How the time limit is spent. Each CP-SAT refinement has a *budget* of deterministic work
# (CP-SAT's deterministic time, the same on every run) and a wall-clock *deadline*. The budgets
# are sized from the work each model does per wall-clock second on the reference machine
# (solver.speed; 2 cores, measured with the official cases: ordering ~0.45, placement ~0.35,
# pipes ~0.2) and from ``SolveOptions.work_s`` (the limit times the machine's speed factor), so
# that a run ends on its budgets, reproducibly, at about 90% of the limit; the deadlines, later,
# only stop a run on a machine slower than its factor says, which then stays on time but may
# differ from run to run.
#: Problem 1: budget (deterministic seconds per second of the limit) and deadline (share).
P1_WORK, P1_DEADLINE = 0.12, 0.40
#: Problem 1 alone (no placement to follow).
P1_ALONE_WORK, P1_ALONE_DEADLINE = 0.40, 0.95
#: Problem 1 buffer compaction (:mod:`heuristics.compaction`), before the LNS: its share of the
#: time limit, as a move count (pipeline, and Problem 1 alone). FlashAttention_Case0 needs about
#: 60 s of moves to reach 3,968 from 4,500; the descent alone takes seconds.
COMPACTION_SHARE, COMPACTION_ALONE_SHARE = 0.10, 0.40
#: Moves of the closing descent after the LNS, as a share of the compaction's.
CLOSING_DESCENT = 0.1
#: Problem 1 LNS settings (windows of 30-50 ops close in ~1 s; larger ones stop closing).
#: ``stall_depth=2``: a drop in the number of positions at the peak is progress too; on
#: FlashAttention_Case1 (the same peak once per key/value column) 26 such drops in a row were
#: cut off as a stall at 7,588 in a 600 s run of d5554fa; the window LNS alone
#: (results/2026-11-21_p1-120s) reached 7,586 after 70 improving steps, most of them such drops.
P1_LNS = LnsParams(initial_window=30, min_window=8, max_window=50, step_time_s=1.5, stall_depth=2)
#: When Problems 2/3 follow, Problem 1's LNS stops once its key has not dropped for this share
#: of its budget (but never sooner than ``P1_STALL_MIN`` deterministic seconds), and hands what
#: is left to Problem 3, whose LNS still improves at the end of its budget. At 600 s the
#: official cases' P1 peaks stopped dropping within the first 35 of 72 deterministic seconds.
P1_STALL_SHARE, P1_STALL_MIN = 0.35, 10.0
#: Deterministic seconds of the pipe model per second of the reference machine.
P3_RATE = 0.2
#: Deterministic seconds of the pipe model per deterministic second of the ordering model
#: handed over (their rates on the reference machine, ~0.2 and ~0.45 per second).
P1_TO_P3_WORK = P3_RATE / 0.45
#: Share of the time limit the Problem 2 traversal search may use (as an evaluation count).
TRAVERSAL_SHARE = 0.15
#: Annealing runs the traversal search's evaluations are split into; each run's order is
#: placed. The search's estimate ranks orders poorly, so one run's answer is its seed's: with
#: one run Conv_Case0's P2 was 45,698 / 55,304 / 43,008 for seeds 0 / 1 / 2
#: (results/2026-11-23_conv0-seeds); three runs, each order placed, gave 43,010 with seed 0
#: (results/2026-11-23_pipeline-600s-traversals).
TRAVERSAL_RUNS = 3
#: Stream-grouped Problem 2 orders (heuristics.streams): group sizes tried (and all streams at
#: once), and how many of them, lowest estimated traffic first, go on to placement when they
#: beat every other order's estimate. On FlashAttention_Case1 groups of 2 estimate 16,384
#: (the placement agrees) against 30,000 and more for the Problem 1 and traversal orders.
STREAM_GROUPS, STREAM_ORDERS = (1, 2, 3, 4, 5, 6, 8), 3
#: Share of the time limit (as traffic estimates) for the stream-grouped orders.
STREAM_SHARE = 0.02
#: Share of the time limit (as traffic estimates) for hoisting the COPY_INs of those orders
#: (heuristics.streams.hoist_loads); on FlashAttention_Case1 it takes about 160 estimates an
#: order, well under this.
HOIST_SHARE = 0.02
#: The farthest a COPY_IN is hoisted, one placed order each. Hoisting takes the first lead that
#: keeps the estimate, halving from this one, so a shorter start settles on other places: on
#: FlashAttention_Case0 (groups of two, topological order) 32 gives 31,366 placed, 256 32,053,
#: at the same 768 units.
HOIST_LEADS = (256, 32)
#: Problem 2 refinement: budget and deadline.
P2_WORK, P2_DEADLINE = 0.03, 0.75
#: The full placement model runs first (on the Problem 2 refinement's budget; LNS gets what it
#: leaves) up to this many buffers: small instances are proven optimal for their order outright.
FULL_PLACEMENT_BUFFERS = 300
#: Problem 2 LNS settings: windows are buffers to re-place, or runs of nodes to re-order.
P2_LNS = LnsParams(initial_window=12, min_window=4, max_window=80, step_time_s=2.0)
#: Deterministic seconds of the pipe model per deterministic second of the placement model
#: handed over (~0.2 and ~0.35 per second of the reference machine).
P2_TO_P3_WORK = P3_RATE / 0.35
#: Problem 3 refinement: budget and deadline (the rest of the limit: writing files). The stage
#: starts at 25-55% of the limit. The pipe model's rate differs by graph: at 600 s on this
#: machine (results/2026-11-23_pipeline-600s-proven, 2 cases at once) 0.5-0.64 deterministic s
#: a second on Conv_Case0 and FlashAttention_Case0, which ended on a budget of 0.08 at 70% of
#: the limit with their LNS still improving; 0.15-0.41 on the larger graphs. 0.14 lets the fast
#: ones run to ~90%; the others end on the deadline (Matmul_Case1 and a 36k-node conv already
#: did), where a run's last steps may differ from run to run.
P3_WORK, P3_DEADLINE = 0.14, 0.97
#: The full pipe model runs first up to this many nodes (spill nodes included).
FULL_PIPE_NODES = 400
#: Problem 3 LNS settings: windows are runs of nodes by start time.
P3_LNS = LnsParams(initial_window=80, min_window=20, max_window=2000, step_time_s=0.4)
#: Problem 1 bound from relaxed sub-instances (solver.bounds.relaxed_instance) around the
#: peak: its share of the Problem 1 budget, and the sub-instance sizes tried in turn (ops),
#: until one does not close. On Conv_Case0 the 32 ops live at the 6,912 peak close in ~0.5
#: deterministic s and prove 6,144 (forced-live: 3,072); with the next ring, 40 ops close in
#: 6 and prove 6,912 (optimal); 48 do not close in 20.
RELAXED_SHARE = 0.1
RELAXED_OPS = (16, 24, 32, 40, 48, 64)
#: Share of the limit kept for putting independent parts together (solver.parts): the
#: parts' answers are re-sequenced for the pipes as a whole.
COMPOSE_SHARE = 0.05
#: Order generators (heuristics.generators) for the Problem 1 portfolio: their share of the
#: limit (as a run count, heuristics.generators.generator_runs) and the tie-break variants
#: tried of each.
PORTFOLIO_SHARE, PORTFOLIO_VARIANTS = 0.05, 4
#: The full ordering model runs for a bound only up to this many ops (beyond, its bound is the
#: trivial one; FINDINGS).
FULL_MODEL_OPS = 400


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


def _solve_parts(
    instance: Instance, parts: Sequence[Part], options: SolveOptions, progress: ProgressFn | None
) -> CaseResult:
    """Each part (:mod:`solver.parts`) solved on its own for its share of the limit (by node
    count), the answers then put one after another; for Problems 2 and 3 the parts' addresses
    also side by side where memory allows, re-sequenced for the pipes, the faster kept."""
    started = time.monotonic() - options.spent_s
    usable = max(options.time_limit_s - options.spent_s, 0.0) * (1.0 - COMPOSE_SHARE)
    total = sum(part.instance.n_nodes for part in parts)
    solved: list[CaseResult] = []
    interrupted: str | None = None
    for part in parts:
        share = usable * part.instance.n_nodes / total
        sub = solve_instance(
            part.instance, replace(options, time_limit_s=share, spent_s=0.0), progress
        )
        solved.append(sub)
        if sub.interrupted:
            interrupted = sub.interrupted
            break
    result = CaseResult(instance.name, order_bound(instance), makespan_bound(instance))
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
    if len(solved) < len(parts):
        result.runtime_s = time.monotonic() - started
        return result  # an answer needs every part
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
            for problem in (2, 3):
                answers = composed(problem)
                if answers is None:
                    continue
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
                        _offer(result, Candidate(method, solution, judged), options)
    except (KeyboardInterrupt, Interrupted) as exc:
        result.interrupted = "SIGINT" if isinstance(exc, KeyboardInterrupt) else str(exc)
    _settle(instance, options, result)
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
    try:
        _pipeline(instance, options, result, started, report, canonical.structure)
    except (KeyboardInterrupt, Interrupted) as exc:
        result.interrupted = "SIGINT" if isinstance(exc, KeyboardInterrupt) else str(exc)
        log.warning("%s: interrupted (%s); keeping the best found", instance.name, exc)
        _settle(instance, options, result)
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
    _refine_pipes(
        instance,
        result,
        options,
        np.random.default_rng(options.seed),
        time.monotonic() - options.spent_s,
        0.0,
        0.0,
        lambda stage, message: None,
    )
    _settle(instance, options, result)
    return result


def _pipeline(
    instance: Instance,
    options: SolveOptions,
    result: CaseResult,
    started: float,
    report: Callable[[str, str], None],
    structure: Structure,
) -> None:
    deadline = started + options.time_limit_s
    rng = np.random.default_rng(options.seed)
    report("bounds", f"P1 >= {result.order_bound.units:,}, P3 >= {result.makespan_bound.cycles:,}")

    # P1: the list scheduler on the generators' orders; restarts stop at a share of the budget.
    alone = set(options.problems) == {1}
    p1_deadline = started + (P1_ALONE_DEADLINE if alone else P1_DEADLINE) * options.time_limit_s
    starts = _portfolio(instance, structure, options)
    runs = order_heuristic(instance, rng, OrderingParams(), deadline=p1_deadline, starts=starts)
    valid_runs = [r for r in runs if r.evaluation.valid]
    handed = 0.0  # Problem 3 work (deterministic s) handed on by stages that ended early
    if valid_runs:
        best = valid_runs[0]
        result.p1 = Candidate(best.name, best.solution, best.evaluation)
        result.note()
        value = best.evaluation.max_v_stay_units or 0
        proven = value <= result.p1_bound_units
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
            spare = _refine_order(data, result, rng, work - used, p1_deadline, stall, report)
            handed = P1_TO_P3_WORK * spare
            closing = max(1, int(CLOSING_DESCENT * moves))
            _compact_order(compactor, result, None, closing, p1_deadline, report)
    else:
        report("P1", "no valid order found (L0 single residency could not be kept)")
    if not {2, 3} & set(options.problems):
        return

    result.p2_bound = traffic_bound(instance, options.hardware)
    report("bounds", f"P2 traffic >= {result.p2_bound.units:,}")

    # P2 and P3 candidates: a few distinct orders x placement policies, each compacted. The
    # list scheduler's best order comes first: the traversal search starts from it. The refined
    # Problem 1 order follows; it keeps residency low by running less at once (on
    # FlashAttention_Case0 its 3,840 order, as the traversal's start, led to a 10% slower P3).
    orders: list[tuple[str, tuple[int, ...]]] = []
    listed = [(run.name, run.solution.order) for run in runs]
    refined = [(result.p1.method, result.p1.solution.order)] if result.p1 is not None else []
    for method, order in listed[:1] + refined + listed[1:]:
        if len(orders) < ORDERS_TO_PLACE and order not in (o for _, o in orders):
            orders.append((method, order))
    if not orders:
        orders.append(("topological", instance.topological_order))
    traversals = _search_traversal(instance, options, orders[0][1], rng, deadline, report)
    for traversal in reversed(traversals):
        if traversal not in (o for _, o in orders):
            orders.insert(0, ("traversal", traversal))
    orders[:0] = _stream_orders(instance, options, orders, starts, report)
    # Each candidate is a whole-graph pass (place, compact, evaluate twice); the next one
    # starts only if it fits before the Problem 2 deadline too, leaving Problem 3 its share.
    p2_deadline = started + P2_DEADLINE * options.time_limit_s
    pass_s = 0.0
    for method, order in orders:
        for policy in PLACEMENT_POLICIES:
            began = time.monotonic()
            if result.candidates and began + pass_s > p2_deadline:
                break
            candidate = _place_and_compact(instance, order, options, f"{method}+{policy}")
            pass_s = max(pass_s, time.monotonic() - began)
            if candidate is not None and candidate.evaluation.valid:
                result.candidates.append(candidate)
    if not result.candidates:
        report("P2", "no valid placement found")
        return
    result.p2 = min(result.candidates, key=lambda c: c.evaluation.objective())
    result.note()
    if options.method == "full":
        handed += P2_TO_P3_WORK * _refine_placement(instance, result, options, rng, started, report)
    e2 = result.p2.evaluation
    report(
        "P2",
        f"traffic {e2.extra_traffic_units:,} in {e2.spill_count:,} spills, "
        f"makespan {e2.makespan_cycles:,} ({result.p2.method})",
    )
    result.p3 = _fastest_within_budget(result, options)
    result.note()
    if options.method == "full":
        _refine_pipes(instance, result, options, rng, started, pass_s, handed, report)
    _settle(instance, options, result)
    assert result.p3 is not None and result.p3_bound is not None
    e3 = result.p3.evaluation
    report(
        "P3",
        f"makespan {e3.makespan_cycles:,} (bound {result.p3_bound.cycles:,}), "
        f"traffic {e3.extra_traffic_units:,} ({result.p3.method})",
    )


def _portfolio(
    instance: Instance, structure: Structure, options: SolveOptions
) -> list[tuple[str, list[int]]]:
    """The order generators' op orders (:mod:`heuristics.generators`), each variant in turn
    while the share ``PORTFOLIO_SHARE`` of the limit lasts (as a run count, so a run is
    reproducible). The ``cone`` order with variant 0 is the canonical order itself (the node
    ids), which the list scheduler runs anyway."""
    runs = generator_runs(instance, PORTFOLIO_SHARE * options.work_s)
    plan = [
        (name, variant)
        for variant in range(PORTFOLIO_VARIANTS)
        for name in GENERATORS
        if (name, variant) != ("cone", 0)
    ][:runs]
    starts: list[tuple[str, list[int]]] = []
    seen: set[tuple[int, ...]] = set()
    for name, variant in plan:
        order = GENERATORS[name](instance, structure, variant)
        if tuple(order) not in seen:
            seen.add(tuple(order))
            starts.append((f"{name}{variant}", order))
    return starts


def _traffic_room(result: CaseResult, options: SolveOptions, incumbent: Evaluation) -> int:
    """How much traffic a Problem 3 step may add to ``incumbent`` and stay within the budget
    (``1 + traffic_slack`` times the Problem 2 answer's traffic, which drops whenever a step
    finds less)."""
    assert result.p2 is not None
    budget = (result.p2.evaluation.extra_traffic_units or 0) * (1.0 + options.traffic_slack)
    return max(0, int(budget) - (incumbent.extra_traffic_units or 0))


def _fastest_within_budget(result: CaseResult, options: SolveOptions) -> Candidate | None:
    """The Problem 3 answer among the candidates: the shortest makespan whose traffic stays
    within ``(1 + traffic_slack)`` times the Problem 2 answer's."""
    if result.p2 is None:
        return None
    budget = (result.p2.evaluation.extra_traffic_units or 0) * (1.0 + options.traffic_slack)
    within = [c for c in result.candidates if (c.evaluation.extra_traffic_units or 0) <= budget]
    p3 = min(within, key=lambda c: (c.evaluation.makespan_cycles, c.evaluation.extra_traffic_units))
    return Candidate(p3.method, p3.solution, replace(p3.evaluation, problem=3))


def _offer(result: CaseResult, candidate: Candidate, options: SolveOptions) -> None:
    """Record a valid Problem 2/3 candidate at once (an interrupted run keeps it): it becomes
    the Problem 2 answer if it ranks first there, and the Problem 3 answer is again the
    fastest candidate within the traffic budget."""
    result.candidates.append(candidate)
    as_p2 = replace(candidate.evaluation, problem=2)
    if result.p2 is None or as_p2.objective() < result.p2.evaluation.objective():
        result.p2 = Candidate(candidate.method, candidate.solution, as_p2)
    result.p3 = _fastest_within_budget(result, options)
    result.note()


def _settle(instance: Instance, options: SolveOptions, result: CaseResult) -> None:
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
        result.p3 = _fastest_within_budget(result, options)
        result.frontier = _frontier(result.candidates)
    if result.p3 is not None:
        result.p3_bound = makespan_bound(instance, result.p3.solution)
    result.note()


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
            params=_wall_cap(deadline),
        )
        left -= float(answer.info.get("deterministic_time", left))
        if answer.bound is not None and answer.bound > result.p1_bound_units:
            result.p1_bound_units = answer.bound
            result.p1_bound_source = f"relaxed sub-instance of {len(chosen)} ops"
        if answer.status is not Status.OPTIMAL:
            break  # a larger one would not close either
    report("P1-bound", f"max V_stay >= {result.p1_bound_units:,} ({result.p1_bound_source})")
    return budget - max(left, 0.0)


def _refine_order(
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
            params=_wall_cap(deadline),
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
            params=_wall_cap(deadline),
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


def _refine_placement(
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

    def keep(solution: Solution) -> None:
        for variant, suffix in ((solution, ""), (compact(instance, solution), "+compact")):
            judged = evaluate(instance, variant, 2, hardware, options.reuse_rule)
            if judged.valid:  # valid by construction; never trust it blindly
                _offer(result, Candidate(method + suffix, variant, judged), options)
            else:
                log.warning("placement model gave an invalid solution: %s", judged.violations[:1])

    start = result.p2.solution
    if len(instance.buffers) <= FULL_PLACEMENT_BUFFERS:
        full = solve_placement(
            instance,
            start,
            hardware,
            time_limit_s=budget,
            seed=seed,
            deterministic=True,
            params=_wall_cap(deadline),
        )
        budget -= float(full.info.get("deterministic_time", 0.0))
        if full.bound is not None:
            result.p2_order_bound = full.bound
        if full.solution is not None and traffic_key(instance, full.solution) < traffic_key(
            instance, start
        ):
            start = full.solution
            keep(start)
        if full.status is Status.OPTIMAL:
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
            params=_wall_cap(deadline),
        )
        work = float(answer.info.get("deterministic_time", time_limit_s))
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


def _refine_pipes(
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
        _offer(result, Candidate(method, timed.solution, timed.evaluation), options)

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
            params=_wall_cap(deadline),
            traffic_room=_traffic_room(result, options, start.evaluation),
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
            params=_wall_cap(deadline),
            traffic_room=_traffic_room(result, options, incumbent.evaluation),
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
        _offer(result, Candidate(f"{current.method}+justify", justified, judged), options)


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
        _offer(result, Candidate(f"{candidate.method}+release", released, judged), options)


def _wall_cap(deadline: float) -> dict[str, str]:
    """CP-SAT's wall-clock limit so that a sub-solve never runs past its stage's deadline (the
    deterministic budget decides when the machine keeps up; this only stops a lagging one)."""
    return {"max_time_in_seconds": f"{max(0.1, deadline - time.monotonic()):.3f}"}


def _frontier(candidates: Sequence[Candidate]) -> list[tuple[int, int]]:
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


def _search_traversal(
    instance: Instance,
    options: SolveOptions,
    start: tuple[int, ...],
    rng: np.random.Generator,
    deadline: float,
    report: Callable[[str, str], None],
) -> list[tuple[int, ...]]:
    """Unit-order search for Problem 2 (:mod:`heuristics.traversal`) on its share of the time
    limit, budgeted in evaluations so the run is reproducible: ``TRAVERSAL_RUNS`` annealing
    runs from one starting point with their own seeds, each on its share of the evaluations.
    Returns their orders, lowest estimate first (every one goes on to placement)."""
    evaluations = evaluations_for(instance, TRAVERSAL_SHARE * options.work_s)
    share = max(1, evaluations // TRAVERSAL_RUNS)
    # The count is the budget; the clock only stops a search the count misjudged.
    stop = min(deadline, time.monotonic() + 2 * TRAVERSAL_SHARE * options.time_limit_s)
    runs = search_traversal(
        instance,
        options.hardware,
        op_order_of(instance, start),
        [np.random.default_rng(int(seed)) for seed in rng.integers(2**31, size=TRAVERSAL_RUNS)],
        TraversalParams(
            max_evaluations=share,
            max_cluster_units=cluster_units_for(0.1 * options.work_s),
        ),
        deadline=stop,
    )
    runs.sort(key=lambda run: run[1])
    estimates = ", ".join(f"{estimate:,}" for _, estimate in runs)
    report(
        "P2-order",
        f"traversal search: estimated traffic {estimates} ({TRAVERSAL_RUNS} x {share:,} "
        "evaluations)",
    )
    orders: list[tuple[int, ...]] = []
    for op_order, _ in runs:
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
        for interleave in (False, True)
        for name, base in bases
        for size in sorted({g for g in STREAM_GROUPS if g < count} | {count})
    ]
    budget = evaluations_for(instance, STREAM_SHARE * options.work_s)
    found: list[tuple[int, str, tuple[int, ...]]] = []
    for interleave, size, name, base in plan[:budget]:
        try:
            op_order = grouped_op_order(instance, base, streams, size, interleave)
        except ValueError:
            continue  # a COPY_IN waits for a stream op of a later group
        estimate = estimate_traffic(instance, op_order, hardware)
        if to_beat is None or estimate < to_beat:
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
    tries = len(kept) * len(HOIST_LEADS)
    estimates = evaluations_for(instance, HOIST_SHARE * options.work_s) // max(tries, 1)
    hoisted: list[tuple[str, tuple[int, ...]]] = []
    seen = {ops for _, ops, _ in kept}
    for method, ops, _ in kept:
        for lead in HOIST_LEADS:
            early = hoist_loads(instance, ops, hardware, lead, max_estimates=estimates)
            if early in seen:
                continue
            seen.add(early)
            try:
                order = schedule_from_op_order(instance, early)
            except ValueError:
                continue
            hoisted.append((f"{method}-hoisted{lead}", order))
    return hoisted + [(method, order) for method, _, order in kept]


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
