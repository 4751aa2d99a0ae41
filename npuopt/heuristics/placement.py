"""Placement with spills for Problem 2: offsets for a given order, spilling what does not fit.

One forward pass over the order keeps, per memory, the resident buffers sorted by offset:

* an ALLOC (or a reload) takes a free gap: best fit (smallest gap that holds it, lowest offset) or,
  with ``policy="rotate"``, the position whose units were released longest ago, which avoids
  address reuse between neighbours and so leaves the pipes freer to overlap (Problem 3);
  ``policy="hybrid"`` rotates in the L0 memories (double buffering) and fits best elsewhere;
* when no gap is large enough, a contiguous window is cleared by spilling the resident buffers in
  it. Windows start or end at a resident buffer's edge or at a gap; the window chosen minimises
  ``sum traffic * (1 + REUSE_HORIZON / next_use_distance)`` over its victims, which is Belady's
  furthest-next-use rule when sizes are equal, with COPY_IN-backed buffers (half the traffic, free
  SPILL_OUT) cheaper. Buffers used by the op about to run are never victims;
* each SPILL_OUT is placed just before the node that needs the space (as late as possible) and its
  SPILL_IN just before the buffer's next use (as late as possible), at an offset chosen then.

A buffer whose only remaining event is its FREE is a last-resort victim: SPEC's edges force a
reload before the FREE, so spilling it buys nothing.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from npuopt.solver.hardware import L0_MEMORIES, MEMORIES, Hardware
from npuopt.solver.instance import Instance
from npuopt.solver.solution import Solution, Spill

PLACEMENT_POLICIES: tuple[str, ...] = ("best-fit", "hybrid", "rotate")
#: Positions over which an imminent reuse makes a victim more expensive (see module docstring).
REUSE_HORIZON = 64.0
#: Cost multiplier of a victim with no use left before its FREE.
_USELESS_SPILL = 1e6


class PlacementError(Exception):
    """An op's buffers cannot fit their memory even with every other buffer spilled."""


@dataclass
class _Pool:
    """Resident buffers of one memory, sorted by offset."""

    capacity: int
    alignment: int
    starts: list[int]
    ends: list[int]
    owners: list[int]
    released_at: np.ndarray  # per unit: position of the last release (-1: never used)

    @classmethod
    def empty(cls, capacity: int, alignment: int) -> _Pool:
        return cls(capacity, alignment, [], [], [], np.full(capacity, -1, dtype=np.int64))

    def add(self, offset: int, size: int, buf: int) -> None:
        i = bisect.bisect_left(self.starts, offset)
        self.starts.insert(i, offset)
        self.ends.insert(i, offset + size)
        self.owners.insert(i, buf)

    def remove(self, buf: int, position: int) -> None:
        i = self.owners.index(buf)
        self.released_at[self.starts[i] : self.ends[i]] = position
        del self.starts[i], self.ends[i], self.owners[i]

    def align_up(self, offset: int) -> int:
        a = self.alignment
        return -(-offset // a) * a

    def gaps(self) -> list[tuple[int, int]]:
        """Free ``[start, end)`` ranges."""
        gaps, cursor = [], 0
        for start, end in zip(self.starts, self.ends, strict=True):
            if start > cursor:
                gaps.append((cursor, start))
            cursor = max(cursor, end)
        if cursor < self.capacity:
            gaps.append((cursor, self.capacity))
        return gaps

    def fit(self, size: int, policy: str) -> int | None:
        """An offset where ``size`` units fit in free space, or ``None``."""
        best: tuple[float, ...] | None = None
        choice = None
        for lo, hi in self.gaps():
            first = self.align_up(lo)
            if first + size > hi:
                continue
            if policy == "best-fit":
                candidates = [(hi - lo, first, first)]
            else:
                last = (hi - size) // self.alignment * self.alignment
                candidates = [
                    (int(self.released_at[o : o + size].max()), hi - lo, o)
                    for o in dict.fromkeys((first, last))
                ]
            for *score, offset in candidates:
                key = (*score, offset)
                if best is None or key < best:
                    best, choice = key, offset
        return choice

    def windows(self, size: int) -> list[int]:
        """Aligned offsets where a window of ``size`` units could be cleared."""
        raw = {0, self.capacity - size}
        for start, end in zip(self.starts, self.ends, strict=True):
            raw.update((start, end, end - size, start - size))
        for lo, _ in self.gaps():
            raw.add(lo)
        out = set()
        for o in raw:
            for aligned in (self.align_up(o), o // self.alignment * self.alignment):
                if aligned >= 0 and aligned + size <= self.capacity:
                    out.add(aligned)
        return sorted(out)

    def overlapping(self, offset: int, size: int) -> list[int]:
        """Resident buffers overlapping ``[offset, offset + size)``."""
        hi = bisect.bisect_left(self.starts, offset + size)
        return [self.owners[i] for i in range(hi) if self.ends[i] > offset]


def place(
    instance: Instance,
    order: Sequence[int],
    hardware: Hardware,
    policy: str = "best-fit",
) -> Solution:
    """Offsets and spills for ``order`` (a schedule of the original nodes).

    Parameters
    ----------
    instance
        The instance.
    order
        A valid schedule of the ``N`` original nodes (e.g. a Problem 1 order).
    hardware
        Capacities and alignment; bank rules are not considered here.
    policy
        ``best-fit`` or ``rotate`` (see the module docstring).

    Returns
    -------
    Solution
        The order with spill nodes inserted, initial offsets and the spill list, back-to-back
        spills of one buffer merged (:func:`merge_back_to_back`).

    Raises
    ------
    PlacementError
        When an op's own buffers cannot fit their memory together.
    """
    if policy not in PLACEMENT_POLICIES:
        raise ValueError(f"unknown placement policy {policy!r}; choose from {PLACEMENT_POLICIES}")
    error = instance.placement_error(hardware)
    if error is not None:
        raise PlacementError(f"{error}: no placement exists")
    return merge_back_to_back(instance, _Placer(instance, order, hardware, policy).run())


class _Placer:
    def __init__(
        self, instance: Instance, order: Sequence[int], hardware: Hardware, policy: str
    ) -> None:
        self.inst, self.order, self.policy = instance, list(order), policy
        self.n = instance.n_nodes
        self.pools = {m: _Pool.empty(hardware.capacity(m), hardware.alignment(m)) for m in MEMORIES}
        self.fit_policy = {
            m: "rotate"
            if policy == "rotate" or (policy == "hybrid" and m in L0_MEMORIES)
            else "best-fit"
            for m in MEMORIES
        }
        position = {v: p for p, v in enumerate(self.order)}
        self.uses = {
            b: sorted(position[u] for u in buf.users) for b, buf in instance.buffers.items()
        }
        self.offsets: dict[int, int] = {}
        self.spills: list[list[int]] = []  # [buffer, new offset] in spill order
        self.in_ddr: dict[int, int] = {}  # buffer -> index of the spill holding it in DDR
        self.out: list[int] = []

    def run(self) -> Solution:
        inst = self.inst
        for p, v in enumerate(self.order):
            b = inst.buffer_of_node[v]
            if b is None:
                self.bring_in(v, p)
                self.out.append(v)
            elif v == inst.buffers[b].alloc:
                self.offsets[b] = self.allocate(b, p, self.pinned_for(b, p))
                self.out.append(v)
            else:
                if b in self.in_ddr:  # spilled with no use left: SPEC still wants it back
                    self.reload(b, p, {b})
                self.pools[inst.buffers[b].memory].remove(b, p)
                self.out.append(v)
        return Solution(
            order=tuple(self.out),
            offsets=self.offsets,
            spills=tuple(Spill(b, o) for b, o in self.spills),
        )

    def pinned_for(self, b: int, p: int) -> set[int]:
        """Buffers that must stay: those of b's next user (the op the ALLOC is made for)."""
        nxt = self.next_use(b, p)
        if nxt is None:
            return {b}
        return {b, *self.inst.bufs_of(self.order[nxt])}

    def next_use(self, b: int, p: int) -> int | None:
        uses = self.uses[b]
        i = bisect.bisect_right(uses, p)
        return uses[i] if i < len(uses) else None

    def bring_in(self, v: int, p: int) -> None:
        """Reload every buffer of op ``v`` that is in DDR, largest first.

        A reload may have to spill another buffer of ``v`` when fragmentation leaves no other
        way (see :meth:`clear_window`); that one is then reloaded in turn, packed tighter.
        """
        bufs = self.inst.bufs_of(v)
        pinned = set(bufs)
        sizes = {b: self.inst.buffers[b].size_units for b in bufs}
        for _ in range(4 * len(bufs) + 4):
            missing = [b for b in bufs if b in self.in_ddr]
            if not missing:
                return
            self.reload(max(missing, key=lambda b: (sizes[b], -b)), p, pinned)
        self.pack(v, p)  # they keep displacing each other: the rule that cannot fail

    def pack(self, v: int, p: int) -> None:
        """Last resort for op ``v`` at position ``p``: in every memory where one of its buffers
        is still in DDR, spill every resident buffer (the op's own included) and reload the
        op's buffers of that memory one after another from offset 0, each at the next aligned
        offset.

        This always succeeds when :meth:`Instance.placement_error` finds nothing, and the
        answer stays valid. Proof: the memory is empty once its residents are spilled; the
        op's buffers there, each rounded up to the alignment but the most padded one (packed
        last), sum to at most the capacity, so packing them from 0 ends within it, every offset
        aligned. Other memories are not
        touched. Each SPILL_OUT is emitted at ``p``, when its buffer is resident and after all
        its earlier uses (they lie before ``p`` in the order); each SPILL_IN either comes here,
        before ``v`` runs, or later, before the buffer's next use or FREE, where the normal
        reloads put it. So every buffer's events keep the form ALLOC (SPILL_OUT SPILL_IN)*
        FREE, no use falls between a SPILL_OUT and its SPILL_IN, and resident segments never
        overlap in address (a reload takes free units only). The price is traffic, which the
        refinement stages then try to win back.
        """
        buffers = self.inst.buffers
        own: dict[str, list[int]] = {}
        for b in self.inst.bufs_of(v):
            own.setdefault(buffers[b].memory, []).append(b)
        for memory, mine in sorted(own.items()):
            if not any(b in self.in_ddr for b in mine):
                continue
            pool = self.pools[memory]
            for resident in list(pool.owners):
                self.spill(resident, p)
            offset = 0
            # The buffer its alignment pads most goes last: its padding needs no room.
            padding = {
                b: pool.align_up(buffers[b].size_units) - buffers[b].size_units for b in mine
            }
            for b in sorted(mine, key=lambda b: (padding[b], -buffers[b].size_units, b)):
                offset = pool.align_up(offset)
                k = self.in_ddr.pop(b)
                self.spills[k][1] = offset
                pool.add(offset, buffers[b].size_units, b)
                self.out.append(self.n + 2 * k + 1)
                offset += buffers[b].size_units

    def reload(self, b: int, p: int, pinned: set[int]) -> None:
        k = self.in_ddr.pop(b)
        self.spills[k][1] = self.allocate(b, p, pinned)
        self.out.append(self.n + 2 * k + 1)

    def allocate(self, b: int, p: int, pinned: set[int]) -> int:
        buf = self.inst.buffers[b]
        pool = self.pools[buf.memory]
        offset = pool.fit(buf.size_units, self.fit_policy[buf.memory])
        if offset is None:
            offset = self.clear_window(buf.memory, buf.size_units, p, pinned | {b})
        pool.add(offset, buf.size_units, b)
        return offset

    def clear_window(self, memory: str, size: int, p: int, pinned: set[int]) -> int:
        """Spill the cheapest window of ``size`` units and return its offset.

        Windows holding a pinned buffer (one the op being served uses) are avoided; when
        fragmentation leaves no other window, pinned buffers may go too: the op's reload loop
        (:meth:`bring_in`) brings them back before it runs.
        """
        pool = self.pools[memory]
        best: tuple[bool, float, int] | None = None
        for offset in pool.windows(size):
            victims = pool.overlapping(offset, size)
            hits_pinned = bool(pinned.intersection(victims))
            cost = sum(self.victim_cost(v, p) for v in victims)
            if best is None or (hits_pinned, cost, offset) < best:
                best = (hits_pinned, cost, offset)
        if best is None:
            raise PlacementError(
                f"{memory}: no window of {size} units fits the memory at position {p}"
            )
        offset = best[2]
        for victim in pool.overlapping(offset, size):
            self.spill(victim, p)
        return offset

    def victim_cost(self, b: int, p: int) -> float:
        buf = self.inst.buffers[b]
        nxt = self.next_use(b, p)
        if nxt is None:
            return buf.spill_traffic_units * _USELESS_SPILL
        return buf.spill_traffic_units * (1.0 + REUSE_HORIZON / (nxt - p))

    def spill(self, b: int, p: int) -> None:
        k = len(self.spills)
        self.spills.append([b, -1])
        self.in_ddr[b] = k
        self.pools[self.inst.buffers[b].memory].remove(b, p)
        self.out.append(self.n + 2 * k)


def merge_back_to_back(instance: Instance, solution: Solution) -> Solution:
    """``solution`` with every *back-to-back* pair of one buffer's spills made one spill.

    Spill ``a`` of buffer ``b`` is followed by spill ``c`` of ``b`` back to back when no
    original node lies between ``a``'s SPILL_IN and ``c``'s SPILL_OUT: ``b`` comes back and goes
    out again unused. The pair becomes one spill from ``a``'s SPILL_OUT to ``c``'s SPILL_IN, at
    ``c``'s new offset; a chain of such spills becomes one. Nothing else moves: ``b`` is simply
    not resident between the two, so no other buffer loses room, and one spill's traffic is
    saved per merge. The greedy placement makes such pairs on the tightest memories (23 of 48
    spills of a jittered 1,500-node conv), and the placement model, which writes every
    SPILL_OUT of a gap before its SPILL_INs, cannot keep them in order. Returns ``solution``
    itself when there is nothing to merge."""
    n, spills = instance.n_nodes, solution.spills
    if len(spills) < 2:
        return solution
    position = {v: i for i, v in enumerate(solution.order)}
    gap: list[int] = []  # per position: how many original nodes precede it
    count = 0
    for v in solution.order:
        gap.append(count)
        count += v < n
    of_buffer: dict[int, list[int]] = {}
    for k, spill in enumerate(spills):
        of_buffer.setdefault(spill.buf_id, []).append(k)
    head: dict[int, int] = {}  # spill -> the spill it is merged into (itself if kept)
    last: dict[int, int] = {}  # kept spill -> the spill whose SPILL_IN and offset it ends with
    for ks in of_buffer.values():
        ks.sort(key=lambda k: position[n + 2 * k])
        for before, k in zip([None, *ks], ks, strict=False):
            back_to_back = (
                before is not None
                and gap[position[n + 2 * before + 1]] == gap[position[n + 2 * k]]
                and position[n + 2 * before + 1] < position[n + 2 * k]
            )
            head[k] = head[before] if back_to_back and before is not None else k
            last[head[k]] = k
    if len(last) == len(spills):
        return solution
    kept = sorted(last)
    index = {k: i for i, k in enumerate(kept)}
    order = []
    for v in solution.order:
        if v < n:
            order.append(v)
            continue
        k, is_in = divmod(v - n, 2)
        if not is_in and head[k] == k:
            order.append(n + 2 * index[k])
        elif is_in and last[head[k]] == k:
            order.append(n + 2 * index[head[k]] + 1)
    merged = tuple(Spill(spills[k].buf_id, spills[last[k]].new_offset_units) for k in kept)
    return Solution(order=tuple(order), offsets=solution.offsets, spills=merged)
