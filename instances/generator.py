"""Seeded generators of contest-shaped instances.

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
from typing import Any

import numpy as np

FAMILIES: tuple[str, ...] = ("conv",)

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
            if writer is not None:
                self.edges.add((writer, v))
        for b in writes:
            if not self.users[b]:
                self.edges.add((self.buffer_nodes[b][0], v))
            elif b in self.last_writer:
                self.edges.add((self.last_writer[b], v))  # accumulation chain
            self.last_writer[b] = v
        for b in writes + reads:
            self.users[b].append(v)
        return v

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


def generate(family: str, seed: int, nodes: int | None = None, **shape: int) -> dict[str, Any]:
    """Generate a graph of ``family`` from ``seed``, about ``nodes`` nodes or an explicit shape."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; choose from {', '.join(FAMILIES)}")
    rng = np.random.default_rng(seed)
    conv_shape = ConvShape.for_nodes(nodes) if nodes is not None else ConvShape(**shape)
    return conv(conv_shape, rng)
