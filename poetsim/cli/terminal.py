"""How the command line writes: tables that fit and never cut, and progress that reaches CI logs.

Width, the same in every command: in a terminal a table fits the window (`COLUMNS` where the
environment sets it, else the terminal's size); sent to a file or a pipe it takes its whole width,
whatever `COLUMNS` says, so that `grep` and CI logs see every row whole. A cell wraps only between
words, after a hyphen between letters, and in a long key or path after a `|` or `/`: no number is
ever broken and nothing is cut. A column is never narrower than its longest word; a table whose
columns cannot fit side by side is printed as records, one block per row with each header beside its
value and empty cells left out (as `psql`'s expanded display), and only where even that cannot fit,
wider than the window rather than cut. A message ("wrote ...", "status: ...") fills the terminal's
lines between words, a number kept with its unit, and a path wider than the window runs past its
edge whole; errors and notes on stderr stay one line each, for logs. Long work shows a live line in
a terminal and, without one, prints a plain progress line at least every `QUIET_EVERY_S` seconds, so
a CI log shows the job is alive. User strings (file names, graph names) are never read as Rich
markup.

Rich is imported on first use, so that `poetsim --help` starts without it.
"""

import os
import re
import select
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions

#: Without a terminal, a progress line at least this often (and at the start and the end).
QUIET_EVERY_S = 30.0
#: Spaces between a header and its value in the records view.
_RECORD_GAP = 2
#: The width of output that is not a terminal: no table is ever wrapped or cut there.
_UNLIMITED = 100_000
#: Where a long unspaced token (a point key, a path) may wrap: after these characters.
_BREAKS_AFTER = re.compile(r"(?<=[|/])")
#: Tokens longer than this may wrap after `_BREAKS_AFTER`; shorter ones ("MB/s") stay whole.
_LONG_TOKEN = 20
#: A word may wrap after a hyphen that a letter follows ("over-budget", "rpi4-nocache"), never inside a number ("1e-05").
_HYPHEN = re.compile(r"(?<=[A-Za-z0-9]-)(?=[A-Za-z])")
#: A number as poetsim prints it ("1,024", "-0.5", "1.67e+05", "35%", "1.2x", "(12"), and a unit that may follow it.
_NUMBER = re.compile(r"[-+(~]?\d[\d.,]*(e[-+]?\d+)?[%x]?")
_UNIT = re.compile(r"(%|[A-Za-zµ]{1,5}(/[A-Za-z]{1,2})?)[,;:)]*")


@dataclass(frozen=True)
class Breaks:
    """Where a cell's words may break.

    `glue` keeps a number with its unit ("94.4 MB/s"), `hyphens` lets a word break after a
    hyphen between letters ("over-" "budget"), and `paths` lets a long key or path break after
    each `|` and `/`.
    """

    glue: bool
    hyphens: bool
    paths: bool = True


#: From the most readable to the narrowest: a table takes the first that lets it fit.
_BREAKS = (Breaks(glue=True, hyphens=False), Breaks(glue=True, hyphens=True), Breaks(glue=False, hyphens=True))
#: A message's lines break between words only: a path stays whole.
_WHOLE_WORDS = Breaks(glue=True, hyphens=False, paths=False)


def output_width(is_terminal: bool) -> int | None:
    """The width to write in: a terminal's (None: Rich reads COLUMNS, else asks the terminal), else no limit."""
    return None if is_terminal else _UNLIMITED


#: The exit code when stdout's reader goes away (`head`, a closed pager): 128 + SIGPIPE, as a
#: command that the signal ends.
OUTPUT_CLOSED = 141


def stdout_closed() -> bool:
    """Whether stdout is a pipe whose reader has gone (writing to it fails with EPIPE)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    poll = select.poll()
    poll.register(fd, 0)  # an error or hang-up is always reported
    return any(events & select.POLLERR for _, events in poll.poll(0))


def leave_closed_output() -> NoReturn:
    """End the command quietly because stdout's reader has gone: exit `OUTPUT_CLOSED`.

    stdout is pointed at /dev/null first, so that nothing later (Python's flush at exit) fails
    on it again. Files the command already wrote are kept.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # a stdout without a descriptor of its own has nothing to flush there
        pass
    finally:
        os.close(devnull)
    raise SystemExit(OUTPUT_CLOSED)


def make_console(stderr: bool = False) -> "Console":
    """A Rich console for stdout (or stderr): no markup or emoji codes, no colour outside a terminal, `output_width` wide.

    A stdout whose reader goes away ends the command with `leave_closed_output`.
    """
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            """End the command with `leave_closed_output` (Rich would exit 1, the code of a regression)."""
            leave_closed_output()

    is_terminal = Console(stderr=stderr).is_terminal
    return _Console(
        stderr=stderr,
        markup=False,
        emoji=False,
        highlight=False,
        width=output_width(is_terminal),
        soft_wrap=not is_terminal,
        color_system="auto" if is_terminal else None,
    )


class Output:
    """stdout or stderr as every command writes to it: a console made on first use, that never cuts a line.

    A table wider than the window (its columns cannot shrink below their longest word) is
    printed whole and the terminal wraps it, rather than Rich cropping it at the window's edge.
    `stderr` picks stderr; the default is stdout.
    """

    def __init__(self, stderr: bool = False):
        self._stderr = stderr
        self._console: Console | None = None

    @property
    def console(self) -> "Console":
        """The Rich console behind this output."""
        if self._console is None:
            self._console = make_console(self._stderr)
        return self._console

    def print(self, *objects: Any, **options: Any) -> None:
        """Rich's `Console.print`, never cropping."""
        options.setdefault("crop", False)
        self.console.print(*objects, **options)

    def line(self, text: str, **options: Any) -> None:
        """A message: in a terminal filled between words to its width, a number kept with its unit; elsewhere one line.

        A word wider than the terminal (a long path) runs past its edge whole rather than being broken.
        """
        console = self.console
        shown = _wrap(text, console.width, _WHOLE_WORDS) if console.is_terminal else text
        console.print(shown, soft_wrap=True, **options)


class FittedTable:
    """A table of text cells that fits the width it is printed in (see the module docstring).

    Build it with `table` and `add_row`; its column widths are chosen when it is printed, from
    the width of that output: each column's natural width where everything fits, else its
    longest word plus a share of the room left in proportion to what it lacks. `title` is
    printed above the table, and the columns named in `right` are right-aligned.
    """

    def __init__(self, headers: Sequence[str], title: str | None = None, right: Sequence[str] = ()):
        self.headers = tuple(headers)
        self.title = title
        self.right = frozenset(right)
        self.rows: list[tuple[str, ...]] = []

    def add_row(self, *cells: object) -> None:
        """Append a row; None is an empty cell, anything else is shown as its `str`."""
        self.rows.append(tuple("" if cell is None else str(cell) for cell in cells))

    def _columns(self) -> list[tuple[str, ...]]:
        """Each column's texts, its header first."""
        return [(header, *(row[i] if i < len(row) else "" for row in self.rows)) for i, header in enumerate(self.headers)]

    def layout(self, width: int) -> "tuple[list[int], Breaks] | None":
        """The text width of each column in an output `width` characters wide, and where its words may break.

        Borders and padding are apart; the layout is the one with the fewest breaks that let the
        table fit. None if no layout fits.
        """
        columns = self._columns()
        natural = [max(_line_width(text) for text in column) for column in columns]
        room = width - _frame_width(len(self.headers))
        for breaks in _BREAKS:
            least = _least_widths(columns, breaks)
            if sum(least) <= room:
                return _fit(natural, least, room), breaks
        return None

    def record_layout(self, width: int) -> "tuple[int, int, Breaks] | None":
        """The header and value widths of the records view in an output `width` characters wide, and its breaks.

        The headers' column takes their natural width where the values still fit beside it, else
        what the values leave (never below a header's longest word). None if no layout fits.
        """
        room = width - _RECORD_GAP
        headers = [header for header in self.headers if header]
        natural = max((_line_width(header) for header in headers), default=0)
        for breaks in _BREAKS:
            least_value = max((_longest_word(cell, breaks) for row in self.rows for cell in row), default=0)
            least_header = max((_longest_word(header, breaks) for header in headers), default=0)
            header_width = max(least_header, min(natural, room - least_value))
            if header_width + least_value <= room:
                return header_width, room - header_width, breaks
        return None

    def __rich_console__(self, console: "Console", options: "ConsoleOptions") -> Iterator[Any]:
        """Draw the table at the console's width: as laid out by `layout`, else as records (rich's protocol)."""
        from rich.table import Table

        fitted = self.layout(options.max_width)
        if fitted is None:
            records = self.record_layout(options.max_width) if self.rows else None
            if records is not None:
                yield from self._records(console, options, *records)
                return
            fitted = _least_widths(self._columns(), _BREAKS[0]), _BREAKS[0]
        widths, breaks = fitted
        shown = Table(title=self.title, title_justify="left")
        for header, width in zip(self.headers, widths):
            shown.add_column(_wrap(header, width, breaks), width=width, justify="right" if header in self.right else "left")
        for row in self.rows:
            shown.add_row(*(_wrap(cell, width, breaks) for cell, width in zip(row, widths)))
        whole = sum(widths) + _frame_width(len(widths))
        yield from console.render(shown, options.update_width(max(options.max_width, whole)))

    def _records(
        self, console: "Console", options: "ConsoleOptions", header_width: int, value_width: int, breaks: Breaks
    ) -> Iterator[Any]:
        """One block per row, each header beside its value (an empty cell left out), a rule between blocks; the title above."""
        from rich.rule import Rule
        from rich.table import Table
        from rich.text import Text

        if self.title:
            yield from console.render(Text(self.title), options)
        for n, row in enumerate(self.rows):
            yield from console.render(Rule(f"row {n + 1} of {len(self.rows)}", align="left", characters="─"), options)
            block = Table.grid(padding=(0, _RECORD_GAP, 0, 0))
            block.add_column(width=header_width)
            block.add_column(width=value_width, justify="left")
            for header, cell in zip(self.headers, row):
                if cell:
                    block.add_row(_wrap(header, header_width, breaks), _wrap(cell, value_width, breaks))
            yield from console.render(block, options)


def table(
    headers: Sequence[str], rows: Iterable[Sequence[object]] = (), title: str | None = None, right: Sequence[str] = ()
) -> FittedTable:
    """A table that wraps its cells between words to fit the output; columns named in `right` align right."""
    shown = FittedTable(headers, title, right)
    for row in rows:
        shown.add_row(*row)
    return shown


def _frame_width(columns: int) -> int:
    """What Rich's default box takes beside the text: a border between and around columns, one space each side."""
    return 3 * columns + 1


def _line_width(text: str) -> int:
    from rich.cells import cell_len

    return max((cell_len(line) for line in text.splitlines()), default=0)


def _words(text: str, breaks: Breaks) -> list[str]:
    """The units a line of `text` wraps between: its words, a number kept with its unit where `breaks` glue them."""
    words: list[str] = []
    for word in text.split():
        if breaks.glue and words and " " not in words[-1] and _NUMBER.fullmatch(words[-1]) and _UNIT.fullmatch(word):
            words[-1] = f"{words[-1]} {word}"
        else:
            words.append(word)
    return words


def _pieces(word: str, breaks: Breaks) -> list[str]:
    """A word cut where it may wrap, as `breaks` allow: after a hyphen, and a long one after each `|` and `/`."""
    if " " in word:
        return [word]
    pieces = _HYPHEN.split(word) if breaks.hyphens else [word]
    if breaks.paths and len(word) > _LONG_TOKEN:
        pieces = [part for piece in pieces for part in _BREAKS_AFTER.split(piece)]
    return [piece for piece in pieces if piece]


def _longest_word(text: str, breaks: Breaks) -> int:
    from rich.cells import cell_len

    return max((cell_len(piece) for word in _words(text, breaks) for piece in _pieces(word, breaks)), default=0)


def _least_widths(columns: Sequence[Sequence[str]], breaks: Breaks) -> list[int]:
    """Each column's narrowest width under `breaks`: its longest unbreakable piece."""
    return [max(_longest_word(text, breaks) for text in column) for column in columns]


def _fit(natural: list[int], least: list[int], room: int) -> list[int]:
    """Column widths within `room`: natural if they fit; never below `least`; the rest shared by need."""
    if sum(natural) <= room:
        return list(natural)
    spare = room - sum(least)
    if spare <= 0:
        return list(least)
    need = [n - low for n, low in zip(natural, least)]
    share = [spare * n // sum(need) for n in need]
    for i in sorted(range(len(need)), key=lambda i: need[i] - share[i], reverse=True)[: spare - sum(share)]:
        share[i] += 1
    return [low + s for low, s in zip(least, share)]


def _wrap(text: str, width: int, breaks: Breaks) -> str:
    """`text` with line breaks so that no line is wider than `width`, breaking only where `_pieces` allows."""
    from rich.cells import cell_len

    lines = []
    for paragraph in text.splitlines() or [""]:
        line = ""
        for word in _words(paragraph, breaks):
            for n, piece in enumerate(_pieces(word, breaks)):
                glue = "" if n else " "
                if line and cell_len(line) + len(glue) + cell_len(piece) > width:
                    lines.append(line)
                    line = piece
                else:
                    line = f"{line}{glue}{piece}" if line else piece
        lines.append(line)
    return "\n".join(lines)


def duration(seconds: float) -> str:
    """12 s, 3 min 05 s, 1 h 02 min."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(round(seconds), 60)
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
    job's log ends with its outcome. `label` names the job; `stream` is where it is shown
    (stderr by default), and `every_s` stands for `QUIET_EVERY_S`.
    """

    def __init__(self, label: str, stream=None, every_s: float = QUIET_EVERY_S):
        from rich.console import Console

        self._label = label
        self._console = Console(file=stream or sys.stderr, markup=False, emoji=False, highlight=False)
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
        """Seconds since the job began."""
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
        """The progress itself; leaving the block closes it."""
        return self

    def __exit__(self, *exc) -> None:
        """Close the progress: the live line goes."""
        self.close()
