"""Hardware descriptions: defaults, the documented example file, errors."""

from __future__ import annotations

import pytest

from npuopt.instances import bundled
from npuopt.solver.errors import HardwareError
from npuopt.solver.hardware import DEFAULT_HARDWARE, BankModel, load_hardware


def test_contest_defaults():
    assert DEFAULT_HARDWARE.capacity_units == {
        "L1": 4096,
        "UB": 1024,
        "L0A": 256,
        "L0B": 256,
        "L0C": 512,
    }
    assert DEFAULT_HARDWARE.alignment("UB") == 1
    assert DEFAULT_HARDWARE.bank("UB") is None


def test_example_file_documents_every_key():
    hw = load_hardware(bundled("hardware_example.toml"))
    assert hw.capacity("L1") == 4096
    assert hw.alignment("L1") == 16 and hw.alignment("L0A") == 1
    bank = hw.bank("UB")
    assert bank == BankModel(banks=16, bank_width=32, policy="minimise")
    text = bundled("hardware_example.toml").read_text()
    for key in ("[capacity]", "[alignment]", "[banks.UB]", "banks", "bank_width", "policy"):
        assert key in text


def test_partial_capacity_keeps_other_defaults(tmp_path):
    path = tmp_path / "hw.toml"
    path.write_text("[capacity]\nUB = 2048\n")
    hw = load_hardware(path)
    assert hw.capacity("UB") == 2048 and hw.capacity("L1") == 4096


def test_bank_of():
    """Bank of unit a: (a // width) % banks; 4 banks of 32: 0->0, 31->0, 32->1, 128->0."""
    bank = BankModel(banks=4, bank_width=32)
    assert [bank.bank_of(a) for a in (0, 31, 32, 128, 160)] == [0, 0, 1, 0, 1]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[capacity]\nL2 = 5\n", "unknown memory 'L2'"),
        ("[capacity]\nUB = 0\n", "capacity.UB"),
        ("[alignment]\nUB = 'x'\n", "alignment.UB"),
        ("[banks.UB]\nbanks = 4\n", "banks.UB.bank_width"),
        ("[banks.UB]\nbanks = 4\nbank_width = 8\npolicy = 'maybe'\n", "banks.UB.policy"),
        ("[frequency]\nMHz = 5\n", "frequency"),
        ("[capacity\n", "invalid TOML"),
    ],
)
def test_bad_hardware_file(tmp_path, text, expected):
    path = tmp_path / "hw.toml"
    path.write_text(text)
    with pytest.raises(HardwareError) as info:
        load_hardware(path)
    assert str(info.value).startswith(str(path))
    assert expected in str(info.value)
