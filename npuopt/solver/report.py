"""Plain-text and JSON views of instances and evaluations, for the CLI and result files."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from npuopt.solver.bounds import MakespanBound, OrderBound
from npuopt.solver.evaluate import Evaluation
from npuopt.solver.hardware import MEMORIES, Hardware
from npuopt.solver.instance import Instance

if TYPE_CHECKING:
    from npuopt.solver.lns import LnsResult
    from npuopt.solver.solve import CaseResult


def gap(value: int, bound: int) -> float | None:
    """Relative gap ``(value - bound) / value``, ``None`` when undefined."""
    return (value - bound) / value if value > 0 else None


def _pct(g: float | None) -> str:
    return "n/a" if g is None else f"{100 * g:.1f}%"


def instance_summary(
    instance: Instance, hardware: Hardware, order: OrderBound, makespan: MakespanBound
) -> dict[str, Any]:
    """Counts, pipe loads, memory totals and bounds of an instance, as plain data."""
    memory_units = dict.fromkeys(MEMORIES, 0)
    memory_buffers = dict.fromkeys(MEMORIES, 0)
    for buf in instance.buffers.values():
        memory_units[buf.memory] += buf.size_units
        memory_buffers[buf.memory] += 1
    ops: dict[str, int] = {}
    for v in instance.op_ids:
        ops[instance.nodes[v].op] = ops.get(instance.nodes[v].op, 0) + 1
    return {
        "case": instance.name,
        "nodes": instance.n_nodes,
        "edges": len(instance.edge_array()),
        "op_nodes": len(instance.op_ids),
        "buffers": len(instance.buffers),
        "copy_in_backed_buffers": len(instance.copy_in_backed),
        "ops": dict(sorted(ops.items())),
        "pipe_load_cycles": dict(makespan.pipe_loads),
        "memory": {
            m: {
                "buffers": memory_buffers[m],
                "total_units": memory_units[m],
                "capacity_units": hardware.capacity(m),
            }
            for m in MEMORIES
        },
        "bounds": {
            "p1_op_local_units": order.op_local_units,
            "p1_forced_live_units": order.forced_live_units,
            "p1_grid_units": order.grid_units,
            "p1_closure_cut_units": order.closure_cut_units,
            "p1_units": order.units,
            "p3_busiest_pipe": makespan.busiest_pipe if makespan.pipe_loads else None,
            "p3_max_pipe_load_cycles": max(makespan.pipe_loads.values(), default=0),
            "p3_critical_path_cycles": makespan.critical_path_cycles,
            "p3_head_tail_cycles": dict(makespan.head_tail_cycles),
            "p3_cycles": makespan.cycles,
        },
    }


def format_instance_summary(summary: dict[str, Any]) -> str:
    """Readable text of :func:`instance_summary`."""
    b = summary["bounds"]
    lines = [
        f"case {summary['case']}: {summary['nodes']:,} nodes, {summary['edges']:,} edges, "
        f"{summary['op_nodes']:,} op nodes, {summary['buffers']:,} buffers "
        f"({summary['copy_in_backed_buffers']:,} COPY_IN-backed)",
        "ops: " + ", ".join(f"{op} {k:,}" for op, k in summary["ops"].items()),
        "pipe load (cycles): "
        + ", ".join(f"{p} {c:,}" for p, c in summary["pipe_load_cycles"].items()),
        "memory (buffers, total units / capacity):",
    ]
    for m, row in summary["memory"].items():
        lines.append(
            f"  {m:<4} {row['buffers']:>7,} buffers "
            f"{row['total_units']:>11,} / {row['capacity_units']:,}"
        )
    lines += [
        f"P1 bound: max V_stay >= {b['p1_units']:,} (op-local {b['p1_op_local_units']:,}, "
        f"forced-live {b['p1_forced_live_units']:,}, grid {b['p1_grid_units']:,}"
        + (f", closure cut {cut:,})" if (cut := b["p1_closure_cut_units"]) else ")"),
        f"P3 bound: makespan >= {b['p3_cycles']:,} (max pipe load {b['p3_max_pipe_load_cycles']:,} "
        f"on {b['p3_busiest_pipe']}, critical path {b['p3_critical_path_cycles']:,}, "
        f"heads and tails {max(b['p3_head_tail_cycles'].values(), default=0):,})",
    ]
    return "\n".join(lines)


def evaluation_dict(
    evaluation: Evaluation, order: OrderBound | None = None, makespan: MakespanBound | None = None
) -> dict[str, Any]:
    """An evaluation (and the bounds beside it) as plain JSON-ready data."""
    data: dict[str, Any] = {
        "problem": evaluation.problem,
        "valid": evaluation.valid,
        "violation_count": evaluation.violation_count,
        "violations": [{"kind": v.kind, "message": v.message} for v in evaluation.violations],
        "peak_units": dict(evaluation.peak_units),
    }
    if evaluation.problem == 1:
        data["max_v_stay_units"] = evaluation.max_v_stay_units
        if order is not None and evaluation.max_v_stay_units is not None:
            data["bound_units"] = order.units
            data["gap"] = gap(evaluation.max_v_stay_units, order.units)
    else:
        data.update(
            extra_traffic_units=evaluation.extra_traffic_units,
            spill_count=evaluation.spill_count,
            makespan_cycles=evaluation.makespan_cycles,
            pipe_busy_cycles=dict(evaluation.pipe_busy_cycles),
            bank_conflicts=evaluation.bank_conflicts,
            reuse_rule=evaluation.reuse_rule,
        )
        if makespan is not None and evaluation.makespan_cycles is not None:
            data["makespan_bound_cycles"] = makespan.cycles
            data["makespan_load_path_cycles"] = makespan.load_path_cycles
            data["gap"] = gap(evaluation.makespan_cycles, makespan.cycles)
    return data


def format_evaluation(
    case: str,
    evaluation: Evaluation,
    order: OrderBound | None = None,
    makespan: MakespanBound | None = None,
) -> str:
    """Readable text of an evaluation."""
    e = evaluation
    head = f"case {case}, Problem {e.problem}"
    if e.problem != 1:
        head += f" (reuse rule: {e.reuse_rule})"
    lines = [head, f"valid: {'yes' if e.valid else 'NO'}"]
    if e.problem == 1 and e.max_v_stay_units is not None:
        line = f"max V_stay: {e.max_v_stay_units:,} units"
        if order is not None:
            line += f" (bound {order.units:,}, gap {_pct(gap(e.max_v_stay_units, order.units))})"
        lines.append(line)
    elif e.makespan_cycles is not None:
        lines.append(f"extra traffic: {e.extra_traffic_units:,} units in {e.spill_count:,} spills")
        line = f"makespan: {e.makespan_cycles:,} cycles"
        if makespan is not None:
            line += (
                f" (bound {makespan.cycles:,}, gap {_pct(gap(e.makespan_cycles, makespan.cycles))};"
                f" pipe load / critical path alone {makespan.load_path_cycles:,})"
            )
        lines.append(line)
        lines.append(
            "pipe busy (cycles): " + ", ".join(f"{p} {c:,}" for p, c in e.pipe_busy_cycles.items())
        )
        if e.bank_conflicts:
            lines.append(f"bank conflicts: {e.bank_conflicts:,}")
    if e.peak_units:
        label = "peak live" if e.problem == 1 else "peak resident"
        lines.append(
            f"{label} (units): " + ", ".join(f"{m} {u:,}" for m, u in e.peak_units.items())
        )
    if e.violation_count:
        lines.append(f"violations ({len(e.violations)} shown of {e.violation_count:,}):")
        lines += [f"  {v.kind}: {v.message}" for v in e.violations]
    return "\n".join(lines)


def case_summary(result: CaseResult) -> dict[str, Any]:
    """One case of ``summary.json``: objective values, bounds and gaps of each answer."""
    data: dict[str, Any] = {
        "case": result.case,
        "interrupted": result.interrupted,
        "runtime_s": round(result.runtime_s, 3),
        "history": [{"seconds": t, "problem": p, "value": v} for t, p, v in result.history],
        "stage_s": {k: round(v, 3) for k, v in result.stage_s.items()},
        "bounds": {
            "p1_units": result.order_bound.units,
            "p3_instance_cycles": result.makespan_bound.cycles,
        },
    }
    for problem in (1, 2, 3):
        candidate = result.best(problem)
        if candidate is None:
            continue
        e = candidate.evaluation
        row: dict[str, Any] = {"method": candidate.method, "valid": e.valid}
        if problem == 1:
            row["max_v_stay_units"] = e.max_v_stay_units
            row["bound_units"] = result.p1_bound_units
            row["bound_source"] = result.p1_bound_source
            row["gap"] = gap(e.max_v_stay_units or 0, result.p1_bound_units)
            row["proven_optimal"] = (e.max_v_stay_units or 0) <= result.p1_bound_units
            row.update(_lns_stats(result.p1_lns))
        else:
            row.update(
                extra_traffic_units=e.extra_traffic_units,
                spill_count=e.spill_count,
                makespan_cycles=e.makespan_cycles,
                reuse_rule=e.reuse_rule,
            )
            if problem == 2 and result.p2_bound is not None:
                row["bound_units"] = result.p2_bound.units
                row["gap"] = gap(e.extra_traffic_units or 0, result.p2_bound.units)
                if result.p2_order_bound is not None:
                    # CP-SAT's bound for the order it was given: not a bound over all orders.
                    row["bound_for_this_order_units"] = result.p2_order_bound
                row.update(_lns_stats(result.p2_lns))
            if problem == 3 and result.p2 is not None:
                # Re-timing found nothing faster within the budget: Problem 2's answer stands.
                row["same_as_p2"] = candidate.solution == result.p2.solution
            if problem == 3 and result.p3_bound is not None:
                row["bound_cycles"] = result.p3_bound.cycles
                row["bound_load_path_cycles"] = result.p3_bound.load_path_cycles
                row["gap"] = gap(e.makespan_cycles or 0, result.p3_bound.cycles)
                row["frontier"] = [
                    {"extra_traffic_units": t, "makespan_cycles": m} for t, m in result.frontier
                ]
                row.update(_lns_stats(result.p3_lns))
                if result.p3_fill is not None:
                    row["fill"] = _lns_stats(result.p3_fill)
        data[f"p{problem}"] = row
    if result.parts:
        data["parts"] = result.parts
    return data


def _lns_stats(lns: LnsResult[Any] | None) -> dict[str, Any]:
    """Steps, outcomes and deterministic work of an LNS run (nothing when none ran), and
    why it stopped (``lns_stop``: only ``"deadline"`` may differ from run to run)."""
    if lns is None:
        return {}
    return {
        "lns_steps": len(lns.steps),
        "lns_outcomes": lns.outcomes(),
        "lns_work": round(lns.work, 2),
        "lns_budget": None if lns.budget is None else round(lns.budget, 2),
        "lns_stalled": lns.stalled,
        "lns_stop": lns.stop,
    }


def results_table(cases: list[dict[str, Any]]) -> str:
    """The competition table of ``summary.json`` cases, as aligned text."""
    header = [
        "case",
        "P1 peak",
        "P1 bound",
        "P2 traffic",
        "P2 bound",
        "spills",
        "P2 makespan",
        "P3 makespan",
        "P3 traffic",
        "P3 bound",
        "P3 gap",
        "time s",
    ]
    rows = [header]
    for c in cases:
        p1, p2, p3 = c.get("p1", {}), c.get("p2", {}), c.get("p3", {})
        rows.append(
            [
                c["case"],
                _num(p1.get("max_v_stay_units")),
                _num(p1.get("bound_units")),
                _num(p2.get("extra_traffic_units")),
                _num(p2.get("bound_units")),
                _num(p2.get("spill_count")),
                _num(p2.get("makespan_cycles")),
                _num(p3.get("makespan_cycles")),
                _num(p3.get("extra_traffic_units")),
                _num(p3.get("bound_cycles")),
                _pct(p3.get("gap")) if "gap" in p3 else "-",
                f"{c['runtime_s']:.1f}",
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _num(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"
