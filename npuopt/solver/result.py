"""What a model returns: a status, a solution if one was found, its objective and a bound.

Models never print and never raise when they find nothing: they return a :class:`Result` whose
status says so (STYLE 5).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from npuopt.solver.solution import Solution


class Status(str, Enum):
    """Outcome of a solve, as CP-SAT reports it."""

    OPTIMAL = "OPTIMAL"
    FEASIBLE = "FEASIBLE"
    INFEASIBLE = "INFEASIBLE"
    UNKNOWN = "UNKNOWN"

    @property
    def has_solution(self) -> bool:
        """True for OPTIMAL and FEASIBLE."""
        return self in (Status.OPTIMAL, Status.FEASIBLE)


@dataclass(frozen=True)
class Result:
    """A model's answer.

    Attributes
    ----------
    status
        OPTIMAL (proven), FEASIBLE, INFEASIBLE (proven) or UNKNOWN.
    solution
        The solution found, ``None`` unless the status has one.
    objective
        The model's own objective value of ``solution`` (kept beside the evaluator's; a test
        asserts they agree).
    bound
        A proven lower bound on the objective *of this model* (for a window, of the window
        problem only: not a global bound).
    runtime_s
        Wall-clock seconds spent.
    info
        Model-specific numbers (sizes, sub-objectives).
    """

    status: Status
    solution: Solution | None = None
    objective: int | None = None
    bound: int | None = None
    runtime_s: float = 0.0
    info: Mapping[str, int | float | str] = field(default_factory=dict)
