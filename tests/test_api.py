"""The public Python API (npuopt/__init__.py, npuopt/api.py), and the README's example run
exactly as written."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import networkx as nx
import pytest

import npuopt
from npuopt.solver.instance import graph_data

from helpers import data_path, tiny_data

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_example_runs_as_written(tmp_path, monkeypatch, capsys):
    """Issue 27: the README's Python section, executed verbatim from another directory."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Python", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.S)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    objectives = eval(printed[0])  # noqa: S307 - the example prints a dict of ints
    assert set(objectives) == {1, 2, 3} and all(v >= 0 for v in objectives.values())
    valid, makespan, bound = printed[1].split()
    assert valid == "True" and int(makespan) == objectives[3] >= int(bound) > 0


def test_public_names_are_all_listed_and_nothing_else_leaks():
    assert npuopt.__version__ and npuopt.__version__ != "0+unknown"
    for name in npuopt.__all__:
        assert hasattr(npuopt, name), name
    public = {n for n in dir(npuopt) if not n.startswith("_")}
    submodules = {"api", "heuristics", "instances", "models", "solver"}
    assert public - submodules == set(npuopt.__all__) - {"__version__"}


def _write_csv_pair(folder, name, data):
    with (folder / f"{name}_Nodes.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(
            handle, ["Id", "Op", "Pipe", "Cycles", "Bufs", "BufId", "Size", "Type"]
        )
        writer.writeheader()
        for node in data["Nodes"]:
            writer.writerow(
                {**node, **({"Bufs": json.dumps(node["Bufs"])} if "Bufs" in node else {})}
            )
    with (folder / f"{name}_Edges.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["StartNodeId", "EndNodeId"])
        writer.writerows(data["Edges"])


def test_load_takes_a_file_a_csv_pair_a_dict_a_digraph_and_an_instance(tmp_path):
    data = tiny_data("example7")
    from_file = npuopt.load(data_path("example7.json"))
    _write_csv_pair(tmp_path, "example7", data)
    from_csv = npuopt.load(tmp_path / "example7_Edges.csv")
    from_dict = npuopt.load(data, name="example7")
    digraph = nx.DiGraph()
    for node in data["Nodes"]:
        digraph.add_node(node["Id"], **{k: v for k, v in node.items() if k != "Id"})
    digraph.add_edges_from(map(tuple, data["Edges"]))
    from_nx = npuopt.load(digraph, name="example7")
    assert npuopt.load(from_file) is from_file
    for other in (from_csv, from_dict, from_nx):
        assert graph_data(other) == graph_data(from_file) and other.name == "example7"


@pytest.mark.parametrize(
    ("graph", "words"),
    [
        ({"Nodes": [{"Id": 0, "Op": "ALLOC"}], "Edges": []}, "node 0"),
        (42, "cannot read a graph from int"),
        ("no/such/file.json", "no/such/file.json"),
    ],
)
def test_bad_graphs_raise_npuopt_error_naming_the_fault(graph, words):
    with pytest.raises(npuopt.NpuoptError, match=re.escape(words)):
        npuopt.load(graph)


def test_bad_arguments_raise_npuopt_error():
    graph = npuopt.load(data_path("example7.json"))
    for kwargs in (
        {"workers": 0},
        {"problems": (4,)},
        {"problems": 1},
        {"method": "exact"},
        {"seed": "x"},
        {"time_limit": -1},
    ):
        with pytest.raises(npuopt.NpuoptError):
            npuopt.solve(graph, time_limit=kwargs.pop("time_limit", 1), **kwargs)
    with pytest.raises(npuopt.NpuoptError, match="problem"):
        npuopt.evaluate(graph, [0], problem=5)
    with pytest.raises(npuopt.NpuoptError, match="pairs"):
        npuopt.evaluate(graph, list(graph.topological_order), problem=2, spills=[(1,)])
    with pytest.raises(npuopt.NpuoptError, match="policy"):
        npuopt.place(graph, graph.topological_order, policy="first-fit")
    order = list(graph.topological_order)
    for bad, words in ((order[:-1], "exactly once"), (order[::-1], "before"), (["a"], "ids")):
        with pytest.raises(npuopt.NpuoptError, match=words):
            npuopt.place(graph, bad)
    placed = npuopt.place(graph, order)
    broken = npuopt.Solution(order=placed.order, offsets={0: 2000, 1: 0})
    with pytest.raises(npuopt.NpuoptError, match="not valid"):
        npuopt.schedule_pipes(graph, broken)


def test_solve_writes_files_the_evaluator_accepts_with_the_same_values(tmp_path):
    graph = npuopt.load(data_path("example7.json"))
    result = npuopt.solve(graph, time_limit=5, method="heuristics")
    assert result.case == "example7" and set(result.answers) == {1, 2, 3}
    assert result.summary["case"] == "example7"
    result.write(tmp_path)
    for problem, answer in result.answers.items():
        again = npuopt.evaluate(graph, tmp_path / f"Problem{problem}", problem=problem)
        assert again.valid and again.objective() == answer.evaluation.objective()
        assert answer.value >= answer.bound and answer.gap is None or 0 <= answer.gap <= 1
    only = npuopt.solve(graph, time_limit=5, problems=[1], method="heuristics")
    assert set(only.answers) == {1}


def test_building_blocks_give_valid_answers():
    """Orders from the generators, their greedy placement, the pipes re-sequenced, bounds."""
    graph = npuopt.load(npuopt.bundled("demo_conv.json"))
    orders = npuopt.generate_orders(graph, variants=2)
    assert {"cone0", "cone-chain1", "lockstep0"} <= set(orders)
    bounds = npuopt.bounds(graph)
    for solution in orders.values():
        judged = npuopt.evaluate(graph, solution, problem=1)
        assert judged.valid and judged.max_v_stay_units >= bounds.order.units
    placed = npuopt.place(graph, orders["cone0"], policy="hybrid")
    judged = npuopt.evaluate(graph, placed, problem=2)
    assert judged.valid
    timed = npuopt.schedule_pipes(graph, placed)
    retimed = npuopt.evaluate(graph, timed, problem=3)
    assert retimed.valid and retimed.extra_traffic_units == judged.extra_traffic_units
    assert retimed.makespan_cycles >= npuopt.bounds(graph, timed).makespan.cycles
    plain = npuopt.evaluate(
        graph,
        list(placed.order),
        problem=2,
        memory=dict(placed.offsets),
        spills=[(s.buf_id, s.new_offset_units) for s in placed.spills],
    )
    assert plain.objective() == judged.objective()
