"""What a step of an `optimise` call may still do: an allowance of work units on the call's meter.

Every step draws on one meter (`work.Work`), so that the whole call holds its effort: a step that
took its own limit from the user's figure would let the call overrun by the sum of the steps. A
step gets a part of what is left (`Allowance.part`), and what it does not use passes to the steps
after it. The meter counts work, not seconds, so a step stops at the same point on any machine.
"""

import math
from dataclasses import dataclass

from poetsim.optimiser.clock import Clock
from poetsim.optimiser.work import Work


@dataclass(frozen=True)
class Allowance:
    """What may be done until `meter` reads `ends_at` (None: no end)."""

    meter: Work
    ends_at: float | None

    def left(self) -> float | None:
        """The units left (never negative); None without an end."""
        if self.ends_at is None:
            return None
        used = self.meter.used()
        return 0.0 if used == math.inf else max(self.ends_at - used, 0.0)

    def over(self) -> bool:
        """Whether the allowance is spent (or the call's guard has tripped)."""
        used = self.meter.used()
        return used == math.inf or (self.ends_at is not None and used >= self.ends_at)

    def part(self, fraction: float, cap: float | None = None) -> "Allowance":
        """An allowance of `fraction` of what is left, at most `cap`, from now; no end if neither bounds it."""
        left = self.left()
        amount = cap if left is None else fraction * left if cap is None else min(fraction * left, cap)
        return Allowance(self.meter, None if amount is None else self.meter.used() + amount)

    def charge(self, units: float) -> None:
        """Count `units` of work done on the call's meter."""
        self.meter.charge(units)

    @property
    def guard(self) -> Clock:
        """The call's wall-clock guard."""
        return self.meter.guard


def effort(units: float | None, limit_s: float | None = None) -> Allowance:
    """A whole call's allowance.

    `units` of work (None: no end) on a fresh meter, guarded by `limit_s` seconds of wall clock
    (None: no guard).
    """
    return Allowance(Work(Clock(limit_s)), units)


def spent(allowance: Allowance | None) -> bool:
    """Whether `allowance` is given and spent (None: no limit, never spent)."""
    return allowance is not None and allowance.over()


def charge(allowance: Allowance | None, units: float) -> None:
    """Count `units` of work on `allowance`'s meter, if there is one."""
    if allowance is not None:
        allowance.charge(units)
