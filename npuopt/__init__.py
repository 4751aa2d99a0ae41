"""npuopt: a constraint-programming optimizer for in-core scheduling on Davinci-style NPUs.

The subpackages: :mod:`npuopt.solver` (schema, evaluator, bounds, files, the pipeline and CLI),
:mod:`npuopt.models` (CP-SAT models), :mod:`npuopt.heuristics` (pure-Python heuristics) and
:mod:`npuopt.instances` (the generator and bundled instances).
"""

from importlib.metadata import PackageNotFoundError as _PackageNotFoundError
from importlib.metadata import version as _version

try:
    __version__ = _version("npuopt")
except _PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
