"""npuopt: a constraint-programming optimizer for in-core scheduling on Davinci-style NPUs.

The Python API in a few calls (the README's "Python" section shows them together)::

    import npuopt

    graph = npuopt.load(npuopt.bundled("demo_conv.json"))
    result = npuopt.solve(graph, time_limit=20)
    print(result.objectives())  # {1: max V_stay, 2: extra traffic, 3: makespan}
    report = npuopt.evaluate(graph, result.p3.solution, problem=3)

The subpackages hold the rest: :mod:`npuopt.solver` (schema, evaluator, bounds, files, the
pipeline and CLI), :mod:`npuopt.models` (CP-SAT models), :mod:`npuopt.heuristics` (pure-Python
heuristics) and :mod:`npuopt.instances` (the generator and bundled instances). Every error is an
:class:`NpuoptError`.
"""

from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version

from npuopt.api import (
    Answer,
    Bounds,
    GraphLike,
    Result,
    bounds,
    evaluate,
    generate_orders,
    load,
    place,
    schedule_pipes,
    solve,
)
from npuopt.instances import bundled
from npuopt.solver.errors import NpuoptError
from npuopt.solver.evaluate import Evaluation
from npuopt.solver.hardware import Hardware
from npuopt.solver.instance import Instance
from npuopt.solver.solution import Solution, Spill

try:
    __version__ = _version("npuopt")
except _PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "Answer",
    "Bounds",
    "Evaluation",
    "GraphLike",
    "Hardware",
    "Instance",
    "NpuoptError",
    "Result",
    "Solution",
    "Spill",
    "__version__",
    "bounds",
    "bundled",
    "evaluate",
    "generate_orders",
    "load",
    "place",
    "schedule_pipes",
    "solve",
]
