"""Instances npuopt ships (small generated or hand-made graphs, a hardware example) and the way to
find the official contest cases, which stay outside the project (``../shared/instances``).
"""

from __future__ import annotations

import os
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: The official contest cases (``Conv_Case1``, the largest, byte-identical to the official
#: file, joined the others in ``../shared/instances`` on 2026-11-27).
OFFICIAL_CASES: tuple[str, ...] = (
    "Matmul_Case0",
    "Matmul_Case1",
    "FlashAttention_Case0",
    "FlashAttention_Case1",
    "Conv_Case0",
    "Conv_Case1",
)


def bundled(name: str) -> Path:
    """Path of a file shipped in this package (``hardware_example.toml``, ``demo_conv.json``...)."""
    return HERE / name


def official_dir() -> Path | None:
    """Folder of the official cases: ``$NPUOPT_OFFICIAL_DIR`` or ``../shared/instances`` beside
    the source tree (the checkout holds ``npuopt/instances``); ``None`` when neither exists."""
    env = os.environ.get("NPUOPT_OFFICIAL_DIR")
    candidates = [Path(env)] if env else []
    candidates.append(HERE.parents[2] / "shared" / "instances")
    return next((c for c in candidates if c.is_dir()), None)


def official_case(name: str) -> Path | None:
    """Path of an official case's JSON file, ``None`` when it is not on this machine."""
    folder = official_dir()
    path = folder / f"{name}.json" if folder else None
    return path if path is not None and path.is_file() else None
