"""Case benchmark: ``npuopt solve`` on the official cases and a generated Conv_Case1-sized
graph, one process per case so wall time and peak memory are per case.

Usage::

    python benchmarks/cases.py [--name pipeline] [--problem all|1|2|3] [--time-limit 600]
                               [--method full|heuristics] [--reuse-rule residency|literal]
                               [--seed 0] [--nodes 36000]
                               [--no-generated] [--cases NAME...] [--jobs 1] [--out DIR]

Writes into ``--out`` (default ``results/<date>_<name>``): ``runs/<case>/`` (attachment files and
summary.json of that run), ``runs.csv`` (one row per case, in ``npuopt bench``'s format, so
``npuopt table DIR`` works here too), ``table.md`` and ``README.md`` (question, command,
commit). ``--jobs N`` solves N cases at once (each solve is single-threaded: on 2 cores,
``--jobs 2`` halves the wall time; each case still gets its whole time limit).
``python benchmarks/cases.py --runs-csv DIR...`` rewrites ``runs.csv`` of existing
folders from their summaries. Every figure comes from the evaluator through ``npuopt solve``;
afterwards each written file is checked again with ``npuopt evaluate``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime as dt
import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from npuopt.instances import OFFICIAL_CASES, official_case  # noqa: E402
from npuopt.solver.bench import COLUMNS as BENCH_COLUMNS  # noqa: E402
from npuopt.solver.bench import Task, row  # noqa: E402

NPUOPT = [sys.executable, "-m", "npuopt.solver.cli"]
#: Best public results (FINDINGS.md): P1 max V_stay, P2 traffic, P3 makespan.
PUBLIC = {
    "Matmul_Case0": (9_216, 28_800, 186_820),
    "Matmul_Case1": (34_816, 430_208, 1_771_383),
    "FlashAttention_Case0": (4_500, 3_584, 36_344),
    "FlashAttention_Case1": (7_588, 32_512, 152_364),
    "Conv_Case0": (7_488, 57_408, 515_634),
    "Conv_Case1": (14_040, 70_940, 1_073_322),
}


def write_table(out: Path, table: str) -> str:
    """Write ``table`` to ``out/table.md`` (the folder made if needed) and return the short
    commit of the checkout the benchmark runs from, for the study's README."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "table.md").write_text(table + "\n")
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()


def write_study(out: Path, heading: str, table: str, setup: str, after: str = "") -> str:
    """Write a study's ``table.md`` and ``README.md`` (its heading, the command as it was run,
    the commit, ``setup``, the table, then ``after``) and return the commit."""
    commit = write_table(out, table)
    command = shlex.join(["python", f"benchmarks/{Path(sys.argv[0]).name}", *sys.argv[1:]])
    (out / "README.md").write_text(
        f"# {heading}\n\nCommand: `{command}`  \nCommit: `{commit}`; {setup}\n\n{table}\n{after}"
    )
    return commit


def full_options(
    time_limit: float, seed: int, speed: float | None, workers: int
) -> argparse.Namespace:
    """:func:`run_case`'s options for the whole pipeline (Problems 1-3, full method, residency
    rule), as the benchmarks that compare runs use it."""
    return argparse.Namespace(
        time_limit=time_limit,
        seed=seed,
        problem="all",
        method="full",
        reuse_rule="residency",
        speed=speed,
        workers=workers,
    )


def answers(row: dict) -> tuple[int | None, int | None, int | None]:
    """A summary row's P1 peak, P2 traffic and P3 makespan (``None`` where missing)."""
    return (
        row.get("p1", {}).get("max_v_stay_units"),
        row.get("p2", {}).get("extra_traffic_units"),
        row.get("p3", {}).get("makespan_cycles"),
    )


def run_case(
    graph: Path, out: Path, args: argparse.Namespace, env: dict[str, str] | None = None
) -> dict:
    """Solve one graph in its own process (``env`` replaces its environment); return its
    summary row, wall time and peak RSS."""
    cmd = [
        *NPUOPT,
        "solve",
        str(graph),
        "--out",
        str(out),
        "--time-limit",
        str(args.time_limit),
        "--seed",
        str(args.seed),
        "--problem",
        args.problem,
        "--method",
        args.method,
        "--reuse-rule",
        args.reuse_rule,
        "--quiet",
        "--workers",
        str(getattr(args, "workers", 1)),
        *(["--speed", str(args.speed)] if args.speed is not None else []),
        *(["--fill"] if getattr(args, "fill", False) else []),
    ]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, env=env)
    peak = [0]
    sampler = threading.Thread(target=_sample_tree, args=(proc.pid, peak), daemon=True)
    sampler.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed with status {status}")
    summary = json.loads((out / "summary.json").read_text())
    case = summary["cases"][0]
    case["speed"] = summary.get("speed")
    case["wall_s"] = round(wall, 1)
    case["peak_rss_mib"] = round(usage.ru_maxrss / 1024, 1)
    # With worker processes the solve's own peak is not the machine's: the whole process tree,
    # sampled every half second.
    case["peak_tree_rss_mib"] = round(max(peak[0], usage.ru_maxrss) / 1024, 1)
    case["workers"] = summary.get("workers", 1)
    case["history"] = case.get("history", [])
    case["rechecked"] = all(_recheck(graph, out, p) for p in _problems(args.problem))
    return case


def _tree_rss_kib(root: int) -> int:
    """Resident memory (KiB) of process ``root`` and all its descendants, read from /proc."""
    parent: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            status = (entry / "status").read_text()
        except OSError:
            continue
        pid = int(entry.name)
        parent[pid] = int(stat.rsplit(")", 1)[1].split()[1])
        line = next((ln for ln in status.splitlines() if ln.startswith("VmRSS:")), None)
        rss[pid] = int(line.split()[1]) if line else 0
    tree, todo = {root}, [root]
    while todo:
        pid = todo.pop()
        for child, up in parent.items():
            if up == pid and child not in tree:
                tree.add(child)
                todo.append(child)
    return sum(rss.get(pid, 0) for pid in tree)


def _sample_tree(root: int, peak: list[int]) -> None:
    while Path(f"/proc/{root}").exists():
        with contextlib.suppress(OSError, ValueError):  # a process ended while being read
            peak[0] = max(peak[0], _tree_rss_kib(root))
        time.sleep(0.5)


def _problems(problem: str) -> tuple[int, ...]:
    return (1, 2, 3) if problem == "all" else (int(problem),)


def _recheck(graph: Path, out: Path, problem: int) -> bool:
    check = subprocess.run(
        [
            *NPUOPT,
            "evaluate",
            str(graph),
            "--problem",
            str(problem),
            "--dir",
            str(out / f"Problem{problem}"),
            "--json",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return check.returncode == 0 and json.loads(check.stdout)["valid"]


def _n(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else "-" if value is None else str(value)


def _ratio(row: dict, key: str) -> str:
    """The makespan over one of the P3 bounds of a case row, ``-`` when either is missing."""
    makespan, bound = row.get("makespan_cycles"), row.get(key)
    return f"{makespan / bound:.3f}" if makespan and bound else "-"


def _ratios(row: dict) -> str:
    """Makespan over the full bound, then over the pipe load / critical path bound alone."""
    return f"{_ratio(row, 'bound_cycles')} ({_ratio(row, 'bound_load_path_cycles')})"


COLUMNS = {  # header: how to read it from a case row
    1: [
        ("P1 max V_stay", lambda c: _n(c["p1"]["max_v_stay_units"])),
        ("P1 bound", lambda c: f"{_n(c['p1']['bound_units'])} ({c['p1']['bound_source']})"),
        ("public P1", lambda c: _n(PUBLIC.get(c["case"], (None,) * 3)[0])),
    ],
    2: [
        (
            "P2 traffic (spills)",
            lambda c: f"{_n(c['p2']['extra_traffic_units'])} ({_n(c['p2']['spill_count'])})",
        ),
        ("public P2", lambda c: _n(PUBLIC.get(c["case"], (None,) * 3)[1])),
        ("P2 makespan", lambda c: _n(c["p2"]["makespan_cycles"])),
    ],
    3: [
        (
            "P3 makespan (bound)",
            lambda c: f"{_n(c['p3']['makespan_cycles'])} ({_n(c['p3'].get('bound_cycles'))})",
        ),
        (
            "P3 / bound (/ load or path)",
            lambda c: _ratios(c["p3"]),
        ),
        ("P3 traffic", lambda c: _n(c["p3"]["extra_traffic_units"])),
        ("public P3", lambda c: _n(PUBLIC.get(c["case"], (None,) * 3)[2])),
    ],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--name", default="pipeline")
    parser.add_argument("--problem", default="all", choices=["all", "1", "2", "3"])
    parser.add_argument("--time-limit", type=float, default=600.0)
    parser.add_argument("--method", default="full", choices=["full", "heuristics"])
    parser.add_argument("--reuse-rule", default="residency", choices=["residency", "literal"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nodes", type=int, default=36_000, help="size of the generated graph")
    parser.add_argument("--no-generated", action="store_true", help="official cases only")
    parser.add_argument(
        "--cases", nargs="+", choices=OFFICIAL_CASES, help="these official cases (default: all)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="cases solved at once")
    parser.add_argument(
        "--workers", type=int, default=1, help="processes of each solve (npuopt solve --workers)"
    )
    parser.add_argument(
        "--fill", action="store_true", help="Problem 3 on the clock (npuopt solve --fill)"
    )
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--speed", type=float, help="pin every case's speed factor (default: each measures it)"
    )
    parser.add_argument(
        "--runs-csv",
        type=Path,
        nargs="+",
        metavar="DIR",
        help="only rewrite runs.csv of these existing folders from their summaries",
    )
    args = parser.parse_args()
    for folder in args.runs_csv or ():
        readme = (folder / "README.md").read_text()
        write_runs_csv(folder, readme.split("Commit: `", 1)[1].split("`", 1)[0])
    if args.runs_csv:
        return
    today = dt.date.today().isoformat()
    out = args.out or ROOT / "results" / f"{today}_{args.name}"

    graphs = [(name, official_case(name)) for name in args.cases or OFFICIAL_CASES]
    if not args.no_generated:
        generated = (
            Path(tempfile.mkdtemp(prefix="npuopt-bench-")) / f"conv{args.nodes // 1000}k_seed3.json"
        )
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

    for name, path in graphs:
        if path is None:
            print(f"{name}: skipped (not found)", file=sys.stderr)
    found = [(name, path) for name, path in graphs if path is not None]

    def solve(item: tuple[str, Path]) -> dict:
        name, path = item
        case = run_case(path, out / "runs" / name, args)
        print(f"{name}: {case['wall_s']} s", file=sys.stderr)
        return case

    with ThreadPoolExecutor(max_workers=max(args.jobs, 1)) as pool:
        rows = list(pool.map(solve, found))

    columns = [("case", lambda c: c["case"])]
    for p in _problems(args.problem):
        columns += COLUMNS[p]
    columns += [
        ("speed", lambda c: "-" if c["speed"] is None else f"{c['speed']:.3g}"),
        ("wall s", lambda c: str(c["wall_s"])),
        ("peak RSS MiB", lambda c: str(c["peak_rss_mib"])),
        # With --workers > 1 the solve's own peak is not the machine's.
        ("peak RSS MiB, process tree", lambda c: str(c["peak_tree_rss_mib"])),
        ("files valid", lambda c: "yes" if c["rechecked"] else "NO"),
    ]
    table = ["| " + " | ".join(h for h, _ in columns) + " |", "|" + "---|" * len(columns)]
    table += ["| " + " | ".join(get(c) for _, get in columns) + " |" for c in rows]
    commit = write_study(
        out,
        f"{args.name}: `npuopt solve --problem {args.problem} --method {args.method} "
        f"--time-limit {args.time_limit:g}` ({today})",
        "\n".join(table),
        f"machine: 2 cores, {max(args.jobs, 1)} case(s) at once; reuse rule: {args.reuse_rule}."
        + (
            ""
            if args.no_generated
            else f"\nThe generated graph is `npuopt generate conv --nodes {args.nodes} --seed 3` "
            "(not stored: regenerate it)."
        ),
        "\nSpeed: the machine's speed factor each run measured or was given "
        "(`solver/speed.py`); `--speed` with it reproduces a run on another machine.\n"
        "Public figures: the best published ones (FINDINGS.md). Solution files: `runs/<case>/`; "
        "`summary.json` there holds bounds, gaps, methods and LNS step counts.\n",
    )
    write_runs_csv(out, commit)
    print("\n".join(table))


def write_runs_csv(out: Path, commit: str) -> None:
    """``runs.csv`` in ``npuopt bench``'s format, from ``runs/<case>/summary.json``, so that
    ``npuopt table`` makes the competition table of this folder too."""
    rows = []
    for path in sorted((out / "runs").glob("*/summary.json")):
        summary = json.loads(path.read_text())
        for case in summary["cases"]:
            task = Task(
                graph=f"{case['case']}.json",
                method=summary.get("method", "full"),  # older summaries: always full
                seed=summary["seed"],
                time_limit_s=summary["time_limit_s"],
            )
            rows.append(row(task, case, commit))
    with (out / "runs.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=BENCH_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
