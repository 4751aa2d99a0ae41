"""Workers benchmark: what does a second core buy (``npuopt solve --workers``)?

Solves each graph twice at the same limit, seed and speed factor: with ``--workers 1`` (two
graphs at a time: each uses one core) and with ``--workers 2`` (one graph at a time: it uses
both). Reports the three answers of each, the wall time the two-worker run took to reach the
one-worker run's final Problem 2 and Problem 3 answers (from ``summary.json``'s history), as a
ratio of the time the one-worker run took to find them, and the peak memory of each run's whole
process tree.

Usage::

    python benchmarks/workers.py [--time-limit 600] [--cases NAME...] [--renumbered NAME...]
        [--speed F] [--name workers] [--out DIR] [--w1-from STUDY...]

``--w1-from``: take each graph's one-worker run from a stored study instead (its
``runs/<graph>/w1/``, ``runs/<graph>/`` or, from ``reproducible.py``, ``runs/<graph>/h1/``:
summary and Problem folders, the same limit, seed, rule and method, and speed factor when
``--speed`` is given, re-checked by the evaluator; the first study holding the graph), when
the one-worker path has not changed since: only the two-worker runs are made. Their peak
memory was not stored there and shows as ``-``.

Writes ``results/<date>_<name>/`` (``runs/<graph>/w1`` and ``w2``, ``table.md``, ``README.md``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from cases import (  # noqa: E402
    NPUOPT,
    _problems,
    _recheck,
    answers,
    full_options,
    run_case,
    write_study,
)

from npuopt.instances import OFFICIAL_CASES, official_case  # noqa: E402


def _reached(history: list[dict], problem: int, value: int) -> float | None:
    """When the history first shows ``problem`` at ``value`` or better."""
    for event in history:
        if event["problem"] == problem and event["value"] <= value:
            return float(event["seconds"])
    return None


def _stored(graph: Path, name: str, studies: list[Path], options: argparse.Namespace) -> dict:
    """The one-worker row of ``name`` from the first of ``studies`` that ran it, with the
    limit and seed of ``options`` (and its speed factor, when given)."""
    wanted = {
        "workers": 1,
        "time_limit_s": options.time_limit,
        "seed": options.seed,
        "problems": [1, 2, 3],
        "method": options.method,
        "reuse_rule": options.reuse_rule,
        "traffic_slack": 0.0,
    }
    subs = ("w1", "", "h1")  # this script's layout, cases.py's, reproducible.py's
    for run in (study / "runs" / name / sub for study in studies for sub in subs):
        if (run / "summary.json").is_file():
            summary = json.loads((run / "summary.json").read_text())
            wrong = [k for k, v in wanted.items() if summary.get(k) != v]
            if options.speed is not None and abs(summary.get("speed", 0) - options.speed) >= 0.01:
                wrong.append("speed")
            if wrong:
                raise SystemExit(f"{run}: not a run like this one ({', '.join(wrong)} differ)")
            row = summary["cases"][0]
            row["history"] = row.get("history", [])
            row["rechecked"] = all(_recheck(graph, run, p) for p in _problems("all"))
            row["source"] = str(run.relative_to(ROOT) if run.is_relative_to(ROOT) else run)
            return row
    raise SystemExit(f"{name}: no one-worker run in {', '.join(map(str, studies))}")


def _mib(row: dict) -> str:
    value = row.get("peak_tree_rss_mib")
    return "-" if value is None else f"{value:,.0f}"


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
    parser.add_argument("--w1-from", type=Path, nargs="+", help="stored one-worker studies")
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
        if args.w1_from:
            return _stored(path, name, [s.resolve() for s in args.w1_from], options(1))
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
            f"{_mib(a)} / {_mib(b)} | {valid} |"
        )
    table = "\n".join(lines)
    sources = [f"- {name} w1: `{row['source']}`" for name, row in single.items() if "source" in row]
    after = "\n".join(["", "One-worker runs taken from stored studies:", *sources, ""])
    write_study(
        out,
        f"{args.name}: one worker against two ({today})",
        table,
        "machine: 2 cores. The one-worker runs went two at a time (a core each; "
        "with --w1-from, in the stored studies listed below), the two-worker runs one at a "
        "time (both cores).\n\n"
        "Reach: the second the two-worker run first held an answer at least as good as the "
        "one-worker run's final one, and that time over the second the one-worker run found "
        "its final answer. Peak memory: the whole process tree (the solve and its workers), "
        "sampled every half second.",
        after if sources else "",
    )
    print(table)


if __name__ == "__main__":
    main()
