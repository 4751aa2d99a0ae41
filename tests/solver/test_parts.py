"""Independent parts (solver.parts) and their solve: a union of graphs is no harder than its
parts solved apart."""

from __future__ import annotations

from npuopt.heuristics.placement import place
from npuopt.instances.generator import generate
from npuopt.instances.transform import union
from npuopt.solver.evaluate import evaluate, evaluate_order
from npuopt.solver.hardware import Hardware
from npuopt.solver.instance import parse_instance
from npuopt.solver.parts import in_sequence, side_by_side, split
from npuopt.solver.solution import Solution
from npuopt.solver.solve import SolveOptions, compose_reserve, solve_instance


def _union():
    a = generate("conv", seed=1, nodes=300)
    b = generate("flashattention", seed=2, nodes=400)
    return a, b, parse_instance(union([a, b], seed=5), name="ab")


def test_split_finds_the_parts_and_renames_them_from_zero():
    a, b, whole = _union()
    parts = split(whole)
    assert [p.instance.n_nodes for p in parts] == sorted(
        [len(a["Nodes"]), len(b["Nodes"])], reverse=True
    )
    assert sorted(v for p in parts for v in p.node) == list(range(whole.n_nodes))
    assert [p.instance.name for p in parts] == ["ab#1", "ab#2"]
    connected = parse_instance(a)
    assert len(split(connected)) == 1 and split(connected)[0].instance is connected


def test_parts_in_sequence_keep_their_values():
    """P1: the peak of the whole is the larger part's; P2: every part's placement and spills
    stay valid and the traffic adds up (spill ids renumbered into the whole's list)."""
    _, _, whole = _union()
    parts = split(whole)
    tight = Hardware(capacity={"L1": 2048, "UB": 512})
    orders = [p.instance.topological_order for p in parts]
    joined = in_sequence(whole, parts, [Solution(order=o) for o in orders])
    peaks = [
        evaluate_order(p.instance, o).max_v_stay_units for p, o in zip(parts, orders, strict=True)
    ]
    assert evaluate_order(whole, joined.order).max_v_stay_units == max(peaks)
    placed = [place(p.instance, o, tight, "best-fit") for p, o in zip(parts, orders, strict=True)]
    judged = [evaluate(p.instance, s, 2, tight) for p, s in zip(parts, placed, strict=True)]
    assert all(j.valid for j in judged) and sum(j.spill_count for j in judged) > 0
    for compose in (in_sequence, side_by_side):
        args = (whole, parts, placed) if compose is in_sequence else (whole, parts, placed, tight)
        whole_judged = evaluate(whole, compose(*args), 2, tight)
        assert whole_judged.valid, whole_judged.violations[:1]
        assert whole_judged.extra_traffic_units == sum(j.extra_traffic_units for j in judged)


def test_a_union_solves_as_well_as_its_parts_apart():
    """Issue 21: the union's P1 is the larger part's and its P2 traffic the sum of the parts'
    (the heuristics are deterministic, and each part is solved under the same canonical names
    as on its own); its P3 is no slower than the parts one after another."""
    a, b, whole = _union()
    options = SolveOptions(time_limit_s=20, method="heuristics")
    together = solve_instance(whole, options)
    apart = [solve_instance(parse_instance(g), options) for g in (a, b)]
    assert together.p1 is not None and together.p2 is not None and together.p3 is not None
    assert together.p1.evaluation.max_v_stay_units == max(
        r.p1.evaluation.max_v_stay_units for r in apart if r.p1
    )
    assert together.p2.evaluation.extra_traffic_units == sum(
        r.p2.evaluation.extra_traffic_units for r in apart if r.p2
    )
    assert together.p3.evaluation.makespan_cycles <= sum(
        r.p3.evaluation.makespan_cycles for r in apart if r.p3
    )
    assert [line["case"] for line in together.parts] == ["ab#1", "ab#2"]
    for problem, candidate in ((1, together.p1), (2, together.p2), (3, together.p3)):
        judged = (
            evaluate_order(whole, candidate.solution.order)
            if problem == 1
            else evaluate(whole, candidate.solution, problem)
        )
        assert judged.valid and judged.objective() == candidate.evaluation.objective()


def test_the_time_kept_for_composing_grows_with_the_graph_not_past_half_the_limit():
    """A 36k-node union of 14 parts overran a 60 s limit by 18% when only 5% of the limit was
    kept for putting the parts together; the reserve now follows the graph's size."""
    small = parse_instance(generate("conv", 1, nodes=300), name="s")
    large = parse_instance(generate("conv", 1, nodes=6000), name="l")
    at = SolveOptions(time_limit_s=60.0, speed=1.0)
    assert compose_reserve(small, at) == 3.0  # the share
    assert compose_reserve(large, at) > compose_reserve(small, at)
    assert compose_reserve(large, SolveOptions(time_limit_s=6.0, speed=1.0)) == 3.0
    assert compose_reserve(large, SolveOptions(time_limit_s=600.0, speed=1.0)) == 30.0


def test_the_parts_get_the_same_budgets_however_late_the_solve_starts():
    """The parts' shares of the limit are fixed in advance: a solve that starts late (the
    loading took longer, ``spent_s``) loses the delay from its deadlines only, and finds the
    same answers (before, each part's share was read from the clock)."""
    _, _, whole = _union()
    tight = Hardware(capacity={"L1": 2048, "UB": 512})
    answers = []
    for spent in (0.0, 1.5):
        options = SolveOptions(time_limit_s=24.0, seed=3, speed=1.0, hardware=tight, spent_s=spent)
        result = solve_instance(whole, options)
        assert len(result.parts) == 2
        answers.append([result.best(p).solution for p in (1, 2, 3)])
    assert answers[0] == answers[1]
