"""Attachment files: exact round trip and readers that reject bad lines with file and line."""

from __future__ import annotations

import pytest

from npuopt.solver.errors import SolutionFileError
from npuopt.solver.files import ProblemFiles, atomic_write_text, read_solution, write_solution
from npuopt.solver.solution import Solution, Spill

from helpers import tiny

SPILLED = Solution(order=(0, 1, 7, 8, 2, 3, 4, 5, 6), offsets={0: 0, 1: 5}, spills=(Spill(0, 100),))


def test_round_trip_problem_2(tmp_path):
    inst = tiny("example7")
    files = write_solution(tmp_path / "Problem2", "example7", 2, SPILLED)
    assert files.schedule.read_text() == "0\n1\n7\n8\n2\n3\n4\n5\n6\n"
    assert files.memory.read_text() == "0:0\n1:5\n"
    assert files.spill.read_text() == "0:100\n"
    assert read_solution(files, inst, 2) == SPILLED


def test_round_trip_problem_1_writes_schedule_only(tmp_path):
    inst = tiny("example7")
    files = write_solution(tmp_path / "Problem1", "example7", 1, Solution(order=range(7)))
    assert sorted(p.name for p in (tmp_path / "Problem1").iterdir()) == ["example7_schedule.txt"]
    assert read_solution(files, inst, 1).order == tuple(range(7))


def test_empty_spill_file(tmp_path):
    inst = tiny("example7")
    files = write_solution(tmp_path, "example7", 3, Solution(order=range(7), offsets={0: 0, 1: 5}))
    assert files.spill.read_text() == ""
    assert read_solution(files, inst, 3).spills == ()


BAD_FILES = [
    ("schedule", "0\n1\n7\n8.0\n2\n3\n4\n5\n6\n", "4: '8.0' is not an integer"),
    ("schedule", "0\n1\n7\n8\n2\n3\n4\n5\n60\n", "9: node 60 does not exist"),
    ("schedule", "0\n1\n7\n8\n2\n3\n4\n5\n5\n", "9: node 5 appears twice (first on line 8)"),
    ("schedule", "0\n1\n7\n8\n2\n3\n4\n5\n", "1 node(s) missing from the schedule, first node 6"),
    ("schedule", "0\n1\n\n7\n8\n2\n3\n4\n5\n6\n", "3: empty line"),
    ("memory", "0:0\n", "1 buffer(s) have no offset, first buffer 1"),
    ("memory", "0:0\n1:5\n0:3\n", "3: buffer 0 appears twice (first on line 1)"),
    ("memory", "0:0\n1:5.5\n", "2: '1:5.5' is not 'BufId:Offset' with integers"),
    ("memory", "0:0\n1:5\n9:0\n", "3: buffer 9 does not exist"),
    ("memory", "0:0\n1:1020\n", "2: buffer 1 (UB, Size 5) at Offset 1020 lies outside 0..1024"),
    ("memory", "0:-1\n1:5\n", "1: buffer 0 (UB, Size 5) at Offset -1 lies outside"),
    ("spill", "3:0\n", "1: buffer 3 does not exist"),
    ("spill", "0:2000\n", "1: buffer 0 (UB, Size 5) at NewOffset 2000 lies outside 0..1024"),
]


@pytest.mark.parametrize(("which", "text", "expected"), BAD_FILES)
def test_bad_lines_name_file_and_line(tmp_path, which, text, expected):
    inst = tiny("example7")
    files = write_solution(tmp_path, "example7", 2, SPILLED)
    getattr(files, which).write_text(text)
    with pytest.raises(SolutionFileError) as info:
        read_solution(files, inst, 2)
    message = str(info.value)
    assert message.startswith(str(getattr(files, which)))
    assert expected in message
    assert "\n" not in message


def test_missing_file(tmp_path):
    with pytest.raises(SolutionFileError, match="example7_spill.txt: file not found"):
        read_solution(ProblemFiles.in_dir(tmp_path, "example7"), tiny("example7"), 2)


def test_trailing_blank_lines_and_crlf_are_accepted(tmp_path):
    inst = tiny("example7")
    files = write_solution(tmp_path, "example7", 1, Solution(order=range(7)))
    files.schedule.write_bytes(b"0\r\n1\r\n2\r\n3\r\n4\r\n5\r\n6\r\n\r\n\r\n")
    assert read_solution(files, inst, 1).order == tuple(range(7))


def test_atomic_write_leaves_no_temp_files(tmp_path):
    target = tmp_path / "out" / "file.txt"
    atomic_write_text(target, "one\n")
    atomic_write_text(target, "two\n")
    assert target.read_text() == "two\n"
    assert [p.name for p in target.parent.iterdir()] == ["file.txt"]


def test_written_files_get_the_usual_permissions(tmp_path):
    """Regression (found making the bundled instances): the temp file behind an atomic write
    is created 0600; the result must get the mode any new file gets under the umask."""
    import os

    mask = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "x.txt", "1\n")
    finally:
        os.umask(mask)
    assert (tmp_path / "x.txt").stat().st_mode & 0o777 == 0o644
