"""Order generators: op orders built from the graph's structure alone, never from its ids.

Each generator is a function ``(instance, structure, variant) -> op order`` (a list of op ids
respecting every path between ops); the list scheduler (:mod:`heuristics.ordering`) turns an
op order into a schedule that keeps the L0 rule, using the order as its rank, and the evaluator
picks among them. They are the *portfolio* the Problem 1 stage starts from.

``cone``
    Consumer-driven and memory-aware: finish what the open buffers' consumers need before
    opening new producers. At each step the candidates are the *units* (:func:`~heuristics.
    structure.op_units`, or single ops) that use a buffer already open; the chosen one runs
    with its whole unscheduled cone (its ancestors, depth first, the deepest first so that
    shallow ones such as a MOVE into L0 run just before their user) just before it. A candidate's
    cost is the L1/UB memory its cone would open (every buffer counted at the ops that can
    first use it), so a block whose inputs are live already comes first; ties go to the
    candidate using the oldest open buffer, then to the smaller structural class. With no open
    buffer, the ready units compete the same way. This is the depth-first schedule of the
    contest statement's convolution figure, found rather than written: on Conv_Case0 it gives
    6,912 (proven optimal) and on Conv_Case1 8,912 units straight away, against 7,488 and
    14,040 for the files' own id order; on Matmul the row-by-row order (9,216 and 34,816,
    optimal). After the liveness-driven schedulers of the memory-aware scheduling literature
    (XLA's DFS scheduler: post-order from the outputs, children by memory need).
``cone-dfs``
    The same, but among equal costs the unit consuming the most recently computed buffer goes
    first (depth first through computed data, loads still in order of need): on
    FlashAttention a block's second matmul then follows its softmax at once, instead of the
    next block's first matmul (estimated Problem 2 traffic of FlashAttention_Case1 72,196 ->
    43,552).
``cone-chain``, ``cone-dfs-chain``
    The same two, but among equal costs and ages the unit with the longest path still ahead of
    it (its bottom level, the list-scheduling priority) goes first: a chain running through a
    computation is taken in its order. On FlashAttention a query row's blocks are merged into
    its running softmax in a fixed order; taken in that order, each block's output is merged at
    once instead of waiting in UB (FlashAttention_Case1: estimated Problem 2 traffic in groups
    of two rows 16,384 against 32,828; Problem 1 8,752 against 9,996). On Conv_Case1 it is
    worse (8,912 against 6,218), hence a generator of its own.
``cone-net``
    The same, but a candidate's cost is what its cone opens *less* what the unit frees (open
    L1/UB buffers whose every remaining user is one of its ops): finishing a buffer counts for
    as much as not opening one. On Conv_Case1 the plain cost takes each weight across all
    twelve spatial tiles before the next, so the inputs of every tile wait for the last
    output channel (6,218); counting the frees ends tiles sooner (5,586 straight away, any
    numbering: the generators never read ids). Same answers on Conv_Case0 and
    FlashAttention_Case0 (6,912, 5,256).
``lockstep``
    A base order with its *streams* (the parts still connected once the COPY_INs are removed,
    :func:`heuristics.streams.stream_of`) moved in step: each op gets the number of shared
    (COPY_IN-backed) buffers its stream has touched up to it, and ops run by that count, then
    by the base order. On FlashAttention this turns one query row at a time into every row
    one key/value block at a time (FlashAttention_Case0: 4,224 -> 3,968 from the op-level cone
    order).

``blocks``
    The ``cone-chain`` order with its streams advanced a *block* at a time: a stream's block is
    the work between reads of a given number of shared loads (buffers DDR holds that two
    streams or more read), and each block is asked for whole before the next stream's block,
    every load with the stream op of the lowest count that uses it. On FlashAttention a block
    is one query row's pass over one key/value column (four shared tiles), and the order is
    the statement's: the columns outside, each row finishing its block before the next row
    starts. The block size is not guessed: every size up to :data:`BLOCK_LOADS` and every
    offset is tried and the smallest peak by first and last use kept (FlashAttention_Case1:
    7,714 from the ``cone-chain`` variant 2 order's 8,752; other variants keep their order,
    which hoists a row's score matmuls ahead of its blocks).

A *variant* reorders the structural classes for the last tie-break (seeded permutations): equal
candidates are then taken in another, still name-free, order. A portfolio run
(:func:`generator_task`) untangles the generator's order around its peak
(:mod:`heuristics.untangle`): parts of a window that share nothing but loads run one after
another. Pure Python.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from npuopt.heuristics.streams import stream_of
from npuopt.heuristics.structure import (
    OpGraph,
    longest_paths,
    op_graph,
    op_units,
    structural_classes,
)
from npuopt.heuristics.untangle import untangle
from npuopt.solver.hardware import COUNTED_MEMORIES, L0_MEMORIES
from npuopt.solver.instance import Instance
from npuopt.solver.solution import op_profile


@dataclass(frozen=True)
class Structure:
    """What the generators read, built once per instance: node classes, the op-level DAG,
    op units and longest-path depths."""

    classes: tuple[int, ...]
    graph: OpGraph
    units: tuple[tuple[int, ...], ...]  # members by (depth, class, id)
    unit_of: dict[int, int]
    unit_class: tuple[int, ...]  # per unit: rank of its members' sorted classes
    depth: tuple[int, ...]  # per node: most ops on a path from a source op (0 for buffers)


#: Structures of the last few instances (a worker process asks once per generator run).
_STRUCTURES: OrderedDict[int, tuple[Instance, Structure]] = OrderedDict()


def remember_structure(instance: Instance, structure: Structure) -> None:
    """Keep ``structure`` as ``instance``'s (worker processes forked later inherit it)."""
    _STRUCTURES[id(instance)] = (instance, structure)
    while len(_STRUCTURES) > 4:
        _STRUCTURES.popitem(last=False)


def generator_task(instance: Instance, name: str, variant: int) -> list[int]:
    """``GENERATORS[name](instance, structure, variant)`` with the remembered structure (or a
    new one), untangled around its peak (:func:`heuristics.untangle.untangle`): one run of
    the portfolio, as a worker process runs it."""
    held = _STRUCTURES.get(id(instance))
    if held is None or held[0] is not instance:
        remember_structure(instance, structure_of(instance))
        held = _STRUCTURES[id(instance)]
    structure = held[1]
    return untangle(instance, structure.graph, GENERATORS[name](instance, structure, variant))


def structure_of(instance: Instance, classes: Sequence[int] | None = None) -> Structure:
    """The :class:`Structure` of ``instance`` (``classes`` when already computed)."""
    classes = tuple(classes) if classes is not None else structural_classes(instance)
    graph = op_graph(instance)
    depth = [0] * instance.n_nodes
    for v in graph.order:
        for p in graph.pred[v]:
            depth[v] = max(depth[v], depth[p] + 1)
    groups = [sorted(g, key=lambda v: (depth[v], classes[v], v)) for g in op_units(instance)]
    signature = [tuple(sorted(classes[v] for v in g)) for g in groups]
    rank = {s: i for i, s in enumerate(sorted(set(signature)))}
    # Units in a name-free order: by class signature, then by their first member's class.
    order = sorted(range(len(groups)), key=lambda i: (rank[signature[i]], groups[i]))
    units = tuple(tuple(groups[i]) for i in order)
    unit_class = tuple(rank[signature[i]] for i in order)
    unit_of = {v: u for u, members in enumerate(units) for v in members}
    return Structure(classes, graph, units, unit_of, unit_class, tuple(depth))


def _class_order(structure: Structure, variant: int) -> list[int]:
    """The tie-break value of each class: the class itself (variant 0) or a seeded shuffle."""
    count = max(structure.classes, default=-1) + 1
    if variant == 0:
        return list(range(count))
    return [int(x) for x in np.random.default_rng(variant).permutation(count)]


def cone_order(
    instance: Instance,
    structure: Structure,
    variant: int = 0,
    granularity: str = "unit",
    depth_first: bool = False,
    by_height: bool = False,
    net: bool = False,
) -> list[int]:
    """The ``cone`` generator (module docstring) over units (``granularity="unit"``) or single
    ops (``"op"``); with ``depth_first``, equal costs go first to the unit using the most
    recently computed open buffer (not a load), so that what was just computed is consumed
    before older work goes on (``cone-dfs``); with ``by_height``, equal costs and ages go to the
    unit with the longest path still ahead of it (``cone-chain``); with ``net``, a candidate's
    cost is what its cone opens less what its own ops free (``cone-net``)."""
    graph = structure.graph
    index, opred = graph.index, graph.pred
    depth = structure.depth
    tie = _class_order(structure, variant)
    classes = structure.classes
    if granularity == "unit":
        groups: Sequence[Sequence[int]] = structure.units
        group_of = structure.unit_of
        group_tie = [tie[c] if c < len(tie) else c for c in structure.unit_class]
    elif granularity == "op":
        groups = [(v,) for v in graph.order]
        group_of = {v: i for i, v in enumerate(graph.order)}
        group_tie = [tie[classes[v]] for v in graph.order]
    else:
        raise ValueError(f"unknown granularity {granularity!r}; choose unit or op")
    # Ancestor bitsets (bit i: op graph.order[i]) of every op, then of every group.
    ancestors: dict[int, int] = {}
    for v in graph.order:
        bits = 1 << index[v]
        for p in opred[v]:
            bits |= ancestors[p]
        ancestors[v] = bits
    group_cone = []
    for members in groups:
        bits = 0
        for v in members:
            bits |= ancestors[v]
        group_cone.append(bits)
    # Memory a cone opens: each L1/UB buffer counted at the users no other user precedes.
    buffers = instance.buffers
    opens: dict[int, int] = {}
    users_bits: dict[int, int] = {}
    for b, buf in buffers.items():
        bits = 0
        for u in buf.users:
            bits |= 1 << index[u]
        users_bits[b] = bits
        if buf.memory not in COUNTED_MEMORIES:
            continue
        for u in set(buf.users):
            if ancestors[u] & bits & ~(1 << index[u]) == 0:
                opens[u] = opens.get(u, 0) + buf.size_units
    by_units: dict[int, int] = {}
    for v, units in opens.items():
        by_units[units] = by_units.get(units, 0) | (1 << index[v])
    weights = sorted(by_units.items())

    counted_of = [  # per op position: its L1/UB buffers, each once (``net`` only)
        tuple({b for b in instance.bufs_of(v) if buffers[b].memory in COUNTED_MEMORIES})
        for v in (graph.order if net else ())
    ]
    done = 0  # bitset of scheduled ops
    scheduled: set[int] = set()
    order: list[int] = []
    opened: dict[int, int] = {}  # open buffer -> its number among the buffers opened so far
    opened_ever: list[int] = []
    users_left = {b: len(set(buf.users)) for b, buf in buffers.items()}

    cached: dict[int, tuple[int, int]] = {}  # group -> (cost, the ``done`` it was taken at)

    def cost(g: int) -> int:
        value, then = cached.get(g, (-1, 0))
        if value < 0:
            rest = group_cone[g] & ~done
            value = sum(units * (rest & mask).bit_count() for units, mask in weights)
        else:
            gone = group_cone[g] & done & ~then  # scheduled since: no longer to open
            if gone:
                value -= sum(units * (gone & mask).bit_count() for units, mask in weights)
        cached[g] = (value, done)
        return value

    def emit(v: int) -> None:
        nonlocal done
        done |= 1 << index[v]
        scheduled.add(v)
        order.append(v)
        # Buffers opened here are numbered by class (the canonical order allocates them the
        # same way), so later ties between their users follow that numbering.
        for b in sorted(set(instance.bufs_of(v)), key=lambda b: (classes[buffers[b].alloc], b)):
            if b not in opened and users_left[b] > 0:
                opened[b] = len(opened_ever)
                opened_ever.append(b)
            users_left[b] -= 1
            if users_left[b] == 0:
                opened.pop(b, None)

    def run_cone(v: int) -> None:
        stack = [v]
        while stack:
            u = stack[-1]
            if u in scheduled:
                stack.pop()
                continue
            missing = [p for p in opred[u] if p not in scheduled]
            if missing:
                # The deepest predecessor first, the shallow ones (a MOVE into L0, a load)
                # last: they run just before the op, as L0 residency wants.
                stack.append(min(missing, key=lambda p: (-depth[p], tie[classes[p]], p)))
                continue
            stack.pop()
            emit(u)

    # Among equal costs and ages, the group with the longest path still ahead of it (its
    # bottom level) first, as list schedulers do: a chain (FlashAttention's running softmax
    # through a row's blocks) is then taken in order, and what it produces is merged at once.
    group_height = [0] * len(groups)
    if by_height:
        _, height = longest_paths(instance)
        group_height = [-max(height[v] for v in members) for members in groups]

    def freed(g: int) -> int:
        """L1/UB units that running unit ``g`` frees: open buffers whose every remaining user
        is one of its ops (``net`` only; 0 otherwise)."""
        if not net:
            return 0
        inside: dict[int, int] = {}
        for v in groups[g]:
            if v not in scheduled:
                for b in counted_of[index[v]]:
                    if b in opened:
                        inside[b] = inside.get(b, 0) + 1
        return sum(buffers[b].size_units for b, k in inside.items() if k == users_left[b])

    total = len(graph.order)
    while len(order) < total:
        # Each candidate's open buffers, oldest first: ties go to the unit finishing older
        # work (compared buffer by buffer, which also tells apart equal-class units by how
        # they relate to what is already scheduled).
        ages: dict[int, list[int]] = {}
        # An open L0 buffer is a lock (one per memory in Problem 1): its users come first.
        locks = [b for b in opened if buffers[b].memory in L0_MEMORIES]
        for b in locks or opened:
            step = opened[b]
            for g in {group_of[u] for u in buffers[b].users if u not in scheduled}:
                ages.setdefault(g, []).append(step)
        if not ages:  # nothing open: the units of the ready ops compete
            ages = {
                group_of[v]: []
                for v in graph.order
                if v not in scheduled and all(p in scheduled for p in opred[v])
            }
        if depth_first:
            computed = sorted(
                (step, b) for b, step in opened.items() if b not in instance.copy_in_backed
            )
            latest = {}  # unit -> its most recent computed open buffer (negated: min first)
            for step, b in computed:
                for u in buffers[b].users:
                    if u not in scheduled:
                        latest[group_of[u]] = -step
            chosen = min(
                ages,
                key=lambda g: (
                    cost(g) - freed(g),
                    latest.get(g, 1),
                    sorted(ages[g]),
                    group_height[g],
                    group_tie[g],
                    groups[g][0],
                ),
            )
        else:
            chosen = min(
                ages,
                key=lambda g: (
                    cost(g) - freed(g),
                    sorted(ages[g]),
                    group_height[g],
                    group_tie[g],
                    groups[g][0],
                ),
            )
        for v in reversed(groups[chosen]):  # the unit's last ops pull in the rest
            run_cone(v)
    return order


def lockstep_order(instance: Instance, base: Sequence[int]) -> list[int]:
    """The ``lockstep`` generator (module docstring) applied to the op order ``base``."""
    streams = stream_of(instance)
    shared = instance.copy_in_backed
    touched: dict[int, set[int]] = {}
    phase: dict[int, int] = {}
    position = {v: p for p, v in enumerate(base)}
    for v in base:
        s = streams.get(v)
        if s is None:
            continue
        seen = touched.setdefault(s, set())
        seen.update(b for b in instance.bufs_of(v) if b in shared)
        phase[v] = len(seen)
    for v in base:  # a COPY_IN goes with its first user
        if v not in phase:
            users = [u for b in instance.bufs_of(v) for u in instance.buffers[b].users]
            phase[v] = min((phase[u] for u in users if u in phase), default=0)
    wanted = sorted(base, key=lambda v: (phase[v], position[v]))
    return _keeping_paths(instance, wanted)


def _keeping_paths(
    instance: Instance, wanted: Sequence[int], graph: OpGraph | None = None
) -> list[int]:
    """The op order closest to ``wanted`` that keeps every path between ops: each time, the
    earliest op of ``wanted`` whose op predecessors have all run (``graph``: the op graph,
    when already built)."""
    if graph is None:
        graph = op_graph(instance)
    rank = {v: r for r, v in enumerate(wanted)}
    waiting = {v: len(graph.pred[v]) for v in wanted}
    ready = [(rank[v], v) for v in wanted if waiting[v] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, v = heapq.heappop(ready)
        out.append(v)
        for w in graph.succ[v]:
            waiting[w] -= 1
            if waiting[w] == 0:
                heapq.heappush(ready, (rank[w], w))
    return out


#: Shared loads a stream's block may read, tried by :func:`blocks_order`.
BLOCK_LOADS = range(1, 9)


def blocks_order(instance: Instance, structure: Structure, variant: int = 0) -> list[int]:
    """The ``blocks`` generator (module docstring): the streams advance a block at a time,
    each block asked for whole before the next stream's (the order then keeps every path
    between ops, which may interleave them), every load with a user.

    In the ``cone-chain`` order of the same variant an op's *count* is the number of shared
    loads (COPY_IN-backed buffers read by two streams or more) the stream has read up to it;
    block k of a stream holds the ops with ``(count - 1 + offset) // size == k`` (an op before
    the stream's first shared read belongs to its first block; the ops of one L0 unit to the
    block of the latest of them). Of every ``size`` in :data:`BLOCK_LOADS` and offset below it,
    and of the ``cone-chain`` order itself, the order with the smallest peak by first and last use
    (:func:`solver.solution.op_profile`) is returned."""
    base = cone_order(instance, structure, variant, by_height=True)
    streams = stream_of(instance)
    shared = {
        b
        for b in instance.copy_in_backed
        if len({streams[u] for u in instance.buffers[b].users if u in streams}) > 1
    }
    if not shared:
        return base
    position = {v: p for p, v in enumerate(base)}
    stream_rank: dict[int, int] = {}
    earlier: dict[int, int] = {}  # per stream op: its count less one, at least 0
    seen: dict[int, set[int]] = {}
    for v in base:
        s = streams.get(v)
        if s is None:
            continue
        stream_rank.setdefault(s, len(stream_rank))
        reads = seen.setdefault(s, set())
        reads.update(b for b in instance.bufs_of(v) if b in shared)
        earlier[v] = max(len(reads), 1) - 1
    # Every op of an L0 unit counts as its latest member.
    latest: dict[int, int] = {}
    for v, c in earlier.items():
        unit = structure.unit_of[v]
        latest[unit] = max(latest.get(unit, 0), c)
    earlier = {v: latest[structure.unit_of[v]] for v in earlier}
    # A load goes with the stream op using it that has the lowest count, the earliest of them in
    # the base order (a load no stream op uses, with the first block's ops of no stream).
    first_user: dict[int, int] = {}
    for v in base:
        if v not in earlier:
            users = [u for b in instance.bufs_of(v) for u in instance.buffers[b].users]
            first_user[v] = min(
                (u for u in users if u in earlier),
                key=lambda u: (earlier[u], position[u]),
                default=v,
            )
    best, best_peak = base, _peak(instance, base)
    for size in BLOCK_LOADS:
        for offset in range(size):

            def key(v: int, size: int = size, offset: int = offset) -> tuple[int, int, int]:
                u = first_user.get(v, v)
                block = (earlier.get(u, 0) + offset) // size
                return (block, stream_rank.get(streams.get(u, -1), -1), position[v])

            order = _keeping_paths(instance, sorted(base, key=key), structure.graph)
            peak = _peak(instance, order)
            if peak < best_peak:
                best, best_peak = order, peak
    return best


def _peak(instance: Instance, op_order: Sequence[int]) -> int:
    return int(op_profile(instance, op_order).max(initial=0))


#: Nodes one second of the reference machine gets through in a generator run (Conv_Case1,
#: 36,086 nodes: 9-15 s a run on this machine).
NODES_PER_SECOND = 3_000


def generator_runs(instance: Instance, seconds: float) -> int:
    """How many generator runs fit ``seconds`` of the reference machine (at least one)."""
    return max(1, int(seconds * NODES_PER_SECOND / max(instance.n_nodes, 1)))


#: A generator: ``(instance, structure, variant) -> op order``.
Generator = Callable[[Instance, Structure, int], list[int]]


def _cone_ops(instance: Instance, structure: Structure, variant: int) -> list[int]:
    return cone_order(instance, structure, variant, granularity="op")


def _cone_chain(instance: Instance, structure: Structure, variant: int) -> list[int]:
    return cone_order(instance, structure, variant, by_height=True)


def _cone_dfs(instance: Instance, structure: Structure, variant: int) -> list[int]:
    return cone_order(instance, structure, variant, depth_first=True)


def _cone_dfs_chain(instance: Instance, structure: Structure, variant: int) -> list[int]:
    return cone_order(instance, structure, variant, depth_first=True, by_height=True)


def _cone_net(instance: Instance, structure: Structure, variant: int) -> list[int]:
    return cone_order(instance, structure, variant, net=True)


def _lockstep_ops(instance: Instance, structure: Structure, variant: int) -> list[int]:
    return lockstep_order(instance, cone_order(instance, structure, variant, granularity="op"))


#: The portfolio, by name; the first is the canonical order (:mod:`solver.canonical`).
GENERATORS: dict[str, Generator] = {
    "cone": cone_order,
    "cone-net": _cone_net,
    "cone-chain": _cone_chain,
    "cone-dfs": _cone_dfs,
    "cone-dfs-chain": _cone_dfs_chain,
    "cone-ops": _cone_ops,
    "lockstep": _lockstep_ops,
    "blocks": blocks_order,
}
#: The generator the Problem 1 stage runs first, once, whatever the portfolio's share
#: (:func:`solver.stages.order.portfolio`).
FIRST_GENERATOR = "cone-net"
