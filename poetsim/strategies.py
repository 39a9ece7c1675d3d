"""The strategies poetsim knows, in one registry: adding a strategy is one entry here plus its code.

A strategy is either solved (POET's MILP, restricted to the strategy's moves, with a proof status)
or a baseline (a fixed rule that makes one schedule, which then fits the budgets or not). Each
entry names its moves, which say whose schedules can start whose solve (`Moves.allows`), and its
colour, which every chart uses. The order of the registry is the order of tables and legends.
"""

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from poetsim.errors import UserInputError
from poetsim.optimiser.baselines import simple as baselines
from poetsim.optimiser.baselines.capuchin import capuchin_schedule
from poetsim.optimiser.baselines.pofo import pofo_schedule
from poetsim.schedule.model import Moves, Schedule
from poetsim.schedule.problem import Problem


class Kind(str, Enum):
    """How a strategy makes its schedule."""

    SOLVED = "solved"  # POET's MILP, restricted to the strategy's moves
    BASELINE = "baseline"  # a fixed rule, no solver


@dataclass(frozen=True)
class Strategy:
    """One strategy: its name, what it may do, how it is made, and how it is drawn.

    `build` makes a baseline's schedule from the problem (it may use the budgets, as Capuchin
    and POFO do); solved strategies have none, the pipeline hands their `moves` to the MILP.
    `colour` is from the Okabe-Ito palette, which colour-blind readers can tell apart.
    """

    name: str
    description: str
    moves: Moves
    colour: str
    build: Callable[[Problem], Schedule] | None = None

    @property
    def kind(self) -> Kind:
        return Kind.SOLVED if self.build is None else Kind.BASELINE


def _keep_all(problem: Problem) -> Schedule:
    return baselines.keep_all(problem.graph, problem.costs, problem.timing)[0]


def _checkpoint_sqrt(problem: Problem) -> Schedule:
    return baselines.checkpoint_sqrt(problem.graph, problem.costs, problem.timing)[0]


def _capuchin(problem: Problem) -> Schedule:
    return capuchin_schedule(problem.graph, problem.costs, problem.budgets.ram_bytes, problem.timing).schedule


def _pofo(problem: Problem) -> Schedule:
    return pofo_schedule(problem.graph, problem.costs, problem.budgets.ram_bytes, problem.timing).schedule


REGISTRY: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy(
            "keep-all",
            "every node computed once and kept until its last reader (the reference)",
            Moves(recompute=False, page=False),
            "#7f7f7f",
            _keep_all,
        ),
        Strategy(
            "hybrid", "POET: the least-energy mix of recomputation and paging (MILP)", Moves(recompute=True, page=True), "#0072B2"
        ),
        Strategy("paging-only", "the least-energy schedule that only pages (MILP)", Moves(recompute=False, page=True), "#009E73"),
        Strategy(
            "recompute-only",
            "the least-energy schedule that only recomputes (MILP, Checkmate's problem)",
            Moves(recompute=True, page=False),
            "#E69F00",
        ),
        Strategy(
            "checkpoint-sqrt",
            "Chen et al. 2016: keep about sqrt(n) segment boundaries, recompute the rest",
            Moves(recompute=True, page=False),
            "#CC79A7",
            _checkpoint_sqrt,
        ),
        Strategy(
            "capuchin",
            "Peng et al. 2020: evict the longest access gaps, swap where it hides, else recompute by memory saved per second",
            Moves(recompute=True, page=True),
            "#D55E00",
            _capuchin,
        ),
        Strategy(
            "pofo",
            "Beaumont et al. 2021: the fastest chain schedule of recomputation and offloading (dynamic program; chains only)",
            Moves(recompute=True, page=True),
            "#56B4E9",
            _pofo,
        ),
    )
}

#: Colour of runs replayed from a saved schedule (`poetsim simulate --schedule`).
SAVED_COLOUR = "#999999"


def get(name: str) -> Strategy:
    """The strategy called `name`; UserInputError naming the known ones otherwise."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise UserInputError(f"unknown strategy '{name}' (use {', '.join(REGISTRY)})") from None


def names(kind: Kind | None = None) -> tuple[str, ...]:
    """Every strategy's name in registry order, or those of one kind."""
    return tuple(name for name, s in REGISTRY.items() if kind is None or s.kind is kind)


def rank(name: str) -> int:
    """Position of a strategy in tables and legends (unknown names last)."""
    order = list(REGISTRY)
    return order.index(name) if name in order else len(order)


def colour(name: str) -> str:
    """The chart colour of a strategy."""
    return REGISTRY[name].colour if name in REGISTRY else SAVED_COLOUR


def help_text() -> str:
    """One line per strategy, for --help."""
    return "; ".join(f"{s.name}: {s.description}" for s in REGISTRY.values())
