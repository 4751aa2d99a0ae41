"""Independent parts: a graph made of several computations with no edge between them.

A user's graph may hold several operators side by side (a union of cases, a model's branches
that never meet). Nothing orders one part against another, so each part is solved on its own
and the answers are put together:

* Problem 1: the parts one after another; the peak is the largest part's;
* Problems 2 and 3: one after another too, every buffer of a part freed before the next part
  starts, so each part's addresses and spills stay valid and the traffic is the sum of the parts'.
  Pipes may still overlap across parts: :func:`side_by_side` moves each part's addresses above
  the previous parts' where the memory has room, so that re-sequencing the pipes
  (:func:`heuristics.pipes.compact`) can interleave them.

A part's spill nodes are renumbered into the whole's spill list (SPEC section 3: the k-th spill
of the whole has nodes ``N + 2k`` and ``N + 2k + 1``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from npuopt.heuristics.structure import weak_components
from npuopt.solver.hardware import Hardware
from npuopt.solver.instance import BufferNode, Instance, relabel
from npuopt.solver.solution import Solution, Spill


@dataclass(frozen=True)
class Part:
    """One weakly connected part of a graph as an instance of its own.

    Attributes
    ----------
    instance
        The part, its nodes numbered ``0..k-1`` in the whole's id order, its buffers likewise.
    node
        ``node[i]``: the whole's id of the part's node ``i``.
    buffer
        ``buffer[j]``: the whole's BufId of the part's buffer ``j``.
    """

    instance: Instance
    node: tuple[int, ...]
    buffer: Mapping[int, int]


def split(instance: Instance) -> list[Part]:
    """The weakly connected parts of ``instance``, largest first (one part when connected).
    Each part keeps the whole's name with ``#i`` appended (``i`` counting from 1)."""
    components = weak_components(instance)
    if len(components) == 1:
        return [Part(instance, tuple(range(instance.n_nodes)), {b: b for b in instance.buffers})]
    parts = []
    for i, nodes in enumerate(components, start=1):
        buffers = sorted(
            {n.buf_id for v in nodes if isinstance(n := instance.nodes[v], BufferNode)}
        )
        new_buffer = {b: j for j, b in enumerate(buffers)}
        part = relabel(instance, nodes, new_buffer, f"{instance.name}#{i}")
        parts.append(Part(part, tuple(nodes), {j: b for b, j in new_buffer.items()}))
    return parts


def in_sequence(whole: Instance, parts: Sequence[Part], solutions: Sequence[Solution]) -> Solution:
    """The parts' solutions one after another, in the whole's ids (module docstring)."""
    n = whole.n_nodes
    order: list[int] = []
    offsets: dict[int, int] = {}
    spills: list[Spill] = []
    for part, solution in zip(parts, solutions, strict=True):
        k = part.instance.n_nodes
        first = len(spills)
        for v in solution.order:
            if v < k:
                order.append(part.node[v])
            else:  # spill node: its index in the part's list, moved into the whole's
                index, kind = divmod(v - k, 2)
                order.append(n + 2 * (first + index) + kind)
        offsets.update({part.buffer[b]: off for b, off in solution.offsets.items()})
        spills += [Spill(part.buffer[s.buf_id], s.new_offset_units) for s in solution.spills]
    return Solution(order=tuple(order), offsets=offsets, spills=tuple(spills))


def side_by_side(
    whole: Instance, parts: Sequence[Part], solutions: Sequence[Solution], hardware: Hardware
) -> Solution:
    """:func:`in_sequence`, with each part's segments moved above the previous parts' in every
    memory where they all fit together (elsewhere the part keeps its addresses and waits for
    the units it shares). Offsets of a memory with an alignment move by multiples of it."""
    base: dict[str, int] = {}
    moved: list[Solution] = []
    for part, solution in zip(parts, solutions, strict=True):
        top = _tops(part.instance, solution)
        shift = {}
        for memory, height in top.items():
            if hardware.bank(memory) is not None:
                continue  # moving would change banks: the bank rule is placement's to keep
            start = _aligned(base.get(memory, 0), hardware.alignment(memory))
            if start + height <= hardware.capacity(memory):
                shift[memory] = start
                base[memory] = start + height
        buffers = part.instance.buffers
        moved.append(
            Solution(
                order=solution.order,
                offsets={
                    b: off + shift.get(buffers[b].memory, 0) for b, off in solution.offsets.items()
                },
                spills=tuple(
                    Spill(s.buf_id, s.new_offset_units + shift.get(buffers[s.buf_id].memory, 0))
                    for s in solution.spills
                ),
            )
        )
    return in_sequence(whole, parts, moved)


def _tops(instance: Instance, solution: Solution) -> dict[str, int]:
    """The highest unit (exclusive) any segment of ``solution`` holds, per memory."""
    top: dict[str, int] = {}
    buffers = instance.buffers
    for b, off in solution.offsets.items():
        buf = buffers[b]
        top[buf.memory] = max(top.get(buf.memory, 0), off + buf.size_units)
    for s in solution.spills:
        buf = buffers[s.buf_id]
        top[buf.memory] = max(top.get(buf.memory, 0), s.new_offset_units + buf.size_units)
    return top


def _aligned(value: int, alignment: int) -> int:
    return -(-value // alignment) * alignment if alignment > 1 else value
