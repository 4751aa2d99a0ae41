"""npuopt bench and npuopt table (issue 7): a study runs in worker processes, resumes without
redoing rows, and its tables match golden files worked out by hand."""

from __future__ import annotations

import csv

import pytest
from typer.testing import CliRunner

from npuopt.solver.bench import COLUMNS, run_study, tasks
from npuopt.solver.cli import app
from npuopt.solver.tables import FORMATS, competition, render, seed_table

from helpers import data_path

runner = CliRunner()
STUDY = data_path("study")


def rows_of(folder):
    with (folder / "runs.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_a_study_runs_in_workers_and_resumes(tmp_path):
    """2 graphs x 1 method x 2 seeds on 2 workers: 4 rows, each with its files; the same
    study again adds nothing; with one row lost, exactly that run is redone."""
    graphs = [str(data_path("example7.json")), str(data_path("forced_spill.json"))]
    todo = tasks(graphs, ["heuristics"], [0, 1], 1.0)
    first = run_study(todo, tmp_path, jobs=2, commit="test")
    assert len(first) == 4 and len(rows_of(tmp_path)) == 4
    assert list(rows_of(tmp_path)[0]) == list(COLUMNS)
    assert all(r["status"] == "ok" and r["commit"] == "test" for r in rows_of(tmp_path))
    for r in rows_of(tmp_path):
        folder = tmp_path / "runs" / r["instance"] / "heuristics" / f"seed{r['seed']}"
        assert (folder / "Problem3" / f"{r['instance']}_schedule.txt").exists()
        assert (folder / "summary.json").exists()
    assert run_study(todo, tmp_path, jobs=2) == []
    kept = rows_of(tmp_path)
    with (tmp_path / "runs.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(kept[1:])
    again = run_study(todo, tmp_path, jobs=1)
    assert [(r["instance"], str(r["seed"])) for r in again] == [
        (kept[0]["instance"], kept[0]["seed"])
    ]
    assert len(rows_of(tmp_path)) == 4


def test_unknown_method_is_refused():
    with pytest.raises(ValueError, match="unknown method 'exact'"):
        tasks(["g.json"], ["exact"], [0], 1.0)  # type: ignore[list-item]


@pytest.mark.parametrize("fmt", FORMATS)
def test_competition_table_matches_the_golden_file(fmt):
    """tests/data/study/runs.csv, by hand: Case_A heuristics has two seeds; its P1 is the
    better one (4,500 of 4,500 and 4,514), its P2 the run with less traffic (seed 1: 1,536,
    though slower), its P3 the faster run (seed 1: 33,090, gap 1 - 25,600/33,090 = 22.6%), and
    its time the slower run (8.4 s). Conv_B's run has no P2/P3 answer: dashes."""
    header, body = competition(rows_of(STUDY))
    assert render(header, body, fmt) == (STUDY / f"table.{fmt}").read_text()


def test_seed_table_matches_the_golden_file():
    """Case_A heuristics: P1 mean (4,500 + 4,514) / 2 = 4,507.0, P2 traffic mean 1,664.0,
    P3 mean (33,775 + 33,090) / 2 = 33,432.5."""
    header, body = seed_table(rows_of(STUDY))
    assert render(header, body, "md") == (STUDY / "seeds.md").read_text()


def test_table_command(tmp_path):
    result = runner.invoke(app, ["table", str(STUDY), "--format", "tex"])
    assert result.exit_code == 0 and result.output == (STUDY / "table.tex").read_text()
    missing = runner.invoke(app, ["table", str(tmp_path)])
    assert missing.exit_code == 2 and "no runs.csv" in missing.output


def test_bench_command_needs_graphs(tmp_path):
    result = runner.invoke(app, ["bench", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "no graphs" in result.output


def test_a_study_runs_on_a_local_ray_runtime(tmp_path):
    """--ray local: the same study as tasks of a real Ray runtime started here (not a mock):
    the rows and files are those of the worker-process path."""
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install npuopt[ray])")
    graphs = [str(data_path("example7.json")), str(data_path("forced_spill.json"))]
    todo = tasks(graphs, ["heuristics"], [0], 1.0)
    rows = run_study(todo, tmp_path, jobs=2, commit="ray", ray_address="local")
    assert sorted(r["instance"] for r in rows) == ["example7", "forced_spill"]
    assert all(r["status"] == "ok" for r in rows_of(tmp_path))
    reference = run_study(todo, tmp_path / "processes", jobs=2, commit="ray")
    pick = ("instance", "p1_max_v_stay", "p2_traffic", "p3_makespan")
    assert sorted(tuple(str(r[k]) for k in pick) for r in rows) == sorted(
        tuple(str(r[k]) for k in pick) for r in reference
    )
    assert run_study(todo, tmp_path, jobs=2, ray_address="local") == []  # resumes: nothing left
    # A run with two workers asks Ray for two CPUs: one machine with both, and it ends.
    two = tasks(graphs[:1], ["heuristics"], [0], 1.0, workers=2)
    rows = run_study(two, tmp_path / "two", jobs=1, commit="ray", ray_address="local")
    assert [r["status"] for r in rows] == ["ok"]


def test_bench_fill_reaches_each_solve_and_its_summary(tmp_path, monkeypatch):
    import json

    import npuopt.solver.bench as bench

    seen = []
    solve = bench.solve_instance

    def record(instance, options, *rest):
        seen.append(options.fill)
        return solve(instance, options, *rest)

    monkeypatch.setattr(bench, "solve_instance", record)
    graph = str(data_path("example7.json"))
    todo = tasks([graph], ["heuristics"], [0], 1.0, fill=True)
    bench.run_task(todo[0], str(tmp_path), bench.DEFAULT_HARDWARE, "test")
    summary = tmp_path / "runs" / "example7" / "heuristics" / "seed0" / "summary.json"
    assert seen == [True] and json.loads(summary.read_text())["fill"] is True
