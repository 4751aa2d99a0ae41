"""The npuopt command line: info, evaluate, exit codes, one-line errors."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from npuopt.instances import bundled
from npuopt.solver.cli import app
from npuopt.solver.files import write_solution
from npuopt.solver.solution import Solution, Spill

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


def test_info_cuts_nodes_for_the_closure_cut_bound():
    """``--cuts`` adds the closure-cut bound (name-free: the renamed copy gets the same) and
    says how far the search got."""
    graph = bundled("random_200.json")
    plain = json.loads(run("info", graph, "--json").output)["bounds"]
    cut = run("info", graph, "--json", "--cuts", 20)
    assert cut.exit_code == 0 and "closure cuts: 20 of 20" in cut.stderr
    bounds = json.loads(cut.stdout)["bounds"]
    assert plain["p1_closure_cut_units"] == 0
    assert bounds["p1_closure_cut_units"] > plain["p1_units"] == plain["p1_forced_live_units"]
    assert bounds["p1_units"] == bounds["p1_closure_cut_units"]
    text = run("info", graph, "--cuts", 20).stdout
    assert f"closure cut {bounds['p1_closure_cut_units']:,})" in text


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


def test_solve_writes_files_summary_and_table(tmp_path):
    out = tmp_path / "out"
    result = run("solve", GRAPH, "--out", out, "--time-limit", 10, "--quiet")
    assert result.exit_code == 0, result.output
    for p in (1, 2, 3):
        assert (out / f"Problem{p}" / "example7_schedule.txt").exists()
    assert (out / "Problem3" / "example7_spill.txt").exists()
    summary = json.loads((out / "summary.json").read_text())
    case = summary["cases"][0]
    assert case["case"] == "example7" and case["p3"]["valid"]
    assert "P1 peak" in result.output and "example7" in result.output
    for p in (1, 2, 3):  # every written file passes npuopt evaluate
        check = run("evaluate", GRAPH, "--problem", p, "--dir", out / f"Problem{p}")
        assert check.exit_code == 0, check.output


def test_solve_records_the_speed_factor_measured_or_pinned(tmp_path):
    """The speed factor sizes every budget, so summary.json records it; a pinned one is rounded
    to the quarter-octave grid a measured one lies on (1.7 -> 2 ** 0.75)."""
    args = ("solve", GRAPH, "--time-limit", 5, "--problem", "1")
    measured = run(*args, "--out", tmp_path / "m")
    assert measured.exit_code == 0, measured.output
    factor = json.loads((tmp_path / "m" / "summary.json").read_text())["speed"]
    assert f"speed factor {factor:.3g}" in measured.output
    assert (
        4 * math.log2(factor) == pytest.approx(round(4 * math.log2(factor))) and 0.25 <= factor <= 8
    )
    pinned = run(*args, "--out", tmp_path / "p", "--speed", 1.7, "--quiet")
    assert pinned.exit_code == 0, pinned.output
    assert json.loads((tmp_path / "p" / "summary.json").read_text())["speed"] == 2**0.75
    assert "speed factor" not in pinned.output
    assert run(*args, "--out", tmp_path / "x", "--speed", 0).exit_code == 2


def test_fill_without_problem_3_is_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "out"
    result = run("solve", GRAPH, "--problem", "2", "--fill", "--out", out)
    assert result.exit_code == 2 and "--fill" in result.output and not out.exists()
    filled = run("solve", GRAPH, "--time-limit", 5, "--fill", "--quiet", "--out", out)
    assert filled.exit_code == 0, filled.output
    assert json.loads((out / "summary.json").read_text())["fill"] is True


def test_solve_without_graph_uses_the_bundled_demo(tmp_path):
    result = run("solve", "--out", tmp_path, "--time-limit", 10, "--problem", "1", "--quiet")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "Problem1" / "demo_conv_schedule.txt").exists()


def test_solve_bad_graph_writes_nothing(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"Nodes": [], "Edges": [[0, 1]]}')
    out = tmp_path / "out"
    result = run("solve", GRAPH, bad, "--out", out)
    assert result.exit_code == 2
    assert "bad.json: edge 0 [0, 1]" in result.output
    assert not out.exists()


def test_generate_writes_a_valid_graph(tmp_path):
    target = tmp_path / "g.json"
    result = run("generate", "conv", "--nodes", 200, "--seed", 2, "--out", target)
    assert result.exit_code == 0, result.output
    assert run("info", target).exit_code == 0
    assert run("generate", "lstm", "--out", target).exit_code == 2


def test_solve_is_byte_for_byte_reproducible(tmp_path):
    """Same seed, same files, even under different string-hash seeds (two processes)."""
    exe = Path(sys.executable).with_name("npuopt")
    if not exe.exists():
        pytest.skip(f"console script not installed beside {sys.executable}")
    outs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / hash_seed
        env = {**__import__("os").environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [exe, "solve", "--out", out, "--time-limit", "30", "--seed", "5", "--speed", "1"]
            + ["--quiet"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        outs.append(out)
    for p in (1, 2, 3):
        for first in sorted((outs[0] / f"Problem{p}").iterdir()):
            assert first.read_bytes() == (outs[1] / f"Problem{p}" / first.name).read_bytes()
    # Not by luck of the clock: every search ended on its budget (or found its bound), which
    # holds whatever the machine's load.
    for out in outs:
        case = json.loads((out / "summary.json").read_text())["cases"][0]
        stops = {p: case[p]["lns_stop"] for p in ("p1", "p2", "p3") if "lns_stop" in case[p]}
        assert "p3" in stops and "deadline" not in stops.values(), stops


def test_an_existing_result_is_kept_unless_overwrite(tmp_path):
    """Issue 8: an existing result is never replaced by a worse one without --overwrite.

    example7: every valid order has max V_stay 10 (EXP holds both buffers). An existing
    Problem 1 file with ALLOC b1 first (2,0,1,3,4,5,6) is as good as anything npuopt finds, so
    it is kept byte for byte and the summary reports the file's own figures; with --overwrite
    npuopt's just-in-time order (ALLOC b1 right before EXP) replaces it. A file that is not a
    valid solution is always replaced."""
    schedule = tmp_path / "Problem1" / "example7_schedule.txt"
    schedule.parent.mkdir()
    schedule.write_text("2\n0\n1\n3\n4\n5\n6\n")
    kept = run("solve", GRAPH, "--problem", "1", "--time-limit", 2, "--out", tmp_path, "--quiet")
    assert kept.exit_code == 0, kept.output
    assert schedule.read_text() == "2\n0\n1\n3\n4\n5\n6\n"
    case = json.loads((tmp_path / "summary.json").read_text())["cases"][0]
    assert case["p1"]["method"] == "existing files" and case["p1"]["max_v_stay_units"] == 10
    replaced = run(
        "solve", GRAPH, "--problem", "1", "--time-limit", 2, "--out", tmp_path, "--overwrite"
    )
    assert replaced.exit_code == 0, replaced.output
    assert schedule.read_text() != "2\n0\n1\n3\n4\n5\n6\n"
    schedule.write_text("3\n0\n")  # not a solution of this graph
    again = run("solve", GRAPH, "--problem", "1", "--time-limit", 2, "--out", tmp_path)
    assert again.exit_code == 0 and len(schedule.read_text().split()) == 7


@pytest.mark.parametrize(
    ("sig", "stage"), [("SIGINT", "P1"), ("SIGTERM", "P1"), ("SIGTERM", "P2-first")]
)
def test_interrupt_writes_the_best_so_far(tmp_path, sig, stage):
    """Issue 8: SIGINT or SIGTERM during a solve writes the best answers found so far (valid
    under the evaluator) and a summary marked interrupted, then exits 130. The signal comes
    once Problem 1's list scheduler has answered, during the CP-SAT refinement; or (issue 23)
    once Problem 2's first placement is in, during its order search: Problems 2 and 3 then
    have valid files too."""
    exe = Path(sys.executable).with_name("npuopt")
    if not exe.exists():
        pytest.skip(f"console script not installed beside {sys.executable}")
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [
            exe,
            "solve",
            "--out",
            out,
            "--time-limit",
            "300" if stage == "P1" else "40",
            "--seed",
            "1",
        ],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # progress lines: wait for the stage's first answer
        if f"] {stage}:" in line:
            break
    proc.send_signal(getattr(__import__("signal"), sig))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert f"interrupted ({sig})" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["interrupted"] == sig and summary["cases"][0]["interrupted"] == sig
    problems = (1, 2, 3) if stage == "P2-first" else (1,)
    for problem in problems:
        folder = out / f"Problem{problem}"
        check = run("evaluate", bundled("demo_conv.json"), "--problem", problem, "--dir", folder)
        assert check.exit_code == 0, check.output


def test_generate_every_family_with_params(tmp_path):
    out = tmp_path / "mm.json"
    done = run(
        "generate", "matmul", "--param", "m=2", "--param", "n=3", "--param", "k=2", "--out", out
    )
    assert done.exit_code == 0, done.output
    assert "matmul, seed 0" in done.output and out.exists()
    for family in ("flashattention", "random", "compose"):
        result = run("generate", family, "--nodes", 400, "--seed", 1, "--out", tmp_path / "g.json")
        assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--param", "m8"], "expected NAME=INTEGER"),
        (["--param", "m=x"], "expected NAME=INTEGER"),
        (["--param", "q=3"], "MatmulShape has no parameter 'q'"),
    ],
)
def test_generate_bad_params_exit_2(tmp_path, args, words):
    result = run("generate", "matmul", *args, "--out", tmp_path / "x.json")
    assert result.exit_code == 2 and words in result.output
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize(
    ("memory", "capacity"), [("L1", 4096), ("UB", 1024), ("L0A", 256), ("L0B", 256), ("L0C", 512)]
)
def test_an_op_too_big_for_its_memory_exits_2_naming_it_and_writes_nothing(
    tmp_path, memory, capacity
):
    """Issue 23: an op whose two buffers each fit the memory but not together: Problems 2 and
    3 have no answer, so solve says so before solving (exit 2, nothing written); Problem 1,
    which has no capacities, still runs."""
    size = capacity // 2 + 1
    nodes = [
        {"Id": 0, "Op": "ALLOC", "BufId": 0, "Size": size, "Type": memory},
        {"Id": 1, "Op": "ALLOC", "BufId": 1, "Size": size, "Type": memory},
        {"Id": 2, "Op": "MIX", "Pipe": "VECTOR", "Cycles": 5, "Bufs": [0, 1]},
        {"Id": 3, "Op": "FREE", "BufId": 0, "Size": size, "Type": memory},
        {"Id": 4, "Op": "FREE", "BufId": 1, "Size": size, "Type": memory},
    ]
    graph = tmp_path / "big.json"
    graph.write_text(json.dumps({"Nodes": nodes, "Edges": [[0, 2], [1, 2], [2, 3], [2, 4]]}))
    out = tmp_path / "out"
    result = run("solve", graph, "--out", out, "--time-limit", 5)
    assert result.exit_code == 2
    message = result.output.strip().splitlines()[-1]
    assert f"op 2 (MIX) needs {2 * size:,} units of {memory} at once" in message
    assert f"capacity {capacity:,}" in message
    assert not out.exists()
    alone = run("solve", graph, "--out", out, "--time-limit", 5, "--problem", 1, "--quiet")
    if memory in ("L1", "UB"):  # Problem 1 has no capacities
        assert message.endswith("Problems 2 and 3 cannot be solved (Problem 1 can: --problem 1)")
        assert alone.exit_code == 0, alone.output
        assert (out / "Problem1" / "big_schedule.txt").exists()
        assert not (out / "Problem2").exists()
    else:  # nor can Problem 1, which keeps one L0 buffer live at a time
        assert "uses two" in message and "Problem 1 cannot be solved" in message
        assert message.endswith("Problems 2 and 3 cannot be solved")
        assert alone.exit_code == 2 and "uses two" in alone.output and not out.exists()


def test_an_interrupted_union_still_gets_answers_for_every_part(tmp_path):
    """Issue 21/23: SIGTERM while the first of two independent parts is solved: the second
    part gets the greedy stages' quick answers, so the whole graph still has valid files."""
    exe = Path(sys.executable).with_name("npuopt")
    if not exe.exists():
        pytest.skip(f"console script not installed beside {sys.executable}")
    parts = []
    for family, nodes in (("conv", 400), ("flashattention", 300)):
        part = tmp_path / f"{family}.json"
        assert run("generate", family, "--nodes", nodes, "--seed", 1, "--out", part).exit_code == 0
        parts.append(part)
    graph = tmp_path / "both.json"
    assert run("rename", *parts, "--seed", 2, "--out", graph).exit_code == 0
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [exe, "solve", graph, "--out", out, "--time-limit", "60", "--workers", "1"],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if "#1] P2-first:" in line:
            break
    proc.send_signal(__import__("signal").SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    for problem in (1, 2, 3):
        check = run("evaluate", graph, "--problem", problem, "--dir", out / f"Problem{problem}")
        assert check.exit_code == 0, check.output
