"""The project's own error types.

Every problem with a user's input (an instance, a hardware file, an attachment file) is raised as
an :class:`NpuoptError` whose message is one line naming the file and the node, buffer, edge or line
at fault. The CLI turns these into exit code 2; anything else escaping is a bug in npuopt.
"""

from __future__ import annotations


class NpuoptError(Exception):
    """Base class of every bad-input error npuopt raises."""


class InstanceError(NpuoptError):
    """An instance graph is malformed or violates a rule of SPEC section 1."""


class HardwareError(NpuoptError):
    """A hardware description is malformed."""


class SolutionFileError(NpuoptError):
    """An attachment file (schedule, memory or spill list) is malformed."""
