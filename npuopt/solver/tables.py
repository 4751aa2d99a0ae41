"""Competition tables from a study's ``runs.csv`` (see :mod:`solver.bench`), as Markdown, CSV
or LaTeX (booktabs).

* the **competition table**: one row per instance and method, each problem's best run over the
  seeds (P1 max V_stay and bound; P2 traffic, spills, makespan; P3 makespan, traffic, bound,
  gap; runtime of the slowest run);
* the **seed table**: per instance and method, mean / min / max over the seeds of P1 max
  V_stay, P2 traffic and P3 makespan.
"""

from __future__ import annotations

import csv
import io
import statistics
from collections.abc import Iterable, Sequence
from typing import Literal

Format = Literal["md", "csv", "tex"]
FORMATS: tuple[Format, ...] = ("md", "csv", "tex")

Row = dict[str, str]


def _int(value: str) -> int | None:
    return int(value) if value not in ("", None) else None


def _best(runs: Sequence[Row], column: str, then: str | None = None) -> Row:
    """The run with the smallest ``column`` (then ``then``); runs without a value come last."""

    def rank(r: Row) -> tuple[int, int, int]:
        value = _int(r.get(column, ""))
        second = _int(r.get(then, "")) if then else 0
        return (value is None, value or 0, second or 0)

    return min(runs, key=rank)


def _groups(rows: Iterable[Row]) -> dict[tuple[str, str], list[Row]]:
    groups: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        groups.setdefault((r["instance"], r["method"]), []).append(r)
    return groups


def competition(rows: Iterable[Row]) -> tuple[list[str], list[list[str]]]:
    """Header and body of the competition table."""
    header = [
        "case",
        "method",
        "seeds",
        "P1 max V_stay",
        "P1 bound",
        "P2 traffic",
        "P2 spills",
        "P2 makespan",
        "P3 makespan",
        "P3 traffic",
        "P3 bound",
        "P3 gap",
        "time s",
    ]
    body = []
    for (case, method), runs in _groups(rows).items():
        p1 = _best(runs, "p1_max_v_stay")
        p2 = _best(runs, "p2_traffic", "p2_makespan")
        p3 = _best(runs, "p3_makespan", "p3_traffic")
        gap = p3.get("p3_gap", "")
        body.append(
            [
                case,
                method,
                str(len(runs)),
                _num(p1["p1_max_v_stay"]),
                _num(p1["p1_bound"]),
                _num(p2["p2_traffic"]),
                _num(p2["p2_spills"]),
                _num(p2["p2_makespan"]),
                _num(p3["p3_makespan"]),
                _num(p3["p3_traffic"]),
                _num(p3["p3_bound"]),
                f"{100 * float(gap):.1f}%" if gap else "-",
                f"{max(float(r['runtime_s']) for r in runs):.1f}",
            ]
        )
    return header, body


def seed_table(rows: Iterable[Row]) -> tuple[list[str], list[list[str]]]:
    """Header and body of the per-seed mean / min / max table."""
    header = ["case", "method", "seeds"]
    columns = (("P1", "p1_max_v_stay"), ("P2 traffic", "p2_traffic"), ("P3", "p3_makespan"))
    for label, _ in columns:
        header += [f"{label} mean", f"{label} min", f"{label} max"]
    body = []
    for (case, method), runs in _groups(rows).items():
        line = [case, method, str(len(runs))]
        for _, column in columns:
            values = [v for r in runs if (v := _int(r.get(column, ""))) is not None]
            if values:
                line += [f"{statistics.fmean(values):,.1f}", f"{min(values):,}", f"{max(values):,}"]
            else:
                line += ["-", "-", "-"]
        body.append(line)
    return header, body


def _num(value: str) -> str:
    number = _int(value)
    return "-" if number is None else f"{number:,}"


def render(header: Sequence[str], body: Sequence[Sequence[str]], fmt: Format) -> str:
    """A table as Markdown, CSV or LaTeX (booktabs, numbers right-aligned)."""
    if fmt == "csv":
        text = io.StringIO()
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(header)
        writer.writerows([[cell.replace(",", "") for cell in r] for r in body])
        return text.getvalue()
    if fmt == "md":
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join(lines) + "\n"
    align = "ll" + "r" * (len(header) - 2)
    lines = [
        f"\\begin{{tabular}}{{{align}}}",
        "\\toprule",
        " & ".join(_tex(h) for h in header) + " \\\\",
        "\\midrule",
    ]
    lines += [" & ".join(_tex(cell) for cell in r) + " \\\\" for r in body]
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


def _tex(text: str) -> str:
    """Escape LaTeX's special characters (``{,}`` keeps digit groups tight)."""
    for char, escaped in (("\\", "\\textbackslash{}"), ("_", "\\_"), ("%", "\\%"), ("&", "\\&")):
        text = text.replace(char, escaped)
    return text.replace(",", "{,}")
