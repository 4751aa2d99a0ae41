"""Worker processes for the independent parts of a solve.

A solve's heuristics are pure Python, so threads would not run them at once; processes do. A
:class:`Workers` holds a pool of ``count`` processes, each with its own copy of the instance
(forked from this process, or rebuilt from the graph's data where fork is not available), and
maps module-level functions ``fn(instance, *args)`` over argument lists, results in the order
of the arguments. With ``count == 1`` (``--workers 1``) nothing is started and every call runs
here, in order: exactly a single-process solve.

Each task is deterministic given its arguments (budgets are counts of work, not seconds), and
results are merged in argument order, so the same seed and the same worker count give the same
answers whatever the machine's load; wall-clock deadlines only cut work on a machine slower than
its speed factor says, as in a single process.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, TypeVar

from npuopt.solver.instance import Instance, graph_data

T = TypeVar("T")

#: The instance of this worker process (set before a fork, or by :func:`_start` after a spawn).
_INSTANCE: Instance | None = None


def available_cores() -> int:
    """The cores this process may use (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _start(data: dict[str, Any] | None, name: str) -> None:
    """Worker initializer: ignore Ctrl-C (the parent decides what an interrupt stops), die at
    once on SIGTERM (a forked worker inherits the CLI's handler, which would only interrupt the
    current task and go on with the next) and, after a spawn, rebuild the instance."""
    global _INSTANCE
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if data is not None:
        _INSTANCE = Instance.model_validate({**data, "name": name})


def _call(fn: Callable[..., T], args: tuple[Any, ...]) -> T:
    assert _INSTANCE is not None
    return fn(_INSTANCE, *args)


class Workers:
    """``count`` worker processes holding ``instance`` (none when ``count`` is 1)."""

    def __init__(self, instance: Instance, count: int, spawn: bool = False) -> None:
        if count < 1:
            raise ValueError(f"workers must be at least 1, not {count}")
        self.instance = instance
        self.count = count
        #: Start fresh interpreters instead of forking: for tasks that run CP-SAT, whose threads
        #: a fork would not carry over safely.
        self.spawn = spawn
        self._pool: ProcessPoolExecutor | None = None

    def map(self, fn: Callable[..., T], calls: Sequence[tuple[Any, ...]]) -> list[T]:
        """``[fn(instance, *args) for args in calls]``, run on the workers, in that order."""
        if self.count == 1 or len(calls) <= 1:
            return [fn(self.instance, *args) for args in calls]
        return self.start(fn, calls)()

    def start(
        self, fn: Callable[..., T], calls: Sequence[tuple[Any, ...]]
    ) -> Callable[[], list[T]]:
        """Start ``fn(instance, *args)`` for every call on the workers and return at once a
        function that waits for the results, in call order (this process may work
        meanwhile)."""
        pool = self._started()
        futures: list[Future[T]] = [pool.submit(_call, fn, args) for args in calls]

        def results() -> list[T]:
            try:
                return [f.result() for f in futures]
            except BaseException:
                for f in futures:
                    f.cancel()
                raise

        return results

    def _started(self) -> ProcessPoolExecutor:
        if self._pool is None:
            global _INSTANCE
            methods = multiprocessing.get_all_start_methods()
            fork = "fork" in methods and not self.spawn
            context: Any = multiprocessing.get_context("fork" if fork else "spawn")
            initargs: tuple[Any, ...] = (None, self.instance.name)
            if fork:
                _INSTANCE = self.instance  # the children inherit it: nothing to copy
            else:
                initargs = (graph_data(self.instance), self.instance.name)
            self._pool = ProcessPoolExecutor(
                max_workers=self.count, mp_context=context, initializer=_start, initargs=initargs
            )
        return self._pool

    def close(self, now: bool = False) -> None:
        """Stop the worker processes; with ``now`` at once, whatever they are doing (an
        interrupted solve must not wait for them)."""
        global _INSTANCE
        pool, self._pool = self._pool, None
        if _INSTANCE is self.instance:
            _INSTANCE = None  # no longer kept alive for children to come
        if pool is None:
            return
        processes = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=not now, cancel_futures=True)
        if now:
            for process in processes:
                process.terminate()

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(now=exc[0] is not None)
