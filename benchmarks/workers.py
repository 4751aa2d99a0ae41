"""Workers benchmark: what does a second core buy (``npuopt solve --workers``)?

Solves each graph twice at the same limit, seed and speed factor: with ``--workers 1`` (two
graphs at a time: each uses one core) and with ``--workers 2`` (one graph at a time: it uses
both). Reports the three answers of each, the wall time the two-worker run took to reach the
one-worker run's final Problem 2 and Problem 3 answers (from ``summary.json``'s history), as a
ratio of the time the one-worker run took to find them, and the peak memory of each run's whole
process tree.

Usage::

    python benchmarks/workers.py [--time-limit 600] [--cases NAME...] [--renumbered NAME...]
        [--speed F] [--name workers] [--out DIR]

Writes ``results/<date>_<name>/`` (``runs/<graph>/w1`` and ``w2``, ``table.md``, ``README.md``).
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

from cases import NPUOPT, answers, full_options, run_case, write_study  # noqa: E402

from npuopt.instances import OFFICIAL_CASES, official_case  # noqa: E402


def _reached(history: list[dict], problem: int, value: int) -> float | None:
    """When the history first shows ``problem`` at ``value`` or better."""
    for event in history:
        if event["problem"] == problem and event["value"] <= value:
            return float(event["seconds"])
    return None


def _value(row: dict, problem: int) -> int | None:
    return answers(row)[problem - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--time-limit", type=float, default=600.0)
    parser.add_argument("--cases", nargs="+", choices=OFFICIAL_CASES)
    parser.add_argument(
        "--renumbered", nargs="*", default=["Conv_Case1"], help="also a renumbered copy of these"
    )
    parser.add_argument("--speed", type=float)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default="workers")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    today = dt.date.today().isoformat()
    out = args.out or ROOT / "results" / f"{today}_{args.name}"
    work = Path(tempfile.mkdtemp(prefix="npuopt-workers-"))
    graphs = [(c, official_case(c)) for c in args.cases or OFFICIAL_CASES]
    graphs = [(c, p) for c, p in graphs if p is not None]
    for case in args.renumbered or ():
        source = official_case(case)
        if source is not None:
            copy = work / f"{case}_r1.json"
            subprocess.run(
                [*NPUOPT, "rename", str(source), "--seed", "1", "--out", str(copy)],
                cwd=ROOT,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            graphs.append((copy.stem, copy))

    def options(workers: int) -> argparse.Namespace:
        return full_options(args.time_limit, args.seed, args.speed, workers)

    def one(item: tuple[str, Path]) -> dict:
        name, path = item
        row = run_case(path, out / "runs" / name / "w1", options(1))
        print(f"{name} w1: {row['wall_s']} s", file=sys.stderr)
        return row

    with ThreadPoolExecutor(max_workers=2) as pool:  # one core each
        single = dict(zip((n for n, _ in graphs), pool.map(one, graphs), strict=True))
    double = {}
    for name, path in graphs:  # both cores each
        double[name] = run_case(path, out / "runs" / name / "w2", options(2))
        print(f"{name} w2: {double[name]['wall_s']} s", file=sys.stderr)

    lines = [
        "| graph | P1 w1 / w2 | P2 w1 / w2 | P3 w1 / w2 | P3 w2/w1 | w2 reaches w1's P2, P3 "
        "(s, ratio) | peak MiB w1 / w2 | files valid |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, _ in graphs:
        a, b = single[name], double[name]
        cells = []
        for problem in (1, 2, 3):
            cells.append(f"{_value(a, problem):,} / {_value(b, problem):,}")
        p3a, p3b = _value(a, 3), _value(b, 3)
        ratio = f"{p3b / p3a:.4f}" if p3a and p3b else "-"
        reach = []
        for problem in (2, 3):
            target = _value(a, problem)
            if target is None:
                reach.append("-")
                continue
            t_a = _reached(a["history"], problem, target)
            t_b = _reached(b["history"], problem, target)
            if t_b is None:
                reach.append("not reached")
            else:
                share = f"{t_b / t_a:.2f}" if t_a else "-"
                reach.append(f"{t_b:.0f} ({share})")
        valid = "yes" if a["rechecked"] and b["rechecked"] else "NO"
        lines.append(
            f"| {name} | {' | '.join(cells)} | {ratio} | {', '.join(reach)} | "
            f"{a['peak_tree_rss_mib']:,.0f} / {b['peak_tree_rss_mib']:,.0f} | {valid} |"
        )
    table = "\n".join(lines)
    write_study(
        out,
        f"{args.name}: one worker against two ({today})",
        table,
        "machine: 2 cores. The one-worker runs went two at a time (a core each), the "
        "two-worker runs one at a time (both cores).\n\n"
        "Reach: the second the two-worker run first held an answer at least as good as the "
        "one-worker run's final one, and that time over the second the one-worker run found "
        "its final answer. Peak memory: the whole process tree (the solve and its workers), "
        "sampled every half second.",
    )
    print(table)


if __name__ == "__main__":
    main()
