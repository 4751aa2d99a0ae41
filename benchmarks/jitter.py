"""Jitter benchmark: does every placeable graph get valid Problem 2 and 3 answers?

Generates graphs of every family (50 to 3,000 nodes) with sizes and cycles jittered by up to
+-F (``npuopt generate --jitter``), and solves each on three hardware descriptions: the
contest's memories, *tight* ones (each memory just large enough for the op needing most of it,
plus a little) and tight ones with offsets aligned to 16 units. A graph an op of which cannot
fit (``Instance.placement_error``) must be refused before solving; every other one must end
with valid Problem 2 and 3 answers. Each run is the pipeline (``solve_instance``) in one of
``--jobs`` worker processes; ``--full-every K`` runs every K-th graph with the CP-SAT stages
too. A run that raises is a failure, recorded with its error.

Usage::

    python benchmarks/jitter.py [--graphs 100] [--jitter 0.25] [--time-limit 5]
        [--full-every 10] [--full-time-limit 20] [--jobs 1] [--name jitter] [--out DIR]

Writes ``results/<date>_<name>/``: ``runs.csv`` (graph, family, nodes, hardware, method,
placeable, P2/P3 validity and values, runtime), the tight hardware files, ``table.md`` and
``README.md`` (command, commit, failures). Exits 1 when a placeable graph got no valid answer.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from itertools import repeat
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from cases import write_study  # noqa: E402

from npuopt.instances.generator import FAMILIES, generate  # noqa: E402
from npuopt.solver.evaluate import evaluate  # noqa: E402
from npuopt.solver.hardware import DEFAULT_HARDWARE, MEMORIES, Hardware  # noqa: E402
from npuopt.solver.instance import Instance, parse_instance  # noqa: E402
from npuopt.solver.solve import SolveOptions, solve_instance  # noqa: E402

#: Node counts cycled through, small to large.
SIZES = (50, 120, 300, 700, 1500, 3000)
#: Units added to each memory's tightest capacity, cycled through.
SLACKS = (0, 8, 32, 128)


def tight(instance: Instance, slack: int, alignment: int) -> Hardware:
    """Each memory as large as the op needing most of it (aligned), plus ``slack``."""
    capacity = dict.fromkeys(MEMORIES, alignment)
    for v in instance.op_ids:
        need: dict[str, int] = {}
        for b in instance.bufs_of(v):
            buf = instance.buffers[b]
            need[buf.memory] = need.get(buf.memory, 0) + -(-buf.size_units // alignment) * alignment
        for memory, units in need.items():
            capacity[memory] = max(capacity[memory], units)
    for buf in instance.buffers.values():
        aligned = -(-buf.size_units // alignment) * alignment
        capacity[buf.memory] = max(capacity[buf.memory], aligned)
    return Hardware(
        capacity={m: c + slack for m, c in capacity.items()},
        alignment=dict.fromkeys(MEMORIES, alignment) if alignment > 1 else {},
    )


def toml(hardware: Hardware) -> str:
    lines = ["[capacity]"] + [f"{m} = {c}" for m, c in hardware.capacity_units.items()]
    if hardware.alignment_units:
        lines += ["", "[alignment]"] + [f"{m} = {a}" for m, a in hardware.alignment_units.items()]
    return "\n".join(lines) + "\n"


def run_graph(i: int, args: argparse.Namespace, out: Path) -> tuple[list[dict], list[str]]:
    """Generate graph ``i`` and solve it on its three hardware descriptions."""
    loose = Hardware(capacity=dict.fromkeys(MEMORIES, 10**9))
    rows, failures = [], []
    family, nodes = FAMILIES[i % len(FAMILIES)], SIZES[(i // len(FAMILIES)) % len(SIZES)]
    name = f"{family}{nodes}_j{i}"
    instance = parse_instance(
        generate(family, i, nodes=nodes, jitter=args.jitter), name=name, hardware=loose
    )
    slack = SLACKS[i % len(SLACKS)]
    hardwares = {
        "contest": DEFAULT_HARDWARE,
        f"tight+{slack}": tight(instance, slack, 1),
        f"tight16+{slack}": tight(instance, slack, 16),
    }
    full = args.full_every > 0 and i % args.full_every == 0
    for label, hardware in hardwares.items():
        if label != "contest":
            (out / "hardware" / f"{name}_{label}.toml").write_text(toml(hardware))
        too_big = any(b.size_units > hardware.capacity(b.memory) for b in instance.buffers.values())
        error = "a buffer exceeds its memory" if too_big else instance.placement_error(hardware)
        row = {
            "graph": name,
            "family": family,
            "nodes": instance.n_nodes,
            "hardware": label,
            "method": "full" if full else "heuristics",
            "placeable": error is None,
        }
        if error is None:
            options = SolveOptions(
                time_limit_s=args.full_time_limit if full else args.time_limit,
                hardware=hardware,
                method="full" if full else "heuristics",
            )
            began = time.monotonic()
            try:
                result = solve_instance(instance, options)
            except Exception as exc:  # a crash is a failure of this run, not of the study
                row["error"] = f"{type(exc).__name__}: {exc}"
                result = None
            row["runtime_s"] = round(time.monotonic() - began, 2)
            for p in (2, 3):
                answer = result.best(p) if result is not None else None
                judged = evaluate(instance, answer.solution, p, hardware) if answer else None
                row[f"p{p}_valid"] = bool(judged and judged.valid)
                row[f"p{p}_traffic"] = judged.extra_traffic_units if judged else None
                row[f"p{p}_makespan"] = judged.makespan_cycles if judged else None
            if not (row["p2_valid"] and row["p3_valid"]):
                failures.append(f"{name} on {label}")
        rows.append(row)
        print(name, label, {k: v for k, v in row.items() if k.startswith("p")}, flush=True)
    return rows, failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--graphs", type=int, default=100, help="graphs (x3 hardware = runs)")
    parser.add_argument("--jitter", type=float, default=0.25)
    parser.add_argument("--time-limit", type=float, default=5.0)
    parser.add_argument("--full-every", type=int, default=10)
    parser.add_argument("--full-time-limit", type=float, default=20.0)
    parser.add_argument("--jobs", type=int, default=1, help="graphs solved at once (processes)")
    parser.add_argument("--name", default="jitter")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    today = dt.date.today().isoformat()
    out = args.out or ROOT / "results" / f"{today}_{args.name}"
    (out / "hardware").mkdir(parents=True, exist_ok=True)
    rows, failures = [], []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:  # graph order kept by map
        for mine, failed in pool.map(run_graph, range(args.graphs), repeat(args), repeat(out)):
            rows += mine
            failures += failed
    with (out / "runs.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=sorted({k for r in rows for k in r}, key=str))
        writer.writeheader()
        writer.writerows(rows)
    placeable = [r for r in rows if r["placeable"]]
    lines = [
        "| family | runs | placeable | P2 and P3 valid | refused before solving |",
        "|---|---|---|---|---|",
    ]
    for family in FAMILIES:
        mine = [r for r in rows if r["family"] == family]
        ok = [r for r in mine if r["placeable"] and r["p2_valid"] and r["p3_valid"]]
        lines.append(
            f"| {family} | {len(mine)} | {sum(r['placeable'] for r in mine)} | {len(ok)} | "
            f"{sum(not r['placeable'] for r in mine)} |"
        )
    ok_all = sum(r["p2_valid"] and r["p3_valid"] for r in placeable)
    lines.append(
        f"| all | {len(rows)} | {len(placeable)} | {ok_all} | {len(rows) - len(placeable)} |"
    )
    table = "\n".join(lines)
    write_study(
        out,
        f"{args.name}: valid Problem 2 and 3 answers on jittered graphs ({today})",
        table,
        f"machine: 2 cores.\n\n{args.graphs} generated graphs (every family, "
        f"{SIZES[0]}-{SIZES[-1]} nodes, sizes and cycles jittered by up to {args.jitter:g}), "
        "each on the contest's memories and on two tight hardware files (`hardware/`: each "
        "memory just large enough for the op needing most of it plus "
        f"{'/'.join(map(str, SLACKS))} units, offsets aligned to 1 or 16). A graph one op of "
        "which cannot fit is refused before solving (`npuopt solve` exits 2 naming it); every "
        "other one must end with valid Problem 2 and 3 answers, judged again by the evaluator. "
        f"Every {args.full_every}-th graph runs the CP-SAT stages too.",
        f"\nFailures: {len(failures)}"
        + (": " + ", ".join(failures) if failures else "")
        + ". Per run: `runs.csv`.\n",
    )
    print(table)
    if failures:
        sys.exit(f"{len(failures)} placeable runs without valid answers: {failures[:5]}")


if __name__ == "__main__":
    main()
