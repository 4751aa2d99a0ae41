"""Heuristics benchmark (issue 3): ``npuopt solve`` on the official cases and a generated
Conv_Case1-sized graph, one process per case so wall time and peak memory are per case.

Usage::

    python benchmarks/heuristics.py [--out results/<date>_heuristics] [--time-limit 600]
                                    [--seed 0] [--nodes 36000]

Writes into ``--out``: ``runs/<case>/`` (the attachment files and summary.json of that run),
``runs.csv`` (one row per case), ``table.md`` (the results table) and ``README.md`` (question,
command, commit). Every figure comes from the evaluator through ``npuopt solve``; afterwards each
written file is checked again with ``npuopt evaluate``.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from instances import OFFICIAL_CASES, official_case  # noqa: E402

NPUOPT = [sys.executable, "-m", "solver.cli"]
PUBLIC = {  # best public results (FINDINGS.md): P1, P2 traffic, P3 makespan
    "Matmul_Case0": (9_216, 28_800, 186_820),
    "Matmul_Case1": (34_816, 430_208, 1_771_383),
    "FlashAttention_Case0": (4_500, 3_584, 36_344),
    "FlashAttention_Case1": (7_588, 32_512, 152_364),
    "Conv_Case0": (7_488, 57_408, 515_634),
}


def run_case(graph: Path, out: Path, time_limit: float, seed: int) -> dict[str, object]:
    """Solve one graph in its own process; return its summary row with wall time and peak RSS."""
    cmd = [
        *NPUOPT,
        "solve",
        str(graph),
        "--out",
        str(out),
        "--time-limit",
        str(time_limit),
        "--seed",
        str(seed),
        "--quiet",
    ]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed with status {status}")
    case = json.loads((out / "summary.json").read_text())["cases"][0]
    case["wall_s"] = round(wall, 2)
    case["peak_rss_mib"] = round(usage.ru_maxrss / 1024, 1)
    for p in (1, 2, 3):  # check every file again, independently of the run
        check = subprocess.run(
            [
                *NPUOPT,
                "evaluate",
                str(graph),
                "--problem",
                str(p),
                "--dir",
                str(out / f"Problem{p}"),
                "--json",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        case[f"p{p}_rechecked"] = check.returncode == 0 and json.loads(check.stdout)["valid"]
    return case


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    today = dt.date.today().isoformat()
    parser.add_argument("--out", type=Path, default=ROOT / "results" / f"{today}_heuristics")
    parser.add_argument("--time-limit", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nodes", type=int, default=36_000, help="size of the generated graph")
    args = parser.parse_args()

    graphs = [(name, official_case(name)) for name in OFFICIAL_CASES]
    scratch = Path(tempfile.mkdtemp(prefix="npuopt-bench-"))
    generated = scratch / f"conv{args.nodes // 1000}k_seed3.json"
    subprocess.run(
        [
            *NPUOPT,
            "generate",
            "conv",
            "--nodes",
            str(args.nodes),
            "--seed",
            "3",
            "--out",
            str(generated),
        ],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    graphs.append((generated.stem, generated))

    rows = []
    for name, path in graphs:
        if path is None:
            print(f"{name}: skipped (not found)", file=sys.stderr)
            continue
        row = run_case(path, args.out / "runs" / name, args.time_limit, args.seed)
        rows.append(row)
        print(f"{name}: done in {row['wall_s']} s", file=sys.stderr)

    fields = [
        "case",
        "p1_max_v_stay",
        "p1_bound",
        "p2_traffic",
        "p2_spills",
        "p2_makespan",
        "p3_makespan",
        "p3_traffic",
        "p3_bound",
        "wall_s",
        "peak_rss_mib",
        "all_rechecked",
    ]
    table = [
        "| case | P1 max V_stay (bound) | public P1 | P2 traffic (spills) | public P2 "
        "| P2 makespan | P3 makespan (bound) | public P3 | wall s | peak RSS MiB | files valid |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "runs.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(fields)
        for r in rows:
            p1, p2, p3 = r["p1"], r["p2"], r["p3"]
            ok = all(r[f"p{p}_rechecked"] for p in (1, 2, 3))
            writer.writerow(
                [
                    r["case"],
                    p1["max_v_stay_units"],
                    p1["bound_units"],
                    p2["extra_traffic_units"],
                    p2["spill_count"],
                    p2["makespan_cycles"],
                    p3["makespan_cycles"],
                    p3["extra_traffic_units"],
                    p3["bound_cycles"],
                    r["wall_s"],
                    r["peak_rss_mib"],
                    ok,
                ]
            )
            public = PUBLIC.get(str(r["case"]), ("-", "-", "-"))
            cells = [
                str(r["case"]),
                f"{p1['max_v_stay_units']:,} ({p1['bound_units']:,})",
                _n(public[0]),
                f"{p2['extra_traffic_units']:,} ({p2['spill_count']:,})",
                _n(public[1]),
                f"{p2['makespan_cycles']:,}",
                f"{p3['makespan_cycles']:,} ({p3['bound_cycles']:,})",
                _n(public[2]),
                str(r["wall_s"]),
                str(r["peak_rss_mib"]),
                "yes" if ok else "NO",
            ]
            table.append("| " + " | ".join(cells) + " |")
    (args.out / "table.md").write_text("\n".join(table) + "\n")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    (args.out / "README.md").write_text(
        f"# Heuristics alone on the official cases ({today})\n\n"
        "Question: what do npuopt's greedy warm starts (list scheduler, placement with spills,\n"
        "pipe compaction) reach on each case, how fast, in how much memory?\n\n"
        f"Command: `python benchmarks/heuristics.py --time-limit {args.time_limit:g} "
        f"--seed {args.seed} --nodes {args.nodes}`  \n"
        f"Commit: `{commit}`; machine: 2 cores; reuse rule: residency. The generated graph is\n"
        f"`npuopt generate conv --nodes {args.nodes} --seed 3` (not stored: regenerate it).\n\n"
        + "\n".join(table)
        + "\n\n"
        "Public figures are the best published ones (FINDINGS.md). "
        "Solution files: `runs/<case>/`.\n"
    )
    print("\n".join(table))


def _n(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


if __name__ == "__main__":
    main()
