"""The evaluator against a slow, literal second implementation on random small cases.

The reference below follows SPEC.md word by word: it materialises every spill edge and every
reuse edge (all pairs, no per-unit shortcut), checks every pair of segments for overlap and
simulates the pipes with the explicit edge set. The random cases come from ``tests/strategies.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from npuopt.solver.evaluate import evaluate
from npuopt.solver.instance import Instance
from npuopt.solver.solution import Solution

from strategies import HARDWARE, MEMS, instances, placements, random_topological_order, room

# -- the reference implementation -------------------------------------------------------------


@dataclass
class Reference:
    precedence_ok: bool
    alternation_ok: bool
    capacity_ok: bool
    overlap_ok: bool
    start: dict[int, int]
    makespan: int
    traffic: int
    peak: dict[str, int]

    @property
    def valid(self) -> bool:
        return self.precedence_ok and self.alternation_ok and self.capacity_ok and self.overlap_ok


def reference(inst: Instance, sol: Solution, rule: str) -> Reference:
    n, order = inst.n_nodes, list(sol.order)
    pos = {v: p for p, v in enumerate(order)}
    bufs = {v: set(inst.bufs_of(v)) for v in range(n)}
    pipe = {v: inst.pipe_of(v) for v in range(n)}
    cycles = {v: int(inst.cycles[v]) for v in range(n)}
    edges = set(inst.edges)
    for k, spill in enumerate(sol.spills):
        b, buf = spill.buf_id, inst.buffers[spill.buf_id]
        so, si = n + 2 * k, n + 2 * k + 1
        users = [v for v in bufs if b in bufs[v]]  # the graph built so far
        edges |= {(buf.alloc, so), (so, si), (si, buf.free)}
        for u in users:
            edges.add((u, so) if pos[u] < pos[so] else (si, u))
        bufs[so], bufs[si] = {b}, {b}
        pipe[so], pipe[si] = "MTE3", "MTE2"
        cycles[so] = 0 if buf.copy_in_backed else 2 * buf.size_units + 150
        cycles[si] = 2 * buf.size_units + 150
    precedence_ok = all(pos[a] < pos[c] for a, c in edges)

    # Segments, per SPEC: from ALLOC or SPILL_IN to the next SPILL_OUT or FREE.
    segments = []  # (buffer, memory, offset, size, start node, end node)
    alternation_ok = True
    for b, buf in inst.buffers.items():
        events = [
            (pos[buf.alloc], "A", buf.alloc, sol.offsets[b]),
            (pos[buf.free], "F", buf.free, None),
        ]
        for k, spill in enumerate(sol.spills):
            if spill.buf_id == b:
                events += [
                    (pos[n + 2 * k], "O", n + 2 * k, None),
                    (pos[n + 2 * k + 1], "I", n + 2 * k + 1, spill.new_offset_units),
                ]
        events.sort()
        kinds = "".join(e[1] for e in events)
        alternation_ok &= kinds == "A" + "OI" * ((len(kinds) - 2) // 2) + "F"
        for i, (_, kind, node, offset) in enumerate(events):
            if kind in "AI":
                ends = [e for e in events[i + 1 :] if e[1] in "OF"]
                if ends:
                    segments.append((b, buf.memory, offset, buf.size_units, node, ends[0][2]))
    capacity_ok = all(s[2] >= 0 and s[2] + s[3] <= HARDWARE.capacity(s[1]) for s in segments)
    capacity_ok &= all(0 <= sp.new_offset_units <= room(inst, sp.buf_id) for sp in sol.spills)
    capacity_ok &= all(0 <= sol.offsets[b] <= room(inst, b) for b in inst.buffers)

    def addr_overlap(a, c):
        return a[2] < c[2] + c[3] and c[2] < a[2] + a[3]

    overlap_ok = True
    for i, a in enumerate(segments):
        for c in segments[i + 1 :]:
            apart_in_time = pos[a[5]] < pos[c[4]] or pos[c[5]] < pos[a[4]]
            if a[1] == c[1] and addr_overlap(a, c) and not apart_in_time:
                overlap_ok = False
    peak = {}
    for mem in MEMS:
        peak[mem] = max(
            (
                sum(s[3] for s in segments if s[1] == mem and pos[s[4]] <= p <= pos[s[5]])
                for p in range(len(order))
            ),
            default=0,
        )

    reuse = set()
    if rule == "residency":
        for r in segments:
            for s in segments:
                if r[1] == s[1] and addr_overlap(r, s) and pos[r[5]] < pos[s[4]]:
                    reuse.add((r[5], s[4]))
    else:
        for a, ba in inst.buffers.items():
            for c, bc in inst.buffers.items():
                ra = (a, ba.memory, sol.offsets[a], ba.size_units)
                rc = (c, bc.memory, sol.offsets[c], bc.size_units)
                if (
                    a != c
                    and ba.memory == bc.memory
                    and addr_overlap(ra, rc)
                    and pos[ba.free] < pos[bc.alloc]
                ):
                    reuse.add((ba.free, bc.alloc))
    preds: dict[int, list[int]] = {v: [] for v in order}
    for a, c in edges | reuse:
        preds[c].append(a)
    start, end, pipe_free = {}, {}, {}
    for v in order:
        t = max([end.get(u, 0) for u in preds[v]] + [pipe_free.get(pipe[v], 0) if pipe[v] else 0])
        start[v], end[v] = t, t + cycles[v]
        if pipe[v]:
            pipe_free[pipe[v]] = end[v]
    traffic = sum(inst.buffers[s.buf_id].spill_traffic_units for s in sol.spills)
    return Reference(
        precedence_ok,
        alternation_ok,
        capacity_ok,
        overlap_ok,
        start,
        max(end.values()),
        traffic,
        peak,
    )


def check_agreement(inst: Instance, sol: Solution, rule: str) -> None:
    ref = reference(inst, sol, rule)
    got = evaluate(inst, sol, 2, HARDWARE, reuse_rule=rule, max_violations=10_000)
    kinds = {v.kind for v in got.violations}
    assert got.valid == ref.valid, (ref, got.violations)
    assert ("edge" in kinds or "spill_edge" in kinds) == (not ref.precedence_ok)
    assert ("spill" in kinds) == (not ref.alternation_ok)
    assert ("capacity" in kinds) == (not ref.capacity_ok)
    assert ("overlap" in kinds) == (not ref.overlap_ok)
    assert got.extra_traffic_units == ref.traffic
    assert dict(got.peak_units) == {**dict.fromkeys(("L0B", "L0C"), 0), **ref.peak}
    if ref.precedence_ok and ref.alternation_ok:
        assert {v: int(got.start_cycles[v]) for v in sol.order} == ref.start
        assert got.makespan_cycles == ref.makespan


@given(placements(), st.sampled_from(["residency", "literal"]))
def test_evaluator_matches_reference(case, rule):
    check_agreement(*case, rule)


@given(placements(disjoint=True), st.sampled_from(["residency", "literal"]))
def test_evaluator_matches_reference_on_mostly_valid_cases(case, rule):
    check_agreement(*case, rule)


@given(st.data())
def test_p1_matches_reference(data):
    inst = data.draw(instances())
    order = random_topological_order(data.draw, inst)
    if data.draw(st.booleans()):  # sometimes break an edge
        i = data.draw(st.integers(0, len(order) - 1))
        j = data.draw(st.integers(0, len(order) - 1))
        order[i], order[j] = order[j], order[i]
    pos = {v: p for p, v in enumerate(order)}
    v_stay = best = 0
    live: dict[str, set[int]] = {m: set() for m in MEMS}
    l0_clashes = 0
    for v in order:
        b = inst.buffer_of_node[v]
        if b is None:
            continue
        buf = inst.buffers[b]
        sign = 1 if v == buf.alloc else -1
        if buf.memory in ("L1", "UB"):
            v_stay += sign * buf.size_units
            best = max(best, v_stay)
        if buf.memory == "L0A" and sign == 1:
            l0_clashes += bool(live["L0A"])  # one violation per ALLOC into an occupied L0
        (live[buf.memory].add if sign == 1 else live[buf.memory].discard)(b)
    edges_ok = all(pos[a] < pos[c] for a, c in inst.edges)
    got = evaluate(inst, Solution(order=tuple(order)), 1, max_violations=10_000)
    assert got.max_v_stay_units == best
    assert sum(v.kind == "l0_residency" for v in got.violations) == l0_clashes
    assert got.valid == (edges_ok and l0_clashes == 0)
