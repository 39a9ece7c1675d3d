"""How the command line writes: tables that never cut a digit, and progress that reaches CI logs.

In a terminal, tables wrap their cells to the window and long work shows a live line. Sent to a
file or a pipe, tables take their full width (no 80-column cut) and long work prints a plain
progress line at least every `QUIET_EVERY_S` seconds, so a CI log shows the job is alive. User
strings (file names, graph names) are never read as Rich markup.
"""

import sys
import time
from collections.abc import Iterable, Sequence

from rich.console import Console
from rich.table import Table

#: Without a terminal, a progress line at least this often (and at the start and the end).
QUIET_EVERY_S = 30.0
#: The width of a console that is not a terminal: wide enough that no table is ever cut.
_UNLIMITED = 100_000


def make_console(stderr: bool = False) -> Console:
    """A console for stdout (or stderr): no markup, full width when not a terminal."""
    probe = Console(stderr=stderr)
    width = None if probe.is_terminal else _UNLIMITED
    return Console(
        stderr=stderr,
        markup=False,
        highlight=False,
        width=width,
        soft_wrap=not probe.is_terminal,
        color_system="auto" if probe.is_terminal else None,
    )


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], title: str | None = None, right: Sequence[str] = ()) -> Table:
    """A table whose cells wrap (fold) instead of being cut; columns named in `right` align right."""
    shown = Table(title=title, title_justify="left")
    for header in headers:
        shown.add_column(header, overflow="fold", justify="right" if header in right else "left")
    for row in rows:
        shown.add_row(*("" if cell is None else str(cell) for cell in row))
    return shown


def duration(seconds: float) -> str:
    """12 s, 3 min 05 s, 1 h 02 min."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


class Progress:
    """Progress of a long job: a transient live line in a terminal, plain lines otherwise.

    `update(text)` may be called as often as one likes: in a terminal the live line changes at
    once; without one, a line is printed once `QUIET_EVERY_S` have passed since the job began or
    since the last line. Short work therefore prints nothing, so that an error stays one line.
    `force` and `close(text)` print a last line only where earlier lines were printed, so a long
    job's log ends with its outcome.
    """

    def __init__(self, label: str, stream=None, every_s: float = QUIET_EVERY_S):
        self._label = label
        self._console = Console(file=stream or sys.stderr, markup=False, highlight=False)
        self._live = self._console.is_terminal
        self._every_s = every_s
        self._started = time.monotonic()
        self._last_print = self._started
        self._printed = False
        self._status = self._console.status(label) if self._live else None
        if self._status is not None:
            self._status.start()

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._started

    def update(self, text: str, force: bool = False) -> None:
        """Show `text` as the job's current state."""
        line = f"{self._label}: {text}"
        if self._status is not None:
            self._status.update(line)
            return
        now = time.monotonic()
        if (force and self._printed) or now - self._last_print >= self._every_s:
            self._last_print, self._printed = now, True
            self._console.print(f"poetsim: {line}", soft_wrap=True)

    def close(self, text: str | None = None) -> None:
        """End the live line; print `text` as the last word, if given."""
        if self._status is not None:
            self._status.stop()
            self._status = None
        elif text and self._printed:
            self._console.print(f"poetsim: {self._label}: {text}", soft_wrap=True)

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
