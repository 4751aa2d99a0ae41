"""Foundation benchmark: load, bounds and evaluator times on the official cases.

Usage: ``python benchmarks/foundation.py [--nodes N]`` (official cases, plus a generated conv graph
of about N nodes, default 36,000: Conv_Case1's size).

For Problem 2 it builds a spill-heavy solution: every L1 buffer with several users is spilled and
reloaded between each pair of consecutive uses, and every residency segment gets an address range
of its own in a memory enlarged to hold them all, so the solution is valid and the evaluator has
to walk thousands of spills. Times are wall-clock seconds on this machine; compare them within one
run.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from npuopt.instances import OFFICIAL_CASES, official_case
from npuopt.instances.generator import generate
from npuopt.solver.bounds import makespan_bound, order_bound
from npuopt.solver.evaluate import evaluate
from npuopt.solver.hardware import MEMORIES, Hardware
from npuopt.solver.instance import Instance, load_instance
from npuopt.solver.solution import Solution, Spill


def spill_heavy(instance: Instance) -> tuple[Solution, Hardware]:
    """A valid solution with a spill between every two consecutive uses of each L1 buffer."""
    order = list(instance.topological_order)
    pos = {v: p for p, v in enumerate(order)}
    n = instance.n_nodes
    spills: list[Spill] = []
    inserts: list[tuple[float, int]] = []  # (fractional position, node)
    next_free = dict.fromkeys(MEMORIES, 0)
    offsets: dict[int, int] = {}
    for b, buf in instance.buffers.items():
        offsets[b] = next_free[buf.memory]
        next_free[buf.memory] += buf.size_units
        if buf.memory != "L1":
            continue
        uses = sorted(pos[u] for u in buf.users)
        for a, c in zip(uses, uses[1:], strict=False):
            k = len(spills)
            spills.append(Spill(b, next_free[buf.memory]))
            next_free[buf.memory] += buf.size_units
            inserts += [
                (a + 0.25 + 0.001 * k / n, n + 2 * k),
                (c - 0.25 + 0.001 * k / n, n + 2 * k + 1),
            ]
    full = sorted([(float(p), v) for p, v in enumerate(order)] + inserts)
    hardware = Hardware(capacity={m: max(next_free[m], 1) for m in MEMORIES})
    return Solution(
        order=tuple(v for _, v in full), offsets=offsets, spills=tuple(spills)
    ), hardware


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--nodes", type=int, default=36_000)
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="npuopt-bench-"))
    generated = scratch / f"conv{args.nodes // 1000}k_seed3.json"
    data = generate("conv", seed=3, nodes=args.nodes)
    generated.write_text(json.dumps(data))
    cases = [(name, official_case(name)) for name in OFFICIAL_CASES] + [(generated.stem, generated)]
    print(
        "| case | nodes | load s | P1 bound s | P3 bound s | P1 eval s | spills | P2 eval s "
        "| valid |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, path in cases:
        if path is None:
            print(f"| {name} | skipped: not found | | | | | | | |")
            continue
        t = time.perf_counter()
        inst = load_instance(path)
        t_load = time.perf_counter() - t
        t = time.perf_counter()
        order_bound(inst)
        t_p1b = time.perf_counter() - t
        t = time.perf_counter()
        makespan_bound(inst)
        t_p3b = time.perf_counter() - t
        t = time.perf_counter()
        evaluate(inst, Solution(order=inst.topological_order), 1)
        t_p1 = time.perf_counter() - t
        sol, hw = spill_heavy(inst)
        inst_hw = load_instance(path, hw)
        t = time.perf_counter()
        result = evaluate(inst_hw, sol, 2, hw)
        t_p2 = time.perf_counter() - t
        print(
            f"| {name} | {inst.n_nodes:,} | {t_load:.2f} | {t_p1b:.2f} | {t_p3b:.2f} | {t_p1:.2f} "
            f"| {len(sol.spills):,} | {t_p2:.2f} | {result.valid} |"
        )


if __name__ == "__main__":
    main()
