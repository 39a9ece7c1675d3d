"""The `poetsim` typer app, its one error boundary, and how every command writes.

Every command registers through `command()`, which puts it behind `_boundary`: a
`PoetsimError` becomes one line on stderr and the error's exit code, Ctrl-C exits 130 and a
file the machine refuses exits 74; anything else is a bug and keeps its traceback. Tables never
cut a digit and long work reports progress (`poetsim.cli.terminal`). Modules imported here stay
light, so that `poetsim --help` starts fast; commands import the library when they run.
"""

import functools
import inspect
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from typer.core import TyperCommand, TyperGroup, TyperOption

from poetsim import __version__
from poetsim.assumptions import ASSUMPTIONS, SIMULATOR_ASSUMPTIONS, TIMING_HELP
from poetsim.cli.terminal import Output
from poetsim.errors import PoetsimError, StorageError
from poetsim.extras import missing

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
    "(finished points kept; rerun with --resume)."
)


if TYPE_CHECKING:
    # The mixin's methods call on into typer's command, its next class at run time; typer's
    # commands take the Context of the click that typer carries inside it.
    from typer._click import Context as CommandContext

    _CommandBase = TyperCommand
else:
    _CommandBase = object


class _QuickHelp(_CommandBase):
    """A command or group whose --help flag defaults to False rather than None.

    typer builds a pydantic adapter (about 0.1 s of imports) to coerce a flag whose value is
    None, so an absent --help would make every command pay for pydantic while parsing; a False
    flag is taken as it is.
    """

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
    """The app's group and its sub-groups: the quick --help, listed by their whole first paragraph."""


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
        (app if group is None else group).command(name, cls=_Command)(_boundary(function))
        return function

    return register


def _boundary(function: Callable[..., Any]) -> Callable[..., Any]:
    """Run a command; a PoetsimError becomes one line on stderr and its exit code.

    So does what the library does not turn into one itself: an install extra the command needs
    and lacks (4, naming the extra), Ctrl-C outside a sweep (130), and a file the machine refuses (74).
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
            fail(StorageError.from_os_error(exc, "use"))

    return run


def fail(exc: PoetsimError) -> None:
    """Print `exc` as one line on stderr and exit with its code."""
    message = " ".join(str(exc).split())
    err.print(f"poetsim: {exc.label}: {message}", soft_wrap=True)
    raise typer.Exit(exc.exit_code) from None


def note(text: str) -> None:
    """A one-line note on stderr: what was assumed, never an error."""
    err.print(f"poetsim: note: {text}", soft_wrap=True)


def emit_json(data: Any) -> None:
    """One JSON document on stdout (numbers as numbers; NaN as null)."""
    print(json.dumps(data, default=str, allow_nan=False))


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
