"""Plots (issue 7): every figure is written, non-empty, headless; bad requests exit 2."""

from __future__ import annotations

import json
import sys

import pytest
from typer.testing import CliRunner

from npuopt.heuristics.ordering import list_schedule, program_rank
from npuopt.heuristics.placement import place
from npuopt.solver import plots
from npuopt.solver.cli import app
from npuopt.solver.files import write_solution
from npuopt.solver.hardware import Hardware

from helpers import data_path, tiny

runner = CliRunner()


@pytest.fixture
def solved(tmp_path):
    """forced_spill with UB = 150 (one spill, so spill bars and hatched segments exist)."""
    inst = tiny("forced_spill")
    hardware = Hardware(capacity={"UB": 150})
    solution = place(inst, list_schedule(inst, "program", program_rank(inst)), hardware)
    write_solution(tmp_path / "Problem3", inst.name, 3, solution)
    (tmp_path / "hw.toml").write_text("[capacity]\nUB = 150\n")
    return inst, solution, hardware, tmp_path


def test_functions_draw_on_given_axes_without_pyplot(solved):
    inst, solution, hardware, _ = solved
    ax = plots.gantt(inst, solution, hardware=hardware)
    assert ax.get_title().startswith("forced_spill: pipes")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["MTE2", "MTE3", "VECTOR"]
    again = plots.memory_map(inst, solution, "UB", ax=ax, hardware=hardware)
    assert again is ax and len(ax.patches) >= 3  # b0 before and after its spill, b1
    assert "matplotlib.pyplot" not in sys.modules  # no backend chosen, no window possible


@pytest.mark.parametrize("kind", ["gantt", "memory", "vstay"])
def test_solution_plots_are_written(solved, kind):
    inst, _, _, folder = solved
    out = folder / f"{kind}.png"
    result = runner.invoke(
        app,
        [
            "plot",
            kind,
            "--graph",
            str(data_path("forced_spill.json")),
            "--dir",
            str(folder / "Problem3"),
            "--hardware",
            str(folder / "hw.toml"),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5_000


@pytest.mark.parametrize(("kind", "suffix"), [("frontier", ".svg"), ("progress", ".pdf")])
def test_solve_plots_are_written(tmp_path, kind, suffix):
    solve = runner.invoke(
        app, ["solve", str(data_path("example7.json")), "--time-limit", "2", "--out", str(tmp_path)]
    )
    assert solve.exit_code == 0, solve.output
    case = json.loads((tmp_path / "summary.json").read_text())["cases"][0]
    assert case["history"] and case["p3"]["frontier"]
    out = tmp_path / f"{kind}{suffix}"
    result = runner.invoke(
        app, ["plot", kind, "--summary", str(tmp_path / "summary.json"), "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 1_000


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["gantt", "--out", "x.png"], "needs --graph GRAPH and --dir PROBLEM_DIR"),
        (["frontier", "--out", "x.png"], "needs --summary"),
        (["frontier", "--summary", "x.json", "--out", "x.gif"], "must end in .png, .svg or .pdf"),
    ],
)
def test_bad_plot_requests_exit_2(tmp_path, args, words):
    result = runner.invoke(app, ["plot", *args])
    assert result.exit_code == 2 and words in result.output
