"""Windowed large-neighbourhood search, shared by the Problem 1, 2 and 3 refinements.

The driver is built from small protocols (after the ALNS package and the CP-SAT primer's LNS):

* a :class:`Neighbourhood` picks a *window* (the items free to move) around the incumbent;
* a :class:`Repair` re-solves the window with the rest fixed (a CP-SAT model, usually) and
  reports whether it closed the window (proved its sub-problem optimal) within its time slice;
* acceptance keeps the candidate when its objective key is no worse (sideways moves let the
  search cross plateaus), and a stop rule ends at the deadline, after ``max_steps``, or when the
  best key reaches a proven lower bound.

Neighbourhoods are drawn by roulette on adaptive scores (rewarded for new bests and improvements,
decayed otherwise). The window grows when a sub-solve closes within its slice and shrinks when it
does not. Every step's outcome is recorded (``best``, ``better``, ``accepted``, ``rejected``,
``failed``). All randomness comes from the ``numpy.random.Generator`` passed in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

import numpy as np

S = TypeVar("S")
S_contra = TypeVar("S_contra", contravariant=True)
Key = tuple[int, ...]


class Neighbourhood(Protocol[S_contra]):
    """Chooses the items free to move, about ``size`` of them."""

    @property
    def name(self) -> str: ...

    def __call__(
        self, incumbent: S_contra, size: int, rng: np.random.Generator, /
    ) -> Collection[int]: ...


@dataclass(frozen=True)
class Repaired(Generic[S]):
    """A repair's answer: a candidate (or ``None``), whether the window was solved to
    optimality within its slice, and the deterministic work it took (CP-SAT's deterministic
    time: the same on every run, unlike seconds)."""

    candidate: S | None
    closed: bool
    status: str
    work: float = 0.0


class Repair(Protocol[S]):
    """Re-solves a window of the incumbent within a time slice."""

    def __call__(
        self, incumbent: S, window: Collection[int], time_limit_s: float, seed: int, /
    ) -> Repaired[S]: ...


@dataclass(frozen=True)
class LnsParams:
    """Settings of :func:`run_lns`.

    Attributes
    ----------
    initial_window, min_window, max_window
        Window size at the start, and its limits.
    grow, shrink
        Factors applied when a sub-solve closes (or does not close) within its slice.
    step_time_s
        Time slice of one sub-solve (in deterministic time when the repair uses it).
    max_steps
        Stop after this many steps.
    work_budget
        Stop once the repairs' deterministic work adds up to this. Unlike the wall-clock
        deadline it does not depend on the machine's load, so with deterministic repairs a run
        that ends on its budget is reproducible step for step.
    stall_work
        Stop once this much work has passed since the key's first ``stall_depth`` components
        last improved: later components only guide the search across plateaus, and the caller
        may have a better use for the rest of the budget.
    stall_depth
        Leading key components whose improvement counts as progress (1: the objective only).
    """

    initial_window: int = 40
    min_window: int = 8
    max_window: int = 400
    grow: float = 1.2
    shrink: float = 0.85
    step_time_s: float = 3.0
    max_steps: int | None = None
    work_budget: float | None = None
    stall_work: float | None = None
    stall_depth: int = 1


@dataclass(frozen=True)
class Step:
    """What one LNS step did."""

    index: int
    neighbourhood: str
    window: int
    status: str
    before: Key
    after: Key | None
    outcome: str
    runtime_s: float


@dataclass
class LnsResult(Generic[S]):
    """Best solution found, its key, and the log of every step."""

    best: S
    best_key: Key
    steps: list[Step] = field(default_factory=list)
    proven_optimal: bool = False
    work: float = 0.0
    #: The deterministic work it was given (``LnsParams.work_budget``; None: the clock alone).
    budget: float | None = None
    stalled: bool = False
    #: Why the search ended: ``"bound"``, ``"steps"``, ``"budget"``, ``"stall"`` (these four
    #: are reproducible) or ``"deadline"`` (the machine fell behind its budget).
    stop: str = "deadline"

    def outcomes(self) -> dict[str, int]:
        """Number of steps per outcome."""
        counts: dict[str, int] = {}
        for step in self.steps:
            counts[step.outcome] = counts.get(step.outcome, 0) + 1
        return counts


def run_lns(
    initial: S,
    key: Callable[[S], Key],
    neighbourhoods: Sequence[Neighbourhood[S]],
    repair: Repair[S],
    rng: np.random.Generator,
    deadline: float,
    params: LnsParams | None = None,
    lower_bound: Key | None = None,
    on_step: Callable[[Step], None] | None = None,
    on_best: Callable[[S], None] | None = None,
) -> LnsResult[S]:
    """Improve ``initial`` by windowed re-solves until the deadline (``time.monotonic()``).

    Parameters
    ----------
    initial
        A valid starting solution.
    key
        Objective key to minimise (lexicographic).
    neighbourhoods
        Window choosers; drawn by roulette on adaptive scores.
    repair
        The sub-solver.
    rng
        Source of every random choice (neighbourhood draws, windows, sub-solver seeds).
    deadline
        ``time.monotonic()`` value at which to stop whatever the budgets say; a step never
        starts with less than a fifth of its slice, or than the slowest step so far took, left
        (on large graphs a step's bookkeeping can outlast its slice).
    params
        Window sizes, slice, step limit.
    lower_bound
        A proven lower bound on the key: reaching it stops the search (proven optimal).
    on_step
        Called after every step (progress display).
    on_best
        Called with every new best solution, as soon as it is found (so that an interrupted
        run keeps it).

    Returns
    -------
    LnsResult
        Never worse than ``initial``.
    """
    params = params or LnsParams()
    current, current_key = initial, key(initial)
    best, best_key = current, current_key
    result = LnsResult(best, best_key, budget=params.work_budget)
    scores = np.ones(len(neighbourhoods))
    size = float(params.initial_window)
    index = 0
    work = 0.0
    gained_at = 0.0  # work done when the key's leading components last improved
    depth = params.stall_depth
    longest = 0.0  # the slowest step so far: the next one starts only if that much is left
    while True:
        if lower_bound is not None and best_key <= lower_bound:
            result.proven_optimal, result.stop = True, "bound"
            break
        if params.max_steps is not None and index >= params.max_steps or not neighbourhoods:
            result.stop = "steps"
            break
        if params.work_budget is not None and work >= params.work_budget:
            result.stop = "budget"
            break
        if params.stall_work is not None and work - gained_at >= params.stall_work:
            result.stalled, result.stop = True, "stall"
            break
        left = deadline - time.monotonic()
        if left < max(0.2 * params.step_time_s, longest):
            break
        chosen = int(rng.choice(len(neighbourhoods), p=scores / scores.sum()))
        hood = neighbourhoods[chosen]
        window = hood(current, int(size), rng)
        started = time.monotonic()
        slice_s = params.step_time_s
        if params.work_budget is not None:
            slice_s = min(slice_s, max(params.work_budget - work, 0.01))
        repaired = repair(current, window, slice_s, int(rng.integers(2**31)))
        work += repaired.work
        after = key(repaired.candidate) if repaired.candidate is not None else None
        before = current_key
        if after is None:
            outcome = "failed"
        elif after < best_key:
            outcome = "best"
        elif after < current_key:
            outcome = "better"
        elif after <= current_key:
            outcome = "accepted"
        else:
            outcome = "rejected"
        if outcome in ("best", "better", "accepted"):
            assert repaired.candidate is not None and after is not None
            current, current_key = repaired.candidate, after
        if outcome == "best":
            if current_key[:depth] < best_key[:depth]:
                gained_at = work
            best, best_key = current, current_key
            if on_best is not None:
                on_best(best)
        reward = {"best": 4.0, "better": 2.0, "accepted": 0.5}.get(outcome, 0.0)
        scores[chosen] = 0.8 * scores[chosen] + 0.2 * max(reward, 0.1)
        factor = params.grow if repaired.closed else params.shrink
        size = min(params.max_window, max(params.min_window, size * factor))
        step = Step(
            index=index,
            neighbourhood=hood.name,
            window=len(window),
            status=repaired.status,
            before=before,
            after=after,
            outcome=outcome,
            runtime_s=time.monotonic() - started,
        )
        longest = max(longest, step.runtime_s)
        result.steps.append(step)
        result.best, result.best_key = best, best_key
        if on_step is not None:
            on_step(step)
        index += 1
    result.best, result.best_key = best, best_key
    result.work = work
    return result
