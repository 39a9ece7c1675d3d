"""The exception tree of poetsim.

The library raises these and never prints or exits; the CLI has one boundary that turns a
`PoetsimError` into one line on stderr and an exit code (`exit_code`).
"""

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class PoetsimError(Exception):
    """Base of every error poetsim raises on purpose."""

    exit_code = 1
    #: The word the command line puts before the message: `poetsim: error: ...`.
    label = "error"


class UserInputError(PoetsimError):
    """A file, option or field the user gave is wrong; the message names where."""

    exit_code = 2


class NotApplicableError(UserInputError):
    """A strategy that cannot schedule this graph at all (POFO on a graph that is not a chain).

    Asked for alone it is bad input (exit 2); a command that runs several strategies skips it
    with one line saying why and goes on.
    """


class InfeasibleBudgetError(PoetsimError):
    """No schedule meets the RAM and runtime budgets; the message says what would."""

    exit_code = 3


class NotInstalledError(PoetsimError):
    """Something the command needs is not installed (an install extra, a solver); the message says how to install it."""

    exit_code = 4


class SolverUnavailableError(NotInstalledError):
    """The requested MILP solver is not installed, or not licensed for the model; the message says which."""


class ToolMissingError(NotInstalledError):
    """A program poetsim runs is not installed (the cross-compiler, QEMU); the message says what to install."""


class DeviceError(PoetsimError):
    """The emulated device refused or failed a step, or measured figures that differ from the prediction.

    The message names the cause: the runtime's status with its stage, instruction and node, a
    timeout, or each figure that disagrees.
    """

    exit_code = 7


class SimulationError(PoetsimError):
    """A schedule cannot be replayed (missing input, overdraft, bad page-in)."""

    exit_code = 5


class ScheduleError(PoetsimError):
    """A schedule breaks the instruction semantics or its budgets.

    Raised by the independent checker, which replays the instruction list; the message names
    the stage, the instruction and the node, or the figures and by how much they are over.
    """

    exit_code = 6

    def about(self, source: object) -> "ScheduleError":
        """The same error, its message led by the file or name the schedule came from."""
        return ScheduleError(f"{source}: {self}")


class UnavailableError(PoetsimError):
    """The Dask cluster a sweep runs on cannot serve it.

    Its scheduler is unreachable or gone, it has no worker, or a worker has another poetsim than
    the client's.

    Points already finished are kept; the message names the scheduler or the worker.
    """

    exit_code = 69


class StorageError(PoetsimError):
    """The machine refused a file: disk full, read-only file system, permission denied.

    An environment error, not a result: the point being written is not recorded (not even as
    `failed`), so `--resume` runs it again once the cause is fixed.
    """

    exit_code = 74

    @classmethod
    def from_os_error(cls, exc: OSError, doing: str, path: object = None) -> "StorageError":
        """'cannot write build/x/runs.csv: No space left on device (ENOSPC)', from the OSError."""
        import errno

        where = path if path is not None else (exc.filename if exc.filename is not None else "a file")
        code = errno.errorcode.get(exc.errno or 0)
        reason = exc.strerror or str(exc) or type(exc).__name__
        return cls(f"cannot {doing} {where}: {reason}" + (f" ({code})" if code else ""))


class FolderBusyError(PoetsimError):
    """Another poetsim process is writing into the same results folder (it holds the lock)."""

    exit_code = 75


class Interrupted(PoetsimError):
    """A sweep stopped by SIGINT or SIGTERM, after recording every point already finished.

    The exit code is the shell's for the signal: 130 for SIGINT (Ctrl-C), 143 for SIGTERM.
    `kept` of the sweep's `total` points have their rows.
    """

    label = "interrupted"

    def __init__(self, signum: int, kept: int, total: int):
        super().__init__(f"{kept} of {total} points kept; rerun with --resume")
        self.signum, self.kept, self.total = signum, kept, total
        self.exit_code = 128 + signum


class InternalError(PoetsimError):
    """A bug in poetsim: an invariant that should always hold did not."""

    exit_code = 70


def first_line(error: BaseException) -> str:
    """The first line of an exception's message ("" if it has none): what a one-line report quotes of an error torch raised."""
    return (str(error).strip().splitlines() or [""])[0]


def parsed(parse: Callable[[Any], T], value: Any, where: str) -> T:
    """`parse(value)`, its ValueError turned into a UserInputError that names `where` (an option, a field)."""
    try:
        return parse(value)
    except ValueError as error:
        raise UserInputError(f"{where}: {error}") from None
