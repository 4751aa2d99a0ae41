"""Scale benchmark: how time and memory grow with the graph, from 2k to 100k nodes.

Usage::

    python benchmarks/scale.py [--sizes 2000 5000 10000 36000 100000] [--time-limit 60]
                               [--out DIR]

For each size it generates a Conv-shaped graph (``npuopt generate conv --nodes N --seed 3``)
and measures, each in its own process: loading, the heuristics alone (``npuopt solve --method
heuristics`` with the same time limit), the evaluator on the Problem 2 answer they wrote
(``npuopt evaluate``, loading included, and the evaluator call alone), and a full ``npuopt solve
--time-limit T``: wall seconds and peak resident memory. Writes ``results/<date>_scale/``
(README with the command and commit, ``runs.csv``, ``table.md``). Wall times are this
machine's (2 cores); compare rows within one run.
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
NPUOPT = [sys.executable, "-m", "npuopt.solver.cli"]


def measure(args: list[str]) -> tuple[float, float, int]:
    """Wall seconds, peak RSS (MiB) and exit code of one npuopt command."""
    started = time.monotonic()
    proc = subprocess.Popen(
        [*NPUOPT, *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(proc.pid, 0)
    return time.monotonic() - started, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


_EVALUATE_IN_PROCESS = """
import json, sys, time
from npuopt.solver.evaluate import evaluate
from npuopt.solver.files import ProblemFiles, read_solution
from npuopt.solver.hardware import DEFAULT_HARDWARE
from npuopt.solver.instance import load_instance
instance = load_instance(sys.argv[1])
solution = read_solution(ProblemFiles.in_dir(sys.argv[2], instance.name), instance, 2,
                         DEFAULT_HARDWARE)
started = time.perf_counter()
result = evaluate(instance, solution, 2)
print(json.dumps({"seconds": time.perf_counter() - started, "valid": result.valid}))
"""


def evaluate_seconds(graph: Path, problem_dir: Path) -> tuple[float, bool]:
    """Seconds of the evaluator alone (loading excluded) on a Problem 2 answer, and its verdict."""
    out = subprocess.run(
        [sys.executable, "-c", _EVALUATE_IN_PROCESS, str(graph), str(problem_dir)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result = json.loads(out)
    return result["seconds"], result["valid"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 5000, 10000, 36000, 100000])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    today = dt.date.today().isoformat()
    out = args.out or ROOT / "results" / f"{today}_scale"
    work = Path(tempfile.mkdtemp(prefix="npuopt-scale-"))
    rows = []
    for size in args.sizes:
        graph = work / f"conv{size}.json"
        subprocess.run(
            [*NPUOPT, "generate", "conv", "--nodes", str(size), "--seed", "3", "--out", graph],
            cwd=ROOT,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        heur = work / f"heur{size}"
        info_s, info_mib, _ = measure(["info", str(graph)])
        h_s, h_mib, h_code = measure(
            [
                "solve",
                str(graph),
                "--method",
                "heuristics",
                "--time-limit",
                str(args.time_limit),
                "--out",
                str(heur),
                "--quiet",
            ]  # fmt: skip
        )
        e_s, e_mib, e_code = measure(
            ["evaluate", str(graph), "--problem", "2", "--dir", str(heur / "Problem2")]
        )
        eval_s, eval_valid = evaluate_seconds(graph, heur / "Problem2")
        f_s, f_mib, f_code = measure(
            [
                "solve",
                str(graph),
                "--time-limit",
                str(args.time_limit),
                "--out",
                str(work / f"full{size}"),
                "--quiet",
            ]  # fmt: skip
        )
        all_ok = h_code == e_code == f_code == 0 and eval_valid
        nodes = len(json.loads(graph.read_text())["Nodes"])
        rows.append(
            {
                "nodes": nodes,
                "info s (load + bounds)": f"{info_s:.1f}",
                f"heuristics {args.time_limit:g} s: wall s": f"{h_s:.1f}",
                "heuristics MiB": f"{h_mib:.0f}",
                "evaluate P2 s (load included)": f"{e_s:.1f}",
                "evaluator alone s": f"{eval_s:.2f}",
                f"solve {args.time_limit:g} s: wall s": f"{f_s:.1f}",
                "solve peak MiB": f"{f_mib:.0f}",
                "all exit 0, valid": "yes" if all_ok else "NO",
            }
        )
        print(f"{size}: {rows[-1]}", file=sys.stderr)
    header = list(rows[0])
    table = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    table += ["| " + " | ".join(str(r[h]) for h in header) + " |" for r in rows]
    out.mkdir(parents=True, exist_ok=True)
    with (out / "runs.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    (out / "table.md").write_text("\n".join(table) + "\n")
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    sizes = " ".join(map(str, args.sizes))
    (out / "README.md").write_text(
        "# How time and memory grow with the graph\n\n"
        f"Command: `python benchmarks/scale.py --sizes {sizes} --time-limit {args.time_limit:g}`"
        f"  \nCommit: `{commit}`; date {today}; machine: 2 cores. Graphs: `npuopt generate conv "
        "--nodes N --seed 3` (not stored: regenerate them). Each figure is one process: wall "
        "seconds and peak resident memory (MiB).\n\n" + "\n".join(table) + "\n"
    )
    print("\n".join(table))


if __name__ == "__main__":
    main()
