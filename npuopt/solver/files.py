"""Readers and writers of the competition attachment files (SPEC section 7).

Layout, one folder per problem::

    Problem1/<case>_schedule.txt
    Problem2/<case>_schedule.txt  <case>_memory.txt  <case>_spill.txt
    Problem3/<case>_schedule.txt  <case>_memory.txt  <case>_spill.txt

Readers accept integers only and reject anything else (floats, unknown ids, duplicates, missing
buffers or nodes, offsets outside the memory) with a :class:`~solver.errors.SolutionFileError`
naming the file and line. Writers replace files atomically (temp file, then rename).
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from npuopt.solver.errors import SolutionFileError
from npuopt.solver.hardware import DEFAULT_HARDWARE, Hardware
from npuopt.solver.instance import Instance
from npuopt.solver.solution import Solution, Spill

_INT = re.compile(r"-?\d+")
_PAIR = re.compile(r"(-?\d+)\s*:\s*(-?\d+)")


@dataclass(frozen=True)
class ProblemFiles:
    """Paths of one problem's attachment files (``memory``/``spill`` unused for Problem 1)."""

    schedule: Path
    memory: Path
    spill: Path

    @classmethod
    def in_dir(cls, problem_dir: str | Path, case: str) -> ProblemFiles:
        """The standard file names of ``case`` inside a ``ProblemN`` folder."""
        d = Path(problem_dir)
        return cls(d / f"{case}_schedule.txt", d / f"{case}_memory.txt", d / f"{case}_spill.txt")


# -- writing -----------------------------------------------------------------------------------


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file and a rename, so readers never see half."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 would hide results from others
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _lines(items: Sequence[str]) -> str:
    return "".join(f"{item}\n" for item in items)


def write_solution(
    problem_dir: str | Path, case: str, problem: int, solution: Solution
) -> ProblemFiles:
    """Write a solution's attachment files into ``problem_dir`` and return their paths.

    Problem 1 writes the schedule only; Problems 2 and 3 write schedule, memory and spill files.
    """
    files = ProblemFiles.in_dir(problem_dir, case)
    atomic_write_text(files.schedule, _lines([str(v) for v in solution.order]))
    if problem != 1:
        atomic_write_text(
            files.memory, _lines([f"{b}:{o}" for b, o in sorted(solution.offsets.items())])
        )
        atomic_write_text(
            files.spill, _lines([f"{s.buf_id}:{s.new_offset_units}" for s in solution.spills])
        )
    return files


# -- reading -----------------------------------------------------------------------------------


def _read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line number, stripped text)``; blank lines are allowed only at the end."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SolutionFileError(f"{path}: file not found") from None
    except OSError as exc:
        raise SolutionFileError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SolutionFileError(f"{path}: not a UTF-8 text file") from None
    lines = text.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    for number, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line:
            raise SolutionFileError(f"{path}:{number}: empty line")
        yield number, line


def _fail(path: Path, line: int, message: str) -> SolutionFileError:
    return SolutionFileError(f"{path}:{line}: {message}")


def read_schedule(path: str | Path, n_total: int) -> tuple[int, ...]:
    """Read a schedule: each id in ``0..n_total-1`` exactly once, one per line."""
    path = Path(path)
    order: list[int] = []
    line_of: dict[int, int] = {}
    for number, line in _read_lines(path):
        if not _INT.fullmatch(line):
            raise _fail(path, number, f"{line!r} is not an integer node id")
        v = int(line)
        if not 0 <= v < n_total:
            raise _fail(path, number, f"node {v} does not exist (ids are 0..{n_total - 1})")
        if v in line_of:
            raise _fail(path, number, f"node {v} appears twice (first on line {line_of[v]})")
        line_of[v] = number
        order.append(v)
    if len(order) < n_total:
        missing = next(v for v in range(n_total) if v not in line_of)
        raise SolutionFileError(
            f"{path}: {n_total - len(order)} node(s) missing from the schedule, "
            f"first node {missing}"
        )
    return tuple(order)


def _read_pairs(
    path: Path, instance: Instance, hardware: Hardware, what: str
) -> Iterator[tuple[int, int, int]]:
    """Yield ``(line, BufId, offset)`` with a known buffer and an offset inside its memory."""
    for number, line in _read_lines(path):
        match = _PAIR.fullmatch(line)
        if not match:
            raise _fail(path, number, f"{line!r} is not 'BufId:{what}' with integers")
        b, offset = int(match[1]), int(match[2])
        buf = instance.buffers.get(b)
        if buf is None:
            raise _fail(path, number, f"buffer {b} does not exist")
        capacity = hardware.capacity(buf.memory)
        if offset < 0 or offset + buf.size_units > capacity:
            raise _fail(
                path,
                number,
                f"buffer {b} ({buf.memory}, Size {buf.size_units}) at {what} {offset} lies outside "
                f"0..{capacity}",
            )
        yield number, b, offset


def read_memory(
    path: str | Path, instance: Instance, hardware: Hardware = DEFAULT_HARDWARE
) -> dict[int, int]:
    """Read initial offsets: ``BufId:Offset``, every buffer exactly once."""
    path = Path(path)
    offsets: dict[int, int] = {}
    line_of: dict[int, int] = {}
    for number, b, offset in _read_pairs(path, instance, hardware, "Offset"):
        if b in offsets:
            raise _fail(path, number, f"buffer {b} appears twice (first on line {line_of[b]})")
        offsets[b] = offset
        line_of[b] = number
    missing = [b for b in instance.buffers if b not in offsets]
    if missing:
        raise SolutionFileError(
            f"{path}: {len(missing)} buffer(s) have no offset, first buffer {missing[0]}"
        )
    return offsets


def read_spills(
    path: str | Path, instance: Instance, hardware: Hardware = DEFAULT_HARDWARE
) -> tuple[Spill, ...]:
    """Read the spill list: ``BufId:NewOffset`` per line, in spill order (may be empty)."""
    return tuple(
        Spill(b, o) for _, b, o in _read_pairs(Path(path), instance, hardware, "NewOffset")
    )


def read_solution(
    files: ProblemFiles, instance: Instance, problem: int, hardware: Hardware = DEFAULT_HARDWARE
) -> Solution:
    """Read one problem's attachment files into a :class:`Solution`.

    Raises
    ------
    SolutionFileError
        When a file is missing or any line is malformed.
    """
    if problem == 1:
        return Solution(order=read_schedule(files.schedule, instance.n_nodes))
    spills = read_spills(files.spill, instance, hardware)
    offsets = read_memory(files.memory, instance, hardware)
    order = read_schedule(files.schedule, instance.n_nodes + 2 * len(spills))
    return Solution(order=order, offsets=offsets, spills=spills)
