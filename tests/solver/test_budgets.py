"""The pipeline's plan (solver.budgets): every stage's budget fits before its deadline, so that
a run on a machine that keeps up with its speed factor ends each stage on its budget, the same
on every run, and the deadlines only stop a machine running late."""

from __future__ import annotations

import pytest

from npuopt.solver import budgets as b

#: Reference seconds per second of the limit that Problem 1's stage takes by plan.
P1_PLANNED = b.PORTFOLIO_SHARE + b.COMPACTION_SHARE * (1 + b.CLOSING_DESCENT)
P1_PLANNED += b.P1_WORK / b.ORDER_RATE
P1_ALONE_PLANNED = b.PORTFOLIO_SHARE + b.COMPACTION_ALONE_SHARE * (1 + b.CLOSING_DESCENT)
P1_ALONE_PLANNED += b.P1_ALONE_WORK / b.ORDER_RATE


def test_each_stage_ends_by_plan_before_its_deadline_with_room_to_spare():
    """At least 10% of the limit between a stage's planned end and its deadline (the work no
    budget counts comes out of it). Before 2026-11-28 Problem 1's plan (0.43) lay beyond its
    deadline (0.40) and Problem 1 alone planned 1.38 of the limit."""
    assert P1_PLANNED + 0.05 <= b.P1_DEADLINE
    assert P1_ALONE_PLANNED + 0.05 <= b.P1_ALONE_DEADLINE
    assert b.planned_before_p3(1) + 0.1 <= b.P2_DEADLINE
    assert b.planned_before_p3(1) < b.P3_END < b.P3_PASSES_END < b.P3_DEADLINE


@pytest.mark.parametrize("workers", [1, 2, 8])
def test_problem_3_gets_what_the_plan_leaves_less_the_uncounted_work(workers):
    """A larger graph leaves less (its uncounted whole-graph work), never below nothing; more
    workers leave more (the traversal search runs beside Problem 1); the placements of the
    traversal search's runners-up come off it (none on a graph too large to place them)."""
    work_s = 600 * 1.68
    small, large = b.p3_budget(work_s, 2_000, workers), b.p3_budget(work_s, 36_000, workers)
    assert small > large > 0
    assert b.p3_budget(work_s, 10**7, workers) == 0.0
    left = (b.P3_END - b.planned_before_p3(workers)) * work_s
    runners_up = b.TRAVERSAL_RUNS * b.runners_up(work_s, 2_000)
    assert runners_up > 0 and b.runners_up(work_s, 36_000) == 0
    placing = b.placement_s(runners_up, 2_000, workers)
    assert 0 < placing <= b.RUNNERS_UP_SHARE * work_s / workers
    assert small == pytest.approx(b.P3_RATE * (left - 2_000 * b.UNCOUNTED_NODE_S - placing))
    assert large == pytest.approx(b.P3_RATE * (left - 36_000 * b.UNCOUNTED_NODE_S))
    if workers > 1:
        assert small > b.p3_budget(work_s, 2_000, 1)


def test_passes_are_counted_by_plan_and_charged_at_the_pipe_models_rate():
    """The passes around Problem 3's LNS: as many as the planned shares hold at this size (at
    least one), each charged as ``PASS_NODE_S`` a node."""
    work_s = 600 * 1.68
    before = b.passes_for(work_s, 36_000)
    after = b.passes_for(work_s, 36_000, after=True)
    assert before == int(b.RELEASE_SHARE * work_s / (b.PASS_NODE_S * 36_000))
    assert after == int((b.P3_PASSES_END - b.P3_END) * work_s / (b.PASS_NODE_S * 36_000))
    assert b.passes_for(1.0, 10**6) == 1
    assert b.pass_work(before, 36_000) == pytest.approx(b.P3_RATE * before * b.PASS_NODE_S * 36_000)
    assert b.pass_work(1, 36_000, b.FRAME_NODE_S) == pytest.approx(
        b.P3_RATE * b.FRAME_NODE_S * 36_000
    )
