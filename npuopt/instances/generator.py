"""Seeded generators of contest-shaped instances.

Families: ``conv`` (below), ``matmul`` (tiled matrix product, the official Matmul cases'
structure), ``flashattention`` (per block: Matmul, online Softmax, Matmul, row-wise merge, as
the official FlashAttention cases), ``random`` (layered DAGs of vector and transfer ops on
UB/L1 buffers) and ``compose`` (several of the above chained in one graph). Sizes and cycles
follow what the official cases show (measured from their files).

``conv``: a multi-layer convolution shaped like the official Conv cases. Each layer's feature map
is split into ``tiles`` L1 buffers; every output tile accumulates ``groups`` input-channel groups,
each a COPY_IN of a weight tile into L1 (MTE2), a MOVE of it into L0B (MTE1) and a CONV on the
CUBE that reads the input tiles of a halo (the tile and its neighbours) and writes the output tile.
Every ``residual``-th layer's last CONV of a tile is a CONV_ADD that also reads the tile of the
layer ``residual`` layers back, which keeps that feature map alive longer. The first layer's inputs
come in by COPY_IN and the last layer's outputs leave by COPY_OUT (MTE3).

Node ids follow the program order (layer by layer, tile by tile), as in the official cases, and
every graph passes the instance validator. Sizes and cycles follow what the official Conv case
shows: COPY_IN about ``2 * Size + 70`` cycles, feature tiles 16 to 1536 units, L0B weight tiles up
to 192 units.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")

FAMILIES: tuple[str, ...] = ("conv", "matmul", "flashattention", "random", "compose")

_FEATURE_UNITS = (16, 48, 96, 144, 192, 384, 768, 1536)
#: Largest L1 total one op reads and writes (the official Conv case peaks at 3,072 of 4,096),
#: so that every op fits L1 and Problem 2 stays feasible.
OP_L1_UNITS = 3072
_WEIGHT_UNITS = (16, 32, 64, 144, 192, 288, 384)


@dataclass(frozen=True)
class ConvShape:
    """Shape of a generated convolution network."""

    layers: int = 4
    tiles: int = 4
    groups: int = 3
    halo: int = 1
    residual: int = 3

    @classmethod
    def for_nodes(cls, nodes: int) -> ConvShape:
        """A shape of about ``nodes`` nodes: small graphs get fewer tiles and groups per layer."""
        tiles, groups = (3, 2) if nodes < 600 else (4, 4) if nodes < 6000 else (8, 12)
        per_layer = tiles * (7 * groups + 2)
        return cls(layers=max(1, round(nodes / per_layer)), tiles=tiles, groups=groups)


class _Builder:
    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.edges: set[tuple[int, int]] = set()
        self.next_buffer = 0
        self.buffer_nodes: dict[int, tuple[int, int]] = {}  # buffer -> (ALLOC id, FREE id)
        self.last_writer: dict[int, int] = {}
        self.users: dict[int, list[int]] = {}

    def buffer(self, memory: str, size: int) -> int:
        b = self.next_buffer
        self.next_buffer += 1
        alloc = self._node({"Op": "ALLOC", "BufId": b, "Size": size, "Type": memory})
        self.buffer_nodes[b] = (alloc, -1)
        self.users[b] = []
        return b

    def free(self, b: int) -> None:
        alloc, _ = self.buffer_nodes[b]
        size, memory = self.nodes[alloc]["Size"], self.nodes[alloc]["Type"]
        free = self._node({"Op": "FREE", "BufId": b, "Size": size, "Type": memory})
        self.buffer_nodes[b] = (alloc, free)
        self.edges.add((alloc, free))
        for u in self.users[b]:
            self.edges.add((u, free))

    def op(self, name: str, pipe: str, cycles: int, writes: list[int], reads: list[int]) -> int:
        v = self._node({"Op": name, "Pipe": pipe, "Cycles": int(cycles), "Bufs": writes + reads})
        for b in reads:
            writer = self.last_writer.get(b)
            # After the writer; a buffer nobody wrote is read after its ALLOC.
            self.edges.add((writer if writer is not None else self.buffer_nodes[b][0], v))
        for b in writes:
            if not self.users[b]:
                self.edges.add((self.buffer_nodes[b][0], v))
            elif b in self.last_writer:
                self.edges.add((self.last_writer[b], v))  # accumulation chain
            self.last_writer[b] = v
        for b in writes + reads:
            self.users[b].append(v)
        return v

    def free_unfreed(self) -> None:
        """FREE every buffer not freed yet (after everything else, in BufId order)."""
        for b, (_, free) in sorted(self.buffer_nodes.items()):
            if free < 0:
                self.free(b)

    def _node(self, fields: dict[str, Any]) -> int:
        v = len(self.nodes)
        self.nodes.append({"Id": v, **fields})
        return v

    def graph(self) -> dict[str, Any]:
        return {"Nodes": self.nodes, "Edges": [list(e) for e in sorted(self.edges)]}


def conv(shape: ConvShape, rng: np.random.Generator) -> dict[str, Any]:
    """A convolution network graph (see the module docstring) as JSON-ready data."""
    g = _Builder()
    r = shape.residual

    def last_reader(i: int) -> int:
        """Layer that reads feature map i last: its own layer, or the residual one."""
        return i + r - 1 if r > 1 and i % r == 0 and i + r - 1 < shape.layers else i

    fsize = int(rng.choice(_FEATURE_UNITS[:4]))
    maps: list[list[int]] = [[]]  # maps[i]: tiles of layer i's input (maps[i + 1] its output)
    for _ in range(shape.tiles):
        tile = g.buffer("L1", fsize)
        g.op("COPY_IN", "MTE2", _transfer_cycles(fsize, rng), [tile], [])
        maps[0].append(tile)
    size_of = {}  # tile -> units, to keep every op's L1 total within OP_L1_UNITS
    for tile in maps[0]:
        size_of[tile] = fsize
    for layer in range(shape.layers):
        residual = maps[layer - r + 1] if r > 1 and layer % r == r - 1 else None
        reads_units = (2 * shape.halo + 1) * size_of[maps[layer][0]]
        if residual is not None:
            reads_units += size_of[residual[0]]
        # The new map must fit beside this layer's reads, and later be read as a halo (plus the
        # smallest output and residual tiles) by the next layer.
        smallest = _FEATURE_UNITS[0]
        fitting = [
            s
            for s in _FEATURE_UNITS
            if s + reads_units <= OP_L1_UNITS
            and (2 * shape.halo + 1) * s + 2 * smallest <= OP_L1_UNITS
        ] or [smallest]
        out_size = int(rng.choice(fitting))
        weight = int(rng.choice(_WEIGHT_UNITS))
        conv_cycles = max(28, int(out_size * weight / 64 * rng.uniform(0.8, 1.2)))
        outputs = []
        for t in range(shape.tiles):
            out = g.buffer("L1", out_size)
            size_of[out] = out_size
            halo = maps[layer][max(0, t - shape.halo) : t + shape.halo + 1]
            for grp in range(shape.groups):
                w_l1 = g.buffer("L1", weight)
                g.op("COPY_IN", "MTE2", _transfer_cycles(weight, rng), [w_l1], [])
                w_l0 = g.buffer("L0B", max(1, weight // 2))
                g.op("MOVE", "MTE1", 27 + weight // 4, [w_l0], [w_l1])
                g.free(w_l1)
                reads, name = [w_l0, *halo], "CONV"
                if residual is not None and grp == shape.groups - 1:
                    reads, name = [*reads, residual[t]], "CONV_ADD"
                g.op(name, "CUBE", conv_cycles, [out], reads)
                g.free(w_l0)
            outputs.append(out)
        maps.append(outputs)
        for i, tiles in enumerate(maps[:-1]):
            if last_reader(i) == layer:
                for tile in tiles:
                    g.free(tile)
    for tile in maps[-1]:
        size = g.nodes[g.buffer_nodes[tile][0]]["Size"]
        g.op("COPY_OUT", "MTE3", _transfer_cycles(size, rng), [], [tile])
        g.free(tile)
    return g.graph()


def _transfer_cycles(size: int, rng: np.random.Generator) -> int:
    return int(2 * size + 70 + rng.integers(-4, 5))


@dataclass(frozen=True)
class MatmulShape:
    """C (m x n blocks) = A (m x k tiles) B (k x n tiles), one L0C block at a time per output."""

    m: int = 8
    n: int = 8
    k: int = 8

    @classmethod
    def for_nodes(cls, nodes: int) -> MatmulShape:
        """A cube ``m = n = k = s`` of about ``nodes`` nodes (7 s^3 + 9 s^2 of them)."""
        s = 1
        while 7 * (s + 1) ** 3 + 9 * (s + 1) ** 2 <= nodes:
            s += 1
        return cls(s, s, s)


#: Cycles the official Matmul and FlashAttention cases give each op (measured from the files).
_MOVE_CYCLES, _MATMUL_CYCLES, _FIXP_OUT_CYCLES, _FIXP_COPY_CYCLES = 31, 128, 263, 41


def matmul(shape: MatmulShape, rng: np.random.Generator) -> dict[str, Any]:
    """Tiled matrix product in program order (output block by block, K steps inside): each
    step MOVEs an A tile to L0A and a B tile to L0B (both COPY_IN'd into L1 at first use) and
    accumulates a MATMUL into the block's L0C buffer; a COPY_OUT on FIXP ends each block. For
    8 x 8 x 8 this is the official Matmul_Case0 graph's shape (4,160 nodes)."""
    g = _Builder()
    tile = 128
    a = [[-1] * shape.k for _ in range(shape.m)]
    b = [[-1] * shape.n for _ in range(shape.k)]
    for i in range(shape.m):
        for j in range(shape.n):
            acc = g.buffer("L0C", 2 * tile)
            for s in range(shape.k):
                for grid, r, c in ((a, i, s), (b, s, j)):
                    if grid[r][c] < 0:
                        grid[r][c] = g.buffer("L1", tile)
                        g.op("COPY_IN", "MTE2", _transfer_cycles(tile, rng), [grid[r][c]], [])
                l0a, l0b = g.buffer("L0A", tile), g.buffer("L0B", tile)
                g.op("MOVE", "MTE1", _MOVE_CYCLES, [l0a], [a[i][s]])
                g.op("MOVE", "MTE1", _MOVE_CYCLES, [l0b], [b[s][j]])
                g.op("MATMUL", "CUBE", _MATMUL_CYCLES, [acc], [l0b, l0a])
                g.free(l0a)
                g.free(l0b)
                if j == shape.n - 1:
                    g.free(a[i][s])
                if i == shape.m - 1:
                    g.free(b[s][j])
            g.op("COPY_OUT", "FIXP", _FIXP_OUT_CYCLES, [], [acc])
            g.free(acc)
    return g.graph()


@dataclass(frozen=True)
class FlashShape:
    """Query row blocks x key/value column blocks."""

    rows: int = 4
    cols: int = 4

    @classmethod
    def for_nodes(cls, nodes: int) -> FlashShape:
        """About ``nodes`` nodes (roughly 74 per block, plus per-row and per-column work)."""
        side = max(1, round((nodes / 74) ** 0.5))
        return cls(side, side)


def flashattention(shape: FlashShape, rng: np.random.Generator) -> dict[str, Any]:
    """FlashAttention in program order, row block by row block: per (row, column) a Matmul
    (Q K^T into L0C, COPY to UB on FIXP), the online Softmax on VECTOR (ROWMAX, COMPACT, SUB,
    EXP, ROWSUM, COMPACT: 128-unit UB tiles, 2-unit row statistics, 16-unit scratch), P moved
    back to L1 (COPY on MTE3), a second Matmul (P V), and the row-wise merge with the running
    maximum, sum and output (MAX, SUB, EXP, MUL, ADD); each row ends with REC, MUL and a
    COPY_OUT. Q, K and V tiles are 256-unit L1 buffers, COPY_IN'd at first use."""
    g = _Builder()
    tile, wide, stat, scratch = 128, 256, 2, 16
    keys = [-1] * shape.cols
    values = [-1] * shape.cols

    def vec(name: str, cycles: int, size: int, reads: list[int], memory: str = "UB") -> int:
        out = g.buffer(memory, size)
        g.op(name, "VECTOR", cycles, [out], reads)
        return out

    def compact(rows: int) -> int:
        """COMPACT a 128-unit tile into a 2-unit statistic, through a 16-unit scratch."""
        out, pad = g.buffer("UB", stat), g.buffer("UB", scratch)
        g.op("COMPACT", "VECTOR", 113, [out, pad], [rows])
        g.free(pad)
        return out

    def product(left: int, right: int) -> int:
        """MOVE both L1 operands into L0A/L0B, MATMUL into L0C, COPY the result to UB."""
        l0a, l0b, acc = g.buffer("L0A", tile), g.buffer("L0B", tile), g.buffer("L0C", 2 * tile)
        g.op("MOVE", "MTE1", _MOVE_CYCLES, [l0a], [left])
        g.op("MOVE", "MTE1", 54, [l0b], [right])
        g.op("MATMUL", "CUBE", _MATMUL_CYCLES, [acc], [l0b, l0a])
        g.free(l0a)
        g.free(l0b)
        out = g.buffer("UB", tile)
        g.op("COPY", "FIXP", _FIXP_COPY_CYCLES, [out], [acc])
        g.free(acc)
        return out

    for i in range(shape.rows):
        q = g.buffer("L1", wide)
        g.op("COPY_IN", "MTE2", _transfer_cycles(wide, rng), [q], [])
        run_max = run_sum = out = -1
        for j in range(shape.cols):
            for grid in (keys, values):
                if grid[j] < 0:
                    grid[j] = g.buffer("L1", wide)
                    g.op("COPY_IN", "MTE2", _transfer_cycles(wide, rng), [grid[j]], [])
            scores = product(q, keys[j])
            row_max = vec("ROWMAX", 310, tile, [scores])
            block_max = compact(row_max)
            shifted = vec("SUB", 151, tile, [scores, row_max])
            g.free(scores)
            g.free(row_max)
            probs = vec("EXP", 218, tile, [shifted])
            g.free(shifted)
            row_sum = vec("ROWSUM", 342, tile, [probs])
            block_sum = compact(row_sum)
            g.free(row_sum)
            probs_l1 = g.buffer("L1", wide)
            g.op("COPY", "MTE3", 271, [probs_l1], [probs])
            g.free(probs)
            partial = product(probs_l1, values[j])
            g.free(probs_l1)
            if i == shape.rows - 1:  # the last row is the last reader of K and V
                g.free(keys[j])
                g.free(values[j])
            if j == 0:
                run_max, run_sum, out = block_max, block_sum, partial
                continue
            new_max = vec("MAX", 23, stat, [run_max, block_max])
            old_scale = vec("EXP", 31, stat, [vec("SUB", 24, stat, [run_max, new_max])])
            new_scale = vec("EXP", 31, stat, [vec("SUB", 24, stat, [block_max, new_max])])
            new_sum = vec(
                "ADD",
                24,
                stat,
                [
                    vec("MUL", 25, stat, [run_sum, old_scale]),
                    vec("MUL", 25, stat, [block_sum, new_scale]),
                ],
            )
            new_out = vec(
                "ADD",
                37,
                tile,
                [
                    vec("MUL", 38, tile, [out, old_scale]),
                    vec("MUL", 38, tile, [partial, new_scale]),
                ],
            )
            for dead in (
                run_max,
                block_max,
                run_sum,
                block_sum,
                out,
                partial,
                old_scale,
                new_scale,
            ):
                g.free(dead)
            run_max, run_sum, out = new_max, new_sum, new_out
        g.free(q)
        inverse = vec("REC", 37, stat, [run_sum])
        final = vec("MUL", 38, tile, [out, inverse])
        g.op("COPY_OUT", "MTE3", 150 + int(rng.integers(0, 42)), [], [final])
        for dead in (run_max, run_sum, out, inverse, final):
            g.free(dead)
    g.free_unfreed()
    return g.graph()


@dataclass(frozen=True)
class RandomShape:
    """Layers x ops per layer; each op reads up to ``fan_in`` earlier outputs."""

    layers: int = 6
    width: int = 4
    fan_in: int = 2

    @classmethod
    def for_nodes(cls, nodes: int) -> RandomShape:
        """About ``nodes`` nodes (3 per op: the op, its output's ALLOC and FREE)."""
        width = max(2, round((nodes / 3) ** 0.5 / 2))
        return cls(layers=max(1, round(nodes / 3 / width)), width=width)


_RANDOM_PIPES = ("VECTOR", "VECTOR", "VECTOR", "MTE2", "MTE3", "FIXP", "CUBE")


def random_dag(shape: RandomShape, rng: np.random.Generator) -> dict[str, Any]:
    """A layered random DAG: the first layer loads (COPY_IN), every later op reads up to
    ``fan_in`` outputs of the previous two layers and writes one UB or L1 buffer; outputs no
    later op reads leave by COPY_OUT. A buffer is freed in program order once no later layer
    can read it."""
    g = _Builder()
    layers: list[list[int]] = []
    readers: dict[int, int] = {}
    for layer in range(shape.layers):
        outputs = []
        for _ in range(shape.width):
            memory = "UB" if rng.random() < 0.6 else "L1"
            size = int(rng.choice(_FEATURE_UNITS[:5] if memory == "L1" else (2, 16, 64, 128)))
            out = g.buffer(memory, size)
            if layer == 0:
                g.op("COPY_IN", "MTE2", _transfer_cycles(size, rng), [out], [])
            else:
                pool = [b for prev in layers[-2:] for b in prev]
                picks = rng.choice(len(pool), size=min(len(pool), shape.fan_in), replace=False)
                reads = [pool[int(p)] for p in sorted(picks)]
                pipe = str(rng.choice(_RANDOM_PIPES))
                g.op(f"OP_{pipe}", pipe, int(rng.integers(20, 400)), [out], reads)
                for b in reads:
                    readers[b] = readers.get(b, 0) + 1
            outputs.append(out)
        layers.append(outputs)
        if len(layers) >= 3:  # reads reach two layers back: older outputs are done
            for b in layers[-3]:
                if readers.get(b):
                    g.free(b)
    for outputs in layers:
        for b in outputs:
            if not readers.get(b):
                size = g.nodes[g.buffer_nodes[b][0]]["Size"]
                g.op("COPY_OUT", "MTE3", _transfer_cycles(size, rng), [], [b])
    g.free_unfreed()
    return g.graph()


#: Parts of a ``compose`` graph, in order.
COMPOSE_PARTS: tuple[str, ...] = ("matmul", "flashattention", "conv")


def compose(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Chain graphs in one: ids and BufIds renumbered, and every loading op (a COPY_IN with no
    op before it) of a part after every storing op (COPY_OUT) of the part before it."""
    nodes: list[dict[str, Any]] = []
    edges: list[list[int]] = []
    previous_outs: list[int] = []
    buffer_base = 0
    for part in parts:
        base = len(nodes)
        for node in part["Nodes"]:
            shifted = {**node, "Id": node["Id"] + base}
            if "BufId" in node:
                shifted["BufId"] = node["BufId"] + buffer_base
            if "Bufs" in node:
                shifted["Bufs"] = [b + buffer_base for b in node["Bufs"]]
            nodes.append(shifted)
        edges += [[a + base, b + base] for a, b in part["Edges"]]
        is_op = {n["Id"] for n in part["Nodes"] if n["Op"] not in ("ALLOC", "FREE")}
        fed = {dst for src, dst in part["Edges"] if src in is_op}
        loads = [
            n["Id"] + base for n in part["Nodes"] if n["Op"] == "COPY_IN" and n["Id"] not in fed
        ]
        edges += [[o, v] for o in previous_outs for v in loads]
        previous_outs = [n["Id"] + base for n in part["Nodes"] if n["Op"] == "COPY_OUT"]
        buffer_base += 1 + max((n.get("BufId", -1) for n in part["Nodes"]), default=-1)
    return {"Nodes": nodes, "Edges": edges}


def generate(
    family: str, seed: int, nodes: int | None = None, jitter: float = 0.0, **shape: int
) -> dict[str, Any]:
    """Generate a graph of ``family`` from ``seed``: about ``nodes`` nodes, or an explicit shape
    (the family's shape fields as keywords; defaults for the rest). With ``jitter`` every
    buffer's size and every op's cycles are varied afterwards (:func:`jittered`)."""
    if jitter:
        return jittered(generate(family, seed, nodes, **shape), jitter, seed)
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose from {', '.join(FAMILIES)}")
    rng = np.random.default_rng(seed)
    if family == "compose":
        share = None if nodes is None else max(1, nodes // len(COMPOSE_PARTS))
        parts = [generate(part, int(rng.integers(2**31)), share, **shape) for part in COMPOSE_PARTS]
        return compose(parts)
    if family == "matmul":
        m = MatmulShape.for_nodes(nodes) if nodes is not None else _shape(MatmulShape, shape)
        return matmul(m, rng)
    if family == "flashattention":
        f = FlashShape.for_nodes(nodes) if nodes is not None else _shape(FlashShape, shape)
        return flashattention(f, rng)
    if family == "random":
        r = RandomShape.for_nodes(nodes) if nodes is not None else _shape(RandomShape, shape)
        return random_dag(r, rng)
    c = ConvShape.for_nodes(nodes) if nodes is not None else _shape(ConvShape, shape)
    return conv(c, rng)


def jittered(graph: dict[str, Any], jitter: float, seed: int) -> dict[str, Any]:
    """``graph`` with every buffer's ``Size`` and every op's ``Cycles`` multiplied by a factor
    drawn uniformly from ``[1 - jitter, 1 + jitter]`` (seeded; sizes stay at least 1, a
    buffer's ALLOC and FREE agree). The structure is unchanged; the sizes may no longer fit:
    an op whose buffers outgrow their memory makes Problems 2 and 3 infeasible, which
    ``npuopt solve`` reports (exit 2)."""
    if not 0.0 <= jitter < 1.0:
        raise ValueError(f"jitter must be in [0, 1), not {jitter}")
    rng = np.random.default_rng([seed, 1_000_003])
    size_of: dict[int, int] = {}
    nodes = []
    for node in graph["Nodes"]:
        node = dict(node)
        if "BufId" in node:
            b = node["BufId"]
            if b not in size_of:
                factor = rng.uniform(1.0 - jitter, 1.0 + jitter)
                size_of[b] = max(1, round(node["Size"] * factor))
            node["Size"] = size_of[b]
        else:
            node["Cycles"] = max(0, round(node["Cycles"] * rng.uniform(1.0 - jitter, 1.0 + jitter)))
        nodes.append(node)
    return {"Nodes": nodes, "Edges": graph["Edges"]}


def _shape(kind: type[T], values: dict[str, int]) -> T:
    """A family's shape from keyword values; unknown names are an error naming the fields."""
    fields = kind.__dataclass_fields__  # type: ignore[attr-defined]
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(
            f"{kind.__name__} has no parameter {unknown[0]!r}; it has {', '.join(fields)}"
        )
    return kind(**values)
