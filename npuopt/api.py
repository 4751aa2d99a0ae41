"""npuopt's Python API: load a graph, solve it, judge a schedule, and the building blocks.

Everything here takes a *graph* in any of the forms :func:`load` accepts and raises one
exception type, :class:`~npuopt.solver.errors.NpuoptError`, with the messages the command line
prints. Answers are in the graph's own node ids and BufIds, whatever they are: npuopt solves
under names derived from the graph's structure (:mod:`npuopt.solver.canonical`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import networkx as nx
import numpy as np

from npuopt.heuristics.generators import GENERATORS
from npuopt.heuristics.ordering import list_schedule, rank_of
from npuopt.heuristics.pipes import compact
from npuopt.heuristics.placement import PLACEMENT_POLICIES, PlacementError
from npuopt.heuristics.placement import place as _place
from npuopt.solver.bounds import (
    MakespanBound,
    OrderBound,
    TrafficBound,
    makespan_bound,
    order_bound,
    traffic_bound,
)
from npuopt.solver.canonical import canonicalize
from npuopt.solver.errors import NpuoptError
from npuopt.solver.evaluate import Evaluation, ReuseRule
from npuopt.solver.evaluate import evaluate as _evaluate
from npuopt.solver.files import ProblemFiles, read_solution, write_solution
from npuopt.solver.hardware import DEFAULT_HARDWARE, Hardware, load_hardware
from npuopt.solver.instance import Instance, check_solvable, load_instance, parse_instance
from npuopt.solver.report import case_summary, gap
from npuopt.solver.solution import Solution, Spill
from npuopt.solver.solve import Candidate, CaseResult, Progress, SolveOptions, solve_instance

#: What :func:`load` accepts: an :class:`Instance`, a path (``.json`` or either file of a CSV
#: pair), the decoded JSON (``{"Nodes": [...], "Edges": [...]}``) or a networkx ``DiGraph``
#: whose nodes are the ids and carry the JSON fields as attributes.
GraphLike: TypeAlias = Instance | str | os.PathLike[str] | Mapping[str, Any] | nx.DiGraph
HardwareLike: TypeAlias = Hardware | str | os.PathLike[str] | None


def load(graph: GraphLike, *, name: str | None = None, hardware: HardwareLike = None) -> Instance:
    """A validated instance from ``graph`` (see :data:`GraphLike`).

    Parameters
    ----------
    graph
        The graph.
    name
        Case name (names the competition files); by default the file's stem, or ``graph``.
    hardware
        Capacities to check buffer sizes against: a :class:`Hardware`, a TOML file, or the
        contest's when ``None``.

    Raises
    ------
    NpuoptError
        Naming the file, node, buffer or edge at fault.
    """
    machine = _hardware(hardware)
    if isinstance(graph, Instance):  # validated already: checked again only against ``hardware``
        if hardware is not None:
            graph.check_hardware(machine)
        return graph if name is None else graph.model_copy(update={"name": name})
    if isinstance(graph, (str, os.PathLike)):
        instance = load_instance(Path(graph), machine)
        return instance if name is None else instance.model_copy(update={"name": name})
    if isinstance(graph, nx.DiGraph):
        return parse_instance(
            _from_networkx(graph), name=name or "graph", source="DiGraph", hardware=machine
        )
    if isinstance(graph, Mapping):
        return parse_instance(dict(graph), name=name or "graph", source="<dict>", hardware=machine)
    raise NpuoptError(
        f"cannot read a graph from {type(graph).__name__}: give a path, a dict, an Instance or "
        "a networkx DiGraph"
    )


def _from_networkx(graph: nx.DiGraph) -> dict[str, Any]:
    nodes = []
    for v, data in graph.nodes(data=True):
        if not isinstance(v, (int, np.integer)):
            raise NpuoptError(f"DiGraph node {v!r}: node keys must be the integer ids")
        nodes.append({**data, "Id": int(v)})
    return {"Nodes": nodes, "Edges": [[int(a), int(b)] for a, b in graph.edges]}


def _hardware(hardware: HardwareLike) -> Hardware:
    if hardware is None:
        return DEFAULT_HARDWARE
    if isinstance(hardware, Hardware):
        return hardware
    return load_hardware(Path(hardware))


@dataclass(frozen=True)
class Answer:
    """One problem's answer: the solution, the evaluator's report on it and its bound.

    Attributes
    ----------
    problem
        1, 2 or 3.
    method
        How npuopt found it (the stages it went through).
    solution
        Schedule, and for Problems 2 and 3 offsets and spills, in the graph's ids.
    evaluation
        The evaluator's report (validity, objective values, peaks, pipe loads, times).
    bound
        The proven lower bound on this problem's objective (P1 units, P2 traffic units or P3
        cycles at this answer's traffic).
    """

    problem: int
    method: str
    solution: Solution
    evaluation: Evaluation
    bound: int

    @property
    def value(self) -> int:
        """The objective: ``max V_stay`` (P1), extra traffic (P2) or makespan (P3)."""
        e = self.evaluation
        values = {1: e.max_v_stay_units, 2: e.extra_traffic_units, 3: e.makespan_cycles}
        return values[self.problem] or 0

    @property
    def gap(self) -> float | None:
        """``(value - bound) / value``; ``None`` when the value is 0."""
        return gap(self.value, self.bound)


@dataclass
class Result:
    """What :func:`solve` found for one graph.

    Attributes
    ----------
    case
        The graph's name (names the competition files).
    answers
        The answer to each problem solved, by problem number.
    interrupted
        What stopped the run early (``"SIGINT"``...), ``None`` when it ran to its limit.
    summary
        The run's summary, as ``npuopt solve`` writes it in ``summary.json``.
    """

    case: str
    answers: dict[int, Answer] = field(default_factory=dict)
    interrupted: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def p1(self) -> Answer | None:
        """Problem 1's answer."""
        return self.answers.get(1)

    @property
    def p2(self) -> Answer | None:
        """Problem 2's answer."""
        return self.answers.get(2)

    @property
    def p3(self) -> Answer | None:
        """Problem 3's answer."""
        return self.answers.get(3)

    def objectives(self) -> dict[int, int]:
        """Each answer's objective value, by problem."""
        return {p: a.value for p, a in sorted(self.answers.items())}

    def write(self, folder: str | os.PathLike[str]) -> list[ProblemFiles]:
        """Write the competition files (``folder/ProblemN/<case>_*.txt``) of every answer."""
        return [
            write_solution(Path(folder) / f"Problem{p}", self.case, p, a.solution)
            for p, a in sorted(self.answers.items())
        ]


def solve(
    graph: GraphLike,
    *,
    time_limit: float = 60.0,
    problems: Iterable[int] = (1, 2, 3),
    seed: int = 0,
    workers: int = 1,
    hardware: HardwareLike = None,
    method: str = "full",
    traffic_slack: float = 0.0,
    reuse_rule: ReuseRule = "residency",
    speed: float = 1.0,
    progress: Callable[[Progress], None] | None = None,
) -> Result:
    """Solve Problems 1-3 (those in ``problems``) for ``graph`` within ``time_limit`` seconds.

    Parameters
    ----------
    graph
        The graph (see :func:`load`).
    time_limit
        Wall-clock seconds for all stages together.
    problems
        Which problems to answer (Problem 1 always runs when 2 or 3 is asked: it supplies
        orders).
    seed
        Seed of every random choice: same seed, speed and workers, same answers.
    workers
        Processes for the independent work (generator runs, annealing runs, placement
        passes); 1 runs everything in this process. The answers depend on it.
    hardware
        Capacities and layout rules (see :func:`load`).
    method
        ``"full"`` (greedy warm starts, then CP-SAT refinement) or ``"heuristics"`` (the
        pure-Python warm starts alone: one heuristic run per problem, no CP-SAT).
    traffic_slack
        Problem 3 may use ``(1 + traffic_slack)`` times the Problem 2 traffic.
    reuse_rule
        ``"residency"`` (SPEC section 4) or ``"literal"``.
    speed
        The machine's speed factor, which sizes every work budget (``npuopt solve`` measures
        it; 1.0 is the reference machine).
    progress
        Called with a :class:`~npuopt.solver.solve.Progress` event after every stage.

    Raises
    ------
    NpuoptError
        On a bad graph, hardware or argument.
    """
    for label, value in (("workers", workers), ("seed", seed)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise NpuoptError(f"{label}={value!r}: an integer is needed")
    if workers < 1:
        raise NpuoptError(f"workers={workers}: at least 1")
    if method not in ("full", "heuristics"):
        raise NpuoptError(f"method {method!r}: choose full or heuristics")
    if not isinstance(time_limit, (int, float)) or time_limit < 0:
        raise NpuoptError(f"time_limit={time_limit!r}: seconds, at least 0")
    try:
        wanted = tuple(sorted(set(problems)))
    except TypeError:
        raise NpuoptError(f"problems {problems!r}: give a collection such as (1, 2, 3)") from None
    if not wanted or not set(wanted) <= {1, 2, 3}:
        raise NpuoptError(f"problems {problems!r}: choose among 1, 2 and 3")
    if reuse_rule not in ("residency", "literal"):
        raise NpuoptError(f"reuse_rule {reuse_rule!r}: choose residency or literal")
    machine = _hardware(hardware)
    instance = load(graph, hardware=machine)
    check_solvable(instance, machine, wanted, instance.name)
    options = SolveOptions(
        problems=wanted,
        time_limit_s=float(time_limit),
        seed=seed,
        traffic_slack=traffic_slack,
        hardware=machine,
        reuse_rule=reuse_rule,
        method=method,  # type: ignore[arg-type]
        speed=speed,
        workers=workers,
    )
    found = solve_instance(instance, options, progress)
    return _result(found, wanted)


def _result(found: CaseResult, problems: Sequence[int]) -> Result:
    bounds = {1: found.p1_bound_units, 2: found.p2_bound.units if found.p2_bound else 0}
    if found.p3_bound is not None:
        bounds[3] = found.p3_bound.cycles
    result = Result(found.case, interrupted=found.interrupted, summary=case_summary(found))
    for problem in problems:
        candidate: Candidate | None = found.best(problem)
        if candidate is not None and candidate.evaluation.valid:
            result.answers[problem] = Answer(
                problem,
                candidate.method,
                candidate.solution,
                candidate.evaluation,
                bounds.get(problem, 0),
            )
    return result


def evaluate(
    graph: GraphLike,
    schedule: Solution | Sequence[int] | str | os.PathLike[str],
    *,
    problem: int,
    memory: Mapping[int, int] | None = None,
    spills: Sequence[Spill | tuple[int, int]] = (),
    hardware: HardwareLike = None,
    reuse_rule: ReuseRule = "residency",
) -> Evaluation:
    """The evaluator's report on a schedule (the judge of every figure npuopt prints).

    Parameters
    ----------
    graph
        The graph (see :func:`load`).
    schedule
        A :class:`Solution`; or the node ids in schedule order, with ``memory`` and
        ``spills`` for Problems 2 and 3; or a ``ProblemN`` folder of the competition layout
        (``<case>_schedule.txt``, and ``_memory.txt``, ``_spill.txt``), ``case`` being the
        graph's name.
    problem
        1, 2 or 3.
    memory
        Initial offset of every buffer, by BufId (Problems 2 and 3).
    spills
        The spill list in order: ``(BufId, new offset)`` pairs or :class:`Spill` objects.
    hardware, reuse_rule
        As for :func:`solve`.
    """
    if problem not in (1, 2, 3):
        raise NpuoptError(f"problem must be 1, 2 or 3, not {problem}")
    machine = _hardware(hardware)
    instance = load(graph, hardware=machine)
    if isinstance(schedule, Solution):
        solution = schedule
    elif isinstance(schedule, (str, os.PathLike)):
        files = ProblemFiles.in_dir(Path(schedule), instance.name)
        solution = read_solution(files, instance, problem, machine)
    else:
        try:
            listed = tuple(
                s if isinstance(s, Spill) else Spill(int(s[0]), int(s[1])) for s in spills
            )
            solution = Solution(
                order=tuple(int(v) for v in schedule),
                offsets={int(b): int(o) for b, o in (memory or {}).items()},
                spills=listed,
            )
        except (TypeError, ValueError, IndexError) as exc:
            raise NpuoptError(
                f"{instance.name}: a schedule is node ids, memory maps BufIds to offsets and "
                f"spills are (BufId, offset) pairs ({exc})"
            ) from None
    return _evaluate(instance, solution, problem, machine, reuse_rule)


def _check_schedule(instance: Instance, order: Sequence[int]) -> None:
    """Raise unless ``order`` lists every original node once and keeps every edge."""
    if sorted(order) != list(range(instance.n_nodes)):
        raise NpuoptError(
            f"{instance.name}: the schedule must list each of the {instance.n_nodes} nodes "
            "exactly once (no spill nodes)"
        )
    position = {v: p for p, v in enumerate(order)}
    for a, after in enumerate(instance.successors):
        for b in after:
            if position[a] > position[b]:
                raise NpuoptError(f"{instance.name}: the schedule puts node {b} before {a}")


# -- building blocks ----------------------------------------------------------------------------


def generate_orders(
    graph: GraphLike, variants: int = 1, *, hardware: HardwareLike = None
) -> dict[str, Solution]:
    """The order generators' Problem 1 schedules (:mod:`npuopt.heuristics.generators`), each
    variant of each generator scheduled by the memory-aware list scheduler (which keeps the L0
    rule), named ``<generator><variant>``: greedy Problem 1 answers read from the graph's
    structure alone. Evaluate them with :func:`evaluate` (``problem=1``)."""
    instance = load(graph, hardware=hardware)
    canonical = canonicalize(instance)
    named = canonical.instance
    orders: dict[str, Solution] = {}
    for name, generator in GENERATORS.items():
        for variant in range(variants):
            op_order = generator(named, canonical.structure, variant)
            order = list_schedule(named, "program", rank_of(named, op_order))
            if order is not None:
                orders[f"{name}{variant}"] = canonical.restore(Solution(order=tuple(order)))
    return orders


def place(
    graph: GraphLike,
    schedule: Solution | Sequence[int],
    *,
    policy: str = "best-fit",
    hardware: HardwareLike = None,
) -> Solution:
    """Problem 2's greedy placement of a schedule of the original nodes (a Problem 1 answer,
    say): an offset for every buffer and the spills that make it fit
    (:mod:`npuopt.heuristics.placement`; ``policy`` one of
    :data:`~npuopt.heuristics.placement.PLACEMENT_POLICIES`)."""
    if policy not in PLACEMENT_POLICIES:
        raise NpuoptError(f"policy {policy!r}: choose from {', '.join(PLACEMENT_POLICIES)}")
    machine = _hardware(hardware)
    instance = load(graph, hardware=machine)
    try:
        listed = schedule.order if isinstance(schedule, Solution) else schedule
        order = tuple(int(v) for v in listed)
    except (TypeError, ValueError):
        raise NpuoptError(f"{instance.name}: a schedule is a sequence of node ids") from None
    _check_schedule(instance, order)
    try:
        return _place(instance, order, machine, policy)
    except (PlacementError, ValueError) as exc:
        raise NpuoptError(f"{instance.name}: {exc}") from None


def schedule_pipes(
    graph: GraphLike, solution: Solution, *, hardware: HardwareLike = None
) -> Solution:
    """Problem 3's pipe scheduling of a placed solution, offsets and spills kept: the non-delay
    list schedule of the pipes and one round of justification, the shortest of them
    (:func:`npuopt.heuristics.pipes.compact`). ``solution`` must be valid under Problem 2's
    rules on ``hardware``. Compare with :func:`evaluate`; it may be slower than ``solution``."""
    machine = _hardware(hardware)
    instance = load(graph, hardware=hardware)
    judged = _evaluate(instance, solution, 2, machine)
    if not judged.valid:
        first = judged.violations[0].message if judged.violations else "invalid"
        raise NpuoptError(f"{instance.name}: the solution is not valid: {first}")
    return compact(instance, solution)


@dataclass(frozen=True)
class Bounds:
    """Proven lower bounds (SPEC section 8).

    Attributes
    ----------
    order
        Problem 1 (``order.units``: the best of the op-local, forced-live and grid bounds).
    traffic
        Problem 2's extra traffic over every order and placement.
    makespan
        Problem 3's makespan: of the graph, or of a solution's spill decisions when given.
    """

    order: OrderBound
    traffic: TrafficBound
    makespan: MakespanBound


def bounds(
    graph: GraphLike, solution: Solution | None = None, *, hardware: HardwareLike = None
) -> Bounds:
    """The bounds every report carries (the pipeline may prove a stronger Problem 1 bound on
    relaxed sub-instances; :func:`solve` reports that one)."""
    machine = _hardware(hardware)
    instance = load(graph, hardware=machine)
    return Bounds(
        order_bound(instance),
        traffic_bound(instance, machine),
        makespan_bound(instance, solution),
    )


__all__ = [
    "Answer",
    "Bounds",
    "GraphLike",
    "Result",
    "bounds",
    "evaluate",
    "generate_orders",
    "load",
    "place",
    "schedule_pipes",
    "solve",
]
