"""One deadline for a whole `optimise` call, and the progress it reports on the way.

A time limit holds only if every step (the bound, the rule-made plans, the model's build, each
solver run, the rounding) draws on the same clock: a step that took its own limit from the
user's figure would let the call overrun by the sum of the steps (bert_base once ran 896 s
under `--time-limit 60`).
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from time import perf_counter

#: What `optimise` reports while it works: (elapsed s, best schedule's total J or None, best proven
#: bound on the total J or None, phase name).
Progress = Callable[[float, float | None, float | None, str], None]

#: Progress is reported at most this often (the CLI prints each report).
PROGRESS_EVERY_S = 1.0


#: Time kept back at the end of a call: solvers check their clocks only now and then (HiGHS
#: overran a 6 s limit by 2 s on MobileNetV2), and the answer is turned into a schedule after.
RESERVE_SHARE = 0.03
RESERVE_S = 0.2


@dataclass
class Clock:
    """The deadline of one call: started on creation, `limit_s` None for no limit.

    Steps see the time left before the limit less a reserve (RESERVE_SHARE of the limit plus
    RESERVE_S), so that the whole call ends within the limit even when a solver overruns a little.
    """

    limit_s: float | None
    began: float = field(default_factory=perf_counter)

    @property
    def ends_at(self) -> float | None:
        """The perf_counter() time by which steps must be done (the limit less the reserve)."""
        if self.limit_s is None:
            return None
        return self.began + max(self.limit_s - RESERVE_SHARE * self.limit_s - RESERVE_S, 0.0)

    def elapsed_s(self) -> float:
        return perf_counter() - self.began

    def left_s(self) -> float | None:
        """Seconds left for steps (never negative); None without a limit."""
        return None if self.ends_at is None else max(self.ends_at - perf_counter(), 0.0)

    def expired(self) -> bool:
        left = self.left_s()
        return left is not None and left <= 0.0

    def share_s(self, fraction: float, cap_s: float | None = None) -> float | None:
        """A share of the time left, at most `cap_s`; None (no limit) when neither bounds it."""
        left = self.left_s()
        if left is None:
            return cap_s
        share = fraction * left
        return share if cap_s is None else min(share, cap_s)


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
