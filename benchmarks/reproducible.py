"""Reproducibility benchmark: same seed, speed factor and worker count, same files?

Solves each graph twice at once with the same command, in two processes whose string-hash
seeds differ (``PYTHONHASHSEED`` 1 and 2: Python salts string hashing per process, so anything
that iterates a set of names shows up here), and compares every written file byte for byte.
With ``--workers 1`` the two runs take a core each.

Usage::

    python benchmarks/reproducible.py [--time-limit 600] [--cases NAME...] [--speed F]
        [--seed 0] [--workers 1] [--name reproducible] [--out DIR]

Writes ``results/<date>_<name>/`` (``runs/<graph>/h1`` and ``h2``, ``table.md``,
``README.md``): per graph the three answers of each run and the files that differ.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from cases import answers, full_options, run_case, write_study  # noqa: E402

from npuopt.instances import OFFICIAL_CASES, official_case  # noqa: E402


def differing(first: Path, second: Path) -> list[str]:
    """Files under ``first`` (``ProblemN/...``) missing from ``second`` or not byte-identical."""
    out = []
    for path in sorted(first.glob("Problem*/*")):
        twin = second / path.relative_to(first)
        if not twin.exists() or twin.read_bytes() != path.read_bytes():
            out.append(str(path.relative_to(first)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--time-limit", type=float, default=600.0)
    parser.add_argument("--cases", nargs="+", choices=OFFICIAL_CASES)
    parser.add_argument("--speed", type=float)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--name", default="reproducible")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    today = dt.date.today().isoformat()
    out = args.out or ROOT / "results" / f"{today}_{args.name}"
    graphs = [(c, official_case(c)) for c in args.cases or OFFICIAL_CASES]
    options = full_options(args.time_limit, args.seed, args.speed, args.workers)
    lines = [
        "| graph | P1 h1 / h2 | P2 h1 / h2 | P3 h1 / h2 | files that differ |",
        "|---|---|---|---|---|",
    ]
    for name, path in graphs:
        if path is None:
            print(f"{name}: not in ../shared/instances, skipped", file=sys.stderr)
            continue

        def run(hash_seed: str, name: str = name, path: Path = path) -> dict:
            env = {**os.environ, "PYTHONHASHSEED": hash_seed}
            return run_case(path, out / "runs" / name / f"h{hash_seed}", options, env)

        with ThreadPoolExecutor(max_workers=2) as pool:  # both at once
            first, second = pool.map(run, ("1", "2"))
        cells = [f"{a:,} / {b:,}" for a, b in zip(answers(first), answers(second), strict=True)]
        diff = differing(out / "runs" / name / "h1", out / "runs" / name / "h2")
        lines.append(f"| {name} | {' | '.join(cells)} | {', '.join(diff) or 'none'} |")
        print(lines[-1], file=sys.stderr)
    table = "\n".join(lines)
    write_study(
        out,
        f"{args.name}: the same run twice at once ({today})",
        table,
        "machine: 2 cores. Each graph was solved by two processes at once with the same "
        "command, their string-hash seeds (`PYTHONHASHSEED`) 1 and 2; every file of the first "
        "compared byte for byte with the second's.",
    )
    print(table)


if __name__ == "__main__":
    main()
