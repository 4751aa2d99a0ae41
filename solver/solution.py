"""Typed solutions: a schedule, initial offsets and an ordered spill list.

A :class:`Solution` is frozen and dumb: it holds what the attachment files hold and does not check
feasibility (that is :mod:`solver.evaluate`'s job). Spill node ids follow SPEC section 3: the k-th
spill creates SPILL_OUT ``N + 2k`` and SPILL_IN ``N + 2k + 1``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


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
