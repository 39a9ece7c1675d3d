"""The wall clock of one `optimise` call: its guard, and the progress it reports on the way.

The call's steps are counted in work (`work.Work`), not seconds; the clock only guards the call
against a machine far slower or busier than the effort was meant for. Once the guard trips the
call returns within its limit, less a reserve for the solvers that check their own clocks only
now and then and for turning the answer into a schedule.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from time import perf_counter

#: What `optimise` reports while it works: (elapsed s, best schedule's total J or None, best proven
#: bound on the total J or None, phase name).
Progress = Callable[[float, float | None, float | None, str], None]

#: Progress is reported at most this often (the CLI prints each report).
PROGRESS_EVERY_S = 1.0

#: Time kept back at the end of a guarded call: solvers check their clocks only now and then, and
#: the answer is turned into a schedule after.
RESERVE_SHARE = 0.03
RESERVE_S = 0.2


@dataclass
class Clock:
    """The seconds of one call since it began, and its guard `limit_s` (None: no guard)."""

    limit_s: float | None
    began: float = field(default_factory=perf_counter)

    def elapsed_s(self) -> float:
        """Seconds since the call began."""
        return perf_counter() - self.began

    def ends_at(self) -> float | None:
        """The perf_counter() time at which the guard trips.

        The limit less the reserve (RESERVE_SHARE of it plus RESERVE_S); None without a guard.
        """
        if self.limit_s is None:
            return None
        return self.began + max(self.limit_s - RESERVE_SHARE * self.limit_s - RESERVE_S, 0.0)

    def left_s(self) -> float | None:
        """Seconds until the guard trips (never negative); None without a guard."""
        ends_at = self.ends_at()
        return None if ends_at is None else max(ends_at - perf_counter(), 0.0)

    def tripped(self) -> bool:
        """Whether the guard has tripped."""
        left = self.left_s()
        return left is not None and left <= 0.0


class Reporter:
    """Calls a Progress callback at most once per PROGRESS_EVERY_S, with the best figures so far."""

    def __init__(self, on_progress: Progress | None, clock: Clock):
        self._on_progress = on_progress
        self._clock = clock
        self._last = float("-inf")
        self.incumbent_j: float | None = None
        self.bound_j: float | None = None

    def __call__(self, phase: str, incumbent_j: float | None = None, bound_j: float | None = None) -> None:
        """Note the best figures (lower incumbent, higher bound win) and report if it is time."""
        if incumbent_j is not None and (self.incumbent_j is None or incumbent_j < self.incumbent_j):
            self.incumbent_j = incumbent_j
        if bound_j is not None and (self.bound_j is None or bound_j > self.bound_j):
            self.bound_j = bound_j
        if self._on_progress is None:
            return
        now = perf_counter()
        if now - self._last >= PROGRESS_EVERY_S:
            self._last = now
            self._on_progress(self._clock.elapsed_s(), self.incumbent_j, self.bound_j, phase)
