"""The strategies poetsim knows, in one registry: adding a strategy is one entry here plus its code.

A strategy is either solved (POET's MILP, restricted to the strategy's moves, with a proof status)
or a baseline (a fixed rule that makes one schedule, which then fits the budgets or not). Each
entry names its moves, which say whose schedules can start whose solve (`Moves.allows`), and its
colour, which every chart uses. The order of the registry is the order of tables and legends.
"""

import importlib
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from poetsim.errors import UserInputError
from poetsim.schedule.model import Moves, Schedule

if TYPE_CHECKING:
    from poetsim.schedule.problem import Problem


class Kind(str, Enum):
    """How a strategy makes its schedule."""

    SOLVED = "solved"  # POET's MILP, restricted to the strategy's moves
    BASELINE = "baseline"  # a fixed rule, no solver


@dataclass(frozen=True)
class Strategy:
    """One strategy: its name, what it may do, how it is made, and how it is drawn.

    `maker` names a baseline's schedule maker as "module:function", a function of the problem
    (it may use the budgets, as Capuchin and POFO do); it is imported on first use, so that
    reading the registry (for help texts and scenario checks) imports no optimiser. Solved
    strategies have none: the pipeline hands their `moves` to the MILP. `colour` is from the
    Okabe-Ito palette, which colour-blind readers can tell apart.
    """

    name: str
    description: str
    moves: Moves
    colour: str
    maker: str | None = None

    @property
    def kind(self) -> Kind:
        """Baseline when a rule makes its schedule, solved when the MILP does."""
        return Kind.SOLVED if self.maker is None else Kind.BASELINE

    def build(self, problem: "Problem") -> Schedule:
        """The baseline's schedule for `problem`; a solved strategy has no rule to build by."""
        if self.maker is None:
            raise TypeError(f"{self.name} is solved, not built by a rule")
        module, _, function = self.maker.partition(":")
        return getattr(importlib.import_module(module), function)(problem)


_MAKERS = "poetsim.optimiser.baselines"

#: The reference: every node computed once and kept until its last reader.
KEEP_ALL = Strategy(
    "keep-all",
    "every node computed once and kept until its last reader (the reference)",
    Moves(recompute=False, page=False),
    "#7f7f7f",
    f"{_MAKERS}:make_keep_all",
)
#: POET itself.
HYBRID = Strategy(
    "hybrid", "POET: the least-energy mix of recomputation and paging (MILP)", Moves(recompute=True, page=True), "#0072B2"
)
#: Paging alone, solved and proven.
PAGING_ONLY = Strategy(
    "paging-only", "the least-energy schedule that only pages (MILP)", Moves(recompute=False, page=True), "#009E73"
)
#: Recomputation alone, solved and proven (Checkmate's problem).
RECOMPUTE_ONLY = Strategy(
    "recompute-only",
    "the least-energy schedule that only recomputes (MILP, Checkmate's problem)",
    Moves(recompute=True, page=False),
    "#E69F00",
)
#: The classic rule of thumb for recomputation, a baseline.
CHECKPOINT_SQRT = Strategy(
    "checkpoint-sqrt",
    "Chen et al. 2016: keep about sqrt(n) segment boundaries, recompute the rest",
    Moves(recompute=True, page=False),
    "#CC79A7",
    f"{_MAKERS}:make_checkpoint_sqrt",
)
#: Capuchin's eviction rule, a baseline of the paper's Figure 5.
CAPUCHIN = Strategy(
    "capuchin",
    "Peng et al. 2020: evict the longest access gaps, swap where it hides, else recompute by memory saved per second",
    Moves(recompute=True, page=True),
    "#D55E00",
    f"{_MAKERS}:make_capuchin",
)
#: POFO's dynamic program over chains, a baseline of the paper's Table 3.
POFO = Strategy(
    "pofo",
    "Beaumont et al. 2021: the fastest chain schedule of recomputation and offloading (dynamic program; chains only)",
    Moves(recompute=True, page=True),
    "#56B4E9",
    f"{_MAKERS}:make_pofo",
)

#: Every strategy by name, in the order of tables and legends. Code that needs one strategy
#: names it by its constant above (`strategies.HYBRID.name`), never by a string of its own.
REGISTRY: dict[str, Strategy] = {
    s.name: s for s in (KEEP_ALL, HYBRID, PAGING_ONLY, RECOMPUTE_ONLY, CHECKPOINT_SQRT, CAPUCHIN, POFO)
}

#: The strategy name of a run replayed from a saved schedule (`poetsim simulate --schedule`): no
#: registry entry, since no rule or solve made it.
#: The rule-made baselines `poetsim compare` adds at every point beside the scenario's own
#: strategies, so that every headline row shows the reference it is measured against.
COMPARE_BASELINES = (KEEP_ALL.name, CHECKPOINT_SQRT.name)

SAVED = "saved"
#: Colour of runs replayed from a saved schedule (`poetsim simulate --schedule`).
SAVED_COLOUR = "#999999"


def known(name: str) -> str:
    """`name` if a strategy has it; ValueError naming the known ones otherwise."""
    if name not in REGISTRY:
        raise ValueError(f"unknown strategy '{name}' (use {', '.join(REGISTRY)})")
    return name


def get(name: str) -> Strategy:
    """The strategy called `name`; UserInputError naming the known ones otherwise."""
    try:
        return REGISTRY[known(name)]
    except ValueError as error:
        raise UserInputError(str(error)) from None


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
