"""Hardware description: memory capacities and the layout rules of SPEC section 5.

The defaults are the contest's. A TOML file may override capacities and add per-memory alignment
and a bank model; ``npuopt/instances/hardware_example.toml`` documents every key.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError, model_validator

from npuopt.solver.errors import HardwareError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

#: Memory types, in the order reports list them.
MEMORIES: tuple[str, ...] = ("L1", "UB", "L0A", "L0B", "L0C")
#: Memories whose residency counts towards ``V_stay`` in Problem 1. Tuples, not sets: a set of
#: strings iterates in an order that changes from process to process (string hashing is salted),
#: and a model built by iterating one differs from run to run.
COUNTED_MEMORIES: tuple[str, ...] = ("L1", "UB")
#: Memories that hold at most one live buffer in Problem 1.
L0_MEMORIES: tuple[str, ...] = ("L0A", "L0B", "L0C")

DEFAULT_CAPACITY_UNITS: dict[str, int] = {
    "L1": 4096,
    "UB": 1024,
    "L0A": 256,
    "L0B": 256,
    "L0C": 512,
}

BankPolicy = Literal["forbid", "minimise"]


class BankModel(BaseModel):
    """Bank layout of one memory (SPEC section 5).

    Unit address ``a`` lies in bank ``(a // bank_width_units) % banks``. Two distinct buffers
    used by one op in this memory conflict when their first units fall in the same bank.

    Attributes
    ----------
    banks
        Number of banks.
    bank_width_units
        Consecutive units held by one bank before the next bank starts.
    policy
        ``"forbid"``: a conflict makes a solution invalid. ``"minimise"``: conflicts are counted and
        placement tries to keep them low.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    banks: PositiveInt
    bank_width_units: PositiveInt = Field(alias="bank_width")
    policy: BankPolicy = "minimise"

    def bank_of(self, offset_units: int) -> int:
        """Bank holding the unit at ``offset_units``."""
        return (offset_units // self.bank_width_units) % self.banks


class Hardware(BaseModel):
    """Capacities and layout rules of the on-chip memories.

    Attributes
    ----------
    capacity_units
        Units available in each memory; every memory of :data:`MEMORIES` is present.
    alignment_units
        Every offset in a memory must be a multiple of its alignment (1 when absent).
    banks
        Bank model per memory; memories without one have no bank rule.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    capacity_units: dict[str, PositiveInt] = Field(
        default_factory=lambda: dict(DEFAULT_CAPACITY_UNITS), alias="capacity"
    )
    alignment_units: dict[str, PositiveInt] = Field(default_factory=dict, alias="alignment")
    banks: dict[str, BankModel] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _known_memories(self) -> Hardware:
        for table, values in (
            ("capacity", self.capacity_units),
            ("alignment", self.alignment_units),
            ("banks", self.banks),
        ):
            unknown = sorted(set(values) - set(MEMORIES))
            if unknown:
                raise ValueError(
                    f"[{table}] names unknown memory {unknown[0]!r}; "
                    f"memories are {', '.join(MEMORIES)}"
                )
        # Memories the file leaves out keep the contest capacity.
        merged = {**DEFAULT_CAPACITY_UNITS, **self.capacity_units}
        object.__setattr__(self, "capacity_units", merged)
        return self

    def capacity(self, memory: str) -> int:
        """Capacity of ``memory`` in units."""
        return self.capacity_units[memory]

    def alignment(self, memory: str) -> int:
        """Alignment of offsets in ``memory`` in units (1 when unconstrained)."""
        return self.alignment_units.get(memory, 1)

    def bank(self, memory: str) -> BankModel | None:
        """Bank model of ``memory``, or ``None`` when it has none."""
        return self.banks.get(memory)


DEFAULT_HARDWARE = Hardware()


def load_hardware(path: str | Path) -> Hardware:
    """Read a hardware description from a TOML file.

    Raises
    ------
    HardwareError
        When the file cannot be read or parsed, or names an unknown key or memory.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise HardwareError(f"{path}: cannot read hardware file: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise HardwareError(f"{path}: invalid TOML: {exc}") from None
    try:
        return Hardware.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(part) for part in err["loc"])
        prefix = f"{where}: " if where else ""
        raise HardwareError(f"{path}: {prefix}{_plain(err['msg'])}") from None


def _plain(message: str) -> str:
    return message.removeprefix("Value error, ")
