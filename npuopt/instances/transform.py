"""Renamings of a graph: the same problem under other node ids and BufIds.

Node ids and BufIds are names. These transforms change only the names, so a solver's answer on
the result must be as good as on the original (``benchmarks/invariance.py`` measures it):

* :func:`renumber` gives the nodes the ids of a random topological order (a ready node drawn
  uniformly at each step, as a tool that emits operators in any valid order would), permutes
  the BufIds and lists each op's ``Bufs`` in a random order;
* :func:`union` puts several graphs into one, with no edge between them, their nodes renumbered
  by one random topological order of the whole (so the parts' ids interleave) and BufIds
  permuted across them.

Both work on JSON-ready data (``{"Nodes": [...], "Edges": [...]}``) and are seeded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

Graph = dict[str, Any]


def random_topological_order(
    n_nodes: int, edges: Sequence[Sequence[int]], rng: np.random.Generator
) -> list[int]:
    """A topological order of nodes ``0..n_nodes-1`` taking a uniformly random ready node at
    each step. Raises ``ValueError`` when the edges hold a cycle."""
    succ: list[list[int]] = [[] for _ in range(n_nodes)]
    indegree = [0] * n_nodes
    for a, b in {(int(a), int(b)) for a, b in edges}:
        succ[a].append(b)
        indegree[b] += 1
    ready = [v for v in range(n_nodes) if indegree[v] == 0]
    order: list[int] = []
    while ready:
        i = int(rng.integers(len(ready)))
        ready[i], ready[-1] = ready[-1], ready[i]
        v = ready.pop()
        order.append(v)
        for w in succ[v]:
            indegree[w] -= 1
            if indegree[w] == 0:
                ready.append(w)
    if len(order) != n_nodes:
        raise ValueError("the graph has a cycle: it has no topological order")
    return order


def renumber(graph: Graph, seed: int) -> Graph:
    """``graph`` with node ids from a random topological order and BufIds permuted (seeded).

    Nodes are listed in their new id order; edges are sorted.
    """
    return renumbering(graph, seed)[0]


def renumbering(graph: Graph, seed: int) -> tuple[Graph, dict[int, int]]:
    """:func:`renumber` and the new id of every old node id."""
    renamed, new_id = _relabel([graph], np.random.default_rng(seed))
    return renamed, new_id


def union(graphs: Sequence[Graph], seed: int) -> Graph:
    """One graph holding every graph of ``graphs`` side by side (no edge between them), ids
    interleaved by a random topological order of the whole and BufIds permuted (seeded)."""
    if not graphs:
        raise ValueError("union needs at least one graph")
    return _relabel(graphs, np.random.default_rng(seed))[0]


def _relabel(graphs: Sequence[Graph], rng: np.random.Generator) -> tuple[Graph, dict[int, int]]:
    """The graphs side by side, renamed; and the new id of each node (numbered as in the
    graphs listed one after another)."""
    nodes: list[dict[str, Any]] = []
    edges: list[tuple[int, int]] = []
    buffer_keys: list[tuple[int, int]] = []  # (part, BufId), in order of first sight
    seen_buffers: set[tuple[int, int]] = set()
    for part, graph in enumerate(graphs):
        base = len(nodes)
        by_id = {int(node["Id"]): node for node in graph["Nodes"]}
        if sorted(by_id) != list(range(len(by_id))):
            raise ValueError(f"graph {part}: node ids must be exactly 0..N-1")
        for v in range(len(by_id)):
            node = by_id[v]
            nodes.append({**node, "_part": part})
            keys = [node["BufId"]] if "BufId" in node else list(node.get("Bufs", ()))
            for b in keys:
                if (part, int(b)) not in seen_buffers:
                    seen_buffers.add((part, int(b)))
                    buffer_keys.append((part, int(b)))
        edges += [(int(a) + base, int(b) + base) for a, b in graph["Edges"]]
    order = random_topological_order(len(nodes), edges, rng)
    new_id = {old: new for new, old in enumerate(order)}
    shuffled = rng.permutation(len(buffer_keys))
    new_buffer = {key: int(shuffled[i]) for i, key in enumerate(buffer_keys)}
    out_nodes = []
    for old in order:
        node = dict(nodes[old])
        part = node.pop("_part")
        node["Id"] = new_id[old]
        if "BufId" in node:
            node["BufId"] = new_buffer[(part, int(node["BufId"]))]
        if "Bufs" in node:  # listed in another order too: a list of names has no order
            bufs = [new_buffer[(part, int(b))] for b in node["Bufs"]]
            node["Bufs"] = [bufs[int(i)] for i in rng.permutation(len(bufs))]
        out_nodes.append(node)
    out_edges = sorted({(new_id[a], new_id[b]) for a, b in edges})
    return {"Nodes": out_nodes, "Edges": [list(e) for e in out_edges]}, new_id
