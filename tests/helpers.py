"""Shared test helpers: the tiny hand-made instances and the official cases (skipped if absent)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from npuopt.instances import official_case, official_dir
from npuopt.solver.evaluate import evaluate_order
from npuopt.solver.hardware import Hardware, load_hardware
from npuopt.solver.instance import Instance, load_instance, parse_instance
from npuopt.solver.solution import op_successors

DATA = Path(__file__).parent / "data"
TINY = (
    "example7",
    "respill",
    "reload_reuse",
    "spill_out_waits",
    "l0_pair",
    "sequential",
    "forced_spill",
    "two_pipes",
    "avoidable_spill",
    "late_ready",
    "delay_pays",
)


def data_path(name: str) -> Path:
    """Path of a file in ``tests/data``."""
    return DATA / name


def tiny(name: str) -> Instance:
    """A hand-made instance from ``tests/data/<name>.json``."""
    return load_instance(DATA / f"{name}.json")


def tiny_data(name: str) -> dict[str, Any]:
    """The raw JSON of a hand-made instance, for tests that mutate it."""
    return json.loads((DATA / f"{name}.json").read_text())


def reparse(data: dict[str, Any]) -> Instance:
    """Validate mutated instance data."""
    return parse_instance(data, name="mutated", source="mutated.json")


def bank_hardware() -> Hardware:
    """UB aligned to 32 with 4 banks of 32 units, conflicts forbidden."""
    return load_hardware(DATA / "bank_rules.toml")


@functools.cache
def _official(name: str) -> Instance | None:
    path = official_case(name)
    return load_instance(path) if path else None


def official(name: str) -> Instance:
    """An official contest case, or a skip naming where it was looked for."""
    instance = _official(name)
    if instance is None:
        pytest.skip(
            f"official case {name} not found (looked in $NPUOPT_OFFICIAL_DIR and "
            f"../shared/instances; found folder: {official_dir()})"
        )
    return instance


def all_topological_orders(inst: Instance):
    """Every order of all nodes that respects the edges (fine up to ~10 nodes)."""
    indegree = [len(p) for p in inst.predecessors]
    order: list[int] = []

    def extend():
        if len(order) == inst.n_nodes:
            yield tuple(order)
            return
        for v in range(inst.n_nodes):
            if indegree[v] == 0 and v not in order:
                order.append(v)
                for w in inst.successors[v]:
                    indegree[w] -= 1
                yield from extend()
                for w in inst.successors[v]:
                    indegree[w] += 1
                order.pop()

    yield from extend()


def brute_force_optimum(inst: Instance) -> int | None:
    best = None
    for order in all_topological_orders(inst):
        result = evaluate_order(inst, order)
        if result.valid and (best is None or result.max_v_stay_units < best):
            best = result.max_v_stay_units
    return best


def assert_keeps_paths(instance: Instance, op_order) -> None:
    """``op_order`` holds every op once and puts each op before the ops it reaches."""
    position = {v: p for p, v in enumerate(op_order)}
    assert sorted(op_order) == sorted(instance.op_ids)
    for v, after in enumerate(op_successors(instance)):
        for w in after:
            assert position[v] < position[w], (v, w)
