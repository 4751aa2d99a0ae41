"""Window choosers for the LNS: which items are free to move.

Problem 1: on an op order (the op nodes in schedule order), sets of op ids around the peak of
the residency profile, where a better order has to differ, and random runs to diversify.
Problem 2: on a placed solution, sets of buffers to re-place, around a spill or where a memory's
address-free occupancy exceeds its capacity. Problem 3: on a solution in time, runs of nodes
(by start) around the critical chain, anywhere, or at the end. Pure Python (and numpy); the LNS
driver (``solver.lns``) draws among them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from npuopt.solver.hardware import COUNTED_MEMORIES, Hardware
from npuopt.solver.instance import Instance
from npuopt.solver.solution import Solution, buffer_lifetimes, op_profile


def peak_key(instance: Instance, op_order: Sequence[int]) -> tuple[int, int]:
    """``(peak, number of positions at the peak)`` of an op order's residency profile.

    The count lets the search see progress where the same peak recurs many times
    (FlashAttention_Case1, FINDINGS): removing one occurrence is an improvement.
    """
    return profile_key(op_profile(instance, op_order))


def profile_key(profile: np.ndarray) -> tuple[int, int]:
    """``(peak, number of positions at the peak)`` of a residency profile."""
    if not len(profile):
        return (0, 0)
    peak = int(profile.max())
    return (peak, int((profile == peak).sum()))


def _peak_position(instance: Instance, op_order: Sequence[int], rng: np.random.Generator) -> int:
    profile = op_profile(instance, op_order)
    peaks = np.flatnonzero(profile == profile.max())
    return int(rng.choice(peaks))


@dataclass(frozen=True)
class PeakRun:
    """A run of consecutive ops containing a (random) peak position, at a random offset."""

    instance: Instance
    name: str = "peak-run"

    def __call__(self, op_order: Sequence[int], size: int, rng: np.random.Generator) -> set[int]:
        at = _peak_position(self.instance, op_order, rng)
        start = int(np.clip(at - rng.integers(0, max(size, 1)), 0, max(len(op_order) - size, 0)))
        return set(op_order[start : start + size])


@dataclass(frozen=True)
class PeakBuffers:
    """The users of the buffers live at a peak position, nearest to it first.

    Moving a live buffer's producer later or its consumers earlier is how its lifetime, and the
    peak, shrink.
    """

    instance: Instance
    name: str = "peak-buffers"

    def __call__(self, op_order: Sequence[int], size: int, rng: np.random.Generator) -> set[int]:
        at = _peak_position(self.instance, op_order, rng)
        position = {v: p for p, v in enumerate(op_order)}
        live = [
            b
            for b, (first, last) in buffer_lifetimes(self.instance, position).items()
            if first <= at <= last and self.instance.buffers[b].memory in COUNTED_MEMORIES
        ]
        users = {u for b in live for u in self.instance.buffers[b].users}
        near = sorted(users, key=lambda u: (abs(position[u] - at), u))
        chosen = set(near[:size])
        # Fill up with the run around the peak when the buffers have few users.
        for offset in range(len(op_order)):
            if len(chosen) >= size:
                break
            for p in (at - offset, at + offset):
                if 0 <= p < len(op_order):
                    chosen.add(op_order[p])
        return chosen


@dataclass(frozen=True)
class RandomRun:
    """A run of consecutive ops anywhere (diversification)."""

    name: str = "random-run"

    def __call__(self, op_order: Sequence[int], size: int, rng: np.random.Generator) -> set[int]:
        start = int(rng.integers(0, max(len(op_order) - size, 0) + 1))
        return set(op_order[start : start + size])


def ordering_neighbourhoods(instance: Instance) -> list[PeakRun | PeakBuffers | RandomRun]:
    """The Problem 1 neighbourhoods, in the driver's draw order."""
    return [PeakRun(instance), PeakBuffers(instance), RandomRun()]


# -- Problem 2: which buffers to re-place -----------------------------------------------------


def traffic_key(instance: Instance, solution: Solution) -> tuple[int, int]:
    """``(extra traffic, spill count)`` of a placed solution (SPEC section 3: ``Size`` per spill of
    a COPY_IN-backed buffer, else ``2 Size``)."""
    traffic = sum(instance.buffers[s.buf_id].spill_traffic_units for s in solution.spills)
    return (traffic, len(solution.spills))


def _live_intervals(instance: Instance, solution: Solution) -> dict[int, tuple[str, int, int]]:
    """(memory, first, last) schedule position of every buffer's whole lifetime."""
    position = {v: p for p, v in enumerate(solution.order)}
    return {
        b: (buf.memory, position[buf.alloc], position[buf.free])
        for b, buf in instance.buffers.items()
    }


def _near(
    lives: dict[int, tuple[str, int, int]], memory: str, lo: int, hi: int, size: int, centre: int
) -> list[int]:
    """Up to ``size`` buffers of ``memory`` alive somewhere in ``[lo, hi]``, nearest first."""
    near = [
        (0 if first <= centre <= last else min(abs(first - centre), abs(last - centre)), b)
        for b, (mem, first, last) in lives.items()
        if mem == memory and first <= hi and last >= lo
    ]
    return [b for _, b in sorted(near)[:size]]


@dataclass(frozen=True)
class AroundSpill:
    """A spilled buffer and the buffers of its memory alive around its spill."""

    instance: Instance
    name: str = "around-spill"

    def __call__(self, solution: Solution, size: int, rng: np.random.Generator) -> set[int]:
        if not solution.spills:
            return set()
        n = self.instance.n_nodes
        k = int(rng.integers(len(solution.spills)))
        b = solution.spills[k].buf_id
        position = {v: p for p, v in enumerate(solution.order)}
        so, si = position[n + 2 * k], position[n + 2 * k + 1]
        lives = _live_intervals(self.instance, solution)
        chosen = _near(lives, self.instance.buffers[b].memory, so, si, size, so)
        return {b, *chosen}


@dataclass(frozen=True)
class PressurePoint:
    """The buffers alive where a memory's address-free occupancy (lifetimes, no spills) is
    highest: the places capacity forces spills."""

    instance: Instance
    hardware: Hardware
    name: str = "pressure-point"

    def __call__(self, solution: Solution, size: int, rng: np.random.Generator) -> set[int]:
        lives = _live_intervals(self.instance, solution)
        over: list[tuple[str, int]] = []
        for memory in sorted({mem for mem, _, _ in lives.values()}):
            delta = np.zeros(len(solution.order) + 1, dtype=np.int64)
            for b, (mem, first, last) in lives.items():
                if mem == memory:
                    delta[first] += self.instance.buffers[b].size_units
                    delta[last + 1] -= self.instance.buffers[b].size_units
            load = np.cumsum(delta[:-1])
            points = np.flatnonzero(load > self.hardware.capacity(memory))
            over += [(memory, int(p)) for p in points]
        if not over:
            return set()
        memory, at = over[int(rng.integers(len(over)))]
        return set(_near(lives, memory, at, at, size, at))


class Reorder(frozenset[int]):
    """A Problem 2 window of *original nodes* to re-order, with the buffers they touch
    re-placed in the same model (the other Problem 2 windows are sets of buffers)."""


@dataclass(frozen=True)
class ReorderAroundSpill:
    """The original nodes in a run of the schedule around a random spill: re-ordered (and
    their buffers re-placed) in one model, an order that needs no spill there can be found."""

    instance: Instance
    name: str = "reorder-around-spill"

    def __call__(self, solution: Solution, size: int, rng: np.random.Generator) -> Reorder:
        if not solution.spills:
            return Reorder()
        n = self.instance.n_nodes
        k = int(rng.integers(len(solution.spills)))
        original = [v for v in solution.order if v < n]
        rank = {v: r for r, v in enumerate(original)}
        at = 0  # rank of the last original node before the SPILL_OUT
        for v in solution.order:
            if v == n + 2 * k:
                break
            if v < n:
                at = rank[v]
        first = int(np.clip(at - rng.integers(0, max(size, 1)), 0, max(len(original) - size, 0)))
        return Reorder(original[first : first + size])


def placement_neighbourhoods(
    instance: Instance, hardware: Hardware
) -> list[AroundSpill | PressurePoint | ReorderAroundSpill]:
    """The Problem 2 neighbourhoods: re-placement, and re-ordering with re-placement."""
    return [AroundSpill(instance), PressurePoint(instance, hardware), ReorderAroundSpill(instance)]


# -- Problem 3: which nodes to re-time --------------------------------------------------------


class Timed(Protocol):
    """What the Problem 3 neighbourhoods read of an incumbent in time (``models.pipes``'s
    frame has it): its schedule sorted by start, start and end cycles, precedences, pipes."""

    @property
    def solution(self) -> Solution: ...
    @property
    def start(self) -> np.ndarray: ...
    @property
    def end(self) -> np.ndarray: ...
    @property
    def pred(self) -> list[list[int]]: ...
    @property
    def pipe(self) -> list[str | None]: ...


def _run_around(order: Sequence[int], at: int, size: int, rng: np.random.Generator) -> set[int]:
    """``size`` consecutive nodes of ``order`` containing index ``at``, at a random offset."""
    first = int(np.clip(at - rng.integers(0, max(size, 1)), 0, max(len(order) - size, 0)))
    return set(order[first : first + size])


def critical_chain(timed: Timed) -> list[int]:
    """Nodes of a chain that sets the makespan, last first: from a node that ends last, back
    through a predecessor or the previous node on its pipe that ends exactly when it starts."""
    order = timed.solution.order
    if not order:
        return []
    previous_on_pipe: dict[int, int] = {}
    last_on: dict[str, int] = {}
    for v in order:
        pipe = timed.pipe[v]
        if pipe is not None:
            if pipe in last_on:
                previous_on_pipe[v] = last_on[pipe]
            last_on[pipe] = v
    v = max(order, key=lambda u: int(timed.end[u]))
    chain = [v]
    while timed.start[v] > 0:
        options = [*timed.pred[v], *([previous_on_pipe[v]] if v in previous_on_pipe else [])]
        tight = [u for u in options if timed.end[u] == timed.start[v]]
        if not tight:
            break
        v = max(tight, key=lambda u: int(timed.start[u]))
        chain.append(v)
    return chain


@dataclass(frozen=True)
class CriticalRun:
    """A run of the schedule (by start time) around a node of the critical chain: the makespan
    only drops where the chain does."""

    name: str = "critical-run"

    def __call__(self, timed: Timed, size: int, rng: np.random.Generator) -> set[int]:
        chain = critical_chain(timed)
        order = timed.solution.order
        if not chain:
            return set()
        at = order.index(chain[int(rng.integers(len(chain)))])
        return _run_around(order, at, size, rng)


@dataclass(frozen=True)
class TimeRun:
    """A run of the schedule anywhere (diversification)."""

    name: str = "time-run"

    def __call__(self, timed: Timed, size: int, rng: np.random.Generator) -> set[int]:
        order = timed.solution.order
        return _run_around(order, int(rng.integers(max(len(order), 1))), size, rng)


@dataclass(frozen=True)
class TailRun:
    """The last nodes to start: the end of the schedule decides the makespan."""

    name: str = "tail-run"

    def __call__(self, timed: Timed, size: int, rng: np.random.Generator) -> set[int]:
        return set(timed.solution.order[-size:])


def pipe_neighbourhoods() -> list[CriticalRun | TimeRun | TailRun]:
    """The Problem 3 (re-timing) neighbourhoods."""
    return [CriticalRun(), TimeRun(), TailRun()]
