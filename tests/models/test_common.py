"""CP-SAT settings shared by the models."""

import subprocess
import sys
from pathlib import Path

import pytest
from ortools.sat.python import cp_model

from npuopt.models.common import set_param

ROOT = Path(__file__).resolve().parents[2]


def test_set_param_parses_each_kind() -> None:
    parameters = cp_model.CpSolver().parameters
    set_param(parameters, "cp_model_presolve", "false")
    set_param(parameters, "num_workers", "3")
    set_param(parameters, "max_time_in_seconds", "2.5")
    set_param(parameters, "search_branching", "FIXED_SEARCH")
    assert parameters.cp_model_presolve is False
    assert parameters.num_workers == 3
    assert parameters.max_time_in_seconds == 2.5
    assert parameters.search_branching == type(parameters.search_branching).FIXED_SEARCH


def test_set_param_names_a_bad_enum_value() -> None:
    parameters = cp_model.CpSolver().parameters
    with pytest.raises(ValueError, match="search_branching: 'FIXED'"):
        set_param(parameters, "search_branching", "FIXED")


def test_ctrl_c_after_a_solve_still_raises_keyboard_interrupt() -> None:
    """CP-SAT's SIGINT handler, left behind by a solve, used to make a later Ctrl-C kill the
    process (exit by signal, no answers written). Run in a child: that death must not take
    the test session with it."""
    script = """
import os, signal, time
from ortools.sat.python import cp_model
from npuopt.models.common import make_solver
model = cp_model.CpModel()
model.maximize(model.new_int_var(0, 9, "x"))
solver = make_solver(time_limit_s=1, seed=0, workers=1, deterministic=True, log=False, params=None)
solver.solve(model)
try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
except KeyboardInterrupt:
    raise SystemExit(0)
raise SystemExit(3)
"""
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, (done.returncode, done.stderr)
