"""npuopt core: instance schema, hardware, solutions, the exact evaluator, bounds and files.

Only the core is re-exported here; the pipeline (``solver.solve``), the LNS driver and the CLI sit
on top of it and are imported explicitly.
"""

from npuopt.solver.bounds import MakespanBound, OrderBound, makespan_bound, order_bound
from npuopt.solver.errors import HardwareError, InstanceError, NpuoptError, SolutionFileError
from npuopt.solver.evaluate import Evaluation, Violation, evaluate
from npuopt.solver.files import ProblemFiles, read_solution, write_solution
from npuopt.solver.hardware import DEFAULT_HARDWARE, MEMORIES, Hardware, load_hardware
from npuopt.solver.instance import (
    Buffer,
    BufferNode,
    Instance,
    OpNode,
    load_instance,
    parse_instance,
)
from npuopt.solver.solution import Solution, Spill

__all__ = [
    "DEFAULT_HARDWARE",
    "MEMORIES",
    "Buffer",
    "BufferNode",
    "Evaluation",
    "Hardware",
    "HardwareError",
    "Instance",
    "InstanceError",
    "MakespanBound",
    "NpuoptError",
    "OpNode",
    "OrderBound",
    "ProblemFiles",
    "SolutionFileError",
    "Solution",
    "Spill",
    "Violation",
    "evaluate",
    "load_hardware",
    "load_instance",
    "makespan_bound",
    "order_bound",
    "parse_instance",
    "read_solution",
    "write_solution",
]
