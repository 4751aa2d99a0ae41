"""What every CP-SAT model of npuopt shares: status mapping and solver settings."""

from __future__ import annotations

from collections.abc import Mapping

from ortools.sat.python import cp_model

from npuopt.solver.result import Status

STATUS = {
    cp_model.OPTIMAL: Status.OPTIMAL,
    cp_model.FEASIBLE: Status.FEASIBLE,
    cp_model.INFEASIBLE: Status.INFEASIBLE,
    cp_model.MODEL_INVALID: Status.UNKNOWN,
    cp_model.UNKNOWN: Status.UNKNOWN,
}


def make_solver(
    *,
    time_limit_s: float,
    seed: int,
    workers: int,
    deterministic: bool,
    log: bool,
    params: Mapping[str, str] | None,
) -> cp_model.CpSolver:
    """A CP-SAT solver with npuopt's settings.

    With ``deterministic`` the limit is CP-SAT's deterministic time (with one worker and a fixed
    seed the answer is then the same on every run, whatever the machine's load); wall-clock
    time is only a safety net then. ``params`` pass straight through by name.

    CP-SAT leaves SIGINT alone: its own handler, once a solve has installed it, stays behind
    and makes a later Ctrl-C kill the process outright, losing the answers the CLI writes on
    an interrupt. Python's handler then raises ``KeyboardInterrupt`` when the solve returns.
    """
    solver = cp_model.CpSolver()
    solver.parameters.catch_sigint_signal = False
    if deterministic:
        solver.parameters.max_deterministic_time = max(0.01, time_limit_s)
        solver.parameters.max_time_in_seconds = 10 * max(1.0, time_limit_s)
    else:
        solver.parameters.max_time_in_seconds = max(0.01, time_limit_s)
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    solver.parameters.log_search_progress = log
    for name, value in (params or {}).items():
        set_param(solver.parameters, name, value)
    return solver


def set_param(parameters: object, name: str, value: str) -> None:
    """Set a CP-SAT parameter from its text form (``"true"``, ``"2"``, ``"0.5"``, or an enum
    value by name, ``"FIXED_SEARCH"``)."""
    current = getattr(parameters, name)
    kind = type(current)
    parsed: object
    if kind is bool:
        parsed = value.lower() in ("1", "true", "yes")
    elif hasattr(kind, "__members__"):  # an enum: by name
        members = kind.__members__
        if value not in members:
            raise ValueError(f"{name}: {value!r} is not one of {', '.join(members)}")
        parsed = members[value]
    else:
        parsed = kind(value)
    setattr(parameters, name, parsed)
