"""Problem 3 alone, in rounds, from a stored answer: where the pipe model's LNS levels off.

Usage::

    python benchmarks/p3_rounds.py GRAPH DIR [--rounds 4] [--time-limit 300] [--speed 1.68]
                                   [--name NAME] [--out DIR]

``DIR`` holds a stored answer's files (``<case>_schedule.txt``, ``_memory.txt``,
``_spill.txt``: a ``Problem2`` or ``Problem3`` folder). Round r runs the Problem 3 stage
(:func:`solver.solve.refine_timing`: the budget of a ``--time-limit`` run, seed r) from round
r - 1's answer, writes its answer to ``round<r>/`` and judges the files it wrote with the
evaluator. The traffic budget is the start's traffic throughout. Writes
``results/<date>_<name>/`` (README with the command and commit, ``table.md``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from npuopt.solver.evaluate import evaluate  # noqa: E402
from npuopt.solver.files import ProblemFiles, read_solution, write_solution  # noqa: E402
from npuopt.solver.instance import load_instance  # noqa: E402
from npuopt.solver.solve import SolveOptions, refine_timing  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("graph", type=Path)
    parser.add_argument("start", type=Path, help="folder of the stored answer's files")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--time-limit", type=float, default=300.0)
    parser.add_argument("--speed", type=float, default=1.68)
    parser.add_argument("--name", default="p3-rounds")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    instance = load_instance(args.graph)
    case = instance.name
    out = args.out or ROOT / "results" / f"{dt.date.today().isoformat()}_{args.name}"
    solution = read_solution(ProblemFiles.in_dir(args.start, case), instance, 3)
    judged = evaluate(instance, solution, 3)
    rows = [
        f"| 0 (start) | {judged.makespan_cycles:,} | {judged.extra_traffic_units:,} | "
        f"{judged.spill_count} | | |"
    ]
    print(rows[0], flush=True)
    for r in range(1, args.rounds + 1):
        options = SolveOptions(
            problems=(3,), time_limit_s=args.time_limit, seed=r, speed=args.speed
        )
        began = time.monotonic()
        result = refine_timing(instance, solution, options)
        wall = time.monotonic() - began
        assert result.p3 is not None
        folder = out / f"round{r}"
        write_solution(folder, case, 3, result.p3.solution)
        solution = read_solution(ProblemFiles.in_dir(folder, case), instance, 3)
        judged = evaluate(instance, solution, 3)  # the files, not the object in memory
        assert judged.valid, judged.violations[:1]
        steps = len(result.p3_lns.steps) if result.p3_lns else 0
        rows.append(
            f"| {r} | {judged.makespan_cycles:,} | {judged.extra_traffic_units:,} | "
            f"{judged.spill_count} | {steps} | {wall:.0f} |"
        )
        print(rows[-1], flush=True)
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    command = " ".join(["python", "benchmarks/p3_rounds.py", *sys.argv[1:]])
    table = [
        "| round | makespan | traffic | spills | LNS steps | wall s |",
        "|---|---|---|---|---|---|",
        *rows,
    ]
    (out / "table.md").write_text("\n".join(table) + "\n")
    (out / "README.md").write_text(
        f"# {args.name}: Problem 3 alone in rounds, {case}\n\n"
        f"Command: `{command}`  \nCommit: `{commit}`; start: `{args.start}`; each round the "
        f"Problem 3 stage of a {args.time_limit:g} s run (speed {args.speed:g}), seed = round.\n\n"
        + "\n".join(table)
        + "\n\nFiles: `round<r>/`, judged by the evaluator after writing.\n"
    )


if __name__ == "__main__":
    main()
