"""Memory-aware list scheduling for Problem 1 (minimise ``max V_stay``).

Op nodes are chosen one at a time by a priority policy; buffer nodes follow rules that are optimal
for a fixed op order (FINDINGS, Problem 1): an ALLOC is emitted just before the first op that needs
it, a FREE as soon as its last predecessor is done.

Each L0 memory holds one live buffer, so it acts as a lock. Two rules keep the scheduler out of
dead ends where every ready op waits for a lock held by a buffer whose users cannot run:

* *serve the holders*: while L0 buffers are live, a new L0 buffer may only be allocated by an op
  that is an unscheduled ancestor-or-self of a pending user of every live L0 buffer;
* *ancestors first*: L0 buffer y may be allocated only if no other unscheduled ancestor of y's
  users still has to allocate in y's memory (it could never run while y holds the lock).

Policies (the op with the smallest key runs next, among those the lock rules admit):

``program``  the rank alone (by default the node id: the generator's program order, which on the
             official cases already gives the best public figures);
``memory``   net L1/UB units the op allocates minus those its completion frees, then the rank;
``release``  ops that free memory first, then ops that allocate nothing, then the rest.

Restarts perturb the rank with seeded noise.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np

from npuopt.solver.evaluate import Evaluation, evaluate_order
from npuopt.solver.hardware import COUNTED_MEMORIES, L0_MEMORIES
from npuopt.solver.instance import Instance
from npuopt.solver.solution import Solution

T = TypeVar("T")

POLICIES: tuple[str, ...] = ("program", "memory", "release")
#: Unscheduled ancestors explored per lock check before giving up on it (keeps checks local).
_ANCESTOR_CAP = 4000


@dataclass(frozen=True)
class OrderingParams:
    """Settings of :func:`order_heuristic`.

    Attributes
    ----------
    policies
        Policies tried without noise, in this order.
    restarts
        Randomised restarts after the plain runs (policy chosen in turn, rank perturbed).
    noise
        Standard deviation of the rank perturbation, in positions of the program order.
    """

    policies: tuple[str, ...] = POLICIES
    restarts: int = 6
    noise: float = 8.0


class _Graph:
    """Per-instance arrays the scheduler reads (built once per call)."""

    def __init__(self, instance: Instance) -> None:
        n = instance.n_nodes
        buffers = instance.buffers
        self.n = n
        self.pred = instance.predecessors
        self.succ = instance.successors
        self.buffer_of = instance.buffer_of_node
        self.is_alloc = [False] * n
        self.is_free = [False] * n
        self.counted_units = [0] * n  # L1/UB size of a buffer node's buffer
        self.l0_memory: list[str | None] = [None] * n  # L0 memory of a buffer node's buffer
        for buf in buffers.values():
            self.is_alloc[buf.alloc] = True
            self.is_free[buf.free] = True
            for v in (buf.alloc, buf.free):
                if buf.memory in COUNTED_MEMORIES:
                    self.counted_units[v] = buf.size_units
                if buf.memory in L0_MEMORIES:
                    self.l0_memory[v] = buf.memory
        self.users = {b: buf.users for b, buf in buffers.items()}


def list_schedule(
    instance: Instance,
    policy: str,
    rank: Sequence[float] | np.ndarray,
    deadline: float | None = None,
) -> list[int] | None:
    """One memory-aware list schedule of all nodes; ``None`` when the lock rules dead-end or the
    ``deadline`` (a ``time.monotonic()`` value) passes first.

    Parameters
    ----------
    instance
        The instance.
    policy
        ``program``, ``memory`` or ``release`` (see the module docstring).
    rank
        Priority of every node (smaller first); ties broken by node id.
    """
    return _Scheduler(_Graph(instance), policy, rank).run(deadline)


class _Scheduler:
    def __init__(self, g: _Graph, policy: str, rank: Sequence[float] | np.ndarray) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown ordering policy {policy!r}; choose from {POLICIES}")
        self.g, self.policy, self.rank = g, policy, rank
        self.done = [False] * g.n
        self.pending = [len(p) for p in g.pred]
        self.free_credit = [0] * g.n  # L1/UB units freed as soon as the op runs
        self.live_l0: dict[str, int] = {}  # memory -> ALLOC node of its live buffer
        self.out: list[int] = []
        # Ops that must allocate in an L0 memory wait in that memory's heap, which competes only
        # while the memory is free; all other ops share the main heap (key None).
        self.heaps: dict[str | None, list[tuple[tuple[float, ...], int, int]]] = {None: []}
        self.version = [0] * g.n
        self.queued = [False] * g.n
        self.serving: set[int] | None = None  # ops allowed to allocate L0 (None: no holder)
        self.serving_stale = True
        self.l0_events = 0  # L0 ALLOCs and FREEs so far: the only moments a refusal can change
        self.l0_allocs: dict[str, int] = {}  # L0 ALLOCs so far, per memory

    # -- keys and readiness ------------------------------------------------------------------

    def alloc_units(self, v: int) -> int:
        g = self.g
        return sum(g.counted_units[p] for p in g.pred[v] if g.is_alloc[p] and not self.done[p])

    def key(self, v: int) -> tuple[float, ...]:
        if self.policy == "program":
            return (self.rank[v], v)
        alloc, freed = self.alloc_units(v), self.free_credit[v]
        if self.policy == "memory":
            return (alloc - freed, self.rank[v], v)
        return (0 if freed > 0 else 1 if alloc == 0 else 2, self.rank[v], v)

    def ready(self, v: int) -> bool:
        """All predecessors done, except ALLOCs that are themselves ready (emitted with v)."""
        g = self.g
        return all(self.done[p] or (g.is_alloc[p] and self.pending[p] == 0) for p in g.pred[v])

    def new_l0(self, v: int) -> list[int]:
        """The unscheduled L0 ALLOCs op ``v`` would emit."""
        g = self.g
        return [p for p in g.pred[v] if g.is_alloc[p] and not self.done[p] and g.l0_memory[p]]

    def push(self, v: int, memory: str | None = None) -> None:
        """Queue ``v`` in the heap of ``memory`` (by default its first busy or needed L0)."""
        if memory is None:
            needed = [self.g.l0_memory[p] for p in self.new_l0(v)]
            busy = [m for m in needed if m in self.live_l0]
            memory = (busy or needed or [None])[0]
        self.version[v] += 1
        self.queued[v] = True
        heapq.heappush(self.heaps.setdefault(memory, []), (self.key(v), self.version[v], v))

    def pop_best(self) -> int | None:
        """Pop the op with the smallest key among the main heap and the free L0 memories'."""
        best: tuple[tuple[float, ...], int, int] | None = None
        best_heap: list[tuple[tuple[float, ...], int, int]] | None = None
        for memory, heap in self.heaps.items():
            if memory in self.live_l0:
                continue
            while heap and (heap[0][1] != self.version[heap[0][2]] or self.done[heap[0][2]]):
                heapq.heappop(heap)  # stale entry
            if heap and (best is None or heap[0] < best):
                best, best_heap = heap[0], heap
        if best is None or best_heap is None:
            return None
        heapq.heappop(best_heap)
        self.queued[best[2]] = False
        return best[2]

    # -- emitting nodes ------------------------------------------------------------------------

    def emit(self, v: int) -> None:
        g = self.g
        self.done[v] = True
        self.out.append(v)
        memory = g.l0_memory[v]
        if memory is not None:
            if g.is_alloc[v]:
                self.live_l0[memory] = v
                self.l0_allocs[memory] = self.l0_allocs.get(memory, 0) + 1
            else:
                self.live_l0.pop(memory, None)
            self.serving_stale = True
            self.l0_events += 1
        for w in g.succ[v]:
            self.pending[w] -= 1
            if g.is_free[w]:
                if self.pending[w] == 0:
                    self.emit(w)
                elif self.pending[w] == 1 and g.counted_units[w]:
                    last = next(p for p in g.pred[w] if not self.done[p])
                    self.free_credit[last] += g.counted_units[w]
                    if self.queued[last] and self.policy != "program":
                        self.push(last)
            elif g.is_alloc[w]:
                if self.pending[w] == 0:
                    for u in g.succ[w]:
                        # Ops only: a FREE goes by itself once ready (an unused buffer's FREE
                        # follows its ALLOC directly).
                        is_op = not (g.is_alloc[u] or g.is_free[u])
                        if is_op and not self.done[u] and not self.queued[u] and self.ready(u):
                            self.push(u)
            elif not self.done[w] and not self.queued[w] and self.ready(w):
                self.push(w)

    # -- L0 lock rules -------------------------------------------------------------------------

    def unscheduled_ancestors(self, roots: Sequence[int]) -> set[int] | None:
        """Unscheduled ancestors-or-self of ``roots``; ``None`` past the exploration cap."""
        pred, done = self.g.pred, self.done
        seen: set[int] = set()
        stack = [r for r in roots if not done[r]]
        while stack:
            u = stack.pop()
            if u in seen:
                continue
            seen.add(u)
            if len(seen) > _ANCESTOR_CAP:
                return None
            stack.extend(p for p in pred[u] if not done[p] and p not in seen)
        return seen

    def serving_set(self) -> set[int] | None:
        if self.serving_stale:
            self.serving_stale = False
            self.serving = None
            for alloc in self.live_l0.values():
                b = self.g.buffer_of[alloc]
                assert b is not None
                around = self.unscheduled_ancestors(self.g.users[b])
                if around is None:
                    continue  # too far to reason about: do not restrict on its account
                self.serving = around if self.serving is None else self.serving & around
        return self.serving

    def refusal(self, v: int, relaxed: bool) -> tuple[str, str | int | None] | None:
        """Why the lock rules refuse ``v`` now, or ``None``.

        ``("impossible", None)``: it needs two new buffers in one L0 memory;
        ``("busy", M)``: L0 memory M, where it must allocate, is held; ``("serving", None)``: it
        serves no live L0 buffer; ``("ancestor", u)``: op u, an unscheduled ancestor of its new
        buffer's users, must allocate in the same memory first; ``("far", M)``: those users are
        too far away to reason about.
        """
        g = self.g
        new_l0 = self.new_l0(v)
        if not new_l0:
            return None
        memories = [g.l0_memory[p] for p in new_l0]
        if len(set(memories)) < len(memories):
            return ("impossible", None)  # two new buffers in one L0 memory: never valid
        for memory in memories:
            if memory in self.live_l0:
                return ("busy", memory)
        if relaxed:
            return None
        serving = self.serving_set() if self.live_l0 else None
        if serving is not None and v not in serving:
            return ("serving", None)
        for alloc in new_l0:
            blocker = self.first_blocker(v, alloc)
            if blocker is not None:
                return blocker
        return None

    def first_blocker(self, v: int, alloc: int) -> tuple[str, str | int] | None:
        """An unscheduled ancestor of the users of ``alloc``'s buffer (other than ``v``) that
        must allocate in the same L0 memory, found by a search that stops at the first one."""
        g, done = self.g, self.done
        b = g.buffer_of[alloc]
        assert b is not None
        memory = g.l0_memory[alloc]
        assert memory is not None
        seen: set[int] = set()
        stack = [u for u in g.users[b] if not done[u]]
        while stack:
            u = stack.pop()
            if u in seen:
                continue
            seen.add(u)
            if len(seen) > _ANCESTOR_CAP:
                return ("far", memory)
            for p in g.pred[u]:
                if done[p]:
                    continue
                if u != v and p != alloc and g.is_alloc[p] and g.l0_memory[p] == memory:
                    return ("ancestor", u)
                if p not in seen:
                    stack.append(p)
        return None

    # -- main loop -------------------------------------------------------------------------------

    def run(self, deadline: float | None = None) -> list[int] | None:
        g = self.g
        for v in range(g.n):
            if not g.is_alloc[v] and not g.is_free[v] and self.ready(v):
                self.push(v)
        # Refused ops wait for an event that can change their refusal: a busy memory's FREE
        # (they wait in its heap); for "serving", the next L0 event (the serving set is fixed
        # between events, and only ops in the new set need a second look); for "ancestor", that
        # ancestor running (it emits the ALLOC the rule waits for); for "far" in memory M, the
        # next L0 ALLOC in M.
        not_serving: set[int] = set()
        behind: dict[int, list[int]] = {}  # blocking ancestor -> ops waiting for it
        blocked: dict[str, list[int]] = {}  # memory -> ops waiting for an ALLOC there
        steps = 0
        while True:
            steps += 1
            if deadline is not None and steps % 256 == 0 and time.monotonic() > deadline:
                return None
            popped = self.pop_best()
            if popped is None:
                waiting = [*not_serving, *(u for us in blocked.values() for u in us)]
                waiting += [u for us in behind.values() for u in us]
                waiting += [e[2] for h in self.heaps.values() for e in h if not self.done[e[2]]]
                if not waiting:
                    break
                # Every ready op is refused: relax the dead-end rules once, as a last resort (a
                # relaxed refusal still holds back "busy" and "impossible" ops: never valid).
                choice = next((u for u in waiting if self.refusal(u, relaxed=True) is None), None)
                if choice is None:
                    return None
                self._run_op(choice)
                for u in waiting:
                    if not self.done[u]:
                        self.push(u)
                not_serving, behind, blocked = set(), {}, {}
                continue
            v = popped
            reason = self.refusal(v, relaxed=False)
            if reason is not None:
                kind, detail = reason
                if kind == "impossible":
                    return None
                if kind == "busy":
                    self.push(v, str(detail))  # wait in that memory's heap
                elif kind == "serving":
                    not_serving.add(v)
                elif kind == "ancestor":
                    behind.setdefault(int(detail or 0), []).append(v)
                else:
                    blocked.setdefault(str(detail), []).append(v)
                continue
            events, allocs = self.l0_events, dict(self.l0_allocs)
            self._run_op(v)
            admitted = set(behind.pop(v, ()))
            if self.l0_events != events:
                serving = self.serving_set() if self.live_l0 else None
                woken = set(not_serving) if serving is None else not_serving & serving
                not_serving -= woken
                admitted |= woken
                for memory, count in self.l0_allocs.items():
                    if allocs.get(memory) != count:
                        admitted.update(blocked.pop(memory, ()))
            for u in admitted:
                if not self.done[u]:
                    self.push(u)
        # Buffers nobody uses (and any node the loop never reached) go last, in a valid order.
        for v in _topological(g):
            if not self.done[v]:
                self.emit(v)
        return self.out

    def _run_op(self, v: int) -> None:
        for p in self.g.pred[v]:
            if not self.done[p]:
                self.emit(p)  # its ALLOCs, just in time
        self.emit(v)


def _topological(g: _Graph) -> list[int]:
    indegree = [len(p) for p in g.pred]
    stack = [v for v in range(g.n) if indegree[v] == 0]
    order = []
    while stack:
        v = stack.pop()
        order.append(v)
        for w in g.succ[v]:
            indegree[w] -= 1
            if indegree[w] == 0:
                stack.append(w)
    return order


def program_rank(instance: Instance) -> np.ndarray:
    """The default rank: node ids, i.e. the program order the graph was written in."""
    return np.arange(instance.n_nodes, dtype=np.float64)


@dataclass(frozen=True)
class OrderingRun:
    """One run of the scheduler: its policy, whether its rank was perturbed, the rank it
    started from (``program``: node ids; else an order generator's name) and what the
    evaluator said."""

    policy: str
    noisy: bool
    solution: Solution
    evaluation: Evaluation
    start: str = "program"

    @property
    def name(self) -> str:
        """``list-<policy>``, with ``@<start>`` when the rank came from a generator."""
        return f"list-{self.policy}" + ("" if self.start == "program" else f"@{self.start}")


def rank_of(instance: Instance, op_order: Sequence[int]) -> np.ndarray:
    """A list-scheduler rank from an op order: each op's position (buffer nodes, which the
    scheduler emits with their ops, last)."""
    rank = np.full(instance.n_nodes, float(instance.n_nodes))
    for position, v in enumerate(op_order):
        rank[v] = position
    return rank


def order_heuristic(
    instance: Instance,
    rng: np.random.Generator,
    params: OrderingParams | None = None,
    deadline: float | None = None,
    starts: Sequence[tuple[str, Sequence[int]]] = (),
    runner: Runner | None = None,
) -> list[OrderingRun]:
    """Run the list scheduler with each policy and with randomised restarts.

    Parameters
    ----------
    instance
        The instance.
    rng
        Source of the rank perturbations (restarts are reproducible from its seed).
    params
        Policies, number of restarts and noise.
    deadline
        ``time.monotonic()`` value after which no new run starts, once a plain run has given
        a valid order (on a large graph at a short limit, the portfolio's other plain runs
        would overrun it).
    starts
        Named op orders (the order generators' portfolio) run as ranks with every policy,
        after the node-id rank; restarts perturb the rank of the best plain run.
    runner
        Runs the list-scheduler runs ``runner.count`` at a time (in worker processes, say).
        Without it, one at a time here. The runs and their rank perturbations are the same
        whatever the count; only the deadline, checked before each batch, may cut a
        different number of them.

    Returns
    -------
    list[OrderingRun]
        Every run that produced an order, best first by (validity, ``max V_stay``).
    """
    params = params or OrderingParams()
    runner = runner or _Here(instance)
    ranks = [("program", program_rank(instance))]
    ranks += [(name, rank_of(instance, order)) for name, order in starts]
    plain = [(policy, rank, start, False) for start, rank in ranks for policy in params.policies]
    runs: list[OrderingRun] = []
    for at in range(0, len(plain), runner.count):
        late = deadline is not None and time.monotonic() > deadline
        if late and any(r.evaluation.valid for r in runs):
            break
        runs += [r for r in runner.map(_run, plain[at : at + runner.count]) if r is not None]
    runs.sort(key=_ranking)
    base = dict(ranks)[runs[0].start] if runs else ranks[0][1]
    best_start = runs[0].start if runs else "program"
    for at in range(0, params.restarts, runner.count):
        if deadline is not None and time.monotonic() > deadline:
            break
        noisy = [
            (
                params.policies[i % len(params.policies)],
                base + rng.normal(0.0, params.noise, size=len(base)),
                best_start,
                True,
            )
            for i in range(at, min(at + runner.count, params.restarts))
        ]
        runs += [r for r in runner.map(_run, noisy) if r is not None]
    runs.sort(key=_ranking)
    return runs


class Runner(Protocol):
    """Runs ``fn(instance, *args)`` for each argument tuple of a batch, ``count`` at a time,
    results in order (:class:`npuopt.solver.workers.Workers` does it in worker processes)."""

    @property
    def count(self) -> int: ...

    def map(self, fn: Callable[..., T], calls: Sequence[tuple[Any, ...]]) -> list[T]: ...


class _Here:
    """A :class:`Runner` that runs everything in this process, one call after another."""

    count = 1

    def __init__(self, instance: Instance) -> None:
        self.instance = instance

    def map(self, fn: Callable[..., T], calls: Sequence[tuple[Any, ...]]) -> list[T]:
        return [fn(self.instance, *args) for args in calls]


def _run(
    instance: Instance, policy: str, rank: np.ndarray, start: str, noisy: bool
) -> OrderingRun | None:
    order = list_schedule(instance, policy, rank)
    if order is None:
        return None
    solution = Solution(order=tuple(order))
    return OrderingRun(policy, noisy, solution, evaluate_order(instance, solution.order), start)


def _ranking(run: OrderingRun) -> tuple[bool, int]:
    return (not run.evaluation.valid, run.evaluation.max_v_stay_units or 0)


def best_order(
    instance: Instance, rng: np.random.Generator, params: OrderingParams | None = None
) -> Solution:
    """The best order :func:`order_heuristic` finds (``(instance, rng) -> Solution`` form)."""
    runs = order_heuristic(instance, rng, params)
    if not runs:
        return Solution(order=instance.topological_order)
    return runs[0].solution
