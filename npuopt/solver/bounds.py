"""Lower bounds every report carries (SPEC section 8).

Problem 1 (``max V_stay``):

* *op-local*: an op's L1/UB buffers are all live while it runs, so their total size is a bound.
* *forced-live*: a buffer whose ALLOC is an ancestor of node v and whose FREE is a descendant of v
  is live whenever v runs, whatever the order; the largest total over v is a bound. It dominates
  the op-local bound (an op's own buffers are among its forced-live ones).

* *grid*: single residency lines up the buffers of an L0 memory (the *blocks*) one after
  another; an L1/UB buffer used around two blocks is live between them. When the L1/UB buffers
  are the rows and columns of a grid of blocks (a tiled matrix product), some point of any
  order has every column and one more row live (:func:`grid_bound`): Matmul's peaks are
  optimal.
* *closure cut*: when node v runs, the nodes run so far (v included) are a down-set D of the
  graph that holds v's ancestors and none of its descendants, and the buffers live are those
  whose ALLOC is in D and whose FREE is not. Whatever the order, that is at least the least
  such total over every down-set D: a minimum cut (an arc ALLOC -> FREE weighing the buffer's
  size, precedence arcs that cannot be cut), found by a maximum flow. Single residency adds
  that no other buffer of an L0 memory v uses may straddle v. It dominates the forced-live
  bound at v (those buffers cross every such D) and finds what no single node forces: on
  Conv_Case1, where the largest forced-live total is an op's own 896, a residual add whose
  inputs' producers must all have run holds 1,756 at least. :class:`models.cuts.ClosureCuts`
  computes it at a node with OR-tools' maximum flow (15-70 ms at 36k nodes; it lives in models/
  because the core never imports OR-tools); :func:`models.cuts.closure_cut_bound` searches
  nodes for the largest.
* *relaxed sub-instance*: keep only some op nodes, the buffers they use and the precedences
  the full graph implies between them (:func:`relaxed_instance`). Any valid order of the
  instance, restricted to those ops, is a valid order of the sub-instance whose buffers live
  no longer than in the full order, so the sub-instance's optimum is a bound; CP-SAT proves it
  where the sub-instance is small (the pipeline picks the ops around a peak: :func:`peak_ops`).

Problem 2 (extra traffic): where the buffers forced live at an op exceed a memory, the excess
must be spilled around it (:func:`traffic_bound`).

Problem 3 (makespan), all three including the spill nodes and spill edges of a given solution
when one is passed:

* the busiest pipe's load and the critical path (node weights = cycles);
* *heads and tails*: no op starts before its predecessors end, nor before every op of a pipe
  among its ancestors has run on that pipe (from the earliest any of them can start); the
  same backwards bounds the time left after it ends. A pipe's ops with these heads and tails
  need at least Jackson's preemptive schedule (:func:`head_tail_bounds`). On
  FlashAttention_Case0 no VECTOR op starts before cycle 2,493 (four COPY_INs, a matrix
  product, a FIXP copy) and the last leaves 191 (a COPY_OUT): 28,284, against a VECTOR load of
  25,600.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from npuopt.solver.evaluate import extended_graph
from npuopt.solver.hardware import COUNTED_MEMORIES, L0_MEMORIES, Hardware
from npuopt.solver.instance import (
    SPILL_IN_PIPE,
    SPILL_OUT_PIPE,
    Instance,
    OpNode,
    parse_instance,
    propagate_bits,
)
from npuopt.solver.solution import Solution, buffer_lifetimes, op_profile

#: Buffers handled per bitset pass (bounds the size of the big integers used as bitsets).
_CHUNK = 8192


@dataclass(frozen=True)
class GridBound:
    """Problem 1 bound of an instance whose blocks form a grid (:func:`grid_bound`).

    Attributes
    ----------
    units
        The bound.
    memory
        The L0 memory whose buffers are the blocks.
    rows, cols
        The grid's shape.
    """

    units: int
    memory: str
    rows: int
    cols: int


@dataclass(frozen=True)
class OrderBound:
    """Lower bounds on Problem 1's ``max V_stay``.

    Attributes
    ----------
    op_local_units
        Largest total L1/UB size used by a single op.
    forced_live_units
        Largest total L1/UB size forced live at a single node.
    forced_live_node
        A node where the forced-live bound is attained.
    grid
        The grid bound (:func:`grid_bound`), when the instance's blocks form a grid.
    closure_cut_units
        The largest closure cut found (:func:`models.cuts.closure_cut_bound`), when nodes were cut.
    """

    op_local_units: int
    forced_live_units: int
    forced_live_node: int
    grid: GridBound | None = None
    closure_cut_units: int = 0

    @property
    def units(self) -> int:
        """The best proven bound."""
        return max(
            self.op_local_units, self.forced_live_units, self.grid_units, self.closure_cut_units
        )

    @property
    def grid_units(self) -> int:
        """The grid bound (0 when the instance is no grid)."""
        return self.grid.units if self.grid is not None else 0

    @property
    def source(self) -> str:
        """Which bound ``units`` is."""
        if self.closure_cut_units > max(self.forced_live_units, self.grid_units):
            return "closure cut"
        if self.grid is not None and self.grid.units > self.forced_live_units:
            return f"grid of {self.grid.rows} x {self.grid.cols} {self.grid.memory} blocks"
        return "forced-live"


def op_local_bound(instance: Instance) -> int:
    """Largest ``sum Size`` of L1/UB buffers used by a single op."""
    best = 0
    for v in instance.op_ids:
        total = 0
        for b in instance.bufs_of(v):
            buf = instance.buffers[b]
            if buf.memory in COUNTED_MEMORIES:
                total += buf.size_units
        best = max(best, total)
    return best


def forced_live_units(instance: Instance) -> np.ndarray:
    """Total L1/UB size forced live at each node (see the module docstring).

    A node's own ALLOC or FREE counts: just after an ALLOC, or just before a FREE, that buffer is
    live too.
    """
    groups = {b: 0 for b, buf in instance.buffers.items() if buf.memory in COUNTED_MEMORIES}
    return forced_live_by_group(instance, groups, 1)[:, 0]


def forced_live_by_group(
    instance: Instance,
    group_of: Mapping[int, int],
    n_groups: int,
    ops_only: bool = False,
) -> np.ndarray:
    """Total size forced live at each node, per group of buffers: ``out[v, g]`` sums the sizes
    of the buffers b with ``group_of[b] == g`` whose ALLOC is v or an ancestor of v and whose
    FREE is v or a descendant of v. With ``ops_only`` the rows of buffer nodes stay 0.

    Computed with bitsets over buffers, propagated along a topological order (ancestor ALLOCs)
    and its reverse (descendant FREEs), in chunks of buffers to bound memory.
    """
    # Bits sorted by (group, size), so each (group, size) is one contiguous run of bits and
    # its weight is size * popcount.
    chosen = sorted(group_of, key=lambda b: (group_of[b], instance.buffers[b].size_units))
    topo = instance.topological_order
    is_op = [instance.is_op(v) for v in range(instance.n_nodes)]
    totals = np.zeros((instance.n_nodes, n_groups), dtype=np.int64)
    for lo in range(0, len(chosen), _CHUNK):
        chunk = chosen[lo : lo + _CHUNK]
        runs: list[tuple[int, int, int, int]] = []  # (first bit, mask, size, group)
        for i, b in enumerate(chunk):
            size, group = instance.buffers[b].size_units, group_of[b]
            if runs and runs[-1][2:] == (size, group):
                first = runs[-1][0]
                runs[-1] = (first, (1 << (i - first + 1)) - 1, size, group)
            else:
                runs.append((i, 1, size, group))
        alloc_bit = {instance.buffers[b].alloc: i for i, b in enumerate(chunk)}
        free_bit = {instance.buffers[b].free: i for i, b in enumerate(chunk)}
        descendants = [0] * instance.n_nodes
        for v, bits in propagate_bits(topo[::-1], instance.successors, free_bit, keep=True):
            descendants[v] = bits
        for v, bits in propagate_bits(topo, instance.predecessors, alloc_bit):
            if ops_only and not is_op[v]:
                continue
            both = bits & descendants[v]
            if both:
                for first, mask, size, group in runs:
                    totals[v, group] += size * ((both >> first) & mask).bit_count()
    return totals


def order_bound(instance: Instance) -> OrderBound:
    """The Problem 1 lower bounds of an instance."""
    forced = forced_live_units(instance)
    node = int(np.argmax(forced)) if len(forced) else 0
    return OrderBound(
        op_local_units=op_local_bound(instance),
        forced_live_units=int(forced[node]) if len(forced) else 0,
        forced_live_node=node,
        grid=grid_bound(instance),
    )


#: Ancestry searches of :func:`block_lines` give up (the user is left unattached, which only
#: weakens the bound) past this many nodes.
_ANCESTRY_VISITS = 4096


def block_lines(instance: Instance, memory: str) -> dict[frozenset[int], int]:
    """The L1/UB buffers as sets of *blocks*: the buffers of the L0 memory ``memory``, which
    Problem 1's single residency lines up one after another.

    A *cut op* of block c uses c and a buffer of each other L0 memory (a MATMUL: its L0C
    accumulator and its L0A and L0B operands). An op u is *attached* to block c when it is a
    cut op of c, or when it uses a buffer l of another L0 memory whose cut-op users all use c
    and u is an ancestor of one of them (a MOVE that fills a MATMUL's operand).

    Take any valid order, the blocks in their order, and q_b the last cut op of block b. An op
    attached to a block at or before b comes at or before q_b (it is, or precedes, one of that
    block's cut ops); one attached to a later block comes after q_b (its l holds a cut op
    after q_b; q_b holds one buffer l' of l's memory, as every op of a valid order holds at
    most one per L0 memory, and l' is not l, whose cut ops are all in the later block; single
    residency keeps l's whole lifetime after l'). So a buffer with users attached to blocks on
    both sides of b is live at q_b: ``max V_stay`` is at least the total size of the buffers
    crossing any cut, in the best order of the blocks.

    Returns the size of the buffers per set of two or more blocks they are attached to.
    """
    others = [m for m in L0_MEMORIES if m != memory]
    block_of: dict[int, int] = {}  # cut op -> its block
    for v in instance.op_ids:
        bufs = [instance.buffers[b] for b in instance.bufs_of(v)]
        mine = [buf.buf_id for buf in bufs if buf.memory == memory]
        if len(mine) == 1 and set(others) <= {buf.memory for buf in bufs}:
            block_of[v] = mine[0]
    anchors: dict[int, tuple[int, set[int]]] = {}  # operand buffer l -> (block, its cut ops)
    for b, buf in instance.buffers.items():
        if buf.memory in others:
            cuts = {u for u in buf.users if u in block_of}
            if len({block_of[u] for u in cuts}) == 1:
                anchors[b] = (block_of[min(cuts)], cuts)

    def precedes(u: int, targets: set[int]) -> bool:
        return next(_reached(instance, u, targets, _ANCESTRY_VISITS), None) is not None

    lines: dict[frozenset[int], int] = {}
    for buf in instance.buffers.values():
        if buf.memory not in COUNTED_MEMORIES:
            continue
        blocks: set[int] = set()
        for u in buf.users:
            if u in block_of:
                blocks.add(block_of[u])
            for b in instance.bufs_of(u):
                if b in anchors and precedes(u, anchors[b][1]):
                    blocks.add(anchors[b][0])
        if len(blocks) >= 2:
            key = frozenset(blocks)
            lines[key] = lines.get(key, 0) + buf.size_units
    return lines


def _reached(
    instance: Instance, start: int, stops: Collection[int], max_visits: int | None = None
) -> Iterator[int]:
    """The nodes of ``stops`` that ``start`` reaches by paths whose inner nodes are not in
    ``stops`` (paths on through a stop are implied by it). Nodes after the last stop in
    topological order reach none: the search stays before it. With ``max_visits``, it gives
    up after visiting that many nodes (some stops may then go unreported)."""
    rank = instance.topological_rank
    last = max((rank[v] for v in stops), default=-1)
    stack, seen = list(instance.successors[start]), set[int]()
    while stack and (max_visits is None or len(seen) < max_visits):
        w = stack.pop()
        if w in seen or rank[w] > last:
            continue
        seen.add(w)
        if w in stops:
            yield w
        else:
            stack.extend(instance.successors[w])


def grid_bound(instance: Instance) -> GridBound | None:
    """A Problem 1 bound for instances whose :func:`block_lines` are the rows and columns of
    a grid of blocks (the output blocks of a tiled matrix product: row i's A tiles, column
    j's B tiles), with at least three rows and three columns; ``None`` otherwise.

    Say the rows weigh w_i and the columns v_j, and a line is *open* at block b when it has
    blocks at or before b and blocks after it (its buffers are live at the cut, see
    :func:`block_lines`). Take the first block b* after which some line is done; say it is a
    row i (columns are symmetric) and let j* be b*'s column. Every column has started by b*.

    * If column j* is done at b* too, every row has started: all lines but row i and column
      j* are open at b*, at least ``sum w - max w + sum v - max v``.
    * Otherwise every column is open at b*. So is another row, if one has started; if not,
      b* ends the first row and the next block starts a row, open with every column (three
      rows or more: none is done yet). At least ``sum v + min w``.

    The bound is the least of the three cases; for n x n blocks of K tiles of size s,
    ``(n + 1) K s``, what row-by-row order reaches.
    """
    best: GridBound | None = None
    for memory in L0_MEMORIES:
        grid = _grid(block_lines(instance, memory))
        if grid is None:
            continue
        w, v = grid
        if len(w) < 3 or len(v) < 3:
            continue
        units = min(sum(v) + min(w), sum(w) + min(v), sum(w) - max(w) + sum(v) - max(v))
        if best is None or units > best.units:
            best = GridBound(units, memory, len(w), len(v))
    return best


def _grid(lines: Mapping[frozenset[int], int]) -> tuple[list[int], list[int]] | None:
    """Row and column weights when ``lines`` are exactly the rows and the columns of a grid of
    blocks (each block on one row and one column, each row meeting each column once)."""
    through: dict[int, list[frozenset[int]]] = {}
    for line in lines:
        for block in line:
            through.setdefault(block, []).append(line)
    if not lines or any(len(ls) != 2 for ls in through.values()):
        return None
    # Lines that share a block get different colours (rows 0, columns 1).
    first = next(iter(lines))
    colour, stack = {first: 0}, [first]
    while stack:
        line = stack.pop()
        for block in line:
            for other in through[block]:
                if other == line:
                    continue
                if other not in colour:
                    colour[other] = 1 - colour[line]
                    stack.append(other)
                elif colour[other] == colour[line]:
                    return None
    rows = [line for line in lines if colour.get(line) == 0]
    cols = [line for line in lines if colour.get(line) == 1]
    if len(rows) + len(cols) != len(lines) or len(rows) * len(cols) != len(through):
        return None
    # Each block sits on one row and one column; as many blocks as (row, column) pairs and
    # no pair twice: a full grid.
    index = {line: i for group in (rows, cols) for i, line in enumerate(group)}
    cells = {
        tuple(sorted(index[line] + len(rows) * colour[line] for line in through[b]))
        for b in through
    }
    if len(cells) != len(through):
        return None
    return [lines[r] for r in rows], [lines[c] for c in cols]


def relaxed_instance(instance: Instance, ops: Collection[int]) -> tuple[Instance, dict[int, int]]:
    """The instance cut down to the op nodes ``ops``: each keeps its pipe, cycles and buffers;
    each buffer they use keeps its ALLOC and FREE, around its users among ``ops`` only; and
    ``u -> w`` is an edge wherever the full graph has a path from ``u`` to ``w`` through nodes
    outside ``ops`` (so every path between two kept ops survives, transitively).

    A valid order of the instance restricted to ``ops`` (ALLOCs just before a buffer's first
    kept user, FREEs just after its last) respects these edges, keeps L0 single residency
    (lifetimes only shrink) and, at every kept op, has live only buffers that are live there
    in the full order. So the sub-instance's optimal ``max V_stay`` bounds the instance's.

    Returns the sub-instance (named after the instance) and each kept op's node id in it
    (ops first, in the given order; then each buffer's ALLOC and FREE).
    """
    kept = list(dict.fromkeys(ops))
    if any(not instance.is_op(v) for v in kept):
        raise ValueError("relaxed_instance keeps op nodes only")
    inside = set(kept)
    new_id = {v: i for i, v in enumerate(kept)}
    edges = {(new_id[u], new_id[w]) for u in kept for w in _reached(instance, u, inside)}
    nodes: list[dict[str, object]] = []
    for v in kept:
        node = instance.nodes[v]
        assert isinstance(node, OpNode)
        nodes.append(
            {
                "Id": new_id[v],
                "Op": node.op,
                "Pipe": node.pipe,
                "Cycles": node.cycles,
                "Bufs": list(node.bufs),
            }
        )
    for b in sorted({b for v in kept for b in instance.bufs_of(v)}):
        buf = instance.buffers[b]
        alloc, free = len(nodes), len(nodes) + 1
        for kind, node_id in (("ALLOC", alloc), ("FREE", free)):
            nodes.append(
                {"Id": node_id, "Op": kind, "BufId": b, "Size": buf.size_units, "Type": buf.memory}
            )
        for user in buf.users:
            if user in inside:
                edges.update(((alloc, new_id[user]), (new_id[user], free)))
    sub = parse_instance(
        {"Nodes": nodes, "Edges": sorted(edges)}, name=instance.name, source=instance.name
    )
    return sub, new_id


def peak_ops(instance: Instance, op_order: Sequence[int], max_ops: int) -> list[int]:
    """Ops whose sub-instance (:func:`relaxed_instance`) should keep the peak of ``op_order``:
    the users of the L1/UB buffers live at its first peak position, taken buffer by buffer,
    largest first (ties by id), skipping any that would bring more than ``max_ops`` ops; then,
    ring by ring while ops fit, the users of the other L1/UB buffers the chosen ops use (the
    neighbouring layers whose order holds the peak's buffers live). Returned in ``op_order``'s
    order."""
    profile = op_profile(instance, op_order)
    if not len(profile):
        return []
    at = int(np.argmax(profile))
    position = {v: p for p, v in enumerate(op_order)}
    live = [
        b
        for b, (first, last) in buffer_lifetimes(instance, position).items()
        if first <= at <= last and instance.buffers[b].memory in COUNTED_MEMORIES
    ]
    chosen: set[int] = set()
    considered: set[int] = set()
    ring = live
    while ring:
        # Largest first; a buffer is considered once, in the first ring it appears in.
        ring.sort(key=lambda b: (-instance.buffers[b].size_units, b))
        grew = False
        for b in ring:
            considered.add(b)
            grown = chosen | set(instance.buffers[b].users)
            if len(grown) <= max_ops and grown != chosen:
                chosen, grew = grown, True
        if not grew:
            break
        ring = list(
            {
                b
                for v in chosen
                for b in instance.bufs_of(v)
                if instance.buffers[b].memory in COUNTED_MEMORIES
            }
            - considered
        )
    return sorted(chosen, key=position.__getitem__)


@dataclass(frozen=True)
class TrafficBound:
    """Lower bound on Problem 2's extra data movement, valid for every order and placement.

    Attributes
    ----------
    units
        The bound.
    node
        An op where it is attained (``-1`` when the bound is 0).
    """

    units: int
    node: int


def traffic_bound(instance: Instance, hardware: Hardware) -> TrafficBound:
    """While op v runs, every buffer forced live at v (ALLOC an ancestor, FREE a descendant) is
    either resident or spilled around v; v's own buffers must be resident. Where a memory's
    forced-live total exceeds its capacity, spills around v must remove the excess, each a
    distinct spill costing ``Size`` (COPY_IN-backed) or ``2 Size``. The cheapest way to remove
    ``excess`` units, relaxed to fractions of buffers (so a bound), is to take COPY_IN-backed
    units first at cost 1, then others at cost 2. The bound is the largest such sum over the
    memories of one op. Addresses are ignored (fragmentation only adds to it).
    """
    memories = sorted({buf.memory for buf in instance.buffers.values()})
    group_of = {
        b: 2 * memories.index(buf.memory) + buf.copy_in_backed
        for b, buf in instance.buffers.items()
    }
    forced = forced_live_by_group(instance, group_of, 2 * len(memories), ops_only=True)
    ops = np.asarray(instance.op_ids, dtype=np.int64)
    if not len(ops):
        return TrafficBound(0, -1)
    spillable = forced[ops].copy()
    for row, v in enumerate(instance.op_ids):  # used by v: resident, not spillable
        for b in instance.bufs_of(v):
            spillable[row, group_of[b]] -= instance.buffers[b].size_units
    cost = np.zeros(len(ops), dtype=np.int64)
    for m, memory in enumerate(memories):
        total = forced[ops, 2 * m] + forced[ops, 2 * m + 1]
        excess = np.maximum(total - hardware.capacity(memory), 0)
        cheap = np.minimum(excess, spillable[:, 2 * m + 1])
        cost += cheap + 2 * (excess - cheap)
    row = int(np.argmax(cost))
    best, where = int(cost[row]), int(ops[row]) if cost[row] > 0 else -1
    return TrafficBound(best, where)


def pipe_loads(instance: Instance, solution: Solution | None = None) -> dict[str, int]:
    """Total cycles per pipe, with the spill nodes of ``solution`` when given."""
    loads: dict[str, int] = {}
    cycles = instance.cycles
    for v in instance.op_ids:
        pipe = instance.pipe_of(v)
        assert pipe is not None
        loads[pipe] = loads.get(pipe, 0) + int(cycles[v])
    for spill in solution.spills if solution is not None else ():
        buf = instance.buffers[spill.buf_id]
        loads[SPILL_OUT_PIPE] = loads.get(SPILL_OUT_PIPE, 0) + buf.spill_out_cycles
        loads[SPILL_IN_PIPE] = loads.get(SPILL_IN_PIPE, 0) + buf.spill_in_cycles
    return dict(sorted(loads.items()))


def solution_graph(
    instance: Instance, solution: Solution | None
) -> tuple[list[int], list[list[int]], list[int], list[str | None]]:
    """A topological order, the predecessors, cycles and pipe of every node: the instance's
    graph, or with a solution's spill nodes and spill edges (its schedule, a permutation of
    all ``N + 2K`` nodes respecting the spill edges as any valid solution does, is then the
    order)."""
    if solution is None or not solution.spills:
        pipes = [instance.pipe_of(v) for v in range(instance.n_nodes)]
        preds = [list(p) for p in instance.predecessors]
        return list(instance.topological_order), preds, instance.cycles.tolist(), pipes
    n_total = instance.n_nodes + 2 * len(solution.spills)
    pos = np.empty(n_total, dtype=np.int64)
    pos[np.asarray(solution.order, dtype=np.int64)] = np.arange(n_total)
    graph = extended_graph(instance, solution, pos)
    return list(solution.order), graph.pred, graph.cycles, graph.pipe


def critical_path(instance: Instance, solution: Solution | None = None) -> int:
    """Longest path, node weights = cycles; with a solution's spill nodes and edges when given.

    With a solution, its schedule must be a permutation of all ``N + 2K`` nodes that respects the
    spill edges (as for any valid solution): the longest path is then found along the schedule.
    """
    return _longest_path(*solution_graph(instance, solution))


def _longest_path(
    order: Sequence[int],
    pred: Sequence[Sequence[int]],
    cycles: Sequence[int],
    pipe: Sequence[str | None],
) -> int:
    """:func:`critical_path` of a :func:`solution_graph`."""
    finish = [0] * len(cycles)
    for v in order:
        start = max((finish[u] for u in pred[v]), default=0)
        finish[v] = start + cycles[v]
    return max(finish, default=0)


def earliest_starts(
    order: Sequence[int],
    pred: Sequence[Sequence[int]],
    cycles: Sequence[int],
    pipe: Sequence[str | None],
) -> list[int]:
    """A lower bound on every node's start time in any schedule of a DAG whose pipes run one
    node at a time (the *heads*). ``order`` is topological.

    A node starts after each predecessor ends (the longest path), and after every op of a pipe
    among its ancestors has run: those take their total cycles on that pipe, one after the
    other, none starting before the least head on the pipe so far. Fed the reversed order and
    the successors, it bounds the time from each node's end to the makespan (the *tails*).
    Ancestors are bitsets (:func:`solver.instance.propagate_bits`) over the timed ops, numbered
    pipe by pipe so that one sum per pipe gives each ancestor load.
    """
    timed = [v for v in range(len(cycles)) if pipe[v] is not None and cycles[v] > 0]
    timed.sort(key=lambda v: str(pipe[v]))
    bit = {v: i for i, v in enumerate(timed)}
    weight = np.asarray([cycles[v] for v in timed], dtype=np.int64)
    names = sorted({str(pipe[v]) for v in timed})
    firsts = np.asarray([[str(pipe[v]) for v in timed].index(name) for name in names])
    n_bytes = (len(timed) + 7) // 8
    least: dict[str, int] = {}  # least head so far per pipe
    head = [0] * len(cycles)
    seeds = {v: bit[v] for v in timed}
    for v, bits in propagate_bits(order, pred, seeds):
        h = max((head[u] + cycles[u] for u in pred[v]), default=0)
        if v in bit and least:
            above = bits & ~(1 << bit[v])  # ancestors only
            if above:
                flags = np.unpackbits(
                    np.frombuffer(above.to_bytes(n_bytes, "little"), dtype=np.uint8),
                    bitorder="little",
                )[: len(timed)]
                loads = np.add.reduceat(flags * weight, firsts)
                for name, load in zip(names, loads.tolist(), strict=True):
                    if load and name in least:
                        h = max(h, least[name] + load)
        head[v] = h
        if v in bit:
            name = str(pipe[v])
            least[name] = min(least.get(name, h), h)
    return head


def preemptive_one_pipe(jobs: Collection[tuple[int, int, int]]) -> int:
    """Least makespan of ``(head, cycles, tail)`` jobs on one machine when a job may be
    interrupted: Jackson's preemptive schedule (whenever a job is released or ends, run the
    released job with the longest tail) is optimal for that relaxation (Horn, 1974), so it is a
    lower bound for the pipe, which never interrupts."""
    pending = sorted(jobs)
    ready: list[tuple[int, int]] = []  # (-tail, cycles left)
    t, i, best = 0, 0, 0
    while i < len(pending) or ready:
        if not ready and t < pending[i][0]:
            t = pending[i][0]
        while i < len(pending) and pending[i][0] <= t:
            _, cycles, tail = pending[i]
            heapq.heappush(ready, (-tail, cycles))
            i += 1
        neg_tail, left = heapq.heappop(ready)
        run = left if i == len(pending) else min(left, pending[i][0] - t)
        t += run
        if left > run:
            heapq.heappush(ready, (neg_tail, left - run))
        else:
            best = max(best, t - neg_tail)
    return best


def head_tail_bounds(instance: Instance, solution: Solution | None = None) -> dict[str, int]:
    """Per pipe, the makespan bound of its ops with their heads and tails
    (:func:`earliest_starts` forwards and backwards, then :func:`preemptive_one_pipe`); with a
    solution's spill nodes and edges when given, as :func:`critical_path`."""
    return _head_tail(*solution_graph(instance, solution))


def _head_tail(
    order: Sequence[int],
    pred: Sequence[Sequence[int]],
    cycles: Sequence[int],
    pipe: Sequence[str | None],
) -> dict[str, int]:
    """:func:`head_tail_bounds` of a :func:`solution_graph`."""
    succ: list[list[int]] = [[] for _ in pred]
    for v, ps in enumerate(pred):
        for u in ps:
            succ[u].append(v)
    heads = earliest_starts(order, pred, cycles, pipe)
    tails = earliest_starts(list(reversed(order)), succ, cycles, pipe)
    jobs: dict[str, list[tuple[int, int, int]]] = {}
    for v, name in enumerate(pipe):
        if name is not None and cycles[v] > 0:
            jobs.setdefault(name, []).append((heads[v], cycles[v], tails[v]))
    return {name: preemptive_one_pipe(js) for name, js in sorted(jobs.items())}


@dataclass(frozen=True)
class MakespanBound:
    """Lower bound on the makespan: ``max(busiest pipe load, critical path, head-tail bound)``.

    Attributes
    ----------
    pipe_loads
        Cycles per pipe (spill nodes included when computed for a solution).
    critical_path_cycles
        Longest path through the graph.
    head_tail_cycles
        Per pipe, :func:`head_tail_bounds`: its load placed between the earliest its ops can
        start and the least time they leave after them. It is at least the pipe's load.
    """

    pipe_loads: Mapping[str, int]
    critical_path_cycles: int
    head_tail_cycles: Mapping[str, int]

    @property
    def busiest_pipe(self) -> str:
        """The pipe with the largest load."""
        return max(self.pipe_loads, key=lambda p: self.pipe_loads[p])

    @property
    def load_path_cycles(self) -> int:
        """``max(busiest pipe load, critical path)``: the simple bound, which issue targets and
        papers quote."""
        return max(max(self.pipe_loads.values(), default=0), self.critical_path_cycles)

    @property
    def cycles(self) -> int:
        """The bound."""
        return max(self.load_path_cycles, max(self.head_tail_cycles.values(), default=0))


def makespan_bound(instance: Instance, solution: Solution | None = None) -> MakespanBound:
    """Makespan lower bound of the instance, or of a solution's spill decisions when given."""
    graph = solution_graph(instance, solution)  # built once for both walks
    return MakespanBound(pipe_loads(instance, solution), _longest_path(*graph), _head_tail(*graph))
