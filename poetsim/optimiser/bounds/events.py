"""What a timed cover places: one restore or transfer of an output in a stage."""

from dataclasses import dataclass
from enum import StrEnum


class EventKind(StrEnum):
    """What happens to an output in a stage (the values are the timed cover's column kinds)."""

    PAGE_OUT = "o"  # paged out in the stage
    PAGE_IN = "n"  # paged in during the stage, usable from the next
    ABSENT = "a"  # absent right after the stage's compute, to be recomputed before its next reader


@dataclass(frozen=True, order=True)
class Event:
    """One event of a timed cover's best solution: `kind` of output `node` in `stage`."""

    kind: EventKind
    node: int
    stage: int

    @property
    def column(self) -> tuple[EventKind, int, int]:
        """The timed cover's column of this event (a start for another timed cover)."""
        return (self.kind, self.node, self.stage)
