"""The process clock behind ``--time-limit``: start-up counts."""

from __future__ import annotations

import subprocess
import sys
import time

from npuopt.solver.clock import process_elapsed


def test_elapsed_grows_with_the_clock():
    before = process_elapsed()
    time.sleep(0.05)
    assert process_elapsed() - before >= 0.04


def test_elapsed_counts_what_ran_before_the_import():
    """A process that sleeps 0.3 s before importing the clock already shows those 0.3 s."""
    code = (
        "import time; time.sleep(0.3)\n"
        "from npuopt.solver.clock import process_elapsed\n"
        "print(process_elapsed())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 0.3 <= float(out.stdout) < 5.0
