"""The pipeline's stages, one module each: :mod:`~solver.stages.order` (Problem 1),
:mod:`~solver.stages.placement` (Problem 2) and :mod:`~solver.stages.timing` (Problem 3).
:mod:`solver.solve` runs them in turn; their budgets are in :mod:`solver.budgets`."""
