"""Hypothesis strategies shared by the tests: random small instances and solutions.

Instances use small capacities (UB and L1 24, L0A 12) so that capacity and overlap violations are
common; spills are placed both carefully (between two uses of the buffer) and carelessly
(anywhere), so valid and subtly invalid solutions both occur.
"""

from __future__ import annotations

from hypothesis import strategies as st

from npuopt.solver.hardware import Hardware
from npuopt.solver.instance import Instance, parse_instance
from npuopt.solver.solution import Solution, Spill

HARDWARE = Hardware(capacity={"UB": 24, "L1": 24, "L0A": 12})
MEMS = ("UB", "L1", "L0A")
PIPES = ("MTE2", "VECTOR", "MTE3")


@st.composite
def instances(draw) -> Instance:
    n_ops = draw(st.integers(1, 6))
    n_bufs = draw(st.integers(1, 4))
    mems = [draw(st.sampled_from(MEMS)) for _ in range(n_bufs)]
    sizes = [draw(st.integers(1, 6)) for _ in range(n_bufs)]
    uses = [
        draw(st.lists(st.integers(0, n_bufs - 1), max_size=3, unique=True)) for _ in range(n_ops)
    ]
    op_edges = [(i, j) for i in range(n_ops) for j in range(i + 1, n_ops) if draw(st.booleans())]
    # Node ids: a random permutation over ops, ALLOCs and FREEs.
    labels = [("op", i) for i in range(n_ops)] + [
        (k, b) for b in range(n_bufs) for k in ("ALLOC", "FREE")
    ]
    ids = draw(st.permutations(range(len(labels))))
    node_id = dict(zip(labels, ids, strict=True))
    nodes = []
    for i in range(n_ops):
        op = "COPY_IN" if draw(st.integers(0, 3)) == 0 else f"OP{i}"
        nodes.append(
            {
                "Id": node_id[("op", i)],
                "Op": op,
                "Pipe": draw(st.sampled_from(PIPES)),
                "Cycles": draw(st.integers(0, 30)),
                "Bufs": uses[i],
            }
        )
    for b in range(n_bufs):
        for kind in ("ALLOC", "FREE"):
            nodes.append(
                {
                    "Id": node_id[(kind, b)],
                    "Op": kind,
                    "BufId": b,
                    "Size": sizes[b],
                    "Type": mems[b],
                }
            )
    edges = {(node_id[("op", i)], node_id[("op", j)]) for i, j in op_edges}
    for b in range(n_bufs):
        edges.add((node_id[("ALLOC", b)], node_id[("FREE", b)]))
        for i in range(n_ops):
            if b in uses[i]:
                edges.add((node_id[("ALLOC", b)], node_id[("op", i)]))
                edges.add((node_id[("op", i)], node_id[("FREE", b)]))
    return parse_instance({"Nodes": nodes, "Edges": sorted(edges)}, hardware=HARDWARE)


def random_topological_order(draw, inst: Instance) -> list[int]:
    indegree = [len(p) for p in inst.predecessors]
    ready = [v for v in range(inst.n_nodes) if indegree[v] == 0]
    order = []
    while ready:
        v = ready.pop(draw(st.integers(0, len(ready) - 1)))
        order.append(v)
        for w in inst.successors[v]:
            indegree[w] -= 1
            if indegree[w] == 0:
                ready.append(w)
    return order


@st.composite
def placements(draw, disjoint: bool = False) -> tuple[Instance, Solution]:
    inst = draw(instances())
    order = random_topological_order(draw, inst)
    n = inst.n_nodes
    spills: list[Spill] = []
    for k in range(draw(st.integers(0, 3))):
        b = draw(st.sampled_from(sorted(inst.buffers)))
        buf = inst.buffers[b]
        careful = draw(st.booleans())
        if careful:
            # Between two consecutive "touches" of b (ALLOC, uses, earlier spill nodes, FREE).
            touches = sorted(order.index(v) for v in (buf.alloc, buf.free, *buf.users))
            gap = draw(st.integers(0, len(touches) - 2))
            lo, hi = touches[gap] + 1, touches[gap + 1]
            so_at = draw(st.integers(lo, hi))
            si_at = draw(st.integers(so_at + 1, hi + 1))
        else:
            so_at = draw(st.integers(0, len(order)))
            si_at = draw(st.integers(0, len(order) + 1))
        order.insert(so_at, n + 2 * k)
        order.insert(si_at, n + 2 * k + 1)
        spills.append(Spill(b, 0))
    slot = iter(range(0, 10_000, 6))
    offsets = {}
    for b, buf in inst.buffers.items():
        cap = HARDWARE.capacity(buf.memory)
        offsets[b] = (
            next(slot) % (cap - 5) if disjoint else draw(st.integers(0, cap - buf.size_units + 1))
        )
    spills = [
        Spill(
            s.buf_id, next(slot) % 6 if disjoint else draw(st.integers(0, room(inst, s.buf_id) + 1))
        )
        for s in spills
    ]
    return inst, Solution(order=tuple(order), offsets=offsets, spills=tuple(spills))


def room(inst: Instance, b: int) -> int:
    """Largest in-capacity offset of buffer b (the strategies go one past it at times)."""
    return HARDWARE.capacity(inst.buffers[b].memory) - inst.buffers[b].size_units
