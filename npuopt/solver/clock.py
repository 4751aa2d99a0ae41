"""How long this process has been running, for time limits that count start-up too.

A user's ``--time-limit T`` is measured from the moment they pressed Enter: the interpreter
start, the imports (ortools, numpy, pydantic: about a second) and loading the graph all count.
"""

from __future__ import annotations

import os
import time

_IMPORTED = time.monotonic()


def process_elapsed() -> float:
    """Seconds since this process started.

    On Linux the start is read from ``/proc/self/stat`` (field 22, in clock ticks since boot,
    compared with the boot-time clock); elsewhere it is the import of this module, which the
    CLI imports first.
    """
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")
        return max(time.clock_gettime(time.CLOCK_BOOTTIME) - started, 0.0)
    except (OSError, ValueError, IndexError, AttributeError):
        return time.monotonic() - _IMPORTED
