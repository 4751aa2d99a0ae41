"""Instance schema: loading, every validation rule of SPEC section 1, derived lookups."""

from __future__ import annotations

import copy
import csv
import json

import pytest
from pydantic import ValidationError

from npuopt.instances import OFFICIAL_CASES
from npuopt.solver.errors import InstanceError
from npuopt.solver.hardware import Hardware
from npuopt.solver.instance import OpNode, load_instance, parse_instance

from helpers import data_path, official, reparse, tiny, tiny_data

OFFICIAL_COUNTS = {
    "Matmul_Case0": (4160, 1216),
    "Matmul_Case1": (30976, 8960),
    "FlashAttention_Case0": (1716, 572),
    "FlashAttention_Case1": (6952, 2328),
    "Conv_Case0": (2580, 831),
    "Conv_Case1": (36086, 12013),
}


@pytest.mark.parametrize("name", OFFICIAL_CASES)
def test_official_cases_load(name):
    instance = official(name)
    nodes, buffers = OFFICIAL_COUNTS[name]
    assert instance.n_nodes == nodes
    assert len(instance.buffers) == buffers
    assert instance.name == name
    assert all(node.id == i for i, node in enumerate(instance.nodes))


def test_example_lookups():
    """The statement's 7-node example: b0 is COPY_IN-backed, b1 is not."""
    inst = tiny("example7")
    assert inst.successors[3] == (4, 5)
    assert inst.predecessors[3] == (1, 2)
    assert inst.buffers[0].users == (1, 3)
    assert (inst.buffers[0].alloc, inst.buffers[0].free) == (0, 4)
    assert inst.copy_in_backed == frozenset({0})
    assert inst.pipes == ("MTE2", "MTE3", "VECTOR")
    assert inst.op_ids == (1, 3, 5)
    assert inst.cycles.tolist() == [0, 15, 0, 30, 0, 15, 0]
    pos = {v: p for p, v in enumerate(inst.topological_order)}
    assert all(pos[a] < pos[b] for a, b in inst.edges)
    assert inst.topological_rank == tuple(pos[v] for v in range(inst.n_nodes))
    assert inst.buffers[0].spill_traffic_units == 5 and inst.buffers[1].spill_traffic_units == 10
    assert inst.buffers[0].spill_out_cycles == 0 and inst.buffers[1].spill_out_cycles == 160
    assert inst.buffers[0].spill_in_cycles == 160


def test_instance_is_frozen():
    inst = tiny("example7")
    with pytest.raises(ValidationError, match="frozen"):
        inst.name = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError, match="frozen"):
        inst.nodes[1].cycles = 3  # type: ignore[misc]
    with pytest.raises(ValueError):
        inst.cycles[1] = 3


def test_nodes_may_come_in_any_order():
    data = tiny_data("example7")
    data["Nodes"].reverse()
    inst = reparse(data)
    assert [n.id for n in inst.nodes] == list(range(7))
    assert isinstance(inst.nodes[1], OpNode)


def _mutate(fn):
    data = tiny_data("example7")
    fn(data)
    return data


def _set(index, key, value):
    def fn(d):
        d["Nodes"][index][key] = value

    return fn


def _drop_edge(edge):
    return lambda d: d["Edges"].remove(edge)


BAD_INSTANCES = [
    ("string cycles", _set(1, "Cycles", "15"), ["node 1", "Cycles"]),
    ("float cycles", _set(1, "Cycles", 15.0), ["node 1", "Cycles"]),
    ("negative cycles", _set(1, "Cycles", -1), ["node 1", "Cycles"]),
    ("missing pipe", lambda d: d["Nodes"][1].pop("Pipe"), ["node 1", "Pipe"]),
    ("unknown field", _set(1, "Colour", "red"), ["node 1", "Colour"]),
    ("zero size", lambda d: [d["Nodes"][i].update(Size=0) for i in (0, 4)], ["node 0", "Size"]),
    ("unknown memory", _set(0, "Type", "L2"), ["node 0", "Type"]),
    ("duplicate id", _set(2, "Id", 1), ["Id 1", "twice"]),
    ("id out of range", _set(6, "Id", 9), ["Id 9", "0..6"]),
    ("edge to unknown node", lambda d: d["Edges"].append([3, 17]), ["edge 6", "node 17"]),
    ("self loop", lambda d: d["Edges"].append([3, 3]), ["self loop", "node 3"]),
    ("cycle", lambda d: d["Edges"].append([5, 1]), ["cycle", "1 -> 3 -> 5 -> 1"]),
    ("alloc without free", lambda d: d["Nodes"][6].update(BufId=7), ["buffer 1", "no FREE"]),
    ("size mismatch", _set(4, "Size", 6), ["buffer 0", "Size 5", "Size 6"]),
    ("type mismatch", _set(4, "Type", "L1"), ["buffer 0", "Type UB", "Type L1"]),
    ("unknown buffer in Bufs", _set(5, "Bufs", [1, 9]), ["node 5", "buffer 9"]),
    ("buffer listed twice", _set(3, "Bufs", [0, 0, 1]), ["node 3", "buffer 0 twice"]),
    ("use before alloc", _drop_edge([0, 1]), ["node 1", "buffer 0", "descendant of its ALLOC"]),
    ("use after free", _drop_edge([3, 4]), ["node 3", "buffer 0", "ancestor of its FREE"]),
    ("nodes not a list", lambda d: d.update(Nodes={}), ["Nodes"]),
    ("edge not a pair", lambda d: d["Edges"].append([1]), ["edge 6"]),
]


@pytest.mark.parametrize(
    ("label", "mutate", "words"), BAD_INSTANCES, ids=[b[0] for b in BAD_INSTANCES]
)
def test_bad_instance_is_one_line_naming_the_culprit(label, mutate, words):
    with pytest.raises(InstanceError) as info:
        reparse(_mutate(mutate))
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("mutated.json: ")
    for word in words:
        assert word in message, (label, message)


def test_buffer_larger_than_memory():
    data = _mutate(lambda d: [d["Nodes"][i].update(Size=2000) for i in (0, 4)])
    with pytest.raises(InstanceError, match=r"buffer 0 .* Size 2000, larger than UB capacity 1024"):
        reparse(data)
    big = Hardware(capacity={"UB": 4096})
    assert parse_instance(data, hardware=big).buffers[0].size_units == 2000


def test_malformed_json_names_line_and_column(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('{"Nodes": [\n  {"Id": 0,,}\n]}')
    with pytest.raises(InstanceError, match=r"broken\.json:2:\d+: invalid JSON"):
        load_instance(path)


def test_missing_file(tmp_path):
    with pytest.raises(InstanceError, match="cannot read graph file"):
        load_instance(tmp_path / "absent.json")


def test_top_level_must_be_an_object():
    with pytest.raises(InstanceError, match="top level"):
        parse_instance([1, 2], source="list.json")


def _write_csv_pair(folder, name, data):
    node_cols = ["Id", "Op", "Pipe", "Cycles", "Bufs", "BufId", "Size", "Type"]
    with (folder / f"{name}_Nodes.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, node_cols)
        writer.writeheader()
        for node in data["Nodes"]:
            row = dict(node)
            if "Bufs" in row:
                row["Bufs"] = json.dumps(row["Bufs"])
            writer.writerow(row)
    with (folder / f"{name}_Edges.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["StartNodeId", "EndNodeId"])
        writer.writerows(data["Edges"])


def test_csv_pair_matches_json(tmp_path):
    _write_csv_pair(tmp_path, "example7", tiny_data("example7"))
    from_csv = load_instance(tmp_path / "example7_Nodes.csv")
    from_json = load_instance(data_path("example7.json"))
    assert from_csv.name == "example7"
    assert from_csv.nodes == from_json.nodes
    assert from_csv.successors == from_json.successors
    assert load_instance(tmp_path / "example7_Edges.csv").nodes == from_json.nodes


def test_csv_non_integer_cell_names_line(tmp_path):
    data = copy.deepcopy(tiny_data("example7"))
    data["Nodes"][3]["Cycles"] = "3.5"
    _write_csv_pair(tmp_path, "bad", data)
    with pytest.raises(
        InstanceError, match=r"bad_Nodes\.csv:5: column Cycles: '3\.5' is not an integer"
    ):
        load_instance(tmp_path / "bad_Nodes.csv")
