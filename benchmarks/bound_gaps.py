"""Stored Problem 3 answers against both makespan bounds: ``max(pipe load, critical path)``
(the issue targets' bound) and the full one with heads and tails (:mod:`solver.bounds`).

Usage::

    python benchmarks/bound_gaps.py GRAPH DIR [GRAPH DIR ...] [--out DIR]

Each ``DIR`` holds one answer's files (``<case>_schedule.txt``, ``_memory.txt``,
``_spill.txt``: a ``Problem3`` folder). Every answer is read from its files and judged by the
evaluator; an invalid one stops the run. Prints a Markdown table and, with ``--out``, writes it
with the command and commit to ``DIR/README.md``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from npuopt.solver.bounds import makespan_bound  # noqa: E402
from npuopt.solver.evaluate import evaluate  # noqa: E402
from npuopt.solver.files import ProblemFiles, atomic_write_text, read_solution  # noqa: E402
from npuopt.solver.instance import load_instance  # noqa: E402

HEADER = (
    "| case | makespan | traffic | load / path bound | makespan / it | full bound | "
    "makespan / it | answer |\n|---|---|---|---|---|---|---|---|"
)


def row(graph: Path, folder: Path) -> str:
    """One table row: the answer in ``folder`` for the instance in ``graph``."""
    instance = load_instance(graph)
    solution = read_solution(ProblemFiles.in_dir(folder, instance.name), instance, 3)
    judged = evaluate(instance, solution, 3)
    if not judged.valid:
        sys.exit(f"{folder}: not a valid answer: {judged.violations[0].message}")
    makespan = judged.makespan_cycles or 0
    bound = makespan_bound(instance, solution)
    simple, full = bound.load_path_cycles, bound.cycles
    return (
        f"| {instance.name} | {makespan:,} | {judged.extra_traffic_units:,} | {simple:,} | "
        f"{makespan / simple:.3f} | {full:,} | {makespan / full:.3f} | `{folder}` |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pairs", nargs="+", help="GRAPH DIR pairs")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if len(args.pairs) % 2:
        parser.error("give GRAPH DIR pairs")
    rows = [HEADER]
    for graph, folder in zip(args.pairs[::2], args.pairs[1::2], strict=True):
        rows.append(row(Path(graph), Path(folder)))
        print(rows[-1] if len(rows) > 2 else "\n".join(rows), flush=True)
    if args.out is not None:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        command = " ".join(["python", "benchmarks/bound_gaps.py", *sys.argv[1:]])
        args.out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(
            args.out / "README.md",
            f"# Stored Problem 3 answers against both makespan bounds\n\n"
            f"Code `{commit}`. Reproduce: `{command}`\n\n" + "\n".join(rows) + "\n",
        )


if __name__ == "__main__":
    main()
