"""Options that several commands share: which scenario point, and how to solve it."""

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.models import OptionInfo

from poetsim import strategies
from poetsim.assumptions import TIMING_HELP
from poetsim.inputs.solvers import SOLVERS
from poetsim.inputs.solvers import known as known_solver
from poetsim.units import GUARD_S_PER_UNIT, LIMIT_S_PER_UNIT

if TYPE_CHECKING:
    from pathlib import Path

    from poetsim import api
    from poetsim.inputs.scenario import Scenario


def number(at_least: float, at_most: float | None = None) -> Callable[[str], float]:
    """The parser of a float option: a finite number within [at_least, at_most].

    click's range check lets `nan` through to say it is below the least value, and `inf` through
    to the command; a bad value here says which rule it breaks.
    """

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise typer.BadParameter(f"'{text}' is not a number") from None
        if not math.isfinite(value):
            raise typer.BadParameter(f"{text} is not a finite number")
        if value < at_least:
            raise typer.BadParameter(f"{text} is below the least value, {at_least:g}")
        if at_most is not None and value > at_most:
            raise typer.BadParameter(f"{text} is above the largest value, {at_most:g}")
        return value

    return parse


def number_option(*args: Any, at_least: float, at_most: float | None = None, help: str) -> Any:
    """A float option read by `number`, its range stated after its help as typer states ranges."""
    within = f"x>={at_least:g}" if at_most is None else f"{at_least:g}<=x<={at_most:g}"
    return typer.Option(*args, parser=number(at_least, at_most), metavar="<float>", help=f"{help} [{within}]")


ModelOpt = Annotated[str | None, typer.Option(help="Model (zoo name or graph path); overrides the scenario.")]
PlatformOpt = Annotated[str | None, typer.Option(help="Platform name or profile path; overrides the scenario.")]
StrategyOpt = Annotated[
    str | None, typer.Option(help="; ".join(f"{s.name}" for s in strategies.REGISTRY.values()) + " (see docs/optimiser.md).")
]
RamOpt = Annotated[
    str | None,
    typer.Option(
        help="RAM budget: % of keep-all (50%), bytes (1048576) or with a unit (256KiB, 1.5MB); a bare number below 1 is refused."
    ),
]
RuntimeOpt = Annotated[str | None, typer.Option(help="Runtime budget: multiple of one plain pass (1.2x).")]
TimingOpt = Annotated[str | None, typer.Option(help=TIMING_HELP)]


def read_by(parse: Callable[[str], Any]) -> Callable[[str | None], Any]:
    """The callback of an option whose value `parse` reads (ValueError: a bad value), as the command line is read."""

    def check(value: str | None) -> Any:
        try:
            return None if value is None else parse(value)
        except ValueError as error:
            raise typer.BadParameter(str(error)) from None

    return check


SolverOpt = Annotated[
    str | None,
    typer.Option(
        help=", ".join(SOLVERS) + " (default highs; gurobi beyond 2,000 columns needs a license).",
        callback=read_by(known_solver),
    ),
]


def _effort_option(help_text: str) -> OptionInfo:
    """The `--effort` option, in work units, with its command's help (the defaults differ)."""
    return number_option("--effort", at_least=0.01, help=help_text)


def _time_limit_option(help_text: str) -> OptionInfo:
    """The `--time-limit` option, the wall-clock guard in seconds, with its command's help."""
    return number_option("--time-limit", at_least=0.1, help=help_text)


EffortOpt = Annotated[
    float | None,
    _effort_option(
        "Optimiser work in work units (about a second each on the reference machine, idle; the scenario's "
        "effort by default): counted in work, not seconds, so the same answer on any machine and at any load."
    ),
]
TimeLimitOpt = Annotated[
    float | None,
    _time_limit_option(
        f"Wall-clock guard in seconds (default {GUARD_S_PER_UNIT:g} s per unit of effort; alone, it sets the effort to "
        f"1/{LIMIT_S_PER_UNIT:g} of it). "
        "A solve it stops says so: its answer then depends on the machine's speed."
    ),
]
#: `train`'s and `validate-run`'s effort, whose defaults are their own (`poetsim.pytorch`).
TrainEffortOpt = Annotated[
    float | None,
    _effort_option("Optimiser work in work units (about a second each; default 6): the same schedule on any machine."),
]
ValidateEffortOpt = Annotated[
    float | None,
    _effort_option("Optimiser work per point in work units (about a second each; default 2): the same schedules on any machine."),
]
PointEffortOpt = Annotated[
    float | None,
    _effort_option(
        "Optimiser work per point in work units (about a second each on the reference machine, idle; the "
        "scenario's effort by default): the same answer on any machine and at any load."
    ),
]
PointTimeLimitOpt = Annotated[
    float | None,
    _time_limit_option(
        f"Wall-clock guard per point, seconds (default {GUARD_S_PER_UNIT:g} s per unit of effort; alone, it sets the "
        f"effort to 1/{LIMIT_S_PER_UNIT:g} of it). A point it stops says so: its answer then depends on the machine's speed."
    ),
]
BatchOpt = Annotated[
    int | None,
    typer.Option(
        "--batch-size", "-b", min=1, help="Batch size of zoo models; overrides the scenario (graph files fix their own)."
    ),
]


def choose_point(
    scenario: "Path | Scenario", model, platform, ram, runtime, strategy, timing, batch_size, saved: bool = False
) -> "api.Choice":
    """The point the options name: the scenario's values where an option is not given.

    Each note of the choice (an option that overrides a list, a value taken from the scenario)
    is printed on stderr. `saved`: the point replays a saved schedule (no strategy is chosen).
    """
    from poetsim import api
    from poetsim.cli.app import note
    from poetsim.inputs.scenario import Scenario, load_scenario

    loaded = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    choice = api.choose(
        loaded,
        model=model,
        platform=platform,
        ram=ram,
        runtime=runtime,
        strategy=strategy,
        timing=timing,
        batch_size=batch_size,
        saved=saved,
    )
    for text in choice.notes:
        note(text)
    return choice
