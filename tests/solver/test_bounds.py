"""Bounds: reference figures of issue 2 and brute-force checks on random DAGs."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from npuopt.instances import OFFICIAL_CASES, bundled
from npuopt.instances.generator import generate
from npuopt.models.cuts import ClosureCuts, closure_cut_bound
from npuopt.models.ordering import OrderingData, solve_order
from npuopt.models.placement import solve_placement
from npuopt.solver.bounds import (
    TrafficBound,
    block_lines,
    critical_path,
    earliest_starts,
    forced_live_units,
    grid_bound,
    makespan_bound,
    op_local_bound,
    order_bound,
    peak_ops,
    preemptive_one_pipe,
    relaxed_instance,
    solution_graph,
    traffic_bound,
)
from npuopt.solver.evaluate import evaluate, evaluate_order
from npuopt.solver.hardware import DEFAULT_HARDWARE, Hardware
from npuopt.solver.instance import load_instance, parse_instance
from npuopt.solver.result import Status
from npuopt.solver.solution import (
    Solution,
    buffer_lifetimes,
    op_order_of,
    op_profile,
    schedule_from_op_order,
)
from npuopt.solver.solve import Candidate, CaseResult, SolveOptions, solve_instance
from npuopt.solver.stages.order import refine_order

from helpers import (
    all_topological_orders,
    brute_force_optimum,
    official,
    reparse,
    tiny,
    tiny_data,
)
from strategies import HARDWARE, instances, placements, random_topological_order

REFERENCE = {  # case: (max pipe load, busiest pipe, op-local V_stay bound, P1 bound)
    "Conv_Case0": (348_677, "CUBE", 3_072, 3_072),
    "Conv_Case1": (409_566, "CUBE", 896, 896),
    "FlashAttention_Case0": (25_600, "VECTOR", 384, 384),
    "FlashAttention_Case1": (104_960, "VECTOR", 384, 384),
    # The grid bound, (n + 1) K tiles of 128: FINDINGS' figures, optimal.
    "Matmul_Case0": (65_536, "CUBE", 128, 9_216),
    "Matmul_Case1": (524_288, "CUBE", 128, 34_816),
}


@pytest.mark.parametrize("name", OFFICIAL_CASES)
def test_reference_bounds(name):
    inst = official(name)
    load, pipe, op_local, p1 = REFERENCE[name]
    bound = makespan_bound(inst)
    assert (max(bound.pipe_loads.values()), bound.busiest_pipe) == (load, pipe)
    assert op_local_bound(inst) == op_local
    # FINDINGS: on these cases the forced-live bound equals the op-local one.
    assert order_bound(inst).forced_live_units == op_local
    assert order_bound(inst).units == p1


def test_example_bounds():
    """EXP uses b0 and b1 (UB, 5 each): op-local 10. Critical path COPY_IN 15 + EXP 30 +
    COPY_OUT 15 = 60; busiest pipe VECTOR 30; with one spill of b0, MTE2 carries 15 + 160."""
    inst = tiny("example7")
    assert order_bound(inst).units == 10
    assert makespan_bound(inst).cycles == 60
    assert makespan_bound(inst).critical_path_cycles == 60


def _graph(inst):
    g = nx.DiGraph()
    g.add_nodes_from(range(inst.n_nodes))
    g.add_edges_from(inst.edges)
    return g


@given(instances())
def test_forced_live_matches_brute_force(inst):
    g = _graph(inst)
    expected = []
    for v in range(inst.n_nodes):
        up, down = nx.ancestors(g, v) | {v}, nx.descendants(g, v) | {v}
        expected.append(
            sum(
                buf.size_units
                for buf in inst.buffers.values()
                if buf.memory in ("L1", "UB") and buf.alloc in up and buf.free in down
            )
        )
    assert forced_live_units(inst).tolist() == expected


@given(instances(), st.data())
def test_forced_live_bound_is_valid(inst, data):
    """No order respecting the edges has a max V_stay below the forced-live bound."""
    order = random_topological_order(data.draw, inst)
    result = evaluate(inst, Solution(order=tuple(order)), 1)
    assert result.max_v_stay_units >= order_bound(inst).units


@given(instances())
def test_critical_path_matches_networkx(inst):
    """Node weights as edge weights: u -> v weighs cycles(u), and v -> sink weighs cycles(v)."""
    g = nx.DiGraph()
    for a, b in inst.edges:
        g.add_edge(a, b, w=int(inst.cycles[a]))
    for v in range(inst.n_nodes):
        g.add_edge(v, "sink", w=int(inst.cycles[v]))
    assert critical_path(inst) == nx.dag_longest_path_length(g, weight="w")


@given(placements(disjoint=True))
def test_makespan_bound_holds_for_valid_solutions(case):
    inst, sol = case
    result = evaluate(inst, sol, 2, HARDWARE)
    if result.valid:
        assert result.makespan_cycles >= makespan_bound(inst, sol).cycles


def test_head_tail_bound_two_pipes():
    """two_pipes: both VECTOR ops wait for a COPY_IN (10), so VECTOR's 40 cycles end at 50 at
    the earliest, the optimum the pipe model proves (tests/models); load and path give 40."""
    bound = makespan_bound(tiny("two_pipes"))
    assert bound.load_path_cycles == 40
    assert bound.head_tail_cycles["VECTOR"] == 50
    assert bound.cycles == 50


JOIN = {
    "Nodes": [
        {"Id": 0, "Op": "ALLOC", "BufId": 0, "Size": 10, "Type": "UB"},
        {"Id": 1, "Op": "ALLOC", "BufId": 1, "Size": 10, "Type": "UB"},
        {"Id": 2, "Op": "ALLOC", "BufId": 2, "Size": 10, "Type": "UB"},
        {"Id": 3, "Op": "COPY_IN", "Pipe": "MTE2", "Cycles": 10, "Bufs": [0]},
        {"Id": 4, "Op": "COPY_IN", "Pipe": "MTE2", "Cycles": 10, "Bufs": [1]},
        {"Id": 5, "Op": "ADD", "Pipe": "VECTOR", "Cycles": 5, "Bufs": [2, 0, 1]},
        {"Id": 6, "Op": "COPY_OUT", "Pipe": "MTE3", "Cycles": 7, "Bufs": [2]},
        {"Id": 7, "Op": "FREE", "BufId": 0, "Size": 10, "Type": "UB"},
        {"Id": 8, "Op": "FREE", "BufId": 1, "Size": 10, "Type": "UB"},
        {"Id": 9, "Op": "FREE", "BufId": 2, "Size": 10, "Type": "UB"},
    ],
    "Edges": [[0, 3], [1, 4], [2, 5], [3, 5], [4, 5], [5, 6], [5, 7], [5, 8], [6, 9]],
}


def test_heads_count_the_ancestors_on_one_pipe():
    """Two COPY_INs (10 each, one MTE2) feed the ADD: it starts at 20, not at 10 as the longest
    path says, and its COPY_OUT ends at 32. Load and path give max(20, 10 + 5 + 7) = 22; the
    evaluator's makespan of the only order shape is 32, so the bound is exact here."""
    inst = reparse(JOIN)
    order, pred, cycles, pipe = solution_graph(inst, None)
    assert earliest_starts(order, pred, cycles, pipe)[5:7] == [20, 25]
    bound = makespan_bound(inst)
    assert (bound.load_path_cycles, bound.cycles) == (22, 32)
    solution = Solution(order=tuple(range(10)), offsets={0: 0, 1: 10, 2: 20})
    assert evaluate(inst, solution, 2, HARDWARE).makespan_cycles == 32


JOBS = st.lists(
    st.tuples(st.integers(0, 30), st.integers(1, 12), st.integers(0, 30)), min_size=1, max_size=6
)


@given(JOBS)
def test_preemptive_one_pipe_between_simple_bounds_and_the_optimum(jobs):
    """Jackson's preemptive schedule is no longer than the best non-preemptive sequence (it is a
    relaxation) and no shorter than the one-job and whole-set bounds."""
    best = min(
        max(end + tail for end, tail in _sequence(perm)) for perm in itertools.permutations(jobs)
    )
    whole = min(h for h, _, _ in jobs) + sum(p for _, p, _ in jobs) + min(q for _, _, q in jobs)
    one = max(h + p + q for h, p, q in jobs)
    assert max(whole, one) <= preemptive_one_pipe(jobs) <= best


def _sequence(jobs):
    t = 0
    for head, cycles, tail in jobs:
        t = max(t, head) + cycles
        yield t, tail


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(placements(disjoint=True))
def test_heads_and_tails_hold_for_valid_solutions(case):
    """Every node starts no earlier than its head and ends no later than the makespan minus its
    tail, on the evaluator's timing of any valid solution."""
    inst, sol = case
    result = evaluate(inst, sol, 2, HARDWARE)
    if not result.valid:
        return
    order, pred, cycles, pipe = solution_graph(inst, sol)
    succ = [[] for _ in pred]
    for v, ps in enumerate(pred):
        for u in ps:
            succ[u].append(v)
    heads = np.asarray(earliest_starts(order, pred, cycles, pipe))
    tails = np.asarray(earliest_starts(order[::-1], succ, cycles, pipe))
    assert (heads <= result.start_cycles).all()
    assert (result.end_cycles + tails <= result.makespan_cycles).all()


def test_traffic_bound_by_hand():
    """forced_spill with UB = 150: while VEC_B runs, b0 (100, COPY_IN-backed, still needed by
    VEC_A) and b1 (100, VEC_B's own) are both allocated: 200 units in 150, so at least 50 units
    of b0 must be out, at cost 1 per unit (COPY_IN-backed): bound 50 at node 3. The contest
    capacity (1,024) holds both: bound 0. (The true optimum is 100: the bound relaxes a
    buffer to fractions.)"""
    inst = tiny("forced_spill")
    assert traffic_bound(inst, Hardware(capacity={"UB": 150})) == TrafficBound(50, 3)
    assert traffic_bound(inst, DEFAULT_HARDWARE).units == 0


def test_traffic_bound_counts_write_back():
    """forced_spill with b0 written by VEC_0 instead of a COPY_IN: b0 is no longer
    COPY_IN-backed, so each unit out costs 2 (out and back in): bound 2 x 50 = 100."""
    data = tiny_data("forced_spill")
    data["Nodes"][1]["Op"] = "VEC_0"
    inst = reparse(data)
    assert traffic_bound(inst, Hardware(capacity={"UB": 150})).units == 100


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_traffic_bound_never_exceeds_an_optimal_placement(data):
    """The bound holds for every order: the CP-SAT placement of a random order, proven
    optimal for that order, never spills less."""
    inst = data.draw(instances())
    bound = traffic_bound(inst, HARDWARE).units
    order = tuple(random_topological_order(data.draw, inst))
    result = solve_placement(inst, Solution(order=order), HARDWARE, time_limit_s=5)
    if result.status is Status.OPTIMAL:
        assert result.objective is not None and result.objective >= bound


@settings(max_examples=80, deadline=None)
@given(instances().filter(lambda inst: inst.n_nodes <= 10), st.data())
def test_relaxed_instance_optimum_never_exceeds_the_instance_optimum(inst, data):
    """Brute force on both sides: whatever ops are kept, the sub-instance's optimal peak is at
    most the instance's (the bound is valid), and with every op kept and no unused buffer it
    is the same problem."""
    full = brute_force_optimum(inst)
    kept = data.draw(st.lists(st.sampled_from(inst.op_ids), unique=True, min_size=1))
    sub, new_id = relaxed_instance(inst, kept)
    assert sorted(new_id) == sorted(kept) and sub.n_nodes >= len(kept)
    relaxed = brute_force_optimum(sub)
    if full is not None:
        assert relaxed is not None and relaxed <= full
    everything, _ = relaxed_instance(inst, inst.op_ids)
    if all(buf.users for buf in inst.buffers.values()):
        assert brute_force_optimum(everything) == full


def _conv_layer():
    """Two output chains over two inputs: conv(o, i) reads weight W_o and input I_i, chain o
    runs i = 1 then 2 and its second step writes O_o. Every op holds at most 8 units (forced-
    live 8); the best order runs the chains one after the other and peaks at 10 (W1, I1, I2,
    O1 while chain 1 ends: I1 still waits for chain 2)."""
    sizes = {"W1": 4, "W2": 4, "I1": 2, "I2": 2, "O1": 2, "O2": 2}
    ids = {name: b for b, name in enumerate(sizes)}
    uses = {"c11": ["W1", "I1"], "c12": ["W1", "I2", "O1"], "c21": ["W2", "I1"]}
    uses["c22"] = ["W2", "I2", "O2"]
    nodes, edges = [], [(0, 1), (2, 3)]  # the chains: c11 -> c12, c21 -> c22
    for i, (name, bufs) in enumerate(uses.items()):
        nodes.append(
            {
                "Id": i,
                "Op": name.upper(),
                "Pipe": "CUBE",
                "Cycles": 1,
                "Bufs": [ids[b] for b in bufs],
            }
        )
    for name, b in ids.items():
        alloc, free = len(nodes), len(nodes) + 1
        for kind, node in (("ALLOC", alloc), ("FREE", free)):
            nodes.append({"Id": node, "Op": kind, "BufId": b, "Size": sizes[name], "Type": "L1"})
        for i, bufs in enumerate(uses.values()):
            if name in bufs:
                edges += [(alloc, i), (i, free)]
    return reparse({"Nodes": nodes, "Edges": edges})


def test_relaxed_instance_keeps_paths_through_dropped_ops():
    """a -> b -> c (b's buffer links them too): dropping b keeps a -> c; in the conv layer,
    c11 -> c12 and c21 -> c22 leave no path between c11 and c22."""
    nodes = [{"Id": i, "Op": f"OP{i}", "Pipe": "VECTOR", "Cycles": 1, "Bufs": []} for i in (0, 2)]
    nodes.append({"Id": 1, "Op": "OP1", "Pipe": "VECTOR", "Cycles": 1, "Bufs": [0]})
    nodes += [
        {"Id": 3, "Op": "ALLOC", "BufId": 0, "Size": 1, "Type": "UB"},
        {"Id": 4, "Op": "FREE", "BufId": 0, "Size": 1, "Type": "UB"},
    ]
    chain = reparse({"Nodes": nodes, "Edges": [(0, 3), (3, 1), (1, 4), (4, 2)]})
    sub, new_id = relaxed_instance(chain, [0, 2])
    assert sub.edges == ((new_id[0], new_id[2]),) and not sub.buffers
    conv = _conv_layer()
    sub, new_id = relaxed_instance(conv, [0, 3])
    assert not [(u, w) for u, w in sub.edges if u in new_id.values() and w in new_id.values()]
    with pytest.raises(ValueError, match="op nodes only"):
        relaxed_instance(conv, [conv.buffers[0].alloc])


def test_pipeline_proves_the_conv_layer_optimal_with_a_relaxed_bound():
    inst = _conv_layer()
    orders = itertools.permutations(range(4))
    chains_kept = [p for p in orders if p.index(0) < p.index(1) and p.index(2) < p.index(3)]
    assert order_bound(inst).units == 8
    assert min(int(op_profile(inst, p).max()) for p in chains_kept) == 10
    order = op_order_of(inst, inst.topological_order)
    assert set(peak_ops(inst, order, 4)) == set(inst.op_ids)
    result = solve_instance(inst, SolveOptions(problems=(1,), time_limit_s=5))
    assert result.p1 is not None and result.p1.evaluation.max_v_stay_units == 10
    assert result.p1_bound_units == 10
    assert result.p1_bound_source == "relaxed sub-instance of 4 ops"


def test_peak_ops_grow_ring_by_ring_beyond_the_peak_buffers():
    """Live buffers at the peak first (their users only, while they fit); with room left, the
    users of the other buffers those ops use join (the neighbouring layers)."""
    inst = parse_instance(generate("conv", seed=0, nodes=300), name="conv300")
    order = op_order_of(inst, inst.topological_order)
    profile = op_profile(inst, order)
    at = int(profile.argmax())
    position = {v: p for p, v in enumerate(order)}
    live = {
        b
        for b, (first, last) in buffer_lifetimes(inst, position).items()
        if first <= at <= last and inst.buffers[b].memory in ("L1", "UB")
    }
    users_of_live = {u for b in live for u in inst.buffers[b].users}
    small = peak_ops(inst, order, 8)
    large = peak_ops(inst, order, len(users_of_live) + 40)
    assert len(small) <= 8 and set(small) <= users_of_live
    assert users_of_live < set(large) and len(large) <= len(users_of_live) + 40
    assert large == sorted(large, key=position.__getitem__)


def test_an_optimal_p1_answer_hands_its_budget_on():
    """Once the P1 answer is proven optimal nothing is left to find: the P1 refinement
    returns its whole budget for Problem 3 (it used to keep it unless the LNS stalled)."""
    inst = _conv_layer()
    order = op_order_of(inst, inst.topological_order)
    result = CaseResult(inst.name, order_bound(inst), makespan_bound(inst))
    solution = Solution(order=schedule_from_op_order(inst, order))
    judged = evaluate_order(inst, solution.order)
    result.p1 = Candidate("start", solution, judged)
    result.p1_bound_units = judged.max_v_stay_units or 0  # proven: bound meets the value
    rng = np.random.default_rng(0)
    spare = refine_order(OrderingData(inst), result, rng, 5.0, 1e18, None, lambda s, m: None)
    assert spare == pytest.approx(5.0, abs=0.5)


def _matmul(m: int, n: int, k: int, sizes: dict[int, int] | None = None):
    """A generated m x n x k matmul; ``sizes`` resizes row i's first A tile (the generator
    creates A tiles row by row: the L1 buffers that MOVEs copy to L0A, in ALLOC order)."""
    data = generate("matmul", seed=0, m=m, n=n, k=k)
    inst = parse_instance(data, name=f"matmul_{m}x{n}x{k}")
    if not sizes:
        return inst
    a_tiles = sorted(
        (
            b
            for b, buf in inst.buffers.items()
            if buf.memory == "L1"
            and any(inst.buffers[c].memory == "L0A" for u in buf.users for c in inst.bufs_of(u))
        ),
        key=lambda b: inst.buffers[b].alloc,
    )
    for row, size in sizes.items():
        for node in data["Nodes"]:
            if node.get("BufId") == a_tiles[row * k]:
                node["Size"] = size
    return reparse(data)


def _optimum(inst) -> int:
    """The proven optimal max V_stay (the full ordering model)."""
    answer = solve_order(
        OrderingData(inst),
        op_order_of(inst, inst.topological_order),
        time_limit_s=120,
        workers=2,
        tie_break=False,
    )
    assert answer.status is Status.OPTIMAL
    assert answer.objective is not None
    return answer.objective


@pytest.mark.parametrize("shape", [(3, 3, 1), (3, 4, 1)])
def test_grid_bound_of_a_small_matmul_is_its_proven_optimum(shape):
    """(n + 1) K tiles on a square grid; a 3 x 4 one runs column by column: 3 + 1 tiles."""
    inst = _matmul(*shape)
    grid = grid_bound(inst)
    assert grid is not None and (grid.rows, grid.cols, grid.memory) == (*shape[:2], "L0C")
    assert grid.units == 4 * 128 == _optimum(inst)
    assert order_bound(inst).units == grid.units


def test_grid_bound_with_uneven_rows_never_exceeds_the_optimum():
    """Rows weigh 128, 256 and 384, columns 128 each: the bound is the least of its three
    cases (sum of columns + lightest row = 512) and stays at or below the optimum."""
    inst = _matmul(3, 3, 1, sizes={1: 256, 2: 384})
    lines = sorted(block_lines(inst, "L0C").values())
    assert lines == [128, 128, 128, 128, 256, 384]
    grid = grid_bound(inst)
    assert grid is not None and grid.units == 3 * 128 + 128
    assert grid.units <= _optimum(inst)


def test_grid_bound_needs_three_rows_three_columns_and_nothing_but_lines():
    assert grid_bound(_matmul(2, 3, 2)) is None  # two rows: the case analysis needs three
    assert grid_bound(load_instance(bundled("flashattention_2x3.json"))) is None
    # One more L1 tile read by MOVEs of two blocks on no common row or column.
    data = generate("matmul", seed=0, m=3, n=3, k=1)
    inst = parse_instance(data, name="matmul")
    moves = [v for v in inst.op_ids if inst.nodes[v].op == "MOVE"]
    first, last = moves[0], moves[-1]  # block (0, 0) and block (2, 2)
    assert grid_bound(inst) is not None
    extra, n = 10_000, inst.n_nodes
    data["Nodes"] += [
        {"Id": n, "Op": "ALLOC", "BufId": extra, "Size": 128, "Type": "L1"},
        {"Id": n + 1, "Op": "FREE", "BufId": extra, "Size": 128, "Type": "L1"},
    ]
    for node in data["Nodes"]:
        if node["Id"] in (first, last):
            node["Bufs"] = [*node["Bufs"], extra]
    data["Edges"] += [[n, first], [n, last], [first, n + 1], [last, n + 1]]
    assert grid_bound(parse_instance(data, name="diagonal")) is None


def test_pipeline_reports_a_matmul_proven_optimal_by_its_grid():
    inst = _matmul(3, 3, 2)
    result = solve_instance(inst, SolveOptions(problems=(1,), time_limit_s=5))
    assert result.p1 is not None and result.p1.evaluation.max_v_stay_units == 4 * 2 * 128
    assert result.p1_bound_units == 4 * 2 * 128
    assert result.p1_bound_source == "grid of 3 x 3 L0C blocks"


def _live_during(inst, order):
    """L1/UB units live while each node runs in ``order`` (a FREE: just before it)."""
    at = {u: p for p, u in enumerate(order)}
    live = [0] * inst.n_nodes
    for buf in inst.buffers.values():
        if buf.memory in ("L1", "UB"):
            for u in order[at[buf.alloc] : at[buf.free] + 1]:
                live[u] += buf.size_units
    return live


@settings(max_examples=60, deadline=None)
@given(instances().filter(lambda inst: inst.n_nodes <= 8))
def test_closure_cut_is_the_least_live_total_at_a_node_over_every_order(inst):
    """Brute force over every order of the nodes: the cut at v is at most what any valid order
    (single residency kept) holds while v runs, at least what any order does, the same when no
    L0 buffer can add a constraint, and at least the forced-live total at v."""
    least = [float("inf")] * inst.n_nodes
    least_valid = [float("inf")] * inst.n_nodes
    optimum = float("inf")  # the evaluator's best max V_stay
    for order in all_topological_orders(inst):
        live = _live_during(inst, order)
        least = [min(a, b) for a, b in zip(least, live, strict=True)]
        judged = evaluate_order(inst, order)
        if judged.valid:
            least_valid = [min(a, b) for a, b in zip(least_valid, live, strict=True)]
            optimum = min(optimum, judged.max_v_stay_units)
    forced = forced_live_units(inst)
    cuts = ClosureCuts(inst)
    l0 = any(buf.memory not in ("L1", "UB") for buf in inst.buffers.values())
    for v in range(inst.n_nodes):
        cut = cuts.at(v)
        assert least[v] <= cut <= least_valid[v] and cut >= forced[v]
        if not l0:
            assert cut == least[v]
    assert closure_cut_bound(inst, inst.n_nodes)[0] <= optimum


def _either_or():
    """P -> S -> R, and Q beside S: buffer a (5) links P and Q, buffer b (6) links Q and R.
    Nothing is forced live at S (forced-live 0, no op holds more than 11), but when S runs
    either Q has run (b is open until R) or it has not (a is open since P): at least 5."""
    ops = {"P": [0], "S": [], "Q": [0, 1], "R": [1]}
    nodes = [
        {"Id": i, "Op": name, "Pipe": "VECTOR", "Cycles": 1, "Bufs": bufs}
        for i, (name, bufs) in enumerate(ops.items())
    ]
    edges = [(0, 1), (1, 3)]
    for b, (size, users) in enumerate(((5, (0, 2)), (6, (2, 3)))):
        alloc, free = len(nodes), len(nodes) + 1
        for kind, node in (("ALLOC", alloc), ("FREE", free)):
            nodes.append({"Id": node, "Op": kind, "BufId": b, "Size": size, "Type": "UB"})
        edges += [(alloc, u) for u in users] + [(u, free) for u in users]
    return reparse({"Nodes": nodes, "Edges": edges})


def test_closure_cut_sees_an_either_or_that_no_single_node_forces():
    inst = _either_or()
    assert forced_live_units(inst)[1] == 0
    assert ClosureCuts(inst).at(1) == 5
    assert brute_force_optimum(inst) >= 5


def test_closure_cut_keeps_single_residency():
    """S uses L0A buffer x; y (L0A) is allocated before S and used by P, with UB buffer a (4)
    that Q, after S, reads too. Nothing forces a live at S, but y may not be open while x is:
    P runs before S, so a is open around S."""
    ops = {"S": [0], "P": [1, 2], "Q": [2]}
    nodes = [
        {"Id": i, "Op": name, "Pipe": "MTE1", "Cycles": 1, "Bufs": bufs}
        for i, (name, bufs) in enumerate(ops.items())
    ]
    edges = [(0, 2)]
    for b, (size, memory, users) in enumerate(
        ((1, "L0A", (0,)), (1, "L0A", (1,)), (4, "UB", (1, 2)))
    ):
        alloc, free = len(nodes), len(nodes) + 1
        for kind, node in (("ALLOC", alloc), ("FREE", free)):
            nodes.append({"Id": node, "Op": kind, "BufId": b, "Size": size, "Type": memory})
        edges += [(alloc, u) for u in users] + [(u, free) for u in users]
        if b == 1:
            edges.append((alloc, 0))  # y is allocated before S
    inst = reparse({"Nodes": nodes, "Edges": edges})
    assert forced_live_units(inst)[0] == 0
    assert ClosureCuts(inst).at(0) == 4 == brute_force_optimum(inst)


def test_closure_cut_locks_only_the_l0_memories_the_node_uses():
    """v uses UB alone: L0A buffer x may stay open around it (P before v, Q after), so UB
    buffer a, read by R before v and by P, closes before v and only v's own b (1) is live.
    Forbidding x to straddle v too would force P after v and count a (5): not a bound."""
    ops = {"R": [1], "V": [2], "P": [0, 1], "Q": [0]}
    nodes = [
        {"Id": i, "Op": name, "Pipe": "MTE1", "Cycles": 1, "Bufs": bufs}
        for i, (name, bufs) in enumerate(ops.items())
    ]
    edges = [(0, 1), (1, 3)]  # R -> V -> Q
    for b, (size, memory, users) in enumerate(
        ((1, "L0A", (2, 3)), (5, "UB", (0, 2)), (1, "UB", (1,)))
    ):
        alloc, free = len(nodes), len(nodes) + 1
        for kind, node in (("ALLOC", alloc), ("FREE", free)):
            nodes.append({"Id": node, "Op": kind, "BufId": b, "Size": size, "Type": memory})
        edges += [(alloc, u) for u in users] + [(u, free) for u in users]
    inst = reparse({"Nodes": nodes, "Edges": edges})
    least_valid = min(
        _live_during(inst, o)[1]
        for o in all_topological_orders(inst)
        if evaluate_order(inst, o).valid
    )
    assert ClosureCuts(inst).at(1) == 1 == least_valid


def test_closure_cut_bound_is_name_free_through_the_pipeline():
    """The search's nodes depend on the ids it is given (a topological order's ties), so the
    pipeline cuts the canonical instance: a renumbered copy gets the same bound."""
    from npuopt.instances.transform import renumber

    graph = generate("random", 1, nodes=200)
    options = SolveOptions(problems=(1,), time_limit_s=20, speed=1.0, method="heuristics")
    one = solve_instance(parse_instance(graph, name="r"), options)
    other = solve_instance(parse_instance(renumber(graph, 5), name="r"), options)
    assert one.p1_bound_source.startswith("closure cut")
    plain = order_bound(parse_instance(graph, name="r")).units
    assert one.p1_bound_units == other.p1_bound_units > plain


def test_the_pipeline_raises_its_problem_1_bound_with_closure_cuts_once_answers_are_in(
    monkeypatch,
):
    """The cuts run last and change no answer, only the bound (here above every other)."""
    import npuopt.solver.stages.order as order_stage

    inst = parse_instance(generate("random", 1, nodes=200), name="r")
    options = SolveOptions(time_limit_s=20, speed=1.0, method="heuristics")
    result = solve_instance(inst, options)
    assert result.p1 is not None and result.p3 is not None
    assert result.p1_bound_units > order_bound(inst).units
    assert result.p1_bound_source.startswith("closure cut")
    assert result.p1.evaluation.max_v_stay_units >= result.p1_bound_units
    monkeypatch.setattr(order_stage, "cuts_for", lambda work_s, nodes: 0)
    without = solve_instance(inst, options)
    assert without.p1_bound_units == order_bound(inst).units
    for problem in (1, 2, 3):
        assert without.best(problem).solution == result.best(problem).solution
