"""Sweep-cut study for Problem 1 bounds: how cheap can a cut through an order be?

Any order of a graph passes, just after its k-th *marker* op, through a set D of k markers
closed under predecessors (among markers). A buffer with a user at or before a marker of D and
a user at or after a marker outside D is live there: ``max_k min_D`` of those buffers' units is
a lower bound on ``max V_stay``. A MOVE is counted with the CUBE op its L0B buffer feeds (one
L0B buffer is live at a time, so the MOVE runs next to it). The markers are the CUBE ops.

For each fraction k/n asked, CP-SAT looks for the cheapest D: the value it finds caps what
this argument can prove at that k; its bound, when above 0, is proven. On Conv_Case1
(docs/decisions.md, "Bounds") the cuts found are far below half of the best answer, so the
argument cannot certify it. Research code, not part of ``npuopt``.

Usage::

    python benchmarks/sweep_cut.py Conv_Case1 [--fractions 0.3 0.5 0.7] [--seconds 90]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

from ortools.sat.python import cp_model

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from npuopt.solver.hardware import COUNTED_MEMORIES  # noqa: E402
from npuopt.solver.instance import Instance, load_instance, propagate_bits  # noqa: E402

CUBE_OPS = ("CONV", "CONV_ADD", "MATMUL")


def _bits(mask: int) -> Iterator[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def sweep_model(
    instance: Instance,
) -> tuple[int, list[tuple[int, int]], list[tuple[int, list[int], list[int]]]]:
    """Markers, their precedences (cover pairs) and per buffer (units, the first markers at or
    after a user, the last markers at or before a user)."""
    markers = [v for v in instance.op_ids if instance.nodes[v].op in CUBE_OPS]
    index = {m: i for i, m in enumerate(markers)}
    topo = instance.topological_order
    anc = [0] * instance.n_nodes
    desc = [0] * instance.n_nodes
    for v, bits in propagate_bits(topo, instance.predecessors, index, keep=True):
        anc[v] = bits
    for v, bits in propagate_bits(topo[::-1], instance.successors, index, keep=True):
        desc[v] = bits
    strict_desc = [desc[m] & ~(1 << i) for i, m in enumerate(markers)]
    strict_anc = [anc[m] & ~(1 << i) for i, m in enumerate(markers)]

    def first(mask: int) -> list[int]:
        cover = 0
        for i in _bits(mask):
            cover |= strict_desc[i]
        return list(_bits(mask & ~cover))

    def last(mask: int) -> list[int]:
        cover = 0
        for i in _bits(mask):
            cover |= strict_anc[i]
        return list(_bits(mask & ~cover))

    buffers = instance.buffers
    rows = []
    for buf in buffers.values():
        if buf.memory not in COUNTED_MEMORIES:
            continue
        users = set(buf.users)
        for u in buf.users:  # a MOVE runs next to the CUBE op its L0B buffer feeds
            for b in instance.bufs_of(u):
                if buffers[b].memory == "L0B":
                    users.update(w for w in buffers[b].users if w in index)
        after, before = 0, 0
        for u in users:
            after |= desc[u]
            before |= anc[u]
        if after and before:
            rows.append((buf.size_units, first(after), last(before)))
    precedences = [(j, i) for i in range(len(markers)) for j in last(strict_anc[i])]
    return len(markers), precedences, rows


def cheapest_cut(
    n: int,
    precedences: list[tuple[int, int]],
    rows: list[tuple[int, list[int], list[int]]],
    k: int,
    seconds: float,
) -> tuple[str, float, float]:
    """CP-SAT's status, best cut found and proven bound for ``|D| = k``."""
    model = cp_model.CpModel()
    done = [model.new_bool_var(f"d{i}") for i in range(n)]
    for j, i in precedences:
        model.add_implication(done[i], done[j])
    model.add(sum(done) == k)
    cost = []
    for units, after, before in rows:
        started, unfinished, live = (model.new_bool_var("") for _ in range(3))
        for i in after:
            model.add_implication(done[i], started)
        for i in before:
            model.add_implication(~done[i], unfinished)
        model.add_bool_or([~started, ~unfinished, live])
        cost.append(units * live)
    model.minimize(sum(cost))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = seconds
    solver.parameters.num_workers = 2
    status = solver.solve(model)
    return solver.status_name(status), solver.objective_value, solver.best_objective_bound


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case")
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.3, 0.5, 0.7])
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--instances", type=Path, default=ROOT.parent / "shared" / "instances")
    args = parser.parse_args()
    instance = load_instance(args.instances / f"{args.case}.json")
    n, precedences, rows = sweep_model(instance)
    print(f"{args.case}: {n} markers, {len(rows)} buffers")
    for fraction in args.fractions:
        k = round(fraction * n)
        status, found, bound = cheapest_cut(n, precedences, rows, k, args.seconds)
        print(
            f"k = {k:,} ({fraction:.0%}): {status}, "
            f"cheapest cut found {found:,.0f}, bound {bound:,.0f}"
        )


if __name__ == "__main__":
    main()
