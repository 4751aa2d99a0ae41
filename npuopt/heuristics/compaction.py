"""Buffer compaction for Problem 1: pull a buffer's users together and re-sequence everything.

The CP-SAT window LNS re-orders runs of consecutive ops, so it cannot shorten a buffer whose
users lie far apart: on FlashAttention_Case0 each Q tile is read by four MOVEs spread over the
whole order, and every window LNS we tried stopped at 4,498. A *compaction move* works on the
whole order instead:

1. take the users of one L1/UB buffer, and close that set under "uses the same L0 buffer" (so
   that every L0 lifetime stays in one piece: a MOVE into L0A travels with the MATMUL reading
   it, which brings the COPY reading that MATMUL's L0C buffer, and so on);
2. give the set the priority of its first op (*pull*) or of its last op (*push*); every other
   op keeps its position as priority. Ancestors of a pulled op inherit its priority (they must
   run first), descendants of a pushed op inherit its priority (they must run after);
3. re-sequence all ops by a list schedule on those priorities that keeps L0 single residency
   (an op whose L0 memory holds another buffer waits until that buffer's last user ran).

A move changes the order globally but cheaply (one heap pass). :func:`descend` takes, round after
round, the best move over the buffers live at a peak (pull and push) while the key
``(peak, positions at the peak)`` drops. :func:`compact_order` iterates: one or two random moves
on any multi-user L1/UB buffer, then a descent; the result is kept when its key is no worse.
Measured on FlashAttention_Case0 from the list scheduler's 4,500: the descent alone reaches 4,242
in about 4 s, the iterated search 3,968 in 25-45 s (single-threaded).

The budget is a number of moves (one list schedule each): the same on every run for a seed.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from npuopt.heuristics.neighbourhoods import profile_key
from npuopt.solver.hardware import L0_MEMORIES
from npuopt.solver.instance import Instance
from npuopt.solver.solution import LiveProfile, op_successors

#: Seconds a move takes on this machine (one move re-sequences every op) for a graph of 1,000
#: ops, and how that grows with the op count n: ``MOVE_S_1000 * (n / 1000) ** MOVE_GROWTH``.
#: Measured (iterated compaction from the list scheduler's order, one process, two runs):
#: FlashAttention_Case0 (572 ops) 1.8 ms a move, Conv_Case0 (918) 2.6-3.7 ms, Matmul_Case0
#: (1,728) 7.5-9.3 ms, FlashAttention_Case1 (2,296) 12.3 ms, Matmul_Case1 (13,056) 92-109 ms.
#: A count linear in n (the first calibration) made the 60 s share take 75-162 s on the
#: official cases in a 600 s run.
MOVE_S_1000, MOVE_GROWTH = 3.8e-3, 1.3
#: A move also has a fixed cost (~140 us here, whatever the size): small graphs are counted as
#: this many ops (a 114-op graph takes ~0.6 ms a move, a 3-op one ~0.14 ms).
MIN_COUNTED_OPS = 400


def moves_for(instance: Instance, seconds: float) -> int:
    """How many compaction moves fit ``seconds`` on this instance (at least one)."""
    n = max(len(instance.op_ids), MIN_COUNTED_OPS)
    return max(1, int(seconds / (MOVE_S_1000 * (n / 1000) ** MOVE_GROWTH)))


Key = tuple[int, int]


class Compactor:
    """What a compaction move reads about an instance, built once."""

    def __init__(self, instance: Instance) -> None:
        self.instance = instance
        buffers = instance.buffers
        self.ops = list(instance.op_ids)
        #: :func:`solver.solution.op_successors` (``models.ordering.OrderingData`` takes it too).
        self.succ = op_successors(instance)
        self.pred_count = [0] * instance.n_nodes
        for v in self.ops:
            for w in self.succ[v]:
                self.pred_count[w] += 1
        rank = instance.topological_rank
        self.topological = sorted(self.ops, key=rank.__getitem__)
        self.l0_of = {
            v: [b for b in instance.bufs_of(v) if buffers[b].memory in L0_MEMORIES]
            for v in self.ops
        }
        #: Vectorised residency profile of the L1/UB buffers.
        self.live = LiveProfile(instance)
        self._counted = self.live.buffers
        #: Buffers a move may compact: L1/UB ones with at least two users.
        self.movable = [b for b in self._counted if len(buffers[b].users) >= 2]

    # -- the objective ----------------------------------------------------------------------

    def profile(self, op_order: Sequence[int]) -> np.ndarray:
        """Live L1+UB units at each op position (as :func:`solver.solution.op_profile`)."""
        return self.live.profile(op_order)

    def key(self, op_order: Sequence[int]) -> Key:
        """``(peak, positions at the peak)``, as :func:`heuristics.neighbourhoods.peak_key`."""
        return profile_key(self.profile(op_order))

    def at_peak(self, op_order: Sequence[int]) -> list[int]:
        """Movable buffers live at some peak position."""
        if not self._counted:
            return []
        profile = self.profile(op_order)
        peaks = np.flatnonzero(profile == profile.max())
        first, last = self.live.lifetimes(op_order)
        # A buffer is live at a peak when some peak position lies in [first, last].
        lo = np.searchsorted(peaks, first, side="left")
        hits = (lo < len(peaks)) & (peaks[np.minimum(lo, len(peaks) - 1)] <= last)
        live = {b for b, hit in zip(self._counted, hits, strict=True) if hit}
        return [b for b in self.movable if b in live]

    # -- the move ---------------------------------------------------------------------------

    def group(self, b: int) -> set[int]:
        """Users of ``b``, closed under sharing an L0 buffer."""
        buffers = self.instance.buffers
        group = set(buffers[b].users)
        stack, seen = list(group), set()
        while stack:
            v = stack.pop()
            for c in self.l0_of[v]:
                if c in seen:
                    continue
                seen.add(c)
                for u in buffers[c].users:
                    if u not in group:
                        group.add(u)
                        stack.append(u)
        return group

    def move(self, op_order: Sequence[int], b: int, push: bool) -> list[int] | None:
        """The op order with ``b``'s group pulled to its first op (pushed to its last), or
        ``None`` when the list schedule dead-ends on L0 single residency."""
        position = {v: p for p, v in enumerate(op_order)}
        group = self.group(b)
        anchor = (max if push else min)(position[v] for v in group)
        tier = 2 if push else 0
        keys = {v: (position[v], 1, position[v]) for v in op_order}
        for v in group:
            keys[v] = (anchor, tier, position[v])
        return self.sequence(keys, push)

    def sequence(self, keys: dict[int, tuple[int, int, int]], push: bool) -> list[int] | None:
        """List schedule of every op by ``keys`` (smallest first) keeping L0 single residency;
        pulled priorities flow to ancestors, pushed ones to descendants."""
        succ = self.succ
        if push:
            for v in self.topological:
                for w in succ[v]:
                    if keys[w] < keys[v]:
                        keys[w] = keys[v]
        else:
            for v in reversed(self.topological):
                for w in succ[v]:
                    if keys[w] < keys[v]:
                        keys[v] = keys[w]
        buffers = self.instance.buffers
        holder: dict[str, int | None] = dict.fromkeys(L0_MEMORIES)
        waiting: dict[str, list[tuple[tuple[int, int, int], int]]] = {m: [] for m in L0_MEMORIES}
        uses_left: dict[int, int] = {}
        indegree = list(self.pred_count)
        heap = [(keys[v], v) for v in self.ops if indegree[v] == 0]
        heapq.heapify(heap)
        out: list[int] = []
        while heap:
            item = heapq.heappop(heap)
            v = item[1]
            busy = next(
                (
                    buffers[c].memory
                    for c in self.l0_of[v]
                    if holder[buffers[c].memory] not in (None, c)
                ),
                None,
            )
            if busy is not None:
                waiting[busy].append(item)
                continue
            out.append(v)
            for c in self.l0_of[v]:
                memory = buffers[c].memory
                holder[memory] = c
                uses_left[c] = uses_left.get(c, len(buffers[c].users)) - 1
                if uses_left[c] == 0:
                    holder[memory] = None
                    for queued in waiting[memory]:
                        heapq.heappush(heap, queued)
                    waiting[memory] = []
            for w in succ[v]:
                indegree[w] -= 1
                if indegree[w] == 0:
                    heapq.heappush(heap, (keys[w], w))
        return out if len(out) == len(self.ops) else None


@dataclass
class CompactionResult:
    """Best op order found, its key, and what the search did."""

    op_order: list[int]
    key: Key
    moves: int = 0
    improvements: int = 0


def descend(
    compactor: Compactor,
    op_order: Sequence[int],
    max_moves: int,
    deadline: float | None = None,
) -> CompactionResult:
    """Best-improvement descent over the moves of the buffers live at a peak (pull and push),
    until no move lowers the key, ``max_moves`` are spent or ``deadline`` passes."""
    best = CompactionResult(list(op_order), compactor.key(op_order))
    while best.moves < max_moves:
        found: tuple[Key, list[int]] | None = None
        for b in compactor.at_peak(best.op_order):
            for push in (False, True):
                if best.moves >= max_moves or (deadline and time.monotonic() > deadline):
                    break
                best.moves += 1
                moved = compactor.move(best.op_order, b, push)
                if moved is None:
                    continue
                key = compactor.key(moved)
                if key < best.key and (found is None or key < found[0]):
                    found = (key, moved)
        if found is None:
            break
        best.key, best.op_order = found
        best.improvements += 1
    return best


def compact_order(
    instance: Instance,
    op_order: Sequence[int],
    rng: np.random.Generator,
    max_moves: int,
    deadline: float | None = None,
    compactor: Compactor | None = None,
    on_best: Callable[[list[int]], None] | None = None,
) -> CompactionResult:
    """Iterated compaction from a valid op order: a descent, then (while moves are left) one or
    two random moves on any movable buffer followed by a descent, kept when the key is no worse.

    Returns the best order found (never worse than ``op_order``), its key and the moves spent.
    ``deadline`` (``time.monotonic()``) only stops a search the move count misjudged;
    ``on_best`` is called with each order that lowers the key, as soon as it is found (so an
    interrupted run keeps it).
    """
    compactor = compactor or Compactor(instance)
    start_key = compactor.key(op_order)
    current = descend(compactor, op_order, max_moves, deadline)
    moves, improvements = current.moves, current.improvements
    best_order, best_key = current.op_order, current.key
    if on_best is not None and best_key < start_key:
        on_best(best_order)
    while moves < max_moves and compactor.movable:
        if deadline is not None and time.monotonic() > deadline:
            break
        trial = best_order
        for _ in range(int(rng.integers(1, 3))):
            b = compactor.movable[int(rng.integers(len(compactor.movable)))]
            moves += 1
            trial = compactor.move(trial, b, bool(rng.integers(2))) or trial
        step = descend(compactor, trial, max_moves - moves, deadline)
        moves += step.moves
        if step.key <= best_key:
            lower = step.key < best_key
            improvements += lower
            best_order, best_key = step.op_order, step.key
            if lower and on_best is not None:
                on_best(best_order)
    return CompactionResult(best_order, best_key, moves, improvements)
