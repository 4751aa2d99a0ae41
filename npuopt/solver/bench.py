"""Benchmarks: methods x instances x seeds, in parallel worker processes, resumable.

A study writes one folder (``results/<date>_<name>/`` by default)::

    README.md        question, command, date, commit
    runs.csv         one row per (instance, method, seed): objectives, bounds, gaps, status,
                     runtime, versions, commit (see ``COLUMNS``)
    runs/<instance>/<method>/seed<k>/Problem1/2/3 and summary.json

Rows are appended as tasks finish, so an interrupted study loses at most the tasks that were
running; run the same command again and the rows already in ``runs.csv`` are not redone.
Every figure comes from the evaluator (through :func:`solver.solve.solve_instance`).
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import platform
import subprocess
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from npuopt.solver.errors import NpuoptError
from npuopt.solver.files import atomic_write_text, write_solution
from npuopt.solver.hardware import DEFAULT_HARDWARE, Hardware
from npuopt.solver.instance import load_instance
from npuopt.solver.report import case_summary
from npuopt.solver.solve import METHODS, Method, SolveOptions, solve_instance

#: Columns of ``runs.csv``, in order.
COLUMNS: tuple[str, ...] = (
    "instance",
    "method",
    "seed",
    "time_limit_s",
    "status",
    "p1_max_v_stay",
    "p1_bound",
    "p1_gap",
    "p2_traffic",
    "p2_spills",
    "p2_makespan",
    "p2_bound",
    "p2_gap",
    "p3_makespan",
    "p3_traffic",
    "p3_bound",
    "p3_gap",
    "runtime_s",
    "npuopt",
    "ortools",
    "python",
    "commit",
)


@dataclass(frozen=True)
class Task:
    """One solve of a study."""

    graph: str
    method: Method
    seed: int
    time_limit_s: float
    #: The machine's speed factor (:mod:`solver.speed`), measured once for the whole study.
    speed: float = 1.0
    #: Processes of one solve (:mod:`solver.workers`).
    workers: int = 1
    #: Problem 3's search on the clock after its budget (``SolveOptions.fill``).
    fill: bool = False

    @property
    def instance(self) -> str:
        return Path(self.graph).stem.removesuffix("_Nodes")

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What identifies a row of ``runs.csv`` (as the file holds it: text)."""
        return (self.instance, self.method, str(self.seed), f"{self.time_limit_s:g}")


def tasks(
    graphs: Sequence[str],
    methods: Sequence[Method],
    seeds: Sequence[int],
    time_limit_s: float,
    speed: float = 1.0,
    workers: int = 1,
    fill: bool = False,
) -> list[Task]:
    """Every (graph, method, seed) combination, in that nesting order."""
    for method in methods:
        if method not in METHODS:
            raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHODS)}")
    return [
        Task(g, m, s, time_limit_s, speed, workers, fill)
        for g in graphs
        for m in methods
        for s in seeds
    ]


def done_keys(out: Path) -> set[tuple[str, str, str, str]]:
    """Rows already in ``out/runs.csv``."""
    path = out / "runs.csv"
    if not path.exists():
        return set()
    with path.open(newline="") as handle:
        return {
            (r["instance"], r["method"], r["seed"], r["time_limit_s"])
            for r in csv.DictReader(handle)
        }


def run_task(task: Task, out: str, hardware: Hardware, commit: str) -> dict[str, Any]:
    """Solve one task in this process and write its files; return its ``runs.csv`` row."""
    instance = load_instance(task.graph, hardware)
    options = SolveOptions(
        time_limit_s=task.time_limit_s,
        seed=task.seed,
        hardware=hardware,
        method=task.method,
        speed=task.speed,
        workers=task.workers,
        fill=task.fill,
    )
    result = solve_instance(instance, options)
    folder = Path(out) / "runs" / task.instance / task.method / f"seed{task.seed}"
    for p in (1, 2, 3):
        candidate = result.best(p)
        if candidate is not None and candidate.evaluation.valid:
            write_solution(folder / f"Problem{p}", instance.name, p, candidate.solution)
    summary = {
        **case_summary(result),
        "speed": task.speed,
        "workers": task.workers,
        "fill": task.fill,
    }
    atomic_write_text(folder / "summary.json", json.dumps(summary, indent=2) + "\n")
    return row(task, summary, commit)


def row(task: Task, summary: dict[str, Any], commit: str) -> dict[str, Any]:
    """The ``runs.csv`` row of a task from its case summary."""
    p1, p2, p3 = (summary.get(f"p{p}", {}) for p in (1, 2, 3))
    solved = all(p.get("valid") for p in (p1, p2, p3))
    status = "interrupted" if summary.get("interrupted") else "ok" if solved else "incomplete"
    return {
        "instance": task.instance,
        "method": task.method,
        "seed": task.seed,
        "time_limit_s": f"{task.time_limit_s:g}",
        "status": status,
        "p1_max_v_stay": p1.get("max_v_stay_units"),
        "p1_bound": p1.get("bound_units"),
        "p1_gap": _round(p1.get("gap")),
        "p2_traffic": p2.get("extra_traffic_units"),
        "p2_spills": p2.get("spill_count"),
        "p2_makespan": p2.get("makespan_cycles"),
        "p2_bound": p2.get("bound_units"),
        "p2_gap": _round(p2.get("gap")),
        "p3_makespan": p3.get("makespan_cycles"),
        "p3_traffic": p3.get("extra_traffic_units"),
        "p3_bound": p3.get("bound_cycles"),
        "p3_gap": _round(p3.get("gap")),
        "runtime_s": f"{summary['runtime_s']:.1f}",
        **versions(commit),
    }


def _round(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def versions(commit: str) -> dict[str, str]:
    """Versions of npuopt, OR-tools and Python, and the source commit."""

    def of(package: str) -> str:
        try:
            return version(package)
        except PackageNotFoundError:  # pragma: no cover - running from a bare source tree
            return "unknown"

    return {
        "npuopt": of("npuopt"),
        "ortools": of("ortools"),
        "python": platform.python_version(),
        "commit": commit,
    }


def git_commit(root: Path) -> str:
    """Short commit of the source tree (``unknown`` outside a git checkout)."""
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def run_study(
    todo: Sequence[Task],
    out: Path,
    *,
    jobs: int = 1,
    hardware: Hardware = DEFAULT_HARDWARE,
    commit: str = "unknown",
    on_row: Callable[[dict[str, Any]], None] | None = None,
    ray_address: str | None = None,
) -> list[dict[str, Any]]:
    """Run the tasks not yet in ``out/runs.csv`` on ``jobs`` worker processes (or, with
    ``ray_address``, as tasks of a Ray cluster, each asking for as many CPUs as its solve has
    workers: ``"local"`` starts one here with ``jobs`` CPUs, or more if a task needs them),
    appending each row as its task finishes; return the new rows."""
    out.mkdir(parents=True, exist_ok=True)
    done = done_keys(out)
    pending = [t for t in todo if t.key not in done]
    rows: list[dict[str, Any]] = []
    with _appender(out / "runs.csv") as append:

        def record(finished: dict[str, Any]) -> None:
            rows.append(finished)
            append(finished)
            if on_row is not None:
                on_row(finished)

        if ray_address is not None:
            for finished in _on_ray(pending, str(out), hardware, commit, ray_address, jobs):
                record(finished)
        elif jobs <= 1:
            for task in pending:
                record(run_task(task, str(out), hardware, commit))
        else:
            for finished in _in_processes(pending, str(out), hardware, commit, jobs):
                record(finished)
    return rows


def _in_processes(
    pending: Sequence[Task], out: str, hardware: Hardware, commit: str, jobs: int
) -> Iterator[dict[str, Any]]:
    """Run the tasks on ``jobs`` worker processes, at most ``jobs`` at a time, and yield their
    rows as they finish."""
    queue = iter(pending)
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        running: set[Future[dict[str, Any]]] = set()
        for task in queue:
            running.add(pool.submit(run_task, task, out, hardware, commit))
            if len(running) >= jobs:
                break
        while running:
            done, running = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                yield future.result()
                following = next(queue, None)
                if following is not None:
                    running.add(pool.submit(run_task, following, out, hardware, commit))


def _on_ray(
    pending: Sequence[Task],
    out: str,
    hardware: Hardware,
    commit: str,
    address: str,
    jobs: int,
) -> Iterator[dict[str, Any]]:
    """Run the tasks on a Ray cluster and yield their rows as they finish. Every worker writes
    into ``out``: on a cluster of several machines it must be a shared folder."""
    if not pending:
        return
    try:
        import ray
    except ImportError:
        raise NpuoptError("--ray needs Ray: pip install 'npuopt[ray]'") from None
    # Each run asks for as many CPUs as it has workers, so Ray places it on one machine
    # with that many cores free, and it uses them (``--workers``).
    need = max(task.workers for task in pending)
    if address == "local":
        ray.init(num_cpus=max(jobs, need), include_dashboard=False, ignore_reinit_error=True)
    else:
        ray.init(address=address, ignore_reinit_error=True)
    try:
        largest = max(
            (node["Resources"].get("CPU", 0) for node in ray.nodes() if node["Alive"]), default=0
        )
        if need > largest:
            raise NpuoptError(
                f"--workers {need}: no machine of the Ray cluster at {address} has {need} CPUs "
                f"(the largest has {largest:g})"
            )
        remote = ray.remote(run_task)
        running = [
            remote.options(num_cpus=task.workers).remote(task, out, hardware, commit)
            for task in pending
        ]
        while running:
            finished, running = ray.wait(running, num_returns=1)
            yield ray.get(finished[0])
    finally:
        ray.shutdown()


@contextmanager
def _appender(path: Path) -> Iterator[Callable[[dict[str, Any]], None]]:
    """Append rows to a CSV file, the header first when the file is new; every row is flushed
    at once so an interrupted study keeps it."""
    new = not path.exists() or path.stat().st_size == 0
    with path.open("a", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        if new:
            writer.writeheader()
            handle.flush()

        def append(values: dict[str, Any]) -> None:
            writer.writerow({k: "" if values.get(k) is None else values[k] for k in COLUMNS})
            handle.flush()

        yield append


def read_rows(out: Path) -> Iterator[dict[str, str]]:
    """The rows of ``out/runs.csv``."""
    with (out / "runs.csv").open(newline="") as handle:
        yield from csv.DictReader(handle)


def write_readme(out: Path, command: str, commit: str, question: str) -> None:
    """The study's README: question, command, date, commit, and where everything is."""
    today = dt.date.today().isoformat()
    atomic_write_text(
        out / "README.md",
        f"# {out.name}\n\nQuestion: {question}\n\nCommand: `{command}`  \n"
        f"Date: {today}; commit `{commit}`; machine: {platform.machine()}, "
        f"Python {platform.python_version()}.\n\n"
        "`runs.csv`: one row per (instance, method, seed), every figure from the evaluator. "
        "`runs/<instance>/<method>/seed<k>/`: the attachment files and summary.json of that "
        "run. `npuopt table` turns `runs.csv` into the competition table.\n",
    )
