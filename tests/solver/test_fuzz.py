"""Fuzzing the input boundary (issue 8): mutated instances and attachment files either load or
raise npuopt's own error type, and whatever loads is judged by the evaluator without crashing.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npuopt.solver.errors import NpuoptError
from npuopt.solver.evaluate import evaluate
from npuopt.solver.files import ProblemFiles, read_solution
from npuopt.solver.hardware import DEFAULT_HARDWARE
from npuopt.solver.instance import load_instance, parse_instance

from helpers import TINY, tiny, tiny_data

FIELDS = ("Id", "Op", "Pipe", "Cycles", "Bufs", "BufId", "Size", "Type")
#: Values a field may be replaced by: wrong types, out-of-range and borderline numbers.
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 12),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.lists(st.integers(-2, 8), max_size=3),
    st.sampled_from(["ALLOC", "FREE", "COPY_IN", "UB", "L1", "L0A", "MTE2", "15", "1e3"]),
)


@st.composite
def mutated(draw) -> dict[str, Any]:
    """A tiny fixture's JSON with one to three random mutations."""
    data = copy.deepcopy(tiny_data(draw(st.sampled_from(TINY))))
    for _ in range(draw(st.integers(1, 3))):
        nodes, edges = data["Nodes"], data["Edges"]
        if not isinstance(nodes, list) or not isinstance(edges, list):
            break  # a top-level key was already replaced: nothing left to walk
        kind = draw(st.integers(0, 7))
        node = nodes[draw(st.integers(0, len(nodes) - 1))] if nodes else None
        if kind == 0 and isinstance(node, dict):  # a field gets a junk value
            node[draw(st.sampled_from(FIELDS))] = draw(JUNK)
        elif kind == 1 and isinstance(node, dict) and node:  # a field disappears
            node.pop(draw(st.sampled_from(sorted(node))))
        elif kind == 2 and nodes:  # a node disappears
            nodes.pop(draw(st.integers(0, len(nodes) - 1)))
        elif kind == 3 and nodes:  # a node is duplicated
            nodes.append(copy.deepcopy(nodes[draw(st.integers(0, len(nodes) - 1))]))
        elif kind == 4:  # a random edge (unknown ids, self loops, cycles)
            edges.append([draw(st.integers(-1, len(nodes))), draw(st.integers(-1, len(nodes)))])
        elif kind == 5 and edges and isinstance(edges[-1], list) and edges[-1]:
            # an edge is reversed (often a cycle) or broken
            edges[-1] = edges[-1][::-1] if draw(st.booleans()) else edges[-1][:1]
        elif kind == 6:  # a top-level key gets a junk value
            data[draw(st.sampled_from(["Nodes", "Edges"]))] = draw(JUNK)
        else:  # an extra key
            data[draw(st.text(min_size=1, max_size=4))] = draw(JUNK)
    return data


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_instances_load_or_raise_our_error(data):
    try:
        inst = parse_instance(data, name="fuzz", source="fuzz.json")
    except NpuoptError as exc:
        message = str(exc)
        assert message.startswith("fuzz.json") and "\n" not in message
        return
    # Whatever loads is a valid instance: the evaluator judges its id order without crashing.
    evaluate(inst, _id_order(inst), 1)


def _id_order(inst):
    from npuopt.solver.solution import Solution

    return Solution(order=tuple(range(inst.n_nodes)))


LINE = st.one_of(
    st.integers(-2, 20).map(str),
    st.tuples(st.integers(-2, 6), st.integers(-5, 1100)).map(lambda p: f"{p[0]}:{p[1]}"),
    st.sampled_from(["", " ", "1.0", "2:3.5", "x", "3:", ":4", "1:2:3", "\t7", "0x10", "1e2"]),
    st.text(max_size=6),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(TINY),
    schedule=st.lists(LINE, max_size=12),
    memory=st.lists(LINE, max_size=5),
    spill=st.lists(LINE, max_size=3),
    problem=st.integers(1, 3),
)
def test_mutated_files_load_or_raise_our_error(
    tmp_path_factory, name, schedule, memory, spill, problem
):
    """Random lines in the attachment files: the reader accepts them or raises
    SolutionFileError naming the file; an accepted solution is evaluated, valid or not."""
    inst = tiny(name)
    folder = Path(tmp_path_factory.mktemp("fuzz"))
    files = ProblemFiles.in_dir(folder, name)
    for path, lines in ((files.schedule, schedule), (files.memory, memory), (files.spill, spill)):
        path.write_text("".join(f"{line}\n" for line in lines))
    try:
        solution = read_solution(files, inst, problem, DEFAULT_HARDWARE)
    except NpuoptError as exc:
        assert str(exc).startswith(str(folder)) and "\n" not in str(exc)
        return
    judged = evaluate(inst, solution, problem)
    assert judged.valid or judged.violation_count > 0


def test_the_fixtures_themselves_load(tmp_path):
    """Guard for the two tests above: unmutated data loads (so mutations are what fails)."""
    for name in TINY:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(tiny_data(name)))
        assert load_instance(path).n_nodes == tiny(name).n_nodes
