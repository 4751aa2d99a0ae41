"""Import direction of STYLE.md, checked on the source tree.

models/ and heuristics/ import only the core of solver (never each other, never the pipeline,
the LNS driver or the CLI); heuristics and the core never import ortools. Every module imports
ours through the one import name ``npuopt`` (issue 27): a bare ``solver`` or ``models`` would be
another distribution's.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = {
    "solver",
    "solver.instance",
    "solver.hardware",
    "solver.solution",
    "solver.evaluate",
    "solver.bounds",
    "solver.result",
    "solver.errors",
}
CORE_FILES = ("instance", "hardware", "solution", "evaluate", "bounds", "files", "errors", "result")


PACKAGES = ("solver", "models", "heuristics", "instances")


def raw_imports(source: str) -> set[str]:
    """Absolute module names a source file imports (``from x import y`` counts as ``x`` and
    ``x.y``, since y may be a submodule)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def imported_modules(source: str) -> set[str]:
    """:func:`raw_imports` with our ``npuopt.`` prefix taken off (``npuopt.solver.cli`` ->
    ``solver.cli``), so that the direction rules read the package names."""
    return {n.removeprefix("npuopt.") for n in raw_imports(source)}


def forbidden(package: str, names: set[str]) -> set[str]:
    """Imports that break the direction rule for a file of ``package``."""
    bad = set()
    for name in names:
        top = name.split(".")[0]
        if package in ("models", "heuristics"):
            other = "heuristics" if package == "models" else "models"
            if top == other:
                bad.add(name)
            if (
                top == "solver"
                and name not in CORE
                and name.rsplit(".", 1)[0] not in CORE - {"solver"}
            ):
                bad.add(name)
        if package in ("heuristics", "core") and top == "ortools":
            bad.add(name)
        if package == "core" and (
            top in ("models", "heuristics")
            or name in ("solver.solve", "solver.lns", "solver.cli", "solver.report")
        ):
            bad.add(name)
    return bad


def _files(package: str) -> list[Path]:
    if package == "core":
        return [
            ROOT / "npuopt" / "solver" / f"{name}.py"
            for name in CORE_FILES
            if (ROOT / "npuopt" / "solver" / f"{name}.py").exists()
        ]
    return sorted((ROOT / "npuopt" / package).rglob("*.py"))


@pytest.mark.parametrize("package", ["models", "heuristics", "core"])
def test_import_direction(package):
    for path in _files(package):
        bad = forbidden(package, imported_modules(path.read_text()))
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


@pytest.mark.parametrize(
    ("package", "source"),
    [
        ("models", "from heuristics.ordering import greedy"),
        ("models", "import solver.cli"),
        ("models", "from solver.solve import run"),
        ("models", "from solver import lns"),
        ("heuristics", "from ortools.sat.python import cp_model"),
        ("heuristics", "import models.ordering"),
        ("core", "from ortools.sat.python import cp_model"),
        ("core", "from solver.solve import run"),
    ],
)
def test_checker_catches_bad_imports(package, source):
    assert forbidden(package, imported_modules(source))


def test_checker_allows_core_imports():
    ok = "from solver.instance import Instance\nfrom solver import evaluate\nimport numpy as np"
    assert not forbidden("models", imported_modules(ok))
    assert not forbidden("heuristics", imported_modules(ok))


def test_every_import_of_ours_goes_through_npuopt():
    """Issue 27: a bare ``import solver`` would find another distribution's ``solver``."""
    files = [*(ROOT / "npuopt").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    files += (ROOT / "benchmarks").rglob("*.py")
    for path in files:
        bare = {n for n in raw_imports(path.read_text()) if n.split(".")[0] in PACKAGES}
        assert not bare, f"{path.relative_to(ROOT)} imports {sorted(bare)} without npuopt."
    assert len(files) > 50


def test_the_checker_catches_a_bare_import():
    assert raw_imports("import solver.cli") == {"solver.cli"}
    assert imported_modules("from npuopt.solver.cli import app") == {"solver.cli", "solver.cli.app"}
