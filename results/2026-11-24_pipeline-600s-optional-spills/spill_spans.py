"""How many nodes start between each spill's SPILL_OUT and SPILL_IN (evaluator's times).

    python results/2026-11-24_pipeline-600s-optional-spills/spill_spans.py CASE DIR

DIR is a stored answer's folder (Problem2 or Problem3); prints the 10th, 50th and 90th
percentiles. A pipe-model window can only drop a spill whose two nodes it holds.
"""

import sys

import numpy as np

from solver.evaluate import evaluate
from solver.files import ProblemFiles, read_solution
from solver.instance import load_instance

case, folder = sys.argv[1], sys.argv[2]
instance = load_instance(f"../shared/instances/{case}.json")
solution = read_solution(ProblemFiles.in_dir(folder, case), instance, 3)
start = evaluate(instance, solution, 3).start_cycles
assert start is not None
n = instance.n_nodes
starts = np.sort(start[np.asarray(solution.order)])
spans = [
    np.searchsorted(starts, start[n + 2 * k + 1], "right")
    - np.searchsorted(starts, start[n + 2 * k], "left")
    for k in range(len(solution.spills))
]
print(case, len(spans), "spills; nodes between SPILL_OUT and SPILL_IN, 10/50/90th percentile:",
      np.percentile(spans, [10, 50, 90]).round().astype(int).tolist())
