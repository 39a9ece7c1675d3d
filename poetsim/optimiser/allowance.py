"""What a step of an `optimise` call may still use: an allowance that ends at a reading of the
call's meter.

Every step draws on one meter, so that the whole call holds its limit: a step that took its own
limit from the user's figure would let the call overrun by the sum of the steps. A step gets a
part of what is left (`Allowance.part`), and what it does not use passes to the steps after it.
"""

from dataclasses import dataclass
from typing import Protocol


class Meter(Protocol):
    """What the call has used so far, in the unit its allowances are stated in."""

    def used(self) -> float:
        """The amount used since the call began."""
        ...


@dataclass(frozen=True)
class Allowance:
    """What may be used until `meter` reads `ends_at` (None: no end)."""

    meter: Meter
    ends_at: float | None

    def left(self) -> float | None:
        """What is left (never negative); None without an end."""
        if self.ends_at is None:
            return None
        return max(self.ends_at - self.meter.used(), 0.0)

    def over(self) -> bool:
        """Whether the allowance is spent."""
        return self.ends_at is not None and self.meter.used() >= self.ends_at

    def part(self, fraction: float, cap: float | None = None) -> "Allowance":
        """An allowance of `fraction` of what is left, at most `cap`, from now; no end if neither bounds it."""
        left = self.left()
        amount = cap if left is None else fraction * left if cap is None else min(fraction * left, cap)
        return Allowance(self.meter, None if amount is None else self.meter.used() + amount)


def spent(allowance: Allowance | None) -> bool:
    """Whether `allowance` is given and spent (None: no limit, never spent)."""
    return allowance is not None and allowance.over()
