"""The machine's speed factor (solver/speed.py): a quarter-octave grid, clipped, measured."""

from __future__ import annotations

import math

import pytest

from npuopt.solver.solve import SolveOptions, solve_instance
from npuopt.solver.speed import MAX_SPEED, MIN_SPEED, measure_speed, quantize
from npuopt.solver.stages import order as order_stage
from npuopt.solver.stages import placement as placement_stage

from helpers import tiny


@pytest.mark.parametrize(
    ("ratio", "factor"),
    [
        (1.0, 1.0),
        (1.08, 1.0),  # within an eighth of an octave of 1
        (1.1, 2**0.25),
        (1.6, 2**0.75),
        (0.5, 0.5),
        (100.0, MAX_SPEED),
        (0.01, MIN_SPEED),
        (0.0, MIN_SPEED),
        (float("nan"), MIN_SPEED),
    ],
)
def test_quantize_rounds_to_quarter_octaves_and_clips(ratio, factor):
    assert quantize(ratio) == pytest.approx(factor)


def test_measured_factor_lies_on_the_grid():
    factor = measure_speed(repeats=1)
    assert MIN_SPEED <= factor <= MAX_SPEED
    assert 4 * math.log2(factor) == pytest.approx(round(4 * math.log2(factor)))


def test_budgets_scale_with_the_speed_factor(monkeypatch):
    """Every work budget is sized from ``time_limit_s * speed``: the generator runs, compaction
    moves and traversal evaluations asked for double with the factor, the limit's deadlines do
    not."""
    asked: dict[float, list[float]] = {}

    def spy(module, name):
        real = getattr(module, name)

        def wrapped(instance, seconds):
            asked[speed].append(seconds)
            return real(instance, seconds)

        monkeypatch.setattr(module, name, wrapped)

    spy(order_stage, "moves_for")
    spy(order_stage, "generator_runs")
    spy(placement_stage, "evaluations_for")
    for speed in (1.0, 2.0):
        asked[speed] = []
        options = SolveOptions(time_limit_s=4, speed=speed)
        assert options.work_s == 4 * speed
        solve_instance(tiny("example7"), options)
    assert asked[1.0] and asked[2.0] == [2 * s for s in asked[1.0]]
