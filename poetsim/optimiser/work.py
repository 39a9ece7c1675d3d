"""The work of one `optimise` call, counted in work units from tallies that do not depend on the machine.

Plans replayed, nonzeros built, and each HiGHS run's simplex iterations and nodes.

So a call's steps stop at the same points, and return the same schedule and bound, on a quiet and
on a loaded machine. A work unit is calibrated to about one second of the reference machine (the
2-core x86_64 CI machine, idle; docs/optimiser.md, "Effort"): an `effort` of 12 units takes about
12 s there, longer on a slower or busier machine, the same answer either way.

The wall clock stays as a guard (`clock.Clock`) that a normal call never reaches: once it trips,
every allowance reads as spent, the call returns what it has, and its message says so.
"""

import math

from poetsim.optimiser.clock import Clock

#: One replay of a plan (`plans.plan.figures` of a rule-made plan), per node of the graph.
REPLAY_UNITS_PER_NODE = 9e-6
#: A change that its energy alone rules out (`plans.plan.Energies`): made, and its energy summed
#: over the stages it made, without a replay. Half a replay: made and screened, the changes of one
#: polish scan over a plan of each graph of the outside set take 0.26-0.58 of the time they take
#: made and replayed (`make bench BENCH=replay`).
SCREEN_UNITS_PER_NODE = 4.5e-6
#: Building a cover program in Python, per nonzero.
BUILD_UNITS_PER_NONZERO = 2e-6
#: Building the stage MILP (`milp.formulation.formulate`), per nonzero.
FORMULATE_UNITS_PER_NONZERO = 1e-6
#: A HiGHS run: a fixed part (the hand-off to its process), a part per nonzero (presolve), and a
#: part per simplex iteration and per node, each times the program's lines (rows and columns).
#: Fitted to the CPU time of 172 runs in optimise calls on eight zoo graphs: the work of a run is
#: within a factor of 4 of its CPU seconds either way, and the sum within 10 % of theirs.
HIGHS_UNITS = 0.017
HIGHS_UNITS_PER_NONZERO = 4e-7
HIGHS_UNITS_PER_ITERATION_LINE = 1.2e-8
HIGHS_UNITS_PER_NODE_LINE = 2.4e-7
#: A run of a linear program (no branching, `Program.solve(linear=True)`): per simplex iteration
#: and line. Fitted to eight relaxations of timed covers of the outside set (26,000-317,000 lines):
#: their run times are within a factor of 2 of this either way, where the MIP's price is 2 to 7 times it.
HIGHS_UNITS_PER_LP_ITERATION_LINE = 3e-9
#: The simplex iterations a node is taken to need when a run's node limit is set from its
#: allowance: many for a node, so that a run seldom outlasts its allowance.
ITERATIONS_PER_NODE = 30
#: The simplex iterations of a program's root LP, per line, as a run is priced before it starts:
#: no node limit stops the root, so a program whose root would outlast its allowance is not run.
#: The covers' roots took 0.03-0.25 iterations per line; the timed cover's, whose windows chain
#: its rows, states its own (`timed_cover.ROOT_ITERATIONS_PER_LINE`).
ROOT_ITERATIONS_PER_LINE = 0.1


class Work:
    """The work units one call has used, and the guard that ends it on the wall clock."""

    def __init__(self, guard: Clock):
        self.guard = guard
        self.done = 0.0
        self.guard_tripped = False

    def used(self) -> float:
        """The units used so far; infinite once the guard has tripped (every allowance is then spent)."""
        if not self.guard_tripped and self.guard.tripped():
            self.guard_tripped = True
        return math.inf if self.guard_tripped else self.done

    def charge(self, units: float) -> None:
        """Count `units` of work done."""
        self.done += units


def highs_units(nonzeros: int, lines: int, iterations: int, nodes: int, linear: bool = False) -> float:
    """The work of one HiGHS run of a program with `nonzeros` and `lines` (rows and columns), from its own tallies.

    Simplex iterations and branch-and-bound nodes; `linear` for a linear program's run.
    """
    per_iteration = HIGHS_UNITS_PER_LP_ITERATION_LINE if linear else HIGHS_UNITS_PER_ITERATION_LINE
    return (
        HIGHS_UNITS
        + HIGHS_UNITS_PER_NONZERO * nonzeros
        + (per_iteration * iterations + HIGHS_UNITS_PER_NODE_LINE * nodes) * lines
    )


def node_limit(units: float, nonzeros: int, lines: int) -> int:
    """The nodes a HiGHS run of a program with `nonzeros` and `lines` may explore within `units`.

    At least one: the root, which no node limit stops.
    """
    per_node = (HIGHS_UNITS_PER_NODE_LINE + HIGHS_UNITS_PER_ITERATION_LINE * ITERATIONS_PER_NODE) * max(lines, 1)
    spare = units - HIGHS_UNITS - HIGHS_UNITS_PER_NONZERO * nonzeros
    return max(1, int(spare / per_node))


def iteration_limit(units: float, nonzeros: int, lines: int) -> int:
    """The simplex iterations a run of a linear program with `nonzeros` and `lines` may take within `units` (at least one)."""
    spare = units - HIGHS_UNITS - HIGHS_UNITS_PER_NONZERO * nonzeros
    return max(1, int(spare / (HIGHS_UNITS_PER_LP_ITERATION_LINE * max(lines, 1))))


def root_units(nonzeros: int, lines: int, iterations_per_line: float = ROOT_ITERATIONS_PER_LINE, linear: bool = False) -> float:
    """The work of a HiGHS run's presolve and root LP (a linear program's whole run if `linear`), as priced before the run.

    The root takes `iterations_per_line` simplex iterations per line (rows and columns).
    """
    return highs_units(nonzeros, lines, int(iterations_per_line * lines), 0, linear)


def replay_units(nodes: int) -> float:
    """The work of one replay of a plan on a graph of `nodes` nodes."""
    return REPLAY_UNITS_PER_NODE * nodes


def screen_units(nodes: int) -> float:
    """The work of a change of a plan on a graph of `nodes` nodes that its energy alone rules out."""
    return SCREEN_UNITS_PER_NODE * nodes
