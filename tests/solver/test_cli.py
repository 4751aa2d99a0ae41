"""The npuopt command line: info, evaluate, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from solver.cli import app
from solver.files import write_solution
from solver.solution import Solution, Spill

from helpers import data_path

runner = CliRunner()
GRAPH = str(data_path("example7.json"))


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_version():
    result = run("--version")
    assert result.exit_code == 0 and result.output.startswith("npuopt ")


def test_info_text_and_json():
    text = run("info", GRAPH)
    assert text.exit_code == 0
    assert "7 nodes" in text.output and "max V_stay >= 10" in text.output
    data = json.loads(run("info", GRAPH, "--json").output)
    assert data["bounds"]["p3_cycles"] == 60
    assert data["memory"]["UB"] == {"buffers": 2, "total_units": 10, "capacity_units": 1024}


def test_evaluate_valid_problem_2(tmp_path):
    spilled = Solution(
        order=(0, 1, 7, 8, 2, 3, 4, 5, 6), offsets={0: 0, 1: 5}, spills=(Spill(0, 100),)
    )
    write_solution(tmp_path / "Problem2", "example7", 2, spilled)
    result = run("evaluate", GRAPH, "--problem", 2, "--dir", tmp_path / "Problem2", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert (data["valid"], data["makespan_cycles"], data["extra_traffic_units"]) == (True, 220, 5)
    text = run("evaluate", GRAPH, "--problem", 2, "--dir", tmp_path / "Problem2")
    assert "makespan: 220 cycles" in text.output


def test_evaluate_invalid_exits_1(tmp_path):
    write_solution(tmp_path, "example7", 2, Solution(order=range(7), offsets={0: 0, 1: 0}))
    result = run("evaluate", GRAPH, "--problem", 2, "--dir", tmp_path)
    assert result.exit_code == 1
    assert "valid: NO" in result.output and "overlap" in result.output


def test_explicit_files_and_literal_rule(tmp_path):
    files = write_solution(tmp_path, "whatever", 2, Solution(order=range(7), offsets={0: 0, 1: 5}))
    result = run(
        "evaluate",
        GRAPH,
        "--problem",
        3,
        "--schedule",
        files.schedule,
        "--memory",
        files.memory,
        "--spill",
        files.spill,
        "--reuse-rule",
        "literal",
        "--json",
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["reuse_rule"] == "literal"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["info", "missing.json"], ["missing.json", "cannot read"]),
        (["evaluate", GRAPH, "--problem", "2"], ["--dir"]),
        (["evaluate", GRAPH, "--problem", "2", "--dir", "nowhere"], ["nowhere", "not a directory"]),
        (["info", GRAPH, "--hardware", "absent.toml"], ["absent.toml"]),
    ],
)
def test_bad_input_exits_2_with_one_line(args, words):
    result = run(*args)
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("npuopt: error: ")
    for word in words:
        assert word in lines[0]


def test_bad_solution_file_exits_2(tmp_path):
    files = write_solution(tmp_path, "example7", 1, Solution(order=range(7)))
    files.schedule.write_text("0\n1\n2\n3.5\n")
    result = run("evaluate", GRAPH, "--problem", 1, "--dir", tmp_path)
    assert result.exit_code == 2
    assert f"{files.schedule}:4: '3.5' is not an integer" in result.output


def test_bad_graph_exits_2(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(data_path("example7.json").read_text().replace('"Cycles": 30', '"Cycles": -30'))
    result = run("info", bad)
    assert result.exit_code == 2
    assert "bad.json: node 3 field Cycles" in result.output


def test_console_script():
    exe = Path(sys.executable).with_name("npuopt")
    if not exe.exists():
        pytest.skip(f"console script not installed beside {sys.executable}")
    result = subprocess.run([exe, "info", GRAPH], capture_output=True, text=True, check=False)
    assert result.returncode == 0 and "7 nodes" in result.stdout
