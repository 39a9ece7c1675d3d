"""The `poetsim` typer app, its one error boundary, and how every command writes.

Every command registers through `command()`, which puts it behind `_boundary`: a
`PoetsimError` becomes one line on stderr and the error's exit code, Ctrl-C exits 130 and a
file the machine refuses exits 74; anything else is a bug and keeps its traceback. Tables never
cut a digit and long work reports progress (`poetsim.cli.terminal`). Modules imported here stay
light, so that `poetsim --help` starts fast; commands import the library when they run.
"""

import contextlib
import functools
import inspect
import json
import textwrap
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import click
import typer
import typer._click as typer_click
from typer.core import TyperCommand, TyperGroup, TyperOption

from poetsim import __version__
from poetsim.assumptions import ASSUMPTIONS, SIMULATOR_ASSUMPTIONS, TIMING_HELP
from poetsim.cli.terminal import OUTPUT_CLOSED, Output, leave_closed_output, stdout_closed
from poetsim.errors import InternalError, PoetsimError, StorageError, first_line
from poetsim.extras import missing
from poetsim.units import json_numbers

if TYPE_CHECKING:
    import pandas as pd

#: Exit codes, as --help and the README list them.
EXIT_CODES = (
    "Exit codes: 0 done; 1 a regression found by `check`, or no schedule within the effort; "
    "2 bad input (a file, field or option; one line names it); 3 infeasible budgets; "
    "4 a solver, an install extra or the device toolchain not installed (the line names it); "
    "5 simulation error; 6 invalid schedule; "
    "7 the emulated device refused or failed a step, or disagreed with the prediction; "
    "69 the Dask cluster unavailable (its scheduler or workers gone, or another poetsim on them); "
    "70 internal error (a bug); 74 a file refused by the machine (disk full, read-only, permissions); "
    "75 another poetsim writes into that results folder; 130/143 stopped by SIGINT/SIGTERM "
    f"(finished points kept; rerun with --resume); {OUTPUT_CLOSED} stdout's reader went away (as with head; "
    "files written are kept)."
)

#: Below every command's help: where the model's assumptions are stated, and the exit codes.
COMMAND_EPILOG = f"The cost and timing model's assumptions: poetsim --help, docs/cost-model.md. {EXIT_CODES}"


if TYPE_CHECKING:
    # The mixin's methods call on into typer's command, its next class at run time; typer's
    # commands take the Context of the click that typer carries inside it.
    from typer._click import Context as CommandContext

    _CommandBase = TyperCommand
else:
    _CommandBase = object


def _fill(text: str, width: int, indent: str = "") -> list[str]:
    """`text`'s paragraphs (blank-line separated), each filled to `width` with breaks at spaces only.

    Never inside a word, after a hyphen either: a path such as docs/cost-model.md or a word such as
    keep-all stays whole, and a word longer than the line overflows it rather than being cut.
    Every line starts with `indent`.
    """
    wrapper = textwrap.TextWrapper(
        max(width, len(indent) + 20),
        initial_indent=indent,
        subsequent_indent=indent,
        break_on_hyphens=False,
        break_long_words=False,
    )
    lines: list[str] = []
    for n, paragraph in enumerate(p for p in inspect.cleandoc(text).split("\n\n") if p.strip()):
        lines += [""] if n else []
        lines += wrapper.wrap(" ".join(paragraph.split()))
    return lines


#: The click that typer runs on (its own copy in recent versions): the context class of its
#: commands, and the help formatter that context makes.
_ClickContext = TyperCommand.context_class
_ClickFormatter = _ClickContext.formatter_class


class _Formatter(_ClickFormatter):  # type: ignore[valid-type,misc]
    """click's help formatter, its text and option lists wrapped at spaces only (`_fill`)."""

    def write_text(self, text: str) -> None:
        """Help text and epilog at the current indent."""
        indent = " " * self.current_indent
        self.write("\n".join(_fill(text, self.width, indent)) + "\n")

    def write_dl(self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2) -> None:
        """Options and commands: the name, then its help beside it (under it where the name is long)."""
        rows = list(rows)
        first_col = min(max((len(term) for term, _ in rows), default=0), col_max) + col_spacing
        lead = " " * self.current_indent
        for term, help_text in rows:
            if not help_text.strip():
                self.write(f"{lead}{term}\n")
                continue
            pad = " " * (first_col + self.current_indent)
            wrapped = _fill(help_text, self.width, pad)
            if len(term) <= first_col - col_spacing:
                self.write(f"{lead}{term}{' ' * (first_col - len(term))}{wrapped[0][len(pad) :]}\n")
            else:
                self.write(f"{lead}{term}\n{wrapped[0]}\n")
            self.write("".join(f"{line}\n" if line else "\n" for line in wrapped[1:]))


class _Context(_ClickContext):  # type: ignore[valid-type,misc]
    """Every command's context: help through `_Formatter`."""

    formatter_class = _Formatter


class _QuickHelp(_CommandBase):
    """A command or group whose --help flag defaults to False rather than None.

    typer builds a pydantic adapter (about 0.1 s of imports) to coerce a flag whose value is
    None, so an absent --help would make every command pay for pydantic while parsing; a False
    flag is taken as it is.
    """

    context_class = _Context

    def get_help_option(self, ctx: "CommandContext") -> TyperOption | None:
        """The --help option, its default False where click left it None."""
        option = super().get_help_option(ctx)
        if option is not None and option.default is None:
            option.default = False
        return option

    def get_short_help_str(self, limit: int = 45) -> str:
        """The first paragraph of the help, whole: the command list wraps it rather than cutting it at `limit`."""
        if self.short_help or not self.help:
            return super().get_short_help_str(limit)
        return " ".join(inspect.cleandoc(self.help).split("\n\n")[0].split())


class _Group(_QuickHelp, TyperGroup):
    """The app's group and its sub-groups: the quick --help, listed by their whole first paragraph.

    A usage error anywhere below it (a bad option or argument, a missing one, no such command)
    prints as one line (`_OneLineUsageError`).
    """

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        """The group's context; a bad option of the group itself is one line."""
        with _usage_errors_in_one_line():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: Any) -> Any:
        """Resolve and run the command; its usage errors, and a command that does not exist, are one line."""
        with _usage_errors_in_one_line():
            return super().invoke(ctx)


class _Command(_QuickHelp, TyperCommand):
    """Every command: the quick --help, listed in its group's help by its whole first paragraph."""


app = typer.Typer(
    cls=_Group,
    help="Simulate and explore energy-optimal on-device training schedules (POET: recomputation + paging).",
    epilog=(
        f"{ASSUMPTIONS}. Timing models: {TIMING_HELP} {SIMULATOR_ASSUMPTIONS}. "
        f"Full model: docs/cost-model.md, docs/optimiser.md. {EXIT_CODES}"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def group(name: str, help: str, epilog: str | None = None) -> typer.Typer:
    """A sub-app `poetsim NAME ...` whose commands register with `command(..., group=it)`."""
    sub = typer.Typer(cls=_Group, help=help, epilog=epilog, rich_markup_mode=None, pretty_exceptions_enable=False)
    app.add_typer(sub, name=name)
    return sub


#: stdout and stderr of every command (`poetsim.cli.terminal.Output`).
out = Output()
err = Output(stderr=True)

Command = TypeVar("Command", bound=Callable[..., Any])

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document instead of a table.")]


def command(name: str | None = None, *, group: typer.Typer | None = None) -> Callable[[Command], Command]:
    """Register a function as the command `name` (default: the function's name) behind the boundary.

    `group` puts it in a sub-app (`poetsim GROUP NAME`) made by `group()`.
    """

    def register(function: Command) -> Command:
        (app if group is None else group).command(name, cls=_Command, epilog=COMMAND_EPILOG)(_boundary(function))
        return function

    return register


def _boundary(function: Callable[..., Any]) -> Callable[..., Any]:
    """Run a command; a PoetsimError becomes one line on stderr and its exit code.

    So does what the library does not turn into one itself: an install extra the command needs
    and lacks (4, naming the extra), Ctrl-C outside a sweep (130), and a file the machine refuses (74).
    Any other exception is a bug: its traceback, then one line and exit 70.
    """

    @functools.wraps(function)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except PoetsimError as exc:
            fail(exc)
        except ModuleNotFoundError as exc:
            extra_missing = missing(exc.name)
            if extra_missing is None:
                raise
            fail(extra_missing)
        except KeyboardInterrupt:
            err.print("poetsim: interrupted", soft_wrap=True)
            raise typer.Exit(130) from None
        except OSError as exc:
            _refused(exc)
        except (typer.Exit, click.exceptions.ClickException, click.exceptions.Abort):
            raise
        except Exception as exc:  # noqa: BLE001 - a bug: its traceback for the report, then exit 70
            traceback.print_exc()
            bug = f"{type(exc).__name__}: {first_line(exc)} (a bug in poetsim: the traceback above is what to report)"
            fail(InternalError(bug))

    return run


class _OneLineUsageError(typer_click.exceptions.UsageError):
    """A bad option or argument as every other bad input: one line on stderr naming the command and the option.

    Click (as typer vendors it) prints a usage error as its usage, a hint and the error; the
    commands promise one line.
    """

    def show(self, file: Any = None) -> None:
        """The error as `poetsim: error: COMMAND: MESSAGE` on stderr."""
        command = self.ctx.command_path if self.ctx is not None else "poetsim"
        err.print(f"poetsim: error: {command}: {' '.join(self.format_message().split())}", soft_wrap=True)


def _refused(exc: OSError) -> NoReturn:
    """A file the machine refused: one line, exit 74; a stdout whose reader has gone ends quietly instead."""
    if isinstance(exc, BrokenPipeError) and stdout_closed():
        leave_closed_output()
    fail(StorageError.from_os_error(exc, "use"))


@contextlib.contextmanager
def _usage_errors_in_one_line() -> Iterator[None]:
    """Raise a usage error of poetsim's commands as `_OneLineUsageError`, its message whole.

    Only errors that print through click's own `UsageError.show`: one that shows itself otherwise
    (a bare `poetsim` prints the help) keeps its class. Click's classes stay as they are for any
    other app in the process.
    """
    try:
        yield
    except typer_click.exceptions.UsageError as exc:
        if isinstance(exc, _OneLineUsageError) or type(exc).show is not typer_click.exceptions.UsageError.show:
            raise
        raise _OneLineUsageError(exc.format_message(), exc.ctx) from exc


def fail(exc: PoetsimError) -> NoReturn:
    """Print `exc` as one line on stderr and exit with its code."""
    message = " ".join(str(exc).split())
    err.print(f"poetsim: {exc.label}: {message}", soft_wrap=True)
    raise typer.Exit(exc.exit_code) from None


def note(text: str) -> None:
    """A one-line note on stderr: what was assumed, never an error."""
    err.print(f"poetsim: note: {text}", soft_wrap=True)


def emit_json(data: Any) -> None:
    """One JSON document on stdout: numbers as numbers, a number that is not finite (NaN, infinity) as null."""
    print(json.dumps(json_numbers(data), default=str, allow_nan=False))


def _clean(value: Any) -> Any:
    """A pandas cell as JSON: NaN becomes None, numpy scalars plain numbers."""
    if isinstance(value, float) and value != value:
        return None
    if hasattr(value, "item"):
        return _clean(value.item())
    return value


def records(frame: "pd.DataFrame") -> list[dict]:
    """The rows of a frame as JSON-ready dicts."""
    return [{k: _clean(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def _version(value: bool) -> None:
    if value:
        print(f"poetsim {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """poetsim: solve, simulate and sweep POET schedules."""
