"""Traversal search for Problem 2: the order of *units* that needs the fewest spills.

For Problem 2 the order matters more than the packing: on Matmul_Case0 the same placement heuristic
spills 34,944 units on the program order and 15,744 on a 2x2-tiled snake over the output blocks.
This module searches such orders generically:

* **units** are the ops connected through L0 buffers (a Matmul output block with its MOVEs and
  COPY_OUT; a FlashAttention MATMUL group with its COPY); they stay contiguous, so L0 residency
  holds. Other ops (COPY_IN, vector ops) are *loose*: each goes just before the first op that
  needs it (or, with no unit after it, right after its predecessors);
* the **estimate** of an order's traffic is an address-free cache simulation per memory: a buffer
  is loaded when allocated or used, and when a memory overflows the resident buffers not needed
  right now are evicted by furthest next use per unit of spill cost (COPY_IN-backed buffers cost
  half). It ignores fragmentation, so it is a fast proxy; the exact placement
  (:mod:`heuristics.placement`) judges the result;
* **simulated annealing** over the unit order (move a unit, swap two, reverse a run), keeping the
  unit precedences, minimises the estimate.

After Belady (furthest next use) for the eviction rule and classic loop tiling for why the order
of blocks decides reuse.
"""

from __future__ import annotations

import bisect
import heapq
import math
import time
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass

import networkx as nx
import numpy as np

from npuopt.solver.hardware import COUNTED_MEMORIES, Hardware
from npuopt.solver.instance import Instance
from npuopt.solver.solution import op_successors


@dataclass(frozen=True)
class Units:
    """The unit decomposition of an instance's ops.

    Attributes
    ----------
    members
        Ops of each unit, in topological (program) order.
    unit_of
        Unit index of each op that belongs to one.
    before
        For each unit, the units it directly depends on (a path from one of their ops reaches
        one of its ops through no other unit); all of them must come earlier.
    """

    members: tuple[tuple[int, ...], ...]
    unit_of: dict[int, int]
    before: tuple[frozenset[int], ...]
    loose: tuple[bool, ...]  # per node: an op in no unit
    op_succ: tuple[tuple[int, ...], ...]  # per node: op successors (through buffer nodes)
    op_pred_count: tuple[int, ...]  # per node: number of op predecessors


#: find_units' answers for the last few instances (the search asks for them once a run).
_UNITS: OrderedDict[int, tuple[Instance, Units]] = OrderedDict()


def find_units(instance: Instance) -> Units:
    """:func:`_find_units`, remembered for the last four instances."""
    held = _UNITS.get(id(instance))
    if held is not None and held[0] is instance:
        _UNITS.move_to_end(id(instance))
        return held[1]
    units = _find_units(instance)
    _UNITS[id(instance)] = (instance, units)
    while len(_UNITS) > 4:
        _UNITS.popitem(last=False)
    return units


def _find_units(instance: Instance) -> Units:
    """Group the ops sharing L0 buffers (union-find), merge groups that depend on each other
    both ways (they cannot each run contiguously), and compute unit precedences."""
    parent = {v: v for v in instance.op_ids}

    def root(v: int) -> int:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    for buf in instance.buffers.values():
        if buf.memory not in COUNTED_MEMORIES and len(buf.users) > 1:
            first = root(buf.users[0])
            for u in buf.users[1:]:
                parent[root(u)] = first
    while True:
        groups: dict[int, list[int]] = {}
        for v in instance.op_ids:
            groups.setdefault(root(v), []).append(v)
        unit_of = {v: r for r, g in groups.items() if len(g) > 1 for v in g}
        reach = _reaching_units(instance, unit_of)
        graph = nx.DiGraph()
        graph.add_nodes_from({r for r in unit_of.values()})
        for r, g in groups.items():
            if len(g) > 1:
                graph.add_edges_from((w, r) for v in g for w in reach[v] if w != r)
        cycles = [c for c in nx.strongly_connected_components(graph) if len(c) > 1]
        if not cycles:
            break
        for component in cycles:
            first, *rest = sorted(component)
            for r in rest:
                parent[root(r)] = root(first)
    rank = instance.topological_rank
    ordered = sorted(
        (sorted(g, key=rank.__getitem__) for g in groups.values() if len(g) > 1),
        key=lambda g: rank[g[0]],
    )
    members = tuple(tuple(g) for g in ordered)
    index = {root(g[0]): i for i, g in enumerate(members)}
    unit_of = {v: i for i, g in enumerate(members) for v in g}
    before = tuple(
        frozenset(index[w] for v in g for w in reach[v] if index[w] != i)
        for i, g in enumerate(members)
    )
    n = instance.n_nodes
    is_op = [instance.is_op(v) for v in range(n)]
    op_succ = tuple(tuple(s) for s in op_successors(instance))
    pred_count = [0] * n
    for v in range(n):
        for w in op_succ[v]:
            pred_count[w] += 1
    loose = tuple(is_op[v] and v not in unit_of for v in range(n))
    return Units(members, unit_of, before, loose, op_succ, tuple(pred_count))


def _reaching_units(instance: Instance, unit_of: dict[int, int]) -> dict[int, set[int]]:
    """For every op, the units (by label) it directly depends on: those reached by walking
    backwards through nodes outside units (loose ops, buffer nodes) and stopping at unit ops.

    Direct predecessors suffice: a unit order that puts each unit after its direct ones puts it
    after all its ancestors, by induction.
    """
    pred = instance.predecessors
    behind: dict[int, frozenset[int]] = {}  # node outside units -> units directly behind it

    def units_behind(node: int) -> frozenset[int]:
        # Iterative post-order over nodes outside units, memoised.
        stack = [node]
        while stack:
            x = stack[-1]
            if x in behind:
                stack.pop()
                continue
            todo = [p for p in pred[x] if p not in unit_of and p not in behind]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            found: set[int] = set()
            for p in pred[x]:
                found |= {unit_of[p]} if p in unit_of else behind[p]
            behind[x] = frozenset(found)
        return behind[node]

    out = {}
    for v in instance.op_ids:
        found: set[int] = set()
        for p in pred[v]:
            found |= {unit_of[p]} if p in unit_of else units_behind(p)
        out[v] = found
    return out


def expand(instance: Instance, units: Units, unit_order: Sequence[int]) -> list[int]:
    """The op order of a unit order: units contiguous; loose ops that load (no predecessor) just
    before the first op needing them, every other loose op as soon as its predecessors are done
    (a vector op right after the matmul it reads, so its inputs die early)."""
    n = instance.n_nodes
    done = [False] * n
    out: list[int] = []
    pred = instance.predecessors
    is_loose = units.loose
    waiting = list(units.op_pred_count)

    def run(v: int) -> None:
        stack = [v]
        while stack:
            u = stack[-1]
            sources = [p for p in pred[u] if is_loose[p] and not done[p]]
            if sources:  # loads (and any loose op still pending) go just in time
                stack.extend(sources)
                continue
            stack.pop()
            if done[u]:
                continue
            done[u] = True
            out.append(u)
            for w in units.op_succ[u]:
                waiting[w] -= 1
                if waiting[w] == 0 and is_loose[w] and not done[w]:
                    stack.append(w)  # ready loose op: right away

    for i in unit_order:
        for v in units.members[i]:
            run(v)
    for v in instance.topological_order:  # loose ops no unit needs
        if is_loose[v] and not done[v]:
            run(v)
    return out


def estimate_traffic(instance: Instance, op_order: Sequence[int], hardware: Hardware) -> int:
    """Spill traffic of an op order under an address-free cache simulation (see module doc).

    Every memory is simulated (L0 ones too: Problem 2 bounds them by capacity only).
    """
    position = {v: p for p, v in enumerate(op_order)}
    buffers = instance.buffers
    uses: dict[int, list[int]] = {}
    for b, buf in buffers.items():
        if buf.users:
            uses[b] = sorted(position[u] for u in buf.users)
    starting: dict[int, list[int]] = {}
    ending: dict[int, list[int]] = {}
    for b, ps in uses.items():
        starting.setdefault(ps[0], []).append(b)
        ending.setdefault(ps[-1], []).append(b)
    # Each buffer's next use after the current position, kept up to date as the order is
    # walked, so that choosing a victim reads it instead of searching the buffer's uses.
    next_use: dict[int, int] = {}
    cost = {b: buffers[b].spill_traffic_units for b in uses}
    resident: dict[str, dict[int, int]] = {}  # memory -> {buffer: size}
    load: dict[str, int] = {}
    evicted: set[int] = set()
    traffic = 0
    for p, v in enumerate(op_order):
        needed = instance.bufs_of(v)
        for b in needed:
            ahead = uses.get(b)
            if ahead is None:
                continue
            i = bisect.bisect_right(ahead, p)
            next_use[b] = ahead[i] if i < len(ahead) else p + _NO_NEXT_USE
        for b in needed:
            buf = buffers[b]
            if b in evicted or b in starting.get(p, ()):
                evicted.discard(b)
                mem = buf.memory
                pool = resident.setdefault(mem, {})
                pool[b] = buf.size_units
                load[mem] = load.get(mem, 0) + buf.size_units
                capacity = hardware.capacity(mem)
                while load[mem] > capacity:
                    victim = _victim(pool, needed, next_use, cost, p)
                    if victim is None:
                        break  # the op alone overflows: placement will say so
                    load[mem] -= pool.pop(victim)
                    evicted.add(victim)
                    traffic += cost[victim]
        for b in ending.get(p, ()):
            mem = buffers[b].memory
            if b in resident.get(mem, {}):
                load[mem] -= resident[mem].pop(b)
    return traffic


#: Distance to the next use of a buffer used no more.
_NO_NEXT_USE = 10**9


def _victim(
    pool: dict[int, int],
    needed: Sequence[int],
    next_use: dict[int, int],
    cost: dict[int, int],
    p: int,
) -> int | None:
    """The resident buffer not needed at ``p`` used furthest ahead per unit of spill cost."""
    best, best_score = None, -1.0
    for b in pool:
        if b in needed:
            continue
        score = (next_use[b] - p) / cost[b]
        if score > best_score:
            best, best_score = b, score
    return best


def greedy_units(
    instance: Instance, units: Units, hardware: Hardware, window_factor: float = 1.0
) -> list[int]:
    """A unit order built greedily for reuse: next comes the available unit whose L1/UB inputs
    were used most recently, within a window of recent buffers ``window_factor`` capacities
    large (ties: the earliest unit).

    Small windows follow the last unit (a snake); larger ones stay in a compact region of
    recently used inputs, the way loop tiling does. Only the *available* units (all
    predecessors done) are scored, so a step costs the size of that frontier, not of the graph.
    """
    inputs = _unit_inputs(instance, units)
    capacity = window_factor * sum(hardware.capacity(m) for m in COUNTED_MEMORIES)
    waiting = [len(before) for before in units.before]
    after: list[list[int]] = [[] for _ in units.members]
    for i, before in enumerate(units.before):
        for w in before:
            after[w].append(i)
    available = [i for i, count in enumerate(waiting) if count == 0]  # kept sorted
    order: list[int] = []
    recent: OrderedDict[int, int] = OrderedDict()  # buffer -> size, least recently used first
    for _ in range(len(units.members)):
        # Buffers of the most recent units, up to about one capacity's worth.
        window, total = set(), 0
        for b in reversed(recent):
            total += recent[b]
            if total > capacity:
                break
            window.add(b)
        assert available  # the unit precedences form a DAG
        best, best_score = available[0], -1
        for i in available:
            score = sum(size for b, size in inputs[i].items() if b in window)
            if score > best_score:
                best, best_score = i, score
        order.append(best)
        available.remove(best)
        for w in after[best]:
            waiting[w] -= 1
            if waiting[w] == 0:
                bisect.insort(available, w)
        for b, size in inputs[best].items():
            recent[b] = size
            recent.move_to_end(b)
    return order


def _unit_inputs(instance: Instance, units: Units) -> list[dict[int, int]]:
    """L1/UB buffers (with sizes) each unit touches."""
    inputs = []
    for group in units.members:
        needed: dict[int, int] = {}
        for v in group:
            for b in instance.bufs_of(v):
                buf = instance.buffers[b]
                if buf.memory in COUNTED_MEMORIES:
                    needed[b] = buf.size_units
        inputs.append(needed)
    return inputs


def clustered_units(instance: Instance, units: Units, jaccard: bool = False) -> list[int]:
    """A unit order from agglomerative clustering on shared inputs (loop tiling, from data).

    Clusters that share the most input units (or, with ``jaccard``, the largest shared fraction
    of their union) merge first; each merge concatenates the two clusters' orders in the
    orientation that reuses most across the seam. The final order follows the merge tree, which
    tiles recursively (like a Morton order); unit precedences are then restored by a stable
    topological pass.
    """
    inputs = _unit_inputs(instance, units)
    n = len(inputs)
    if n < 2:
        return list(range(n))
    members: dict[int, list[int]] = {i: [i] for i in range(n)}
    sets: dict[int, dict[int, int]] = {i: dict(inputs[i]) for i in range(n)}
    owners: dict[int, set[int]] = {}  # buffer -> clusters touching it
    for i, needed in enumerate(inputs):
        for b in needed:
            owners.setdefault(b, set()).add(i)

    def gain(a: int, b: int) -> float:
        shared = sum(size for k, size in sets[a].items() if k in sets[b])
        if not jaccard:
            return shared
        union = sum(sets[a].values()) + sum(sets[b].values()) - shared
        return shared / union if union else 0.0

    heap: list[tuple[float, int, int]] = []
    for a in range(n):
        for b in {c for k in sets[a] for c in owners[k]}:
            if a < b:
                heapq.heappush(heap, (-gain(a, b), a, b))
    next_id = n
    while len(members) > 1:
        while heap and (heap[0][1] not in members or heap[0][2] not in members):
            heapq.heappop(heap)
        if heap:
            _, a, b = heapq.heappop(heap)
        else:  # nothing shared any more: join in order
            a, b = sorted(members)[:2]
        merged = _join(members.pop(a), members.pop(b), inputs)
        combined = {**sets.pop(a), **sets.pop(b)}
        members[next_id], sets[next_id] = merged, combined
        for k in combined:
            owners[k] = (owners[k] - {a, b}) | {next_id}
        for c in {c for k in combined for c in owners[k]} - {next_id}:
            heapq.heappush(heap, (-gain(next_id, c), c, next_id))
        next_id += 1
    (order,) = members.values()
    return _restore_precedence(order, units)


def _join(first: list[int], second: list[int], inputs: list[dict[int, int]]) -> list[int]:
    """Concatenate two unit runs in the orientation sharing most inputs across the seam."""

    def shared(a: int, b: int) -> int:
        return sum(size for k, size in inputs[a].items() if k in inputs[b])

    options = [
        (first, second),
        (first, second[::-1]),
        (first[::-1], second),
        (first[::-1], second[::-1]),
    ]
    left, right = max(options, key=lambda pair: shared(pair[0][-1], pair[1][0]))
    return left + right


def _restore_precedence(order: list[int], units: Units) -> list[int]:
    """The topological order of the units closest to ``order`` (list scheduling by rank)."""
    rank = {u: i for i, u in enumerate(order)}
    waiting = {u: len(units.before[u]) for u in order}
    after: dict[int, list[int]] = {u: [] for u in order}
    for u in order:
        for w in units.before[u]:
            after[w].append(u)
    ready = [(rank[u], u) for u in order if waiting[u] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, u = heapq.heappop(ready)
        out.append(u)
        for w in after[u]:
            waiting[w] -= 1
            if waiting[w] == 0:
                heapq.heappush(ready, (rank[w], w))
    return out


#: Op visits one second of this machine (2 cores) gets through in the traffic estimate; turns a
#: time share into a reproducible evaluation count.
OPS_PER_SECOND = 100_000


def evaluations_for(instance: Instance, seconds: float) -> int:
    """How many estimate evaluations fit ``seconds`` on this instance (at least one)."""
    return max(1, int(seconds * OPS_PER_SECOND / max(len(instance.op_ids), 1)))


@dataclass(frozen=True)
class TraversalParams:
    """Settings of :func:`search_traversal`."""

    max_evaluations: int = 4000
    initial_temperature: float = 0.02
    final_temperature: float = 0.0005
    #: How many orders a run returns: its best and the orders it held best before, latest
    #: first. The estimate is only a proxy: the placement of a runner-up is often the better.
    elite: int = 1
    #: The clustered starts cost about (units)^2 work (5,000 units: 20 s here); above this many
    #: units they are skipped. :func:`cluster_units_for` turns a time share into this cap.
    max_cluster_units: int | None = None


#: Seconds per (unit)^2 of the clustered starts, measured here (conv36k: 4,992 units, 20 s).
CLUSTER_SECONDS_PER_PAIR = 1e-6


def cluster_units_for(seconds: float) -> int:
    """Largest unit count whose clustered starts fit ``seconds`` (a deterministic cap)."""
    return int(math.sqrt(max(seconds, 0.0) / CLUSTER_SECONDS_PER_PAIR))


def search_traversal(
    instance: Instance,
    hardware: Hardware,
    start: Sequence[int],
    rngs: Sequence[np.random.Generator],
    params: TraversalParams | None = None,
    deadline: float | None = None,
) -> list[tuple[list[int], int]]:
    """Simulated annealing over unit orders from the units' order in ``start`` (an op order),
    one run per generator of ``rngs``.

    The runs start from the best of: the units' order in ``start``, the greedy order and the
    two clustered orders (unless there are more than ``max_cluster_units`` units), chosen once
    for all of them. Returns each run's best op order and its estimated traffic, in run order.
    Temperatures are relative to the start's estimate and cool geometrically over
    ``max_evaluations`` per run (a count, so a run is reproducible); ``deadline`` only cuts
    runs short.
    """
    params = params or TraversalParams()
    first, first_cost = traversal_start(instance, hardware, start, params)
    units = find_units(instance)
    return [
        _anneal(instance, hardware, units, first, first_cost, rng, params, deadline)[0]
        for rng in rngs
    ]


def traversal_start(
    instance: Instance, hardware: Hardware, start: Sequence[int], params: TraversalParams
) -> tuple[list[int], int]:
    """The unit order every annealing run of :func:`search_traversal` starts from, and its
    estimate: the best of the units' order in ``start`` (an op order), the greedy order and,
    unless there are more than ``max_cluster_units`` units, the two clustered orders."""
    units = find_units(instance)
    position = {v: p for p, v in enumerate(start)}
    given = sorted(
        range(len(units.members)), key=lambda i: min(position[v] for v in units.members[i])
    )
    first, first_cost = given, math.inf
    starts = [given, greedy_units(instance, units, hardware)]
    if params.max_cluster_units is None or len(units.members) <= params.max_cluster_units:
        starts += [
            clustered_units(instance, units, jaccard=False),
            clustered_units(instance, units, jaccard=True),
        ]
    for candidate in starts:
        cost = estimate_traffic(instance, expand(instance, units, candidate), hardware)
        if cost < first_cost:
            first, first_cost = candidate, cost
    return first, int(first_cost)


def anneal_from(
    instance: Instance,
    hardware: Hardware,
    first: list[int],
    first_cost: int,
    seed: int,
    params: TraversalParams,
    deadline: float | None = None,
) -> list[tuple[list[int], int]]:
    """One annealing run of :func:`search_traversal` from :func:`traversal_start`'s order,
    seeded with ``seed`` (a task a worker process can run on its own): its ``params.elite``
    last best orders with their estimates, best first."""
    units = find_units(instance)
    rng = np.random.default_rng(seed)
    return _anneal(instance, hardware, units, first, first_cost, rng, params, deadline)


def _anneal(
    instance: Instance,
    hardware: Hardware,
    units: Units,
    current: list[int],
    current_cost: int,
    rng: np.random.Generator,
    params: TraversalParams,
    deadline: float | None,
) -> list[tuple[list[int], int]]:
    """One annealing run of :func:`search_traversal` from the unit order ``current``: the
    ``params.elite`` orders it held best last (each beat the one before), best first."""
    best_order, best_cost = expand(instance, units, current), current_cost
    held: deque[tuple[list[int], int]] = deque(maxlen=max(params.elite - 1, 0))
    if len(current) < 2 or current_cost == 0:
        return [(best_order, best_cost)]
    scale = max(current_cost, 1)
    ratio = params.final_temperature / params.initial_temperature
    k = attempts = 0
    while k < params.max_evaluations and attempts < 20 * params.max_evaluations:
        attempts += 1
        if deadline is not None and time.monotonic() > deadline:
            break
        proposal = _neighbour(current, units, rng)
        if proposal is None:
            continue  # broke a precedence: not evaluated, not counted
        candidate = proposal
        temperature = params.initial_temperature * ratio ** (k / params.max_evaluations)
        k += 1
        order = expand(instance, units, candidate)
        cost = estimate_traffic(instance, order, hardware)
        delta = (cost - current_cost) / scale
        if delta <= 0 or rng.random() < math.exp(-delta / temperature):
            current, current_cost = candidate, cost
            if cost < best_cost:
                held.append((best_order, best_cost))
                best_cost, best_order = cost, order
    return [(best_order, best_cost), *reversed(held)]


def _neighbour(order: list[int], units: Units, rng: np.random.Generator) -> list[int] | None:
    """Move one unit, swap two, reverse a run or move a run elsewhere; ``None`` if the result
    breaks a precedence."""
    n = len(order)
    i = int(rng.integers(n))
    if rng.random() < 0.5:  # local: precedence-heavy orders mostly allow short moves
        j = i + int(rng.geometric(0.2)) * (1 if rng.random() < 0.5 else -1)
        j = min(max(j, 0), n - 1)
    else:
        j = int(rng.integers(n))
    if i == j:
        return None
    i, j = min(i, j), max(i, j)
    kind = rng.integers(4)
    lo, hi = i, j
    if kind == 0:
        candidate = order[:i] + order[i + 1 :]
        candidate.insert(j, order[i])
    elif kind == 1:
        candidate = list(order)
        candidate[i], candidate[j] = candidate[j], candidate[i]
    elif kind == 2:
        candidate = order[:i] + order[i : j + 1][::-1] + order[j + 1 :]
    else:  # move the run [i, j] to another place (or-opt), keeping its inner order
        run = order[i : j + 1]
        rest = order[:i] + order[j + 1 :]
        at = int(rng.integers(len(rest) + 1))
        candidate = rest[:at] + run + rest[at:]
        lo, hi = 0, n - 1
    seen: set[int] = set(candidate[:lo])
    for u in candidate[lo : hi + 1]:
        if not units.before[u] <= seen:
            return None
        seen.add(u)
    return candidate
