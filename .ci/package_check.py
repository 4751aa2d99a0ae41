"""Issue 27's checks on the built package: the wheel holds only ``npuopt/`` and its
``dist-info``; installed into a clean virtual environment, ``npuopt --version``,
``python -c "import npuopt"`` and the README's Python example run from a directory outside the
checkout. Run by ``.ci/run`` (``make package-check``)."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*cmd: object, cwd: Path) -> str:
    done = subprocess.run(list(map(str, cmd)), cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        sys.exit(
            f"{' '.join(map(str, cmd))} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
        )
    return done.stdout


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="npuopt-package-"))
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--quiet",
        "--no-deps",
        "-w",
        work / "wheel",
        ROOT,
        cwd=ROOT,
    )
    (wheel,) = (work / "wheel").glob("npuopt-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    stray = [n for n in names if not n.startswith("npuopt/") and ".dist-info/" not in n]
    if stray:
        sys.exit(f"{wheel.name} holds files outside npuopt/: {stray[:5]}")
    for needed in ("npuopt/py.typed", "npuopt/__init__.py", "npuopt/instances/demo_conv.json"):
        if needed not in names:
            sys.exit(f"{wheel.name} lacks {needed}")
    tops = sorted({n.split("/")[0] for n in names})
    print(f"{wheel.name}: {len(names)} files, top level {tops}")

    venv.create(work / "venv", with_pip=True)
    python = work / "venv" / "bin" / "python"
    run(python, "-m", "pip", "install", "--quiet", wheel, cwd=work)
    outside = work / "elsewhere"
    outside.mkdir()
    print(run(work / "venv" / "bin" / "npuopt", "--version", cwd=outside).strip())
    print(run(python, "-c", "import npuopt; print(npuopt.__version__)", cwd=outside).strip())
    for name in ("solver", "models", "heuristics", "instances"):
        found = run(
            python, "-c", f"import importlib.util as u; print(u.find_spec({name!r}))", cwd=outside
        )
        if found.strip() != "None":
            sys.exit(f"the installed package provides a top-level {name!r}: {found}")
    section = (ROOT / "README.md").read_text().split("## Python", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, re.S)
    (outside / "example.py").write_text(code)
    print(run(python, "example.py", cwd=outside).strip())
    print("package check: ok")


if __name__ == "__main__":
    main()
