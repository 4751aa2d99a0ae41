"""CP-SAT settings shared by the models."""

import pytest
from ortools.sat.python import cp_model

from models.common import set_param


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
