"""Re-offsetting for earlier loads: faster or unchanged, never invalid, traffic kept."""

from __future__ import annotations

import time

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from npuopt.heuristics.ordering import list_schedule, program_rank
from npuopt.heuristics.pipes import compact
from npuopt.heuristics.placement import PlacementError, place
from npuopt.heuristics.prefetch import _window_max, release_earlier
from npuopt.solver.evaluate import evaluate
from npuopt.solver.hardware import DEFAULT_HARDWARE
from npuopt.solver.solution import Solution, Spill

from helpers import tiny
from strategies import HARDWARE, instances


def test_a_buffer_moves_off_a_range_freed_late():
    """sequential: P1 (VECTOR, 50) then P2 (MTE3, 5) on unrelated buffers. Sharing offset 0,
    P2's ALLOC waits for P1's FREE: 55 cycles. Moved to a free range, P2 overlaps P1: 50."""
    inst = tiny("sequential")
    shared = Solution(order=range(6), offsets={0: 0, 1: 0})
    assert evaluate(inst, compact(inst, shared), 3).makespan_cycles == 55
    moved, judged, _ = release_earlier(inst, shared, DEFAULT_HARDWARE)
    assert judged.valid and judged.makespan_cycles == 50
    assert moved.offsets[1] != 0 and moved.offsets[0] == 0


def test_a_reload_moves_off_a_range_freed_late():
    """reload_held: b0 (COPY_IN-backed, Size 10) is spilled after A and reloaded for B into
    b1's range, which C (VECTOR, 100 cycles) holds until 120: the SPILL_IN (2*10+150 = 170
    cycles on MTE2) runs 120-290, B ends at 300. Reloaded into a range free since the spill,
    the SPILL_IN runs 20-190 and B ends at 200. The spill's offset moves, not the buffer's."""
    inst = tiny("reload_held")
    held = Solution(
        order=(0, 1, 2, 8, 5, 6, 7, 9, 3, 4), offsets={0: 0, 1: 10}, spills=(Spill(0, 10),)
    )
    before = evaluate(inst, held, 3)
    assert before.valid and before.makespan_cycles == 300
    moved, judged, _ = release_earlier(inst, held, DEFAULT_HARDWARE)
    assert judged.valid and judged.makespan_cycles == 200
    assert judged.extra_traffic_units == before.extra_traffic_units == 10
    assert moved.offsets == held.offsets
    assert moved.spills[0].buf_id == 0 and moved.spills[0].new_offset_units != 10


@given(instances(), st.sampled_from(["residency", "literal"]))
def test_valid_same_traffic_never_slower(inst, rule):
    order = list_schedule(inst, "program", program_rank(inst))
    if order is None:
        return
    try:
        placed = compact(inst, place(inst, order, HARDWARE, "rotate"))
    except PlacementError:
        return
    start = evaluate(inst, placed, 3, HARDWARE, rule)
    assert start.valid
    moved, judged, _ = release_earlier(inst, placed, HARDWARE, rule)
    again = evaluate(inst, moved, 3, HARDWARE, rule)
    assert again.valid, again.violations
    assert again.makespan_cycles == judged.makespan_cycles <= start.makespan_cycles
    assert again.extra_traffic_units == start.extra_traffic_units
    assert [s.buf_id for s in moved.spills] == [s.buf_id for s in placed.spills]


@given(st.lists(st.integers(0, 1000), min_size=1, max_size=40), st.integers(1, 40))
def test_window_max_is_the_sliding_maximum(values, w):
    w = min(w, len(values))
    array = np.array(values, dtype=np.int64)
    expected = [max(values[o : o + w]) for o in range(len(values) - w + 1)]
    assert _window_max(array, w).tolist() == expected


def test_a_passed_deadline_returns_the_start_judged():
    """No trial starts once the deadline has passed: the input comes back, evaluated."""
    inst = tiny("sequential")
    shared = Solution(order=range(6), offsets={0: 0, 1: 0})
    late = time.monotonic() - 1
    same, judged, trials = release_earlier(inst, shared, DEFAULT_HARDWARE, deadline=late)
    assert same is shared and judged.valid and judged.makespan_cycles == 55 and trials == 0


def test_the_trials_stop_at_their_budget():
    """``max_trials`` caps the whole-graph passes (the caller's budget, the same on every
    run): with none allowed the start comes back; with the moves' first trial allowed, the
    improvement the unbounded call finds in that trial is found too."""
    inst = tiny("sequential")
    shared = Solution(order=range(6), offsets={0: 0, 1: 0})
    same, judged, trials = release_earlier(inst, shared, DEFAULT_HARDWARE, max_trials=0)
    assert same is shared and trials == 0 and judged.makespan_cycles == 55
    free, free_judged, free_trials = release_earlier(inst, shared, DEFAULT_HARDWARE)
    assert free_trials >= 1 and free_judged.makespan_cycles < 55
    one, one_judged, one_trials = release_earlier(inst, shared, DEFAULT_HARDWARE, max_trials=1)
    assert one_trials == 1 and one_judged.makespan_cycles < 55
