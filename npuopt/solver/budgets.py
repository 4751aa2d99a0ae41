"""How a solve spends its time limit: every share, budget and size limit of the pipeline.

Each stage has a *budget* of work that is the same on every run for a given limit and speed
factor (CP-SAT's deterministic seconds, compaction moves, traffic estimates, generator runs), and
a wall-clock *deadline* as a share of the limit. Budgets are sized from ``SolveOptions.work_s``
(the limit times the machine's speed factor, :mod:`solver.speed`) and from the work each part
does per second on the reference machine (2 cores: ordering model ~0.45 deterministic s a
second, placement model ~0.35, pipe model ~0.2), so that a run ends on its budgets, reproducibly,
at about 90% of the limit. The deadlines only stop a machine slower than its factor says: such a
run stays on time but may differ from run to run. The measurements behind the values are in
``docs/decisions.md`` ("Budgets").
"""

from __future__ import annotations

from npuopt.heuristics.placement import PLACEMENT_POLICIES
from npuopt.solver.lns import LnsParams

# -- Problem 1 ------------------------------------------------------------------------------

#: Order generators (heuristics.generators): their share of the limit (as a run count,
#: heuristics.generators.generator_runs) and the tie-break variants tried of each.
PORTFOLIO_SHARE, PORTFOLIO_VARIANTS = 0.05, 8
#: Refinement budget (deterministic seconds per second of the limit) and deadline (share).
#: With the portfolio and the compaction, the plan ends Problem 1 at ~0.43 of the limit, plus
#: work no budget counts; the deadline only stops a machine running late.
P1_WORK, P1_DEADLINE = 0.12, 0.50
#: The same when Problem 1 is solved alone (no placement follows): the plan ends at ~0.88.
P1_ALONE_WORK, P1_ALONE_DEADLINE = 0.25, 0.95
#: Buffer compaction (heuristics.compaction) before the LNS: its share of the limit, as a move
#: count (in the pipeline, and Problem 1 alone).
COMPACTION_SHARE, COMPACTION_ALONE_SHARE = 0.10, 0.25
#: Moves of the closing descent after the LNS, as a share of the compaction's.
CLOSING_DESCENT = 0.1
#: Window LNS over the ordering model: windows of 30-50 ops close in about a second, larger
#: ones stop closing. ``stall_depth=2``: fewer positions at the peak is progress too.
P1_LNS = LnsParams(initial_window=30, min_window=8, max_window=50, step_time_s=1.5, stall_depth=2)
#: When Problems 2/3 follow, the LNS stops once its key has not dropped for this share of its
#: budget (never sooner than ``P1_STALL_MIN`` deterministic seconds) and hands the rest on.
P1_STALL_SHARE, P1_STALL_MIN = 0.35, 10.0
#: The full ordering model runs (for a bound and maybe the optimum) up to this many ops.
FULL_MODEL_OPS = 400
#: Relaxed sub-instances around the peak (solver.bounds.relaxed_instance): their share of the
#: refinement budget, and the sizes tried in turn (ops) until one does not close.
RELAXED_SHARE = 0.1
RELAXED_OPS = (16, 24, 32, 40, 48, 64)
#: Closure cuts (models.cuts.closure_cut_bound), once every answer is in: their share of the
#: limit, as a count of nodes cut at ``CUT_NODE_S`` reference seconds a node of the graph per
#: cut (all 12,060 nodes of Conv_Case1 took 290 s at speed 1.19, 24 ms a cut: 8e-7 s a node;
#: with margin). They run in the time the other stages leave before the limit (at 600 s, about
#: 590 cuts on Conv_Case1, whose answers are in by 540-580 s), so they change no answer, only
#: the bound.
CUT_SHARE, CUT_NODE_S = 0.03, 1e-6


def cuts_for(work_s: float, nodes: int) -> int:
    """How many nodes the closure-cut search cuts on a ``work_s`` limit at this size."""
    return int(CUT_SHARE * work_s / (CUT_NODE_S * max(nodes, 1)))


# -- Problem 2 ------------------------------------------------------------------------------

#: Distinct Problem 1 orders that go on to placement, after the search's and stream orders.
ORDERS_TO_PLACE = 2
#: Traversal search (heuristics.traversal): share of the limit (as an evaluation count) and the
#: annealing runs it is split into, each run's order placed.
TRAVERSAL_SHARE, TRAVERSAL_RUNS = 0.15, 3
#: Below this many evaluations per unit a run gets, the search returns its start unannealed.
ANNEAL_MIN_EVALUATIONS = 4
#: Stream-grouped orders (heuristics.streams): group sizes tried (and all streams at once), how
#: many of the best estimates go on to placement, and their share of the limit (as estimates).
STREAM_GROUPS, STREAM_ORDERS, STREAM_SHARE = (1, 2, 3, 4, 5, 6, 8), 3, 0.02
#: Hoisting the COPY_INs of those orders (heuristics.streams.hoist_loads): share of the limit
#: (as estimates) and the longest leads tried, one placed order each.
HOIST_SHARE, HOIST_LEADS = 0.02, (256, 32)
#: Runners-up of the traversal search (:attr:`heuristics.traversal.TraversalParams.elite`):
#: each annealing run also returns up to ``RUNNERS_UP`` of the orders it held best before its
#: last, as many as ``RUNNERS_UP_SHARE`` of the limit places (:func:`runners_up`).
RUNNERS_UP, RUNNERS_UP_SHARE = 9, 0.02
#: Reference seconds per node of placing an order with one policy (place, compact, evaluate
#: twice): 6.4e-5 to 9.7e-5 measured on Conv_Case0, Matmul_Case0 and FlashAttention_Case1.
PLACE_NODE_S = 1e-4
#: Refinement budget and deadline (the plan ends Problem 2 at ~0.70 of the limit, plus work
#: no budget counts).
P2_WORK, P2_DEADLINE = 0.03, 0.85
#: The full placement model runs first up to this many buffers.
FULL_PLACEMENT_BUFFERS = 300
#: Window LNS over the placement model: windows are buffers to re-place, or runs of nodes to
#: re-order.
P2_LNS = LnsParams(initial_window=12, min_window=4, max_window=80, step_time_s=2.0)

# -- Problem 3 ------------------------------------------------------------------------------

#: Deadline of the refinement (the rest of the limit is for writing files).
P3_DEADLINE = 0.97
#: The full pipe model runs first up to this many nodes (spill nodes included).
FULL_PIPE_NODES = 400
#: Window LNS over the pipe model: windows are runs of nodes by start time.
P3_LNS = LnsParams(initial_window=80, min_window=20, max_window=2000, step_time_s=0.4)
#: Deterministic seconds of the ordering, placement and pipe models per second of the
#: reference machine. Work a stage leaves unused is handed to Problem 3 at these rates.
ORDER_RATE, PLACE_RATE, P3_RATE = 0.45, 0.35, 0.25
P1_TO_P3_WORK = P3_RATE / ORDER_RATE
P2_TO_P3_WORK = P3_RATE / PLACE_RATE


def planned_before_p3(workers: int = 1) -> float:
    """Reference seconds per second of the limit that the stages before Problem 3 take, in
    this process, when each uses its whole budget: with more workers the generator runs and
    the stream and hoisting estimates are shared out, and the traversal search runs beside
    Problem 1's refinement."""
    shared = (PORTFOLIO_SHARE + STREAM_SHARE + HOIST_SHARE) / max(workers, 1)
    beside = TRAVERSAL_SHARE if workers == 1 else 0.0
    return (
        shared
        + COMPACTION_SHARE * (1 + CLOSING_DESCENT)
        + P1_WORK / ORDER_RATE
        + beside
        + P2_WORK / PLACE_RATE
    )


#: Where Problem 3's LNS ends by plan (share of the limit): the rest, up to its deadline, is
#: for the re-offsetting and justification passes after it. Its budget is what the plan leaves
#: (:func:`p3_budget`), so that it ends on its budget, not on the clock: the same steps, the
#: same files on every run.
P3_END = 0.84
#: Reference seconds per node of the whole-graph work that no budget counts before Problem 3
#: (canonical names, bounds, list scheduling, placing the candidates).
UNCOUNTED_NODE_S = 3e-3
#: Reference seconds per node (spill nodes included) of a Problem 3 LNS step's whole-graph
#: work (framing the candidate, the segments the model reads), charged to the budget beside
#: CP-SAT's deterministic time, at ``P3_RATE``.
FRAME_NODE_S = 4.5e-5
#: Most rounds of justification after the LNS (each a whole-graph pass).
JUSTIFY_ROUNDS = 8
#: Reference seconds per node of one whole-graph pass around Problem 3's LNS: a trial of the
#: re-offsetting (move, re-time, evaluate twice) or a round of justification.
PASS_NODE_S = 7e-5
#: Planned shares of the limit for those passes: the re-offsetting before the LNS (charged to
#: its budget), and the passes after it, from ``P3_END`` to ``P3_PASSES_END``.
RELEASE_SHARE, P3_PASSES_END = 0.02, 0.94


def p3_budget(work_s: float, nodes: int, workers: int = 1, alone: bool = False) -> float:
    """Problem 3's LNS budget (deterministic seconds of the pipe model, before what earlier
    stages hand on): what the plan (:func:`planned_before_p3`, the runners-up's placements)
    leaves of a ``work_s`` limit up to ``P3_END``, less the work no budget counts on a graph
    of ``nodes`` nodes; ``alone``: Problem 3 from a stored answer, no stage before it."""
    if alone:
        return P3_RATE * P3_END * work_s
    planned = (P3_END - planned_before_p3(workers)) * work_s - UNCOUNTED_NODE_S * nodes
    planned -= placement_s(TRAVERSAL_RUNS * runners_up(work_s, nodes), nodes, workers)
    return P3_RATE * max(planned, 0.0)


def passes_for(work_s: float, nodes: int, after: bool = False) -> int:
    """How many whole-graph passes of ``nodes`` nodes the plan gives, on a ``work_s`` limit,
    the re-offsetting before Problem 3's LNS, or (``after``) the passes after it: a count,
    the same on every run."""
    share = P3_PASSES_END - P3_END if after else RELEASE_SHARE
    return max(1, int(share * work_s / (PASS_NODE_S * max(nodes, 1))))


def pass_work(passes: int, nodes: int, per_node: float = PASS_NODE_S) -> float:
    """What ``passes`` whole-graph passes of ``nodes`` nodes count for, in deterministic
    seconds of the pipe model (charged to Problem 3's LNS budget); ``per_node``:
    ``FRAME_NODE_S`` for the whole-graph work of an LNS step."""
    return P3_RATE * per_node * nodes * passes


def runners_up(work_s: float, nodes: int) -> int:
    """How many runners-up each traversal run returns on a graph of ``nodes`` nodes and a
    ``work_s`` limit: at most ``RUNNERS_UP``, as many as ``RUNNERS_UP_SHARE`` of it places."""
    return min(RUNNERS_UP, int(RUNNERS_UP_SHARE * work_s / placement_s(TRAVERSAL_RUNS, nodes)))


def placement_s(orders: float, nodes: int, workers: int = 1) -> float:
    """Reference seconds this process takes to place ``orders`` orders of ``nodes`` nodes with
    every policy, the placements shared out over ``workers``."""
    return orders * len(PLACEMENT_POLICIES) * PLACE_NODE_S * nodes / workers


#: With several workers, each other one runs an LNS chain of its own when the Problem 3 budget
#: is at least this (deterministic seconds): a fresh process takes a few seconds to start.
SIDE_CHAIN_MIN_WORK = 5.0
#: Share of the Problem 3 budget each chain gets when side chains run: a side chain on the other
#: core slows this process's chain down (shared caches and memory). At 600 s the main chain ran
#: at 0.90 of its one-worker rate on Conv_Case1 and Matmul_Case1 (docs/decisions.md, "Workers");
#: 0.85 also covers Matmul_Case1's chain, which alone already runs below the plan's rate, so that
#: every chain ends on its budget, not the clock.
SIDE_CHAIN_RATE = 0.85

# -- Independent parts ----------------------------------------------------------------------

#: Share of the limit kept for putting independent parts together (solver.parts), and at
#: least this many seconds of the reference machine per node of the whole graph: the
#: composition evaluates and compacts whole-graph solutions (a 36k-node union of 14 parts
#: took 15 s at speed 1.68, and overran a 60 s limit by 18% with the share alone).
COMPOSE_SHARE, COMPOSE_NODE_S = 0.05, 7e-4
