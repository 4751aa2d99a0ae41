"""Invariance benchmark: does an answer depend on how the graph's nodes are named?

Node ids and BufIds are names. This runs ``npuopt solve`` (one process per graph, like
``benchmarks/cases.py``) on

* each official case and seeded renumberings of it (``npuopt rename``: node ids from a random
  topological order, BufIds permuted, every ``Bufs`` list shuffled);
* unions of official cases, their ids interleaved, against the parts solved apart (the original
  rows): P1 against the largest part's, P2 against the sum, P3 against the sum (one part after
  the other);
* generated graphs of every family and a renumbering of each.

Usage::

    python benchmarks/invariance.py [--time-limit 600] [--seeds 1 2] [--cases NAME...]
        [--unions] [--families] [--family-time-limit 60] [--family-nodes 2000]
        [--jobs 2] [--speed F] [--name invariance] [--out DIR]

Writes ``results/<date>_<name>/``: ``runs/<graph>/`` (files and summary of every run),
``table.md`` and ``README.md`` (command, commit, how to rebuild the renamed graphs, which are
not stored: they are the official files under other names). Every file is checked again with
``npuopt evaluate``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from cases import NPUOPT, PUBLIC, answers, full_options, run_case, write_study  # noqa: E402

from npuopt.instances import OFFICIAL_CASES, official_case  # noqa: E402
from npuopt.instances.generator import FAMILIES  # noqa: E402

#: Unions of official cases measured with --unions (the issue's pair first).
UNIONS = (
    ("FlashAttention_Case0", "Conv_Case0"),
    ("Matmul_Case0", "FlashAttention_Case0", "Conv_Case0"),
)
#: Targets of issue 21 (renumbered / original), per problem.
TOLERANCE = {1: 1.02, 2: 1.10, 3: 1.05}


def _rename(sources: list[Path], seed: int, out: Path) -> Path:
    subprocess.run(
        [*NPUOPT, "rename", *map(str, sources), "--seed", str(seed), "--out", str(out)],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return out


def _generate(family: str, nodes: int, out: Path) -> Path:
    subprocess.run(
        [*NPUOPT, "generate", family, "--nodes", str(nodes), "--seed", "1", "--out", str(out)],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return out


def _cell(value: int | None, reference: int | None, problem: int) -> str:
    if value is None:
        return "-"
    if not reference:
        return f"{value:,}"
    ratio = value / reference
    flag = "" if ratio <= TOLERANCE[problem] else " ✗"
    return f"{value:,} ({ratio:.3f}{flag})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--name", default="invariance")
    parser.add_argument("--time-limit", type=float, default=600.0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--cases", nargs="+", choices=OFFICIAL_CASES)
    parser.add_argument("--unions", action="store_true", help="also the unions of UNIONS")
    parser.add_argument("--families", action="store_true", help="also generated graphs")
    parser.add_argument("--family-time-limit", type=float, default=60.0)
    parser.add_argument("--family-nodes", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--workers", type=int, default=1, help="processes of each solve")
    parser.add_argument("--speed", type=float)
    parser.add_argument("--seed", type=int, default=0, help="npuopt's own seed")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    today = dt.date.today().isoformat()
    out = args.out or ROOT / "results" / f"{today}_{args.name}"
    work = Path(tempfile.mkdtemp(prefix="npuopt-invariance-"))

    # (label, graph path, reference label or None, kind, time limit)
    plan: list[tuple[str, Path, str | None, str, float]] = []
    cases = [c for c in (args.cases or OFFICIAL_CASES) if official_case(c) is not None]
    for case in cases:
        path = official_case(case)
        assert path is not None
        plan.append((case, path, None, "official", args.time_limit))
        for seed in args.seeds:
            copy = _rename([path], seed, work / f"{case}_r{seed}.json")
            plan.append((copy.stem, copy, case, "renumbered", args.time_limit))
    if args.unions:
        for parts in UNIONS:
            if not all(p in cases for p in parts):
                continue
            sources = [official_case(p) for p in parts]
            label = "+".join(p.replace("FlashAttention", "FA") for p in parts)
            graph = _rename([s for s in sources if s], 1, work / f"{label}_u1.json")
            plan.append((graph.stem, graph, "+".join(parts), "union", args.time_limit))
    if args.families:
        for family in FAMILIES:
            graph = _generate(family, args.family_nodes, work / f"{family}{args.family_nodes}.json")
            plan.append((graph.stem, graph, None, "generated", args.family_time_limit))
            copy = _rename([graph], 1, work / f"{graph.stem}_r1.json")
            plan.append((copy.stem, copy, graph.stem, "renumbered", args.family_time_limit))

    def solve(item: tuple[str, Path, str | None, str, float]) -> tuple[str, dict]:
        label, path, _, _, limit = item
        options = full_options(limit, args.seed, args.speed, args.workers)
        row = run_case(path, out / "runs" / label, options)
        print(f"{label}: {row['wall_s']} s, {answers(row)}", file=sys.stderr)
        return label, row

    with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        rows = dict(pool.map(solve, plan))

    lines = [
        "| graph | kind | compared with | P1 max V_stay | P2 traffic | P3 makespan | P3 traffic "
        "| wall s | files valid |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, _, reference, kind, _ in plan:
        row = rows[label]
        values = answers(row)
        after: list[str] = []
        if reference is None:
            refs: tuple[int | None, ...] = (None, None, None)
            compared = "-"
        elif kind == "union":
            apart = [answers(rows[p]) for p in reference.split("+")]
            refs = (
                max(v[0] or 0 for v in apart),
                sum(v[1] or 0 for v in apart),
                sum(v[2] or 0 for v in apart),
            )
            compared = "parts apart: max / sum / sum"
            # The same parts inside the union's run (each on its share of the one limit).
            inside = row.get("parts", [])
            if inside and all("p3" in part for part in inside):
                same = (
                    max(part["p1"] for part in inside),
                    sum(part["p2"]["extra_traffic_units"] for part in inside),
                    sum(part["p3"]["makespan_cycles"] for part in inside),
                )
                cells = [
                    _cell(v, r, p) for p, (v, r) in enumerate(zip(values, same, strict=True), 1)
                ]
                after.append(
                    f"| {label} | union | its parts, same budget: max / sum / sum | "
                    + " | ".join(cells)
                    + f" | {row.get('p3', {}).get('extra_traffic_units', '-'):,} | - | - |"
                )
        else:
            refs = answers(rows[reference])
            compared = reference
        cells = [_cell(v, r, p) for p, (v, r) in enumerate(zip(values, refs, strict=True), 1)]
        lines.append(
            f"| {label} | {kind} | {compared} | "
            + " | ".join(cells)
            + f" | {row.get('p3', {}).get('extra_traffic_units', '-'):,} | {row['wall_s']} | "
            + ("yes" if row["rechecked"] else "NO")
            + " |"
        )
        lines += after
    table = "\n".join(lines)
    public = ", ".join(f"{c} {v[0]:,} / {v[1]:,} / {v[2]:,}" for c, v in PUBLIC.items())
    write_study(
        out,
        f"{args.name}: the same problems under other names ({today})",
        table,
        "machine: 2 cores, "
        f"{max(args.jobs, 1)} graph(s) at once; reuse rule: residency.\n\n"
        "Renamed graphs are not stored (they are the official files under other names); "
        "rebuild one with `npuopt rename ../shared/instances/<case>.json --seed S --out "
        "<case>_rS.json`, a union with `npuopt rename A.json B.json --seed 1 --out U.json`, "
        "a generated one with `npuopt generate <family> --nodes N --seed 1`.\n\n"
        "Each cell: the value, and in brackets its ratio to the graph it is compared with "
        f"(✗ above issue 21's tolerance: P1 {TOLERANCE[1]}, P2 {TOLERANCE[2]}, "
        f"P3 {TOLERANCE[3]}). A union is compared twice: with its parts solved apart, each on "
        "a whole limit, and with the same parts inside the union's own run (each on its share "
        "of one limit; the union puts their answers together, so P1 is their largest, P2 their "
        "sum and P3 at most their sum: below 1 is the pipes' overlap across parts).",
        f"\nBest public figures (P1 / P2 / P3): {public}.\n",
    )
    print(table)


if __name__ == "__main__":
    main()
