"""Parsing of the quantities users type: byte sizes, percentages and runtime multiples.

Decimal units are powers of 1000 (KB, MB, GB), binary ones powers of 1024 (KiB, MiB, GiB),
as in IEC 80000-13; a plain number is bytes. Embedded datasheets often say "256 KB" for
262,144 bytes: write 256KiB for that.
"""

import re
from typing import NamedTuple

_BYTE_UNITS = {
    "": 1, "B": 1,
    "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
    "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40,
}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")


class RamSpec(NamedTuple):
    """A RAM budget as written: absolute bytes, or a fraction of the keep-all peak."""

    bytes: int | None
    fraction_of_keep_all: float | None
    text: str = ""

    def resolve(self, keep_all_peak_bytes: int) -> int:
        """Absolute bytes of this budget for a graph whose keep-all peak is given."""
        if self.bytes is not None:
            return self.bytes
        return int(round(self.fraction_of_keep_all * keep_all_peak_bytes))

    def __str__(self) -> str:
        if self.text:
            return self.text
        if self.bytes is not None:
            return str(self.bytes)
        return f"{self.fraction_of_keep_all * 100:g}%"


def parse_bytes(text: str | int | float) -> int:
    """Bytes from `1048576`, `256KB`, `1.5MiB`; raises ValueError with the reason."""
    if isinstance(text, bool):
        raise ValueError("expected a size such as 1048576, 256KB or 1.5MiB")
    if isinstance(text, (int, float)):
        value, unit = float(text), ""
    else:
        match = _SIZE.match(text)
        if not match:
            raise ValueError(f"'{text}' is not a size such as 1048576, 256KB or 1.5MiB")
        value, unit = float(match.group(1)), match.group(2).upper()
        if unit not in _BYTE_UNITS:
            raise ValueError(f"unknown unit '{match.group(2)}' (use B, KB, MB, GB, KiB, MiB, GiB)")
    size = value * _BYTE_UNITS[unit]
    if size <= 0:
        raise ValueError("must be greater than zero")
    return int(round(size))


def parse_ram(text: str | int | float) -> RamSpec:
    """A RAM budget: bytes (plain number or with a unit) or a percentage of keep-all."""
    if isinstance(text, str) and text.strip().endswith("%"):
        try:
            percent = float(text.strip()[:-1])
        except ValueError:
            raise ValueError(f"'{text}' is not a percentage such as 50%") from None
        if percent <= 0:
            raise ValueError("must be greater than zero")
        return RamSpec(None, percent / 100.0, text.strip())
    return RamSpec(parse_bytes(text), None, str(text).strip())


def parse_runtime(text: str | int | float) -> float:
    """A runtime budget as a multiple of one plain forward+backward pass: `1.2x` or 1.2."""
    if isinstance(text, bool):
        raise ValueError("expected a multiple such as 1.2x")
    raw = text.strip().rstrip("xX") if isinstance(text, str) else text
    try:
        multiple = float(raw)
    except ValueError:
        raise ValueError(f"'{text}' is not a multiple such as 1.2x") from None
    if multiple <= 0:
        raise ValueError("must be greater than zero")
    return multiple


def format_bytes(size: float) -> str:
    """Human-readable binary size: 1.50 MiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(size) >= scale:
            return f"{size / scale:.2f} {unit}"
    return f"{int(size)} B"
