"""The ``npuopt`` command line.

Exit codes: 0 success (a valid solution), 1 an invalid solution, 2 bad input (a one-line message
naming the file and the line, node or buffer at fault; nothing is written), 130 interrupted by
SIGINT or SIGTERM (the best answers found so far are written, the summary says so).
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import date
from enum import Enum
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Annotated, Any

import typer

from npuopt.instances import OFFICIAL_CASES, bundled, official_case
from npuopt.instances.generator import FAMILIES
from npuopt.instances.generator import generate as generate_graph
from npuopt.instances.transform import renumber, union
from npuopt.models.cuts import closure_cut_bound
from npuopt.solver.bench import COLUMNS as BENCH_COLUMNS
from npuopt.solver.bench import done_keys, git_commit, read_rows, run_study, write_readme
from npuopt.solver.bench import tasks as bench_tasks
from npuopt.solver.bounds import makespan_bound, order_bound
from npuopt.solver.canonical import canonicalize
from npuopt.solver.clock import process_elapsed
from npuopt.solver.errors import NpuoptError
from npuopt.solver.evaluate import evaluate as evaluate_solution
from npuopt.solver.files import ProblemFiles, atomic_write_text, read_solution, write_solution
from npuopt.solver.hardware import DEFAULT_HARDWARE, Hardware, load_hardware
from npuopt.solver.instance import (
    Instance,
    check_solvable,
    graph_data,
    load_instance,
    parse_instance,
)
from npuopt.solver.report import (
    case_summary,
    evaluation_dict,
    format_evaluation,
    format_instance_summary,
    instance_summary,
    results_table,
)
from npuopt.solver.solve import Candidate, Interrupted, Progress, SolveOptions, solve_instance
from npuopt.solver.speed import MAX_SPEED, MIN_SPEED, measure_speed, quantize
from npuopt.solver.tables import competition, render, seed_table
from npuopt.solver.workers import available_cores

#: What ``npuopt solve`` runs on when no graph is given.
DEMO_GRAPH = bundled("demo_conv.json")

EXIT_INVALID = 1
EXIT_BAD_INPUT = 2
#: Stopped by SIGINT or SIGTERM (the best answers found so far were written).
EXIT_INTERRUPTED = 130

app = typer.Typer(
    name="npuopt",
    help="Constraint-programming optimizer for in-core scheduling on Davinci-style NPUs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class ReuseRuleOption(str, Enum):
    residency = "residency"
    literal = "literal"


def _version() -> str:
    try:
        return version("npuopt")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "unknown"


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"npuopt {_version()}")
        raise typer.Exit()


@app.callback()
def main(
    show_version: Annotated[
        bool,
        typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Constraint-programming optimizer for in-core scheduling on Davinci-style NPUs."""


@contextmanager
def bad_input_exits() -> Iterator[None]:
    """Turn npuopt's own input errors into one line on stderr and exit code 2."""
    try:
        yield
    except NpuoptError as exc:
        typer.echo(f"npuopt: error: {exc}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None


def _load(graph: Path, hardware_file: Path | None) -> tuple[Instance, Hardware]:
    hardware = load_hardware(hardware_file) if hardware_file else DEFAULT_HARDWARE
    return load_instance(graph, hardware), hardware


GraphArg = Annotated[Path, typer.Argument(help="Graph: a .json file or a <name>_Nodes.csv file.")]
HardwareOpt = Annotated[
    Path | None, typer.Option("--hardware", help="Hardware TOML (capacities, layout rules).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
WorkersOpt = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Processes for the independent work of one solve (default: the cores this process "
        "may use). Same seed, speed and workers: same files; 1 runs everything in one process.",
    ),
]
FillOpt = Annotated[
    bool,
    typer.Option(
        "--fill",
        help="After its budgeted search, let Problem 3's search go on, on the clock, to its "
        "planned end of the limit: uses the limit on a machine faster than its speed factor, "
        "but the files then depend on the machine's load.",
    ),
]
SpeedOpt = Annotated[
    float | None,
    typer.Option(
        min=MIN_SPEED,
        max=MAX_SPEED,
        help="Size the work budgets for a machine this many times the reference one, rounded "
        "to a quarter octave (default: measured here, ~2 s; summary.json records it: pass it "
        "back to reproduce a run on another machine).",
    ),
]


@app.command()
def info(
    graph: GraphArg,
    hardware_file: HardwareOpt = None,
    as_json: JsonOpt = False,
    cuts: Annotated[
        int,
        typer.Option(
            "--cuts",
            min=0,
            help="Also cut this many nodes for the closure-cut Problem 1 bound (each about a "
            "second at 36k nodes; solve cuts as many as 3% of its limit allows).",
        ),
    ] = 0,
) -> None:
    """Show an instance's counts, pipe loads, memory totals and bounds."""
    with bad_input_exits():
        instance, hardware = _load(graph, hardware_file)
    order = order_bound(instance)
    if cuts:
        # Under canonical names, as solve does: a renamed copy gets the same nodes cut.
        began = time.monotonic()

        def heard(done: int, best: int) -> None:
            if done % 10 == 0 or done == cuts:
                elapsed = time.monotonic() - began
                typer.echo(
                    f"closure cuts: {done:,} of {cuts:,}, best {best:,} ({elapsed:.0f} s)", err=True
                )

        units, _ = closure_cut_bound(canonicalize(instance).instance, cuts, progress=heard)
        order = replace(order, closure_cut_units=units)
    summary = instance_summary(instance, hardware, order, makespan_bound(instance))
    typer.echo(json.dumps(summary, indent=2) if as_json else format_instance_summary(summary))


@app.command()
def evaluate(
    graph: GraphArg,
    problem: Annotated[int, typer.Option("--problem", min=1, max=3, help="Problem 1, 2 or 3.")],
    problem_dir: Annotated[
        Path | None,
        typer.Option("--dir", help="A ProblemN folder holding <case>_schedule.txt and friends."),
    ] = None,
    schedule: Annotated[Path | None, typer.Option(help="Schedule file (overrides --dir).")] = None,
    memory: Annotated[Path | None, typer.Option(help="Memory file (overrides --dir).")] = None,
    spill: Annotated[Path | None, typer.Option(help="Spill file (overrides --dir).")] = None,
    hardware_file: HardwareOpt = None,
    reuse_rule: Annotated[
        ReuseRuleOption, typer.Option(help="Reuse edges for the timing (SPEC section 4).")
    ] = ReuseRuleOption.residency,
    as_json: JsonOpt = False,
) -> None:
    """Check a solution against SPEC.md and print its objective values and bounds.

    Exit code 0 when the solution is valid, 1 when it is not, 2 on bad input.
    """
    with bad_input_exits():
        instance, hardware = _load(graph, hardware_file)
        files = _problem_files(instance.name, problem, problem_dir, schedule, memory, spill)
        solution = read_solution(files, instance, problem, hardware)
    result = evaluate_solution(instance, solution, problem, hardware, reuse_rule.value)
    order = order_bound(instance) if problem == 1 else None
    makespan = makespan_bound(instance, solution) if problem != 1 and result.valid else None
    if as_json:
        typer.echo(
            json.dumps(
                {"case": instance.name, **evaluation_dict(result, order, makespan)}, indent=2
            )
        )
    else:
        typer.echo(format_evaluation(instance.name, result, order, makespan))
    if not result.valid:
        raise typer.Exit(EXIT_INVALID)


def _problem_files(
    case: str,
    problem: int,
    problem_dir: Path | None,
    schedule: Path | None,
    memory: Path | None,
    spill: Path | None,
) -> ProblemFiles:
    needed = (
        {"schedule": schedule}
        if problem == 1
        else {"schedule": schedule, "memory": memory, "spill": spill}
    )
    if problem_dir is None:
        missing = [name for name, path in needed.items() if path is None]
        if missing:
            raise NpuoptError(
                f"give --dir PROBLEM_DIR or --{missing[0]} FILE for Problem {problem}"
            )
        return ProblemFiles(schedule or Path(), memory or Path(), spill or Path())
    if not problem_dir.is_dir():
        raise NpuoptError(f"{problem_dir}: not a directory")
    default = ProblemFiles.in_dir(problem_dir, case)
    return ProblemFiles(
        schedule or default.schedule, memory or default.memory, spill or default.spill
    )


class MethodChoice(str, Enum):
    full = "full"
    heuristics = "heuristics"


class ProblemChoice(str, Enum):
    one = "1"
    two = "2"
    three = "3"
    all = "all"


@app.command()
def solve(
    graphs: Annotated[
        list[Path] | None,
        typer.Argument(help="Graphs to solve, in turn (default: the bundled demo instance)."),
    ] = None,
    problem: Annotated[
        ProblemChoice, typer.Option(help="Problem 1, 2, 3 or all.")
    ] = ProblemChoice.all,
    time_limit: Annotated[
        float, typer.Option(min=0.0, help="Seconds for each graph, all stages together.")
    ] = 600.0,
    seed: Annotated[int, typer.Option(help="Seed of every random choice.")] = 0,
    out: Annotated[Path, typer.Option(help="Output folder: Problem1/2/3 and summary.json.")] = Path(
        "out"
    ),
    hardware_file: HardwareOpt = None,
    traffic_slack: Annotated[
        float, typer.Option(min=0.0, help="Problem 3 may use (1 + EPS) x the Problem 2 traffic.")
    ] = 0.0,
    reuse_rule: Annotated[
        ReuseRuleOption, typer.Option(help="Reuse edges for the timing (SPEC section 4).")
    ] = ReuseRuleOption.residency,
    method: Annotated[
        MethodChoice,
        typer.Option(help="full: heuristics then CP-SAT refinement; heuristics: warm starts only."),
    ] = MethodChoice.full,
    overwrite: Annotated[
        bool,
        typer.Option("--overwrite", help="Replace existing result files even by worse ones."),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", help="No progress lines.")] = False,
    speed: SpeedOpt = None,
    workers: WorkersOpt = None,
    fill: FillOpt = False,
) -> None:
    """Solve Problems 1-3 and write the attachment files, summary.json and a results table.

    Exit code 0 when every requested problem got a valid solution, 1 otherwise, 2 on bad input,
    130 when SIGINT or SIGTERM stopped it (the best answers found so far are written). Result
    files already in the output folder are replaced only by better ones, unless --overwrite.
    """
    with bad_input_exits():
        hardware = load_hardware(hardware_file) if hardware_file else DEFAULT_HARDWARE
        loaded: list[tuple[Instance, float]] = []
        problems = (1, 2, 3) if problem is ProblemChoice.all else (int(problem.value),)
        if fill and 3 not in problems:
            raise NpuoptError("--fill gives time to Problem 3's search: ask for Problem 3 too")
        for g in graphs or [DEMO_GRAPH]:
            began = time.monotonic()
            instance = load_instance(g, hardware)
            check_solvable(instance, hardware, problems, g)
            loaded.append((instance, time.monotonic() - began))
    factor = _speed(speed, quiet)
    options = SolveOptions(
        problems=problems,
        time_limit_s=time_limit,
        seed=seed,
        traffic_slack=traffic_slack,
        hardware=hardware,
        reuse_rule=reuse_rule.value,
        method=method.value,
        speed=factor,
        workers=workers or available_cores(),
        fill=fill,
    )
    cases: list[dict[str, Any]] = []
    summary: dict[str, Any] = {
        "npuopt_version": _version(),
        "problems": list(problems),
        "time_limit_s": time_limit,
        "seed": seed,
        "traffic_slack": traffic_slack,
        "reuse_rule": reuse_rule.value,
        "method": method.value,
        "hardware": str(hardware_file) if hardware_file else "contest defaults",
        "speed": factor,
        "workers": options.workers,
        "fill": fill,
        "cases": cases,
    }
    all_valid = True
    interrupted: str | None = None
    with _signals_interrupt():
        # The limit covers each graph from start to finish: its loading, and for the first
        # one the process start-up and imports too.
        startup = process_elapsed() - sum(load_s for _, load_s in loaded)
        for i, (instance, load_s) in enumerate(loaded):
            spent = load_s + (startup if i == 0 else 0.0)
            budget = replace(options, spent_s=spent)
            result = solve_instance(instance, budget, None if quiet else _print_progress)
            for p in problems:
                candidate = result.best(p)
                if candidate is None or not candidate.evaluation.valid:
                    all_valid = False
                    continue
                kept = None if overwrite else _better_existing(out, instance, p, candidate, options)
                if kept is not None:
                    setattr(result, f"p{p}", kept)  # the files keep it: report what they hold
                else:
                    write_solution(out / f"Problem{p}", instance.name, p, candidate.solution)
            cases.append(case_summary(result))
            interrupted = result.interrupted
            if interrupted:
                summary["interrupted"] = interrupted
            atomic_write_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")
            if interrupted:
                break
    typer.echo(results_table(cases))
    typer.echo(f"files in {out}/ (summary.json, Problem{'/'.join(map(str, problems))})")
    if interrupted:
        typer.echo(f"npuopt: interrupted ({interrupted}): kept the best found so far", err=True)
        raise typer.Exit(EXIT_INTERRUPTED)
    if not all_valid:
        raise typer.Exit(EXIT_INVALID)


@contextmanager
def _signals_interrupt() -> Iterator[None]:
    """While solving, SIGTERM stops the run the way Ctrl-C (SIGINT) does: the solve keeps its
    best answers and the files are written."""

    def stop(signum: int, frame: object) -> None:
        raise Interrupted(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _better_existing(
    out: Path, instance: Instance, problem: int, candidate: Candidate, options: SolveOptions
) -> Candidate | None:
    """The solution already in ``out`` for this case and problem when it is valid and no worse
    than ``candidate`` (an existing result is never replaced by a worse one without
    ``--overwrite``); ``None`` when there is none, it cannot be read, or it is worse."""
    files = ProblemFiles.in_dir(out / f"Problem{problem}", instance.name)
    if not files.schedule.exists():
        return None
    try:
        existing = read_solution(files, instance, problem, options.hardware)
    except NpuoptError:
        return None  # not a result for this graph: replace it
    judged = evaluate_solution(instance, existing, problem, options.hardware, options.reuse_rule)
    if not judged.valid or judged.objective() > candidate.evaluation.objective():
        return None
    typer.echo(
        f"npuopt: kept {files.schedule.parent}/ for {instance.name}: no worse than this run "
        "(use --overwrite to replace it)",
        err=True,
    )
    return Candidate("existing files", existing, judged)


def _speed(given: float | None, quiet: bool) -> float:
    """The speed factor: ``given``, or measured on this machine (and said so)."""
    if given is not None:
        return quantize(given)
    factor = measure_speed()
    if not quiet:
        typer.echo(f"speed factor {factor:.3g} (measured; --speed {factor:.3g} pins it)", err=True)
    return factor


def _print_progress(event: Progress) -> None:
    typer.echo(f"[{event.case}] {event.stage}: {event.message} ({event.elapsed_s:.1f} s)", err=True)


@app.command()
def generate(
    family: Annotated[str, typer.Argument(help=f"Family: {', '.join(FAMILIES)}.")],
    out: Annotated[Path, typer.Option(help="Output JSON file.")],
    nodes: Annotated[int | None, typer.Option(min=1, help="Scale to about N nodes.")] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param",
            help="A family parameter NAME=INT (e.g. m=8 for matmul), instead of --nodes.",
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed; same seed, same graph.")] = 0,
    jitter: Annotated[
        float,
        typer.Option(
            min=0.0, max=0.99, help="Vary every size and cycle count by up to +-F (seeded)."
        ),
    ] = 0.0,
) -> None:
    """Generate a contest-shaped instance and write it as JSON.

    Families and their parameters: conv (layers, tiles, groups, halo, residual), matmul (m, n,
    k), flashattention (rows, cols), random (layers, width, fan_in), compose (matmul, then
    flashattention, then conv, chained). With --jitter, sizes may outgrow a memory: npuopt
    solve then says which op cannot be placed.
    """
    with bad_input_exits():
        if family not in FAMILIES:
            raise NpuoptError(f"unknown family {family!r}; choose from {', '.join(FAMILIES)}")
        shape = dict(_parameter(text) for text in param or [])
        try:
            data = generate_graph(family, seed=seed, nodes=nodes, jitter=jitter, **shape)
        except (ValueError, TypeError) as exc:
            raise NpuoptError(f"generate {family}: {exc}") from None
        instance = parse_instance(data, name=out.stem, source=f"generated {family}")
    _write_graph(out, data)
    jittered = f", jitter {jitter:g}" if jitter else ""
    typer.echo(
        f"{out}: {instance.n_nodes:,} nodes, {len(instance.edge_array()):,} edges, "
        f"{len(instance.buffers):,} buffers ({family}, seed {seed}{jittered})"
    )


def _write_graph(out: Path, data: dict[str, Any]) -> None:
    """A graph as JSON, one node per line (diffs stay readable), written atomically."""
    text = '{"Nodes": [\n' + ",\n".join(json.dumps(n) for n in data["Nodes"])
    text += '\n],\n"Edges": ' + json.dumps(data["Edges"]) + "}\n"
    atomic_write_text(out, text)


@app.command()
def rename(
    graphs: Annotated[
        list[Path], typer.Argument(help="One graph, or several to put side by side.")
    ],
    out: Annotated[Path, typer.Option(help="Output JSON file.")],
    seed: Annotated[int, typer.Option(help="Seed; same seed, same file.")] = 0,
) -> None:
    """Write the same problem under other names: one graph with its node ids taken from a
    random topological order, its BufIds permuted and each op's Bufs listed in another order;
    several graphs as one graph of independent parts, their ids interleaved.

    npuopt's answers should not depend on names: solve both files and compare
    (benchmarks/invariance.py does it for the official cases).
    """
    with bad_input_exits():
        datas = [graph_data(load_instance(g)) for g in graphs]
        data = renumber(datas[0], seed) if len(datas) == 1 else union(datas, seed)
        instance = parse_instance(data, name=out.stem, source="renamed graph")
    _write_graph(out, data)
    what = "renumbered" if len(graphs) == 1 else f"{len(graphs)} graphs side by side"
    size = f"{instance.n_nodes:,} nodes, {len(instance.buffers):,} buffers"
    typer.echo(f"{out}: {size} ({what}, seed {seed})")


@app.command()
def bench(
    graphs: Annotated[
        list[Path] | None, typer.Argument(help="Graphs to run (with --official: added to them).")
    ] = None,
    official: Annotated[
        bool, typer.Option("--official", help="Add the official cases found on this machine.")
    ] = False,
    methods: Annotated[
        str, typer.Option(help="Comma-separated methods: full, heuristics.")
    ] = "heuristics,full",
    seeds: Annotated[str, typer.Option(help="Comma-separated seeds.")] = "0",
    time_limit: Annotated[float, typer.Option(min=0.0, help="Seconds per run.")] = 60.0,
    jobs: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 1,
    name: Annotated[str, typer.Option(help="Study name: results/<date>_<name>.")] = "bench",
    out: Annotated[Path | None, typer.Option(help="Study folder (overrides --name).")] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            help="Run on a Ray cluster at ADDRESS ('local': start one here with --jobs CPUs).",
        ),
    ] = None,
    hardware_file: HardwareOpt = None,
    speed: SpeedOpt = None,
    workers: WorkersOpt = None,
    fill: FillOpt = False,
) -> None:
    """Run methods x graphs x seeds in worker processes (or on a Ray cluster) into a study
    folder (runs.csv, files, README). Running the same command again skips the rows already
    in runs.csv. Each run uses --workers processes (default: this machine's cores shared by
    the --jobs runs; on a Ray cluster, each run uses that many on its machine)."""
    with bad_input_exits():
        hardware = load_hardware(hardware_file) if hardware_file else DEFAULT_HARDWARE
        paths = [str(g) for g in graphs or []]
        if official:
            paths += [str(p) for n in OFFICIAL_CASES if (p := official_case(n)) is not None]
        if not paths:
            raise NpuoptError("no graphs: give GRAPH files or --official")
        for path in paths:
            load_instance(path, hardware)  # every input is checked before any run starts
        try:
            todo = bench_tasks(
                paths,
                [m.strip() for m in methods.split(",") if m.strip()],  # type: ignore[misc]
                [int(s) for s in seeds.split(",") if s.strip()],
                time_limit,
                _speed(speed, quiet=False),
                workers or max(1, available_cores() // jobs),
                fill,
            )
        except ValueError as exc:
            raise NpuoptError(f"bench: {exc}") from None
    folder = out or Path("results") / f"{date.today().isoformat()}_{name}"
    root = Path(__file__).resolve().parents[1]
    commit = git_commit(root)
    already = done_keys(folder)
    left = sum(t.key not in already for t in todo)
    typer.echo(f"{folder}: {len(todo)} runs, {len(todo) - left} already done", err=True)
    command = "npuopt " + " ".join(sys.argv[1:]) if sys.argv else "npuopt bench"
    write_readme(folder, command, commit, f"methods {methods} on {len(paths)} graphs")

    def show(row: dict[str, Any]) -> None:
        typer.echo(
            f"[{row['instance']} {row['method']} seed {row['seed']}] {row['status']}: "
            f"P1 {row['p1_max_v_stay']}, P2 {row['p2_traffic']}, P3 {row['p3_makespan']} "
            f"({row['runtime_s']} s)",
            err=True,
        )

    with bad_input_exits():
        run_study(
            todo, folder, jobs=jobs, hardware=hardware, commit=commit, on_row=show, ray_address=ray
        )
    header, body = competition(read_rows(folder))
    typer.echo(render(header, body, "md"), nl=False)


class TableFormat(str, Enum):
    md = "md"
    csv = "csv"
    tex = "tex"


@app.command()
def table(
    study: Annotated[Path, typer.Argument(help="A study folder holding runs.csv.")],
    fmt: Annotated[TableFormat, typer.Option("--format", help="md, csv or tex.")] = TableFormat.md,
    seeds: Annotated[
        bool, typer.Option("--seeds", help="The per-seed mean/min/max table instead.")
    ] = False,
) -> None:
    """Print a study's competition table (or its per-seed table) as Markdown, CSV or LaTeX."""
    with bad_input_exits():
        if not (study / "runs.csv").is_file():
            raise NpuoptError(f"{study}: no runs.csv (run npuopt bench first)")
        rows = list(read_rows(study))
        missing = [c for c in BENCH_COLUMNS if rows and c not in rows[0]]
        if missing:
            raise NpuoptError(f"{study / 'runs.csv'}: line 1: missing column {missing[0]!r}")
    header, body = seed_table(rows) if seeds else competition(rows)
    typer.echo(render(header, body, fmt.value), nl=False)


class PlotKind(str, Enum):
    gantt = "gantt"
    memory = "memory"
    vstay = "vstay"
    frontier = "frontier"
    progress = "progress"


@app.command()
def plot(
    kind: Annotated[PlotKind, typer.Argument(help="gantt, memory, vstay, frontier or progress.")],
    out: Annotated[Path, typer.Option(help="Image file: .png, .svg or .pdf.")],
    graph: Annotated[
        Path | None, typer.Option(help="Graph (gantt, memory, vstay).", show_default=False)
    ] = None,
    problem_dir: Annotated[
        Path | None, typer.Option("--dir", help="ProblemN folder of the solution to draw.")
    ] = None,
    problem: Annotated[int, typer.Option(min=1, max=3, help="Problem of --dir.")] = 3,
    memory: Annotated[str, typer.Option(help="Memory of the memory map.")] = "UB",
    summary: Annotated[
        Path | None, typer.Option(help="summary.json of a solve (frontier, progress).")
    ] = None,
    case: Annotated[str | None, typer.Option(help="Case in the summary (default: first).")] = None,
    hardware_file: HardwareOpt = None,
) -> None:
    """Draw a solution (pipe chart, memory map, V_stay curve) or a solve (frontier, progress)
    into an image file; never opens a window."""
    try:
        from npuopt.solver import plots
    except ImportError:  # pragma: no cover - the plot extra is not installed
        typer.echo("npuopt: error: plotting needs matplotlib: pip install 'npuopt[plot]'", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    with bad_input_exits():
        if out.suffix.lower() not in (".png", ".svg", ".pdf"):
            raise NpuoptError(f"{out}: the image must end in .png, .svg or .pdf")
        if kind in (PlotKind.frontier, PlotKind.progress):
            if summary is None:
                raise NpuoptError(f"plot {kind.value} needs --summary SUMMARY_JSON")
            row = _summary_case(summary, case)
        else:
            if graph is None or problem_dir is None:
                raise NpuoptError(f"plot {kind.value} needs --graph GRAPH and --dir PROBLEM_DIR")
            instance, hardware = _load(graph, hardware_file)
            files = _problem_files(instance.name, problem, problem_dir, None, None, None)
            solution = read_solution(files, instance, problem, hardware)
            if kind is not PlotKind.vstay and problem == 1:
                raise NpuoptError(f"plot {kind.value} draws a Problem 2/3 solution (--problem)")
            if not evaluate_solution(instance, solution, problem, hardware).valid:
                raise NpuoptError(f"{problem_dir}: not a valid solution (npuopt evaluate says why)")
    if kind is PlotKind.gantt:
        ax = plots.gantt(instance, solution, hardware=hardware)
    elif kind is PlotKind.memory:
        ax = plots.memory_map(instance, solution, memory, hardware=hardware)
    elif kind is PlotKind.vstay:
        ax = plots.vstay_curve(instance, solution)
    elif kind is PlotKind.frontier:
        points = [(p["extra_traffic_units"], p["makespan_cycles"]) for p in row["frontier"]]
        ax = plots.frontier(points)
    else:
        ax = plots.progress([(h["seconds"], h["problem"], h["value"]) for h in row["history"]])
    out.parent.mkdir(parents=True, exist_ok=True)
    ax.get_figure(root=True).savefig(out, bbox_inches="tight")  # type: ignore[union-attr]
    typer.echo(f"{out}: {kind.value}")


def _summary_case(path: Path, case: str | None) -> dict[str, Any]:
    """A case of a summary.json, with its frontier and history (an NpuoptError if absent)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise NpuoptError(f"{path}: cannot read a summary: {exc}") from None
    cases = data.get("cases", []) if isinstance(data, dict) else []
    chosen = next((c for c in cases if case in (None, c.get("case"))), None)
    if chosen is None:
        raise NpuoptError(f"{path}: no case {case!r}" if case else f"{path}: no cases")
    return {
        "frontier": chosen.get("p3", {}).get("frontier", []),
        "history": chosen.get("history", []),
    }


def _parameter(text: str) -> tuple[str, int]:
    """``NAME=INT`` of ``--param``."""
    name, sep, value = text.partition("=")
    if not sep or not name or not value.strip().lstrip("-").isdigit():
        raise NpuoptError(f"--param {text!r}: expected NAME=INTEGER, e.g. m=8")
    return name.strip(), int(value)


if __name__ == "__main__":  # python -m npuopt.solver.cli
    app()
