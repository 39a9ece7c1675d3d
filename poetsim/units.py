"""The quantities users type: byte sizes, percentages, runtime multiples, and a solve's effort.

Decimal units are powers of 1000 (KB, MB, GB), binary ones powers of 1024 (KiB, MiB, GiB),
as in IEC 80000-13; a plain number is bytes. Embedded datasheets often say "256 KB" for
262,144 bytes: write 256KiB for that.
"""

import math
import re
from typing import Any, NamedTuple

_BYTE_UNITS = {
    "": 1,
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
}
_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*$")
#: Above this a size is certainly a typo: 1 PiB of activation RAM.
MAX_BYTES = 2**50
#: Above this share of keep-all the keep-all schedule already fits; more means nothing.
MAX_PERCENT = 100.0
#: A deadline beyond this many plain passes is certainly a typo.
MAX_RUNTIME_X = 1000.0


def number_text(value: float) -> str:
    """The shortest text that reads back as exactly `value`, without a trailing '.0': 1.2, 70, 1.0000001.

    Keys of results are made with it, so two budgets that differ in any digit get two keys.
    """
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


class RamSpec(NamedTuple):
    """A RAM budget as written: absolute bytes, or a percentage of the keep-all peak."""

    bytes: int | None
    percent: float | None
    text: str = ""

    @property
    def fraction_of_keep_all(self) -> float | None:
        """The budget as a share of the keep-all peak (None for absolute bytes)."""
        return None if self.percent is None else self.percent / 100.0

    def resolve(self, keep_all_peak_bytes: int) -> int:
        """Absolute bytes of this budget for a graph whose keep-all peak is given."""
        if self.bytes is not None:
            return self.bytes
        assert self.percent is not None
        return round(self.percent * keep_all_peak_bytes / 100.0)

    @property
    def key(self) -> str:
        """The canonical form, equal for equal budgets however written: 50%, 262144B."""
        if self.bytes is not None:
            return f"{self.bytes}B"
        assert self.percent is not None
        return f"{number_text(self.percent)}%"

    def __str__(self) -> str:
        """The budget as the user wrote it, else its canonical key."""
        return self.text or self.key


def parse_bytes(text: str | int | float) -> int:
    """Bytes from `1048576`, `256KB`, `1.5MiB`; raises ValueError with the reason."""
    if isinstance(text, bool):
        raise ValueError("expected a size such as 1048576, 256KB or 1.5MiB")
    if isinstance(text, (int, float)):
        value, unit = float(text), ""
    elif isinstance(text, str):
        match = _SIZE.match(text)
        if not match:
            raise ValueError(f"'{text}' is not a size such as 1048576, 256KB or 1.5MiB")
        value, unit = float(match.group(1)), match.group(2).upper()
        if unit not in _BYTE_UNITS:
            raise ValueError(f"unknown unit '{match.group(2)}' (use B, KB, MB, GB, KiB, MiB, GiB)")
    else:
        raise ValueError(f"expected a size such as 1048576, 256KB or 1.5MiB, not {type(text).__name__}")
    size = value * _BYTE_UNITS[unit]
    if not math.isfinite(size) or size > MAX_BYTES:
        raise ValueError(f"{text} is not a size poetsim can use (at most {MAX_BYTES:,} bytes)")
    if size < 1:
        raise ValueError("must be at least one byte")
    return round(size)


def parse_ram(text: str | int | float) -> RamSpec:
    """A RAM budget: bytes (plain number or with a unit) or a percentage of keep-all.

    A bare number below 1 is refused: it would be a fraction of a byte, and is most likely a
    share of keep-all written without its percent sign.
    """
    if isinstance(text, str) and text.strip().endswith("%"):
        try:
            percent = float(text.strip()[:-1])
        except ValueError:
            raise ValueError(f"'{text}' is not a percentage such as 50%") from None
        if not math.isfinite(percent) or percent <= 0:
            raise ValueError(f"'{text}' must be a percentage above 0 such as 50%")
        if percent > MAX_PERCENT:
            raise ValueError(f"'{text}' is above 100%: keep-all fits at 100%, so use 100%")
        return RamSpec(None, percent, text.strip())
    if isinstance(text, (int, float, str)) and not isinstance(text, bool):
        try:
            value = float(text)
        except ValueError:
            value = None
        if value is not None and 0 < value < 1:
            raise ValueError(f"{text} would be a fraction of a byte; did you mean {number_text(100 * value)}%?")
    return RamSpec(parse_bytes(text), None, str(text).strip())


def parse_runtime(text: str | int | float) -> float:
    """A runtime budget as a multiple of one plain forward+backward pass: `1.2x` or 1.2."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        raise ValueError("expected a multiple such as 1.2x")
    raw = text.strip().rstrip("xX") if isinstance(text, str) else text
    try:
        multiple = float(raw)
    except ValueError:
        raise ValueError(f"'{text}' is not a multiple such as 1.2x") from None
    if not math.isfinite(multiple) or multiple <= 0:
        raise ValueError(f"'{text}' must be a multiple above 0 such as 1.2x")
    if multiple > MAX_RUNTIME_X:
        raise ValueError(f"'{text}' is more than {MAX_RUNTIME_X:g} plain passes; a typo?")
    return multiple


def format_bytes(size: float) -> str:
    """Human-readable binary size: 1.50 MiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(size) >= scale:
            return f"{size / scale:.2f} {unit}"
    return f"{int(size)} B"


# A solve's effort and its wall-clock guard, as a scenario, the command line and `optimise` state
# them. The optimiser counts its work in work units (`poetsim.optimiser.work`: about a second each
# on the reference machine, idle), so that the same inputs give the same answer on any machine and
# at any load; a wall-clock limit only guards against a machine far slower or busier than that.

#: Unless stated, a call's wall-clock guard is this many seconds per unit of its effort: a normal
#: call, on an idle machine or one loaded twice over, never reaches it. A whole call takes 0.7 to
#: 2.7 CPU seconds a unit on the reference machine, idle; its greedy phase, replaying plans of many
#: recomputations, up to 4 (docs/optimiser.md, "How close a unit is to a second").
GUARD_S_PER_UNIT = 30.0
#: ... and at least this many seconds: a call of little effort still starts its solver processes
#: and builds its model.
GUARD_MIN_S = 10.0
#: A guard stated alone sets the effort to a unit per this many seconds of it: a third of what the
#: guard of that effort would be, for a limit the user chose to bind.
LIMIT_S_PER_UNIT = 10.0


def limits_or(default_effort: float, effort: float | None, time_limit_s: float | None) -> tuple[float, float]:
    """`resolve_limits` with `default_effort` units when neither the effort nor the guard is stated."""
    effort, limit_s = resolve_limits(default_effort if effort is None and time_limit_s is None else effort, time_limit_s)
    assert effort is not None and limit_s is not None, "one of them is stated"
    return effort, limit_s


def resolve_limits(effort: float | None, time_limit_s: float | None) -> tuple[float | None, float | None]:
    """A call's effort (units) and guard (seconds) from what was stated.

    Either derives the other (the guard is GUARD_S_PER_UNIT seconds per unit of effort, at least
    GUARD_MIN_S; the effort a unit per LIMIT_S_PER_UNIT seconds of the guard), both stand as
    stated, and neither leaves the call unbounded (until proven).
    """
    if effort is None and time_limit_s is not None:
        return time_limit_s / LIMIT_S_PER_UNIT, time_limit_s
    if effort is not None and time_limit_s is None:
        return effort, max(GUARD_S_PER_UNIT * effort, GUARD_MIN_S)
    return effort, time_limit_s


def json_numbers(value: Any) -> Any:
    """`value` with NaN and infinities, at any depth of its dicts, lists and tuples, as None: JSON has no word for them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: json_numbers(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_numbers(item) for item in value]
    return value


#: A figure's column name ends in its unit: how a table's header says it.
COLUMN_UNITS = (("_pct", "%"), ("_bytes", "bytes"), ("_j", "J"), ("_s", "s"), ("_w", "W"), ("_x", "x"))


def column_header(column: str) -> str:
    """A results column's name as a header, its unit in brackets: 'device_energy_j' -> 'device energy (J)'."""
    for suffix, unit in COLUMN_UNITS:
        if column.endswith(suffix):
            return f"{column[: -len(suffix)].replace('_', ' ')} ({unit})"
    return column.replace("_", " ")
