"""The exception tree of poetsim.

The library raises these and never prints or exits; the CLI has one boundary that turns a
`PoetsimError` into one line on stderr and an exit code (`exit_code`).
"""


class PoetsimError(Exception):
    """Base of every error poetsim raises on purpose."""

    exit_code = 1


class UserInputError(PoetsimError):
    """A file, option or field the user gave is wrong; the message names where."""

    exit_code = 2


class InfeasibleBudgetError(PoetsimError):
    """No schedule meets the RAM and runtime budgets; the message says what would."""

    exit_code = 3


class SolverUnavailableError(PoetsimError):
    """The requested MILP solver is not installed; the message names the package."""

    exit_code = 4


class SimulationError(PoetsimError):
    """A schedule cannot be replayed (missing input, overdraft, bad page-in)."""

    exit_code = 5


class ScheduleError(PoetsimError):
    """A schedule breaks the instruction semantics or its budgets.

    Raised by the independent checker, which replays the instruction list; the message names
    the stage, the instruction and the node, or the figures and by how much they are over.
    """

    exit_code = 6


class InternalError(PoetsimError):
    """A bug in poetsim: an invariant that should always hold did not."""

    exit_code = 70
