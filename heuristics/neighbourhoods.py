"""Window choosers for the Problem 1 LNS: which ops of an op order are free to move.

All work on an op order (the op nodes in schedule order) and return a set of op ids. They target
the peak of the residency profile, where a better order has to differ, and diversify with random
runs. Pure Python (and numpy); the LNS driver (``solver.lns``) draws among them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from solver.hardware import COUNTED_MEMORIES
from solver.instance import Instance
from solver.solution import buffer_lifetimes, op_profile


def peak_key(instance: Instance, op_order: Sequence[int]) -> tuple[int, int]:
    """``(peak, number of positions at the peak)`` of an op order's residency profile.

    The count lets the search see progress where the same peak recurs many times
    (FlashAttention_Case1, FINDINGS): removing one occurrence is an improvement.
    """
    profile = op_profile(instance, op_order)
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
