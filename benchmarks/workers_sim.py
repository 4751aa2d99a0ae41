"""More workers than this machine has: what would Problem 3 gain from N chains?

With N workers, Problem 3 runs N LNS chains from the same start, each on its own seed and the
same deterministic budget, and keeps the fastest answer (docs/decisions.md, "Workers"). A
chain's answer depends on its start, seed and budget, not on what runs beside it, so N chains
can be run here two at a time and the N-worker answer read off as the best of the first N.

From a stored two-worker run of each case (``runs/<case>/w2`` or ``runs/<case>``: its Problem 2
answer as the start, its ``summary.json``'s Problem 3 budget), runs ``--chains`` chains, chain 0
on a main seed (``--main-seed``, by default the run's ``--seed``) and the others on seeds drawn
from it as a solve draws its side chains' from its main chain's. These are not the run's own
chain seeds (a solve draws its main chain's seed mid-pipeline and does not store it): the
table samples N seeds, it does not replay the run. Writes each chain's answer as a Problem 3
folder and the evaluator's makespans as a table: the best of the first N chains for
N = 1 .. ``--chains``.

The stored Problem 2 files hold the fastest answer found at Problem 2's traffic, usually the
run's final Problem 3 answer: the chains here continue from where the run ended. So the table
shows what N chains add to one from a common start, not the figure an N-worker run prints; it
also leaves out the re-offsetting and justification passes around the chains, the plan's
budget growing a little with N (the shared-out generator, stream and hoisting runs: about 6
deterministic seconds more at N = 4 on a 600 s limit), and the chains of a real run on N cores
slowing each other down as measured on two.

Usage::

    python benchmarks/workers_sim.py --study results/<two-worker study> [--cases NAME...]
        [--chains 4] [--name workers-sim] [--out DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from cases import write_study  # noqa: E402

from npuopt.instances import OFFICIAL_CASES, official_case  # noqa: E402
from npuopt.solver.bounds import makespan_bound  # noqa: E402
from npuopt.solver.evaluate import evaluate  # noqa: E402
from npuopt.solver.files import ProblemFiles, read_solution, write_solution  # noqa: E402
from npuopt.solver.hardware import DEFAULT_HARDWARE  # noqa: E402
from npuopt.solver.instance import load_instance  # noqa: E402
from npuopt.solver.stages.timing import pipe_chain  # noqa: E402
from npuopt.solver.workers import Workers  # noqa: E402


def chain_seeds(main: int, count: int) -> list[int]:
    """The seeds of an N-worker solve's chains, N = ``count``: the main chain's, then the side
    chains' (drawn from it as :func:`solver.stages.timing.refine_pipes` draws them)."""
    sides = np.random.default_rng(main).integers(2**31, size=max(count - 1, 0))
    return [main, *(int(s) for s in sides)]


def _run_dir(study: Path, case: str) -> Path | None:
    for run in (study / "runs" / case / "w2", study / "runs" / case):
        if (run / "summary.json").is_file():
            return run
    return None


def _checked(run: Path, summary: dict) -> float:
    """The stored run's Problem 3 budget, once the run is one this estimate can restart: two
    workers or more, contest hardware, the residency rule, a budget recorded."""
    if summary.get("workers", 1) < 2:
        raise SystemExit(f"{run}: a one-worker run (its budget is not a side-chain budget)")
    if summary.get("hardware") != "contest defaults" or summary.get("reuse_rule") != "residency":
        raise SystemExit(f"{run}: not the contest hardware and residency rule")
    budget = summary["cases"][0].get("p3", {}).get("lns_budget")
    if budget is None:
        raise SystemExit(f"{run}: no lns_budget in summary.json (made before 693371f?)")
    return float(budget)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--study", type=Path, required=True, help="stored two-worker runs")
    parser.add_argument("--cases", nargs="+", choices=OFFICIAL_CASES)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--main-seed", type=int, help="chain 0's seed (default: the run's --seed)")
    parser.add_argument("--name", default="workers-sim")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.chains < 1:
        parser.error("--chains must be at least 1")
    today = dt.date.today().isoformat()
    out = args.out or ROOT / "results" / f"{today}_{args.name}"
    lines = [
        "| case | budget (det. s) | chain makespans | best of N = 1 .. "
        f"{args.chains} | best of {args.chains} / of 1 | files valid |",
        "|---|---|---|---|---|---|",
    ]
    for case in args.cases or OFFICIAL_CASES:
        path = official_case(case)
        if path is None:
            print(f"{case}: not in ../shared/instances, skipped", file=sys.stderr)
            continue
        run = _run_dir(args.study, case)
        if run is None:
            print(f"{case}: no run in {args.study}, skipped", file=sys.stderr)
            continue
        summary = json.loads((run / "summary.json").read_text())
        budget = _checked(run, summary)
        inst = load_instance(path)
        start = read_solution(ProblemFiles.in_dir(run / "Problem2", case), inst, 2)
        judged = evaluate(inst, start, 3)
        slack = summary.get("traffic_slack", 0.0)
        cap = int((judged.extra_traffic_units or 0) * (1.0 + slack))
        bound = makespan_bound(inst, start).cycles
        main_seed = summary["seed"] if args.main_seed is None else args.main_seed
        seeds = chain_seeds(main_seed, args.chains)
        calls = [(start, DEFAULT_HARDWARE, "residency", cap, budget, s, 1e18, bound) for s in seeds]
        with Workers(inst, 2, spawn=True) as workers:
            found = workers.start(pipe_chain, calls)()
        makespans, valid = [], True
        for k, (solution, stop) in enumerate(found):
            if stop == "deadline":
                raise SystemExit(f"{case} chain {k}: stopped by the clock")
            answer = solution if solution is not None else start
            folder = out / "runs" / case / f"chain{k}" / "Problem3"
            folder.mkdir(parents=True, exist_ok=True)
            write_solution(folder, case, 3, answer)
            again = evaluate(inst, read_solution(ProblemFiles.in_dir(folder, case), inst, 3), 3)
            valid &= again.valid and (again.extra_traffic_units or 0) <= cap
            makespans.append(again.makespan_cycles)
        best = [min(makespans[: n + 1]) for n in range(len(makespans))]
        lines.append(
            f"| {case} | {budget:.1f} | {', '.join(f'{m:,}' for m in makespans)} | "
            f"{', '.join(f'{m:,}' for m in best)} | {best[-1] / best[0]:.4f} | "
            f"{'yes' if valid else 'NO'} |"
        )
        print(lines[-1], file=sys.stderr)
    table = "\n".join(lines)
    write_study(
        out,
        f"{args.name}: Problem 3 with N chains, estimated ({today})",
        table,
        f"machine: 2 cores, two chains at a time; starts, budgets and seeds from `{args.study}`. "
        "Each chain from the stored Problem 2 answer, on the stored run's Problem 3 budget, "
        "ended by that budget (never the clock); its answer is in `runs/<case>/chain<k>/`, "
        "re-read and judged by the evaluator. Chain 0 runs on the main seed, chain k on the "
        "k-th side seed drawn from it (a sample of seeds, not the run's own chains). See the "
        "module docstring for what the estimate leaves out.",
    )
    print(table)


if __name__ == "__main__":
    main()
