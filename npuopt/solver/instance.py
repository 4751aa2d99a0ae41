"""Instance schema: op and buffer nodes, the graph, its validation and derived lookups.

An :class:`Instance` is validated once, when it is built, against every rule of SPEC section 1;
each failure is an :class:`~solver.errors.InstanceError` whose one-line message names the node,
buffer or edge at fault. Derived lookups (successors, users of each buffer, the COPY_IN-backed set,
numpy arrays) are built right after validation and are read-only from then on.
"""

from __future__ import annotations

import csv
import heapq
import json
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PrivateAttr,
    StrictInt,
    StrictStr,
    Tag,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from npuopt.solver.errors import InstanceError
from npuopt.solver.hardware import DEFAULT_HARDWARE, L0_MEMORIES, MEMORIES, Hardware

BUFFER_OPS = ("ALLOC", "FREE")
COPY_IN = "COPY_IN"
#: Pipes of the spill nodes (SPEC section 3).
SPILL_OUT_PIPE = "MTE3"
SPILL_IN_PIPE = "MTE2"
#: Fixed part of a spill transfer's cycles: ``2 * size + SPILL_CYCLES_FIXED``.
SPILL_CYCLES_FIXED = 150

_NODE_CONFIG = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class OpNode(BaseModel):
    """A node that runs ``cycles`` cycles on ``pipe`` and reads or writes the buffers ``bufs``."""

    model_config = _NODE_CONFIG

    id: StrictInt = Field(alias="Id")
    op: StrictStr = Field(alias="Op")
    pipe: StrictStr = Field(alias="Pipe", min_length=1)
    cycles: StrictInt = Field(alias="Cycles", ge=0)
    bufs: tuple[StrictInt, ...] = Field(alias="Bufs")


class BufferNode(BaseModel):
    """An ALLOC or FREE of ``size_units`` units of memory ``memory`` for buffer ``buf_id``."""

    model_config = _NODE_CONFIG

    id: StrictInt = Field(alias="Id")
    op: Literal["ALLOC", "FREE"] = Field(alias="Op")
    buf_id: StrictInt = Field(alias="BufId", ge=0)
    size_units: StrictInt = Field(alias="Size", gt=0)
    memory: Literal["L1", "UB", "L0A", "L0B", "L0C"] = Field(alias="Type")


def _node_kind(value: Any) -> str | None:
    op = value.get("Op", value.get("op")) if isinstance(value, dict) else getattr(value, "op", None)
    if op is None:
        return None
    return "buffer node" if op in BUFFER_OPS else "op node"


Node = Annotated[
    Annotated[OpNode, Tag("op node")] | Annotated[BufferNode, Tag("buffer node")],
    Discriminator(_node_kind),
]


@dataclass(frozen=True, slots=True)
class Buffer:
    """One buffer of an instance, with its ALLOC/FREE nodes and the ops that use it.

    Attributes
    ----------
    buf_id
        The buffer's ``BufId``.
    memory
        Memory type (``L1``, ``UB``, ``L0A``, ``L0B`` or ``L0C``).
    size_units
        Size in memory units.
    alloc, free
        Node ids of its ALLOC and FREE.
    users
        Op nodes that list the buffer in ``Bufs``, ascending.
    copy_in_backed
        True when a ``COPY_IN`` node uses it: its data also lives in DDR, so a spill costs half the
        traffic and its SPILL_OUT takes no time (SPEC section 3).
    """

    buf_id: int
    memory: str
    size_units: int
    alloc: int
    free: int
    users: tuple[int, ...]
    copy_in_backed: bool

    @property
    def spill_traffic_units(self) -> int:
        """Extra DDR traffic of one spill of this buffer."""
        return self.size_units if self.copy_in_backed else 2 * self.size_units

    @property
    def spill_out_cycles(self) -> int:
        """Cycles of this buffer's SPILL_OUT node."""
        return 0 if self.copy_in_backed else 2 * self.size_units + SPILL_CYCLES_FIXED

    @property
    def spill_in_cycles(self) -> int:
        """Cycles of this buffer's SPILL_IN node."""
        return 2 * self.size_units + SPILL_CYCLES_FIXED


class Instance(BaseModel):
    """A validated scheduling instance (SPEC section 1).

    Build it with :func:`load_instance` or :func:`parse_instance`. Nodes are held in id order, so
    ``instance.nodes[i].id == i``.

    Attributes
    ----------
    name
        Case name, the graph file's stem (``Conv_Case0``); used to name attachment files.
    nodes
        Op and buffer nodes, in id order.
    edges
        Precedence edges ``(src, dst)`` as given (duplicates allowed, ignored in the lookups).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: str = "instance"
    nodes: tuple[Node, ...] = Field(alias="Nodes")
    edges: tuple[tuple[StrictInt, StrictInt], ...] = Field(alias="Edges")

    _succ: tuple[tuple[int, ...], ...] = PrivateAttr()
    _pred: tuple[tuple[int, ...], ...] = PrivateAttr()
    _topo: tuple[int, ...] = PrivateAttr()
    _rank: tuple[int, ...] = PrivateAttr()
    _buffers: Mapping[int, Buffer] = PrivateAttr()
    _buffer_of_node: tuple[int | None, ...] = PrivateAttr()
    _op_ids: tuple[int, ...] = PrivateAttr()
    _cycles: np.ndarray = PrivateAttr()
    _pipes: tuple[str, ...] = PrivateAttr()
    _copy_in_backed: frozenset[int] = PrivateAttr()
    _edge_array: np.ndarray | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _validate_graph(self) -> Instance:
        nodes = _nodes_in_id_order(self.nodes)
        object.__setattr__(self, "nodes", nodes)
        n = len(nodes)
        succ_sets: list[set[int]] = [set() for _ in range(n)]
        for k, (a, b) in enumerate(self.edges):
            for end in (a, b):
                if not 0 <= end < n:
                    _fail(f"edge {k} [{a}, {b}] names node {end}, which does not exist")
            if a == b:
                _fail(f"edge {k} [{a}, {b}] is a self loop on node {a}")
            succ_sets[a].add(b)
        buffers = _collect_buffers(nodes)
        # A buffer is freed after it is allocated, whether or not the file says so (a buffer
        # no op uses may have no path from its ALLOC to its FREE).
        for buf in buffers.values():
            succ_sets[buf.alloc].add(buf.free)
        succ = tuple(tuple(sorted(s)) for s in succ_sets)
        pred_lists: list[list[int]] = [[] for _ in range(n)]
        for a in range(n):
            for b in succ[a]:
                pred_lists[b].append(a)
        pred = tuple(tuple(p) for p in pred_lists)
        topo = _topological_order(succ, pred)
        _check_uses(nodes, buffers, topo, succ, pred)

        self._succ, self._pred, self._topo = succ, pred, topo
        rank = [0] * n
        for r, v in enumerate(topo):
            rank[v] = r
        self._rank = tuple(rank)
        self._buffers = MappingProxyType(buffers)
        self._buffer_of_node = tuple(
            node.buf_id if isinstance(node, BufferNode) else None for node in nodes
        )
        ops = [node for node in nodes if isinstance(node, OpNode)]
        self._op_ids = tuple(node.id for node in ops)
        cycles = np.zeros(n, dtype=np.int64)
        for node in ops:
            cycles[node.id] = node.cycles
        cycles.setflags(write=False)
        self._cycles = cycles
        self._pipes = tuple(sorted({node.pipe for node in ops}))
        self._copy_in_backed = frozenset(
            b for b, buf in self._buffers.items() if buf.copy_in_backed
        )
        return self

    # -- derived, read-only lookups ------------------------------------------------------------

    @property
    def n_nodes(self) -> int:
        """Number of original nodes ``N``; spill nodes get ids from ``N`` on."""
        return len(self.nodes)

    @property
    def successors(self) -> tuple[tuple[int, ...], ...]:
        """Direct successors of each node (deduplicated, ascending), with ALLOC -> FREE of
        every buffer whether or not the file gives that edge."""
        return self._succ

    @property
    def predecessors(self) -> tuple[tuple[int, ...], ...]:
        """Direct predecessors of each node (deduplicated, ascending)."""
        return self._pred

    @property
    def topological_order(self) -> tuple[int, ...]:
        """The topological order that takes the smallest ready id first (Kahn's algorithm with
        a heap): the id order itself whenever ids are topological, as in the contest cases."""
        return self._topo

    @property
    def topological_rank(self) -> tuple[int, ...]:
        """Each node's position in :attr:`topological_order`."""
        return self._rank

    @property
    def buffers(self) -> Mapping[int, Buffer]:
        """Buffers by ``BufId``, ascending."""
        return self._buffers

    @property
    def buffer_of_node(self) -> tuple[int | None, ...]:
        """``BufId`` of each ALLOC/FREE node, ``None`` for op nodes."""
        return self._buffer_of_node

    @property
    def op_ids(self) -> tuple[int, ...]:
        """Ids of the op nodes, ascending."""
        return self._op_ids

    @property
    def cycles(self) -> np.ndarray:
        """Cycles of each node as a read-only int64 array (0 for ALLOC/FREE)."""
        return self._cycles

    @property
    def pipes(self) -> tuple[str, ...]:
        """Pipes used by the op nodes, sorted."""
        return self._pipes

    @property
    def copy_in_backed(self) -> frozenset[int]:
        """BufIds of the COPY_IN-backed buffers."""
        return self._copy_in_backed

    def is_op(self, node_id: int) -> bool:
        """True when ``node_id`` is an op node (not ALLOC/FREE)."""
        return self._buffer_of_node[node_id] is None

    def pipe_of(self, node_id: int) -> str | None:
        """Pipe of an op node, ``None`` for ALLOC/FREE."""
        node = self.nodes[node_id]
        return node.pipe if isinstance(node, OpNode) else None

    def bufs_of(self, node_id: int) -> tuple[int, ...]:
        """Buffers an op node uses (empty for ALLOC/FREE)."""
        node = self.nodes[node_id]
        return node.bufs if isinstance(node, OpNode) else ()

    def edge_array(self) -> np.ndarray:
        """The file's edges, deduplicated, as a read-only ``(E, 2)`` int64 array (without the
        ALLOC -> FREE edges the lookups add where the file leaves them out). Built once: the
        evaluator reads it on every call."""
        if self._edge_array is None:
            pairs = sorted({(int(a), int(b)) for a, b in self.edges})
            edges = np.array(pairs, dtype=np.int64).reshape(-1, 2)
            edges.setflags(write=False)
            self._edge_array = edges
        return self._edge_array

    def check_hardware(self, hardware: Hardware) -> None:
        """Check every buffer fits its memory on ``hardware``.

        Raises
        ------
        InstanceError
            Naming the first buffer larger than its memory's capacity.
        """
        for buf in self._buffers.values():
            capacity = hardware.capacity(buf.memory)
            if buf.size_units > capacity:
                raise InstanceError(
                    f"buffer {buf.buf_id} (ALLOC node {buf.alloc}) has Size {buf.size_units}, "
                    f"larger than {buf.memory} capacity {capacity}"
                )

    def placement_error(self, hardware: Hardware) -> str | None:
        """Why no placement exists on ``hardware`` (Problems 2 and 3), or ``None``.

        An op needs all its buffers resident at once, each at an offset that is a multiple of
        its memory's alignment; so the buffers of one op in one memory, each rounded up to the
        alignment but the last (the one rounded up most goes last), must fit the capacity
        together. This is the only obstacle: when every op
        passes, :func:`npuopt.heuristics.placement.place` always finds a placement (see its
        fallback). Problem 1 has no capacities and is not concerned.
        """
        for v in self._op_ids:
            need: dict[str, int] = {}
            slack: dict[str, int] = {}  # the largest rounding: the last buffer needs none
            for b in self.bufs_of(v):
                buf = self._buffers[b]
                a = hardware.alignment(buf.memory)
                aligned = -(-buf.size_units // a) * a
                need[buf.memory] = need.get(buf.memory, 0) + aligned
                slack[buf.memory] = max(slack.get(buf.memory, 0), aligned - buf.size_units)
            for memory, units in sorted(need.items()):
                units -= slack[memory]
                capacity = hardware.capacity(memory)
                if units > capacity:
                    node = self.nodes[v]
                    where = (
                        f" at offsets aligned to {hardware.alignment(memory)}"
                        if hardware.alignment(memory) > 1
                        else ""
                    )
                    return (
                        f"op {v} ({node.op}) needs {units:,} units of {memory} at once (its "
                        f"buffers{where}), more than the capacity {capacity:,}"
                    )
        return None

    def order_error(self) -> str | None:
        """Why no Problem 1 order exists, as far as one op shows it, or ``None``: an op using
        two buffers of one L0 memory can never run, since Problem 1 keeps at most one L0
        buffer live per memory."""
        for v in self._op_ids:
            seen: dict[str, int] = {}
            for b in self.bufs_of(v):
                memory = self._buffers[b].memory
                if memory in L0_MEMORIES:
                    if memory in seen:
                        return (
                            f"op {v} ({self.nodes[v].op}) uses two {memory} buffers "
                            f"({seen[memory]} and {b}), while Problem 1 keeps one live at a time"
                        )
                    seen[memory] = b
        return None


# -- validation helpers ------------------------------------------------------------------------


def _fail(message: str) -> None:
    raise PydanticCustomError("instance", message)


def _nodes_in_id_order(nodes: tuple[OpNode | BufferNode, ...]) -> tuple[OpNode | BufferNode, ...]:
    n = len(nodes)
    by_id: list[OpNode | BufferNode | None] = [None] * n
    index_of: dict[int, int] = {}
    for index, node in enumerate(nodes):
        if not 0 <= node.id < n:
            _fail(f"node at index {index} has Id {node.id}; ids must be exactly 0..{n - 1}")
        if by_id[node.id] is not None:
            _fail(f"Id {node.id} is used twice (nodes at index {index_of[node.id]} and {index})")
        by_id[node.id] = node
        index_of[node.id] = index
    return tuple(by_id)  # type: ignore[arg-type]  # every slot filled: n distinct ids in 0..n-1


def _topological_order(
    succ: Sequence[Sequence[int]], pred: Sequence[Sequence[int]]
) -> tuple[int, ...]:
    indegree = [len(p) for p in pred]
    # Smallest ready id first: the program order itself whenever ids are topological.
    ready = [v for v, d in enumerate(indegree) if d == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        v = heapq.heappop(ready)
        order.append(v)
        for w in succ[v]:
            indegree[w] -= 1
            if indegree[w] == 0:
                heapq.heappush(ready, w)
    if len(order) < len(succ):
        _fail(f"the edges form a cycle: {' -> '.join(map(str, _find_cycle(pred, indegree)))}")
    return tuple(order)


def _find_cycle(pred: Sequence[Sequence[int]], indegree: Sequence[int]) -> list[int]:
    """A cycle among the nodes Kahn's algorithm could not order, in edge direction."""
    v = next(v for v, d in enumerate(indegree) if d > 0)
    seen: dict[int, int] = {}
    walk: list[int] = []
    # Every unordered node keeps an unordered predecessor, so walking backwards must repeat.
    while v not in seen:
        seen[v] = len(walk)
        walk.append(v)
        v = next(u for u in pred[v] if indegree[u] > 0)
    cycle = walk[seen[v] :][::-1]
    first = cycle.index(min(cycle))  # start at the smallest id, so the message is stable
    cycle = cycle[first:] + cycle[:first]
    return [*cycle, cycle[0]]


def _collect_buffers(nodes: Sequence[OpNode | BufferNode]) -> dict[int, Buffer]:
    allocs: dict[int, BufferNode] = {}
    frees: dict[int, BufferNode] = {}
    users: dict[int, list[int]] = {}
    copy_in: set[int] = set()
    for node in nodes:
        if isinstance(node, BufferNode):
            seen = allocs if node.op == "ALLOC" else frees
            if node.buf_id in seen:
                _fail(
                    f"buffer {node.buf_id} has two {node.op} nodes "
                    f"({seen[node.buf_id].id} and {node.id})"
                )
            seen[node.buf_id] = node
        else:
            if len(set(node.bufs)) != len(node.bufs):
                twice = next(b for b in node.bufs if node.bufs.count(b) > 1)
                _fail(f"node {node.id} ({node.op}) lists buffer {twice} twice in Bufs")
            for b in node.bufs:
                users.setdefault(b, []).append(node.id)
            if node.op == COPY_IN:
                copy_in.update(node.bufs)
    for b, alloc in allocs.items():
        if b not in frees:
            _fail(f"buffer {b} has an ALLOC (node {alloc.id}) but no FREE")
        free = frees[b]
        for field, label in (("size_units", "Size"), ("memory", "Type")):
            if getattr(alloc, field) != getattr(free, field):
                _fail(
                    f"buffer {b}: ALLOC node {alloc.id} has {label} {getattr(alloc, field)} but "
                    f"FREE node {free.id} has {label} {getattr(free, field)}"
                )
    for b, free in frees.items():
        if b not in allocs:
            _fail(f"buffer {b} has a FREE (node {free.id}) but no ALLOC")
    for b, user_ids in users.items():
        if b not in allocs:
            _fail(f"node {user_ids[0]} uses buffer {b} in Bufs, but buffer {b} has no ALLOC/FREE")
    return {
        b: Buffer(
            buf_id=b,
            memory=allocs[b].memory,
            size_units=allocs[b].size_units,
            alloc=allocs[b].id,
            free=frees[b].id,
            users=tuple(users.get(b, ())),
            copy_in_backed=b in copy_in,
        )
        for b in sorted(allocs)
    }


#: Buffers handled per bitset pass; bounds the size of the big integers used as bitsets.
_BITSET_CHUNK = 8192


def propagate_bits(
    order: Sequence[int],
    inputs: Sequence[Sequence[int]],
    seeds: Mapping[int, int],
    *,
    keep: bool = False,
) -> Iterator[tuple[int, int]]:
    """Propagate bitsets along a DAG, yielding ``(node, bits)`` in ``order``.

    ``bits`` of a node is the OR of its inputs' bits and its own seed bit. With ``order`` a
    topological order and ``inputs`` the predecessors, bit ``i`` of node v is set exactly when the
    node seeded with bit ``i`` is v or an ancestor of v (reverse order and successors give
    descendants). Python integers serve as bitsets.

    Unless ``keep`` is set, a node's bits are dropped once every node reading them is done, so
    memory stays proportional to the order's frontier rather than to the whole graph.
    """
    readers = [0] * len(inputs)
    for ins in inputs:
        for u in ins:
            readers[u] += 1
    bits: list[int] = [0] * len(inputs)
    for v in order:
        acc = 1 << seeds[v] if v in seeds else 0
        for u in inputs[v]:
            acc |= bits[u]
            if not keep:
                readers[u] -= 1
                if readers[u] == 0:
                    bits[u] = 0
        bits[v] = acc
        yield v, acc


def _check_uses(
    nodes: Sequence[OpNode | BufferNode],
    buffers: Mapping[int, Buffer],
    topo: Sequence[int],
    succ: Sequence[Sequence[int]],
    pred: Sequence[Sequence[int]],
) -> None:
    """Every op using buffer b must descend from ALLOC(b) and precede FREE(b)."""
    buf_ids = list(buffers)
    reverse_topo = topo[::-1]
    for lo in range(0, len(buf_ids), _BITSET_CHUNK):
        chunk = {b: i for i, b in enumerate(buf_ids[lo : lo + _BITSET_CHUNK])}
        for end, order, inputs, relation in (
            ("alloc", topo, pred, "a descendant of its ALLOC"),
            ("free", reverse_topo, succ, "an ancestor of its FREE"),
        ):
            seeds = {getattr(buffers[b], end): i for b, i in chunk.items()}
            for v, bits in propagate_bits(order, inputs, seeds):
                node = nodes[v]
                if isinstance(node, BufferNode):
                    continue
                for b in node.bufs:
                    i = chunk.get(b)
                    if i is not None and not (bits >> i) & 1:
                        anchor = getattr(buffers[b], end)
                        _fail(
                            f"node {v} ({node.op}) uses buffer {b} but is not {relation} "
                            f"(node {anchor})"
                        )


# -- loading -----------------------------------------------------------------------------------


def parse_instance(
    data: Any, *, name: str = "instance", source: str = "<data>", hardware: Hardware | None = None
) -> Instance:
    """Validate already-decoded graph data ``{"Nodes": [...], "Edges": [...]}``.

    Parameters
    ----------
    data
        The decoded JSON object.
    name
        Case name stored in the instance.
    source
        Where the data came from; starts every error message.
    hardware
        Capacities to check buffer sizes against (the contest's when ``None``).

    Raises
    ------
    InstanceError
        With a one-line message naming ``source`` and the node, buffer or edge at fault.
    """
    if not isinstance(data, dict):
        raise InstanceError(f"{source}: top level must be an object with Nodes and Edges")
    try:
        instance = Instance.model_validate({**data, "name": name})
    except ValidationError as exc:
        raise InstanceError(f"{source}: {_describe(exc, data)}") from None
    try:
        instance.check_hardware(hardware or DEFAULT_HARDWARE)
    except InstanceError as exc:
        raise InstanceError(f"{source}: {exc}") from None
    return instance


def _describe(exc: ValidationError, data: Mapping[str, Any]) -> str:
    errors = exc.errors()
    err = errors[0]
    loc = list(err["loc"])
    message = err["msg"].removeprefix("Value error, ")
    where = ""
    if len(loc) >= 2 and loc[0] == "Nodes" and isinstance(loc[1], int):
        raw = data["Nodes"][loc[1]]
        node_id = raw.get("Id") if isinstance(raw, dict) else None
        where = f"node {node_id}" if type(node_id) is int else f"node at index {loc[1]}"
        fields = [str(p) for p in loc[2:] if p not in ("op node", "buffer node")]
        if fields:
            where += f" field {'.'.join(fields)}"
    elif len(loc) >= 2 and loc[0] == "Edges" and isinstance(loc[1], int):
        where = f"edge {loc[1]} {data['Edges'][loc[1]]!r}"
    elif loc:
        where = f"field {'.'.join(map(str, loc))}"
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    text = f"{where}: {message}{more}" if where else f"{message}{more}"
    # One line, whatever the input's keys hold (a field name may contain a newline).
    return " ".join(text.split())


def graph_data(instance: Instance) -> dict[str, Any]:
    """The instance as JSON-ready data (``{"Nodes": [...], "Edges": [...]}``, fields by their
    file names), nodes in id order and edges deduplicated."""
    return {
        "Nodes": [
            {
                k: list(v) if isinstance(v, tuple) else v
                for k, v in n.model_dump(by_alias=True).items()
            }
            for n in instance.nodes
        ],
        "Edges": [[a, b] for a, after in enumerate(instance.successors) for b in after],
    }


def relabel(
    instance: Instance,
    nodes: Sequence[int],
    buffer_ids: Mapping[int, int],
    name: str,
    sort_bufs: bool = False,
) -> Instance:
    """The graph on ``nodes`` (old ids, listed in their new id order: node ``nodes[i]`` becomes
    ``i``; a subset keeps the edges among its nodes) with BufIds renamed by ``buffer_ids``,
    validated again. With ``sort_bufs`` each op lists its buffers by new BufId."""
    new_id = {v: i for i, v in enumerate(nodes)}
    data: list[dict[str, Any]] = []
    for v in nodes:
        node = instance.nodes[v]
        if isinstance(node, OpNode):
            bufs = [buffer_ids[b] for b in node.bufs]
            data.append(
                {
                    "Id": new_id[v],
                    "Op": node.op,
                    "Pipe": node.pipe,
                    "Cycles": node.cycles,
                    "Bufs": sorted(bufs) if sort_bufs else bufs,
                }
            )
        else:
            data.append(
                {
                    "Id": new_id[v],
                    "Op": node.op,
                    "BufId": buffer_ids[node.buf_id],
                    "Size": node.size_units,
                    "Type": node.memory,
                }
            )
    edges = sorted(
        (new_id[a], new_id[b]) for a in nodes for b in instance.successors[a] if b in new_id
    )
    return Instance.model_validate({"Nodes": data, "Edges": [list(e) for e in edges], "name": name})


def check_solvable(
    instance: Instance, hardware: Hardware, problems: Collection[int], source: str | Path
) -> None:
    """Raise when one of ``problems`` has no answer: Problem 1 when an op needs two buffers of
    one L0 memory (:meth:`Instance.order_error`), Problems 2 and 3 when an op's buffers do not
    fit their memory together on ``hardware`` (:meth:`Instance.placement_error`). The message
    names ``source``, and for each problem asked that cannot be solved the op and the memory
    (with demand and capacity) that prevent it; then the problems that still can be."""
    order, place = instance.order_error(), instance.placement_error(hardware)
    reasons = []
    if order and 1 in problems:
        reasons.append(f"{order}: Problem 1 cannot be solved")
    if place and {2, 3} & set(problems):
        asked = sorted({2, 3} & set(problems))
        noun = "Problem 2" if asked == [2] else "Problem 3" if asked == [3] else "Problems 2 and 3"
        reasons.append(f"{place}: {noun} cannot be solved")
    if not reasons:
        return
    rest = sorted({1, 2, 3} - ({1} if order else set()) - ({2, 3} if place else set()))
    can = ""
    if len(rest) == 1:
        can = f" (Problem {rest[0]} can: --problem {rest[0]})"
    elif len(rest) == 2:
        can = f" (Problems {rest[0]} and {rest[1]} can: --problem {rest[0]} or {rest[1]})"
    raise InstanceError(f"{source}: " + "; ".join(reasons) + can)


def case_name(path: str | Path) -> str:
    """Case name of a graph file: its stem, without a ``_Nodes``/``_Edges`` CSV suffix."""
    stem = Path(path).stem
    for suffix in ("_Nodes", "_Edges"):
        if Path(path).suffix.lower() == ".csv" and stem.endswith(suffix):
            return stem[: -len(suffix)]
    return stem


def load_instance(path: str | Path, hardware: Hardware | None = None) -> Instance:
    """Load and validate a graph from JSON or from a ``<name>_Nodes.csv``/``_Edges.csv`` pair.

    Parameters
    ----------
    path
        A ``.json`` file, or either file of a CSV pair.
    hardware
        Capacities to check buffer sizes against (the contest's when ``None``).

    Raises
    ------
    InstanceError
        When a file is missing or unreadable, or the graph breaks a rule of SPEC section 1.
    """
    path = Path(path)
    if path.suffix.lower() == ".csv":
        data = _read_csv_pair(path)
    else:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise InstanceError(f"{path}: cannot read graph file: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise InstanceError(f"{path}: not a UTF-8 text file") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InstanceError(
                f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}"
            ) from None
    return parse_instance(data, name=case_name(path), source=str(path), hardware=hardware)


_CSV_INT_FIELDS = ("Id", "Cycles", "BufId", "Size")


def _read_csv_pair(path: Path) -> dict[str, Any]:
    stem = case_name(path)
    nodes_path = path.with_name(f"{stem}_Nodes.csv")
    edges_path = path.with_name(f"{stem}_Edges.csv")
    nodes = []
    for line_no, row in _csv_rows(nodes_path, ("Id", "Op")):
        node: dict[str, Any] = {}
        for key, cell in row.items():
            if key is None:
                raise InstanceError(f"{nodes_path}:{line_no}: more cells than header columns")
            cell = (cell or "").strip()
            if not cell:
                continue
            if key in _CSV_INT_FIELDS:
                node[key] = _csv_int(cell, nodes_path, line_no, key)
            elif key == "Bufs":
                node[key] = _csv_int_list(cell, nodes_path, line_no)
            else:
                node[key] = cell
        if node.get("Op") not in BUFFER_OPS and "Bufs" not in node and "Op" in node:
            node["Bufs"] = []  # an op with an empty Bufs cell uses no buffer
        nodes.append(node)
    edges = [
        [
            _csv_int(row["StartNodeId"], edges_path, line_no, "StartNodeId"),
            _csv_int(row["EndNodeId"], edges_path, line_no, "EndNodeId"),
        ]
        for line_no, row in _csv_rows(edges_path, ("StartNodeId", "EndNodeId"))
    ]
    return {"Nodes": nodes, "Edges": edges}


def _csv_rows(path: Path, required: Sequence[str]) -> Iterator[tuple[int, dict[str, str]]]:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            header = [h.strip() for h in reader.fieldnames or []]
            reader.fieldnames = header
            missing = [c for c in required if c not in header]
            if missing:
                raise InstanceError(f"{path}:1: header lacks column {missing[0]!r}")
            for row in reader:
                yield reader.line_num, row
    except OSError as exc:
        raise InstanceError(f"{path}: cannot read graph file: {exc.strerror}") from None


def _csv_int(cell: str | None, path: Path, line_no: int, column: str) -> int:
    text = (cell or "").strip()
    try:
        return int(text)
    except ValueError:
        raise InstanceError(
            f"{path}:{line_no}: column {column}: {text!r} is not an integer"
        ) from None


def _csv_int_list(cell: str, path: Path, line_no: int) -> list[int]:
    """Parse a ``Bufs`` cell: ``[1, 2]``, ``1;2`` or ``1 2``."""
    inner = cell.strip().removeprefix("[").removesuffix("]")
    parts = inner.replace(";", " ").replace(",", " ").split()
    return [_csv_int(p, path, line_no, "Bufs") for p in parts]


__all__ = [
    "MEMORIES",
    "Buffer",
    "BufferNode",
    "Instance",
    "OpNode",
    "case_name",
    "load_instance",
    "parse_instance",
    "propagate_bits",
]
