"""Heuristics vs optimal: how far each greedy warm start is from a proven optimum.

Usage::

    python benchmarks/heuristics_vs_optimal.py [--nodes 100] [--seeds 4] [--time-limit 20]
                                               [--out DIR]

On generated instances small enough for the full CP-SAT models to prove their optimum (every
family of ``npuopt generate``, ``--seeds`` seeds each, about ``--nodes`` nodes):

* **P1**: each list-scheduler policy's ``max V_stay`` against the full ordering model;
* **P2**: with each memory cut to 70% of the program order's address-free peak (never below
  what one op needs), each placement policy's traffic against the full placement model *for
  the same order* (the program-policy list schedule);
* **P3**: the pipe compaction's makespan against the full pipe model *for the same placement*.

Only proven optima count (a run whose model does not close is listed, not scored). Writes
``results/<date>_heuristics-vs-optimal/`` with ``runs.csv`` (one row per instance, problem and
heuristic: value, optimum, gap, whether proven), ``table.md`` (gap distribution per heuristic:
mean, median, max, share at the optimum) and a README with the command and commit.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from npuopt.heuristics.ordering import POLICIES, list_schedule, program_rank  # noqa: E402
from npuopt.heuristics.pipes import compact  # noqa: E402
from npuopt.heuristics.placement import PLACEMENT_POLICIES, PlacementError, place  # noqa: E402
from npuopt.instances.generator import FAMILIES, generate  # noqa: E402
from npuopt.models.ordering import OrderingData, solve_order  # noqa: E402
from npuopt.models.pipes import frame, solve_pipes  # noqa: E402
from npuopt.models.placement import solve_placement  # noqa: E402
from npuopt.solver.evaluate import evaluate, evaluate_order  # noqa: E402
from npuopt.solver.hardware import DEFAULT_HARDWARE, MEMORIES, Hardware  # noqa: E402
from npuopt.solver.instance import Instance, parse_instance  # noqa: E402
from npuopt.solver.result import Status  # noqa: E402
from npuopt.solver.solution import Solution, op_order_of  # noqa: E402


def tight_hardware(instance: Instance, order: list[int]) -> Hardware:
    """Each memory at 70% of the order's address-free peak, never below one op's need."""
    live = dict.fromkeys(MEMORIES, 0)
    peak = dict.fromkeys(MEMORIES, 0)
    for v in order:
        b = instance.buffer_of_node[v]
        if b is None:
            continue
        buf = instance.buffers[b]
        live[buf.memory] += buf.size_units if v == buf.alloc else -buf.size_units
        peak[buf.memory] = max(peak[buf.memory], live[buf.memory])
    need = dict.fromkeys(MEMORIES, 1)
    for v in instance.op_ids:
        per: dict[str, int] = {}
        for b in instance.bufs_of(v):
            per[instance.buffers[b].memory] = per.get(instance.buffers[b].memory, 0) + (
                instance.buffers[b].size_units
            )
        for memory, units in per.items():
            need[memory] = max(need[memory], units)
    capacity = {
        m: min(DEFAULT_HARDWARE.capacity(m), max(need[m], int(0.7 * peak[m]))) for m in MEMORIES
    }
    return Hardware(capacity=capacity)


def study(instance: Instance, time_limit: float) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []

    def add(problem: int, method: str, value: int | None, optimum: int | None, proven: bool):
        gap = (value - optimum) / optimum if value is not None and optimum else None
        if value is not None and optimum == 0:
            gap = 0.0 if value == 0 else None
        rows.append(
            {
                "instance": instance.name,
                "nodes": instance.n_nodes,
                "problem": problem,
                "heuristic": method,
                "value": value,
                "optimum": optimum,
                "proven": proven,
                "gap": "" if gap is None else f"{gap:.4f}",
            }
        )

    # P1: each policy against the full ordering model.
    orders = {p: list_schedule(instance, p, program_rank(instance)) for p in POLICIES}
    valid = {p: o for p, o in orders.items() if o is not None and evaluate_order(instance, o).valid}
    start = next(iter(valid.values()))
    full = solve_order(
        OrderingData(instance),
        op_order_of(instance, start),
        None,
        time_limit_s=time_limit,
        tie_break=False,
        deterministic=True,
    )
    proven = full.status is Status.OPTIMAL
    for policy in POLICIES:
        order = valid.get(policy)
        value = evaluate_order(instance, order).max_v_stay_units if order else None
        add(1, policy, value, full.objective if proven else None, proven)

    # P2: each placement policy on the program order, against the full placement model.
    order = orders["program"] or start
    hardware = tight_hardware(instance, order)
    best = solve_placement(
        instance, Solution(order=tuple(order)), hardware, time_limit_s=time_limit,
        deterministic=True,
    )  # fmt: skip
    proven = best.status is Status.OPTIMAL
    placed: Solution | None = None
    for policy in PLACEMENT_POLICIES:
        try:
            solution = place(instance, order, hardware, policy)
        except PlacementError:
            add(2, policy, None, best.objective if proven else None, proven)
            continue
        judged = evaluate(instance, solution, 2, hardware)
        add(2, policy, judged.extra_traffic_units, best.objective if proven else None, proven)
        if placed is None:
            placed = solution

    # P3: the pipe compaction of that placement against the full pipe model.
    if placed is not None:
        compacted = compact(instance, placed)
        timed = frame(instance, compacted, hardware)
        if timed is not None:
            optimum = solve_pipes(
                instance, timed, move_addresses=False, time_limit_s=time_limit,
                deterministic=True,
            )  # fmt: skip
            proven = optimum.status is Status.OPTIMAL
            add(3, "compact", timed.makespan, optimum.objective if proven else None, proven)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--time-limit", type=float, default=20.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    today = dt.date.today().isoformat()
    out = args.out or ROOT / "results" / f"{today}_heuristics-vs-optimal"
    rows: list[dict[str, object]] = []
    for family in FAMILIES:
        for seed in range(args.seeds):
            data = generate(family, seed=seed, nodes=args.nodes)
            instance = parse_instance(data, name=f"{family}-{seed}", source=f"generated {family}")
            rows += study(instance, args.time_limit)
            print(f"{instance.name}: {len(rows)} rows", file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    with (out / "runs.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    columns = ("problem", "heuristic", "instances", "proven", "mean gap", "median gap")
    columns += ("max gap", "at optimum")
    table = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    keys = sorted({(r["problem"], r["heuristic"]) for r in rows}, key=str)
    for problem, heuristic in keys:
        mine = [r for r in rows if (r["problem"], r["heuristic"]) == (problem, heuristic)]
        gaps = [float(r["gap"]) for r in mine if r["gap"] != ""]  # type: ignore[arg-type]
        proven = sum(bool(r["proven"]) for r in mine)
        if gaps:
            at = sum(g == 0 for g in gaps)
            cells = [
                f"{100 * statistics.fmean(gaps):.1f}%",
                f"{100 * statistics.median(gaps):.1f}%",
                f"{100 * max(gaps):.1f}%",
                f"{at}/{len(gaps)}",
            ]
        else:
            cells = ["-"] * 4
        table.append(
            f"| P{problem} | {heuristic} | {len(mine)} | {proven} | " + " | ".join(cells) + " |"
        )
    (out / "table.md").write_text("\n".join(table) + "\n")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    (out / "README.md").write_text(
        "# Heuristics vs proven optima\n\n"
        "Question: how far is each greedy warm start from the optimum the full CP-SAT model "
        "proves, on generated instances small enough to prove it?\n\n"
        f"Command: `python benchmarks/heuristics_vs_optimal.py --nodes {args.nodes} --seeds "
        f"{args.seeds} --time-limit {args.time_limit:g}`  \nCommit: `{commit}`; date {today}; "
        "2 cores. P2 compares placements of one order (the program-policy list schedule) with "
        "memories cut to 70% of its peak; P3 compares schedules of one placement. A gap is "
        "(heuristic - optimum) / optimum; a heuristic that finds no placement has no gap (its "
        "row says so in runs.csv). Instances: every family of `npuopt generate` with seeds "
        f"0..{args.seeds - 1} (regenerate them from the family and seed).\n\n"
        + "\n".join(table)
        + "\n"
    )
    print("\n".join(table))


if __name__ == "__main__":
    main()
