"""Typed solutions: a schedule, initial offsets and an ordered spill list.

A :class:`Solution` is frozen and dumb: it holds what the attachment files hold and does not check
feasibility (that is :mod:`solver.evaluate`'s job). Spill node ids follow SPEC section 3: the k-th
spill creates SPILL_OUT ``N + 2k`` and SPILL_IN ``N + 2k + 1``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from npuopt.solver.hardware import COUNTED_MEMORIES
from npuopt.solver.instance import Instance


@dataclass(frozen=True, slots=True)
class Spill:
    """One line of the spill list: buffer ``buf_id`` is spilled and reloaded at a new offset."""

    buf_id: int
    new_offset_units: int


def _frozen_mapping(
    values: Mapping[int, int] | Iterable[tuple[int, int]] = (),
) -> Mapping[int, int]:
    return MappingProxyType(dict(values))


@dataclass(frozen=True)
class Solution:
    """A schedule with, for Problems 2 and 3, offsets and spills.

    Attributes
    ----------
    order
        Node ids in schedule order; includes the spill nodes for Problems 2 and 3.
    offsets
        Initial offset of every buffer by ``BufId`` (empty for a Problem 1 solution).
    spills
        The spill list in order; spill k's nodes are ``N + 2k`` (SPILL_OUT) and ``N + 2k + 1``.
    """

    order: tuple[int, ...]
    offsets: Mapping[int, int] = field(default_factory=_frozen_mapping)
    spills: tuple[Spill, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "order", tuple(self.order))
        object.__setattr__(self, "offsets", _frozen_mapping(self.offsets))
        object.__setattr__(self, "spills", tuple(self.spills))

    def __reduce__(self) -> tuple[type[Solution], tuple[object, ...]]:
        # A read-only mapping does not pickle; worker processes send solutions back.
        return (Solution, (self.order, dict(self.offsets), self.spills))

    @property
    def n_spills(self) -> int:
        """Number of spills."""
        return len(self.spills)


def spill_out_id(n_nodes: int, k: int) -> int:
    """Node id of the k-th spill's SPILL_OUT in a graph of ``n_nodes`` original nodes."""
    return n_nodes + 2 * k


def spill_in_id(n_nodes: int, k: int) -> int:
    """Node id of the k-th spill's SPILL_IN in a graph of ``n_nodes`` original nodes."""
    return n_nodes + 2 * k + 1


def with_segment_offsets(
    instance: Instance, solution: Solution, offsets: Mapping[int, int]
) -> Solution:
    """``solution`` with residency segments at new offsets, each keyed by the node opening it:
    an ALLOC sets its buffer's initial offset, the k-th spill's SPILL_IN that spill's reload
    offset."""
    if not offsets:
        return solution
    initial = dict(solution.offsets)
    spills = list(solution.spills)
    n = instance.n_nodes
    for node, offset in offsets.items():
        if node < n:
            b = instance.buffer_of_node[node]
            if b is None:
                raise ValueError(f"node {node} opens no segment (not an ALLOC or SPILL_IN)")
            initial[b] = offset
        else:
            k = (node - n) // 2
            spills[k] = Spill(spills[k].buf_id, offset)
    return Solution(order=solution.order, offsets=initial, spills=tuple(spills))


# -- the op-order view of a Problem 1 solution -------------------------------------------------
#
# For a fixed order of the op nodes, emitting each ALLOC just before the buffer's first user and
# each FREE as soon as it is ready is optimal for Problem 1 (FINDINGS): it only shortens
# lifetimes. So P1 search can work on op orders alone; these helpers translate both ways.


def op_order_of(instance: Instance, order: Sequence[int]) -> tuple[int, ...]:
    """The op nodes of a schedule, in schedule order."""
    return tuple(v for v in order if instance.is_op(v))


def op_successors(instance: Instance) -> list[list[int]]:
    """Per node: for an op, the ops reachable from it through buffer nodes only (its op-level
    successors, depth-first order); for a buffer node, nothing."""
    succ = instance.successors
    is_op = [instance.is_op(v) for v in range(instance.n_nodes)]
    result: list[list[int]] = [[] for _ in range(instance.n_nodes)]
    for v in instance.op_ids:
        out, stack, seen = result[v], list(succ[v]), set()
        while stack:
            w = stack.pop()
            if w in seen:
                continue
            seen.add(w)
            if is_op[w]:
                out.append(w)
            else:
                stack.extend(succ[w])
    return result


def schedule_from_op_order(instance: Instance, op_order: Sequence[int]) -> tuple[int, ...]:
    """The full schedule of an op order: ALLOCs just in time, FREEs as soon as ready.

    Buffer nodes that no op needs (an unused buffer) go last, each ALLOC right before its FREE.
    The op order must respect every path between ops (through buffer nodes included).
    """
    n = instance.n_nodes
    pred, succ = instance.predecessors, instance.successors
    buffer_of = instance.buffer_of_node
    frees = {buf.free for buf in instance.buffers.values()}
    done = [False] * n
    pending = [len(p) for p in pred]
    out: list[int] = []

    def emit(v: int) -> None:
        stack = [v]
        while stack:  # emit unscheduled predecessors (buffer nodes) first, depth first
            u = stack[-1]
            missing = [p for p in pred[u] if not done[p]]
            if missing:
                stack.extend(missing)
                continue
            stack.pop()
            if done[u]:
                continue
            done[u] = True
            out.append(u)
            for w in succ[u]:
                pending[w] -= 1
                if pending[w] == 0 and w in frees and not done[w]:
                    stack.append(w)  # a FREE goes the moment it is ready

    for v in op_order:
        emit(v)
    for v in instance.topological_order:
        if not done[v] and buffer_of[v] is not None:
            emit(v)
    if len(out) != n:
        raise ValueError("the op order leaves nodes unscheduled")
    return tuple(out)


def buffer_lifetimes(
    instance: Instance, op_positions: Mapping[int, int]
) -> dict[int, tuple[int, int]]:
    """``(first, last)`` op position of every used buffer: its lifetime under JIT/eager rules."""
    spans: dict[int, tuple[int, int]] = {}
    for b, buf in instance.buffers.items():
        if buf.users:
            ps = [op_positions[u] for u in buf.users]
            spans[b] = (min(ps), max(ps))
    return spans


def op_profile(instance: Instance, op_order: Sequence[int]) -> np.ndarray:
    """Live L1+UB units while each op of ``op_order`` runs (JIT/eager lifetimes).

    Its maximum, together with the largest unused buffer, is the order's ``max V_stay``.
    """
    position = {v: p for p, v in enumerate(op_order)}
    delta = np.zeros(len(op_order) + 1, dtype=np.int64)
    for b, (first, last) in buffer_lifetimes(instance, position).items():
        buf = instance.buffers[b]
        if buf.memory in COUNTED_MEMORIES:
            delta[first] += buf.size_units
            delta[last + 1] -= buf.size_units
    return np.cumsum(delta[:-1])


class LiveProfile:
    """:func:`op_profile` vectorised for many orders of one instance: the users of every used
    buffer of ``memories`` (L1 and UB by default) gathered once, so a profile costs a few numpy
    passes. :meth:`by_memory` gives one profile per memory."""

    def __init__(self, instance: Instance, memories: Collection[str] = COUNTED_MEMORIES) -> None:
        self.n_nodes = instance.n_nodes
        buffers = instance.buffers
        #: The buffers profiled, in the order of :meth:`lifetimes`.
        self.buffers = [b for b, buf in buffers.items() if buf.users and buf.memory in memories]
        self._users = np.concatenate(
            [np.asarray(buffers[b].users, dtype=np.int64) for b in self.buffers]
            or [np.zeros(0, np.int64)]
        )
        self._starts = np.cumsum([0] + [len(buffers[b].users) for b in self.buffers[:-1]])
        self._sizes = np.asarray([buffers[b].size_units for b in self.buffers], dtype=np.int64)
        self._memory = [buffers[b].memory for b in self.buffers]

    def lifetimes(self, op_order: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """First and last op position of each of :attr:`buffers` in ``op_order``."""
        pos = np.zeros(self.n_nodes, dtype=np.int64)
        pos[np.asarray(op_order, dtype=np.int64)] = np.arange(len(op_order))
        at = pos[self._users]
        return np.minimum.reduceat(at, self._starts), np.maximum.reduceat(at, self._starts)

    def profile(self, op_order: Sequence[int]) -> np.ndarray:
        """Live units of every profiled buffer at each op position (as :func:`op_profile`)."""
        if not self.buffers:
            return np.zeros(len(op_order), dtype=np.int64)
        return self._cumulate(len(op_order), *self.lifetimes(op_order), self._sizes)

    def by_memory(self, op_order: Sequence[int]) -> dict[str, np.ndarray]:
        """Live units at each op position, per memory."""
        if not self.buffers:
            return {}
        first, last = self.lifetimes(op_order)
        memory = np.asarray(self._memory)
        return {
            m: self._cumulate(len(op_order), first[kept], last[kept], self._sizes[kept])
            for m in sorted(set(self._memory))
            if (kept := memory == m).any()
        }

    @staticmethod
    def _cumulate(n: int, first: np.ndarray, last: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        delta = np.zeros(n + 1, dtype=np.int64)
        np.add.at(delta, first, sizes)
        np.add.at(delta, last + 1, -sizes)
        return np.cumsum(delta[:-1])


def unused_buffer_units(instance: Instance) -> int:
    """Largest L1/UB buffer no op uses: it is live on its own, briefly, in any order."""
    return max(
        (
            buf.size_units
            for buf in instance.buffers.values()
            if not buf.users and buf.memory in COUNTED_MEMORIES
        ),
        default=0,
    )
