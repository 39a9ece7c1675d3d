"""Sweeps: run every point of a scenario's grid, in parallel, keeping every finished row.

Each point (model x platform x RAM x runtime x strategy) is solved, checked and simulated by a
worker (`poetsim.sweeps.workers`: local processes; or a Dask cluster, `poetsim.sweeps.dask_pool`),
which sends the point's row and files back (`poetsim.sweeps.point`). Only the sweep's own
process, the client, writes the results folder: a point's folder, then its row in `runs.csv`
(`poetsim.runs.RunsFile`), one row per finished point, so that a sweep killed at any moment
keeps every row it had; `--resume` runs exactly the points without a row, and those whose row
says `failed`. An infeasible or failed point is a row with its status and a one-line reason,
never a crash.

What a sweep does when things go wrong (docs/dependability.md has the whole story):

- SIGINT or SIGTERM: no new point starts, the rows the workers already returned are written,
  the workers end (a cluster's queued points are cancelled), and `Interrupted` is raised
  (exit 130 or 143), within a second or so;
- another process writing into the same folder: `FolderBusyError` at once (`FolderLock`);
- the machine refuses a file (disk full, read-only, permissions): `StorageError`; that point
  is not recorded, so `--resume` runs it again;
- a worker that dies twice on one point: that point is a `failed` row, the rest go on;
- a Dask cluster that cannot serve (unreachable, lost, no workers, a worker with another
  poetsim): `UnavailableError`, with every finished row kept.

The order of a cell's points and the points that share one solve are the grid's
(`poetsim.sweeps.grid`); once every point has its row, what points tell about each other is
carried across the grid (`poetsim.sweeps.donors.carry_across_grid`).
"""

import ast
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

from poetsim.errors import Interrupted, PoetsimError, StorageError, UnavailableError, UserInputError
from poetsim.inputs.scenario import Point, Scenario
from poetsim.runs import FolderLock, ResultRow
from poetsim.status import Status
from poetsim.sweeps.dask_pool import NO_WORKER_WAIT_S, DaskPool, scheduler_address
from poetsim.sweeps.donors import carry_across_grid
from poetsim.sweeps.folder import check_resumable, make_folder, point_folder, read_schedule, save_scenario_copy, write_point
from poetsim.sweeps.grid import POINTS_DIR, SweepPlan, plan_sweep, point_fields, point_slug, prerequisites, twin_points
from poetsim.sweeps.interrupts import StopRequest
from poetsim.sweeps.point import PointJob, PointOutcome, input_files, run_point
from poetsim.sweeps.workers import Died, ProcessPool, Raised

#: How often the sweep looks up from waiting for points to see whether it was asked to stop.
POLL_S = 0.2
#: The executors a sweep runs its points on.
EXECUTORS = ("process", "dask")

# The sweep's names, importable from here as from their own modules: reports, benchmarks and tests
# find a point's folder and run the grid's pass through the sweep's entry module.
__all__ = [
    "EXECUTORS",
    "POINTS_DIR",
    "carry_across_grid",
    "plan_sweep",
    "point_slug",
    "run_sweep",
    "save_scenario_copy",
    "twin_points",
]


def run_sweep(
    scenario: Scenario,
    directory: Path,
    jobs: int | None = None,
    resume: bool = False,
    time_limit_s: float | None = None,
    executor: str | None = None,
    scheduler: str | None = None,
    on_row: Callable[[ResultRow, int, int], None] | None = None,
    no_worker_wait_s: float = NO_WORKER_WAIT_S,
    effort: float | None = None,
) -> Path:
    """Run every point not yet done in `directory/runs.csv`; returns the path of runs.csv.

    `effort` and `time_limit_s`, when given, replace the scenario's (`Scenario.with_limits`).

    `executor` is `process` (local worker processes) or `dask`; None means dask when a
    `scheduler` address is given, process otherwise. `jobs` is how many points run at once
    here (default: the core count); a cluster's workers decide it there. Everything is checked before the first
    write (`plan_sweep`, the scheduler's address), and a Dask cluster is reached and its
    workers checked before it too; the folder is then locked for the sweep's life
    (`FolderLock`), a resumed runs.csv is tidied (`RunsFile.tidy`: its failed rows go, so
    those points run again) and the scenario is copied beside the results. `on_row(row, done,
    total)` is called after each row is written (for progress).

    Raises Interrupted on SIGINT or SIGTERM (when called from the main thread), FolderBusyError,
    StorageError or UnavailableError (the Dask scheduler or its workers); in every case the
    rows already written stay, and the message says how many.
    """
    executor, address = _executor(executor, scheduler)
    if address is not None and jobs is not None:
        raise UserInputError(
            f"--jobs {jobs}: with --scheduler the cluster's workers decide how many points run at once "
            "(start them with `dask worker ADDRESS --nworkers N --nthreads 1`); leave --jobs out"
        )
    if address is None:
        _refuse_unguarded_script()
    scenario = scenario.with_limits(effort, time_limit_s)
    plan = _plan(scenario, directory, resume)
    workers = max(1, jobs or os.cpu_count() or 1)
    # A point's solver takes this machine's share of cores; on a cluster, the one thread its task has.
    threads = 1 if address is not None else max(1, (os.cpu_count() or 1) // workers)
    limit_s = scenario.time_limit_s
    with StopRequest() as stop, _pool(executor, workers, address, no_worker_wait_s) as pool:
        if stop.signum is not None:  # while a cluster was reached or started: nothing written yet
            raise Interrupted(stop.signum, _kept(plan), plan.total)
        make_folder(plan.directory)
        with FolderLock(plan.directory):
            if resume:
                plan.runs.tidy()
            plan = _plan(scenario, directory, resume)  # again, now that no one else can write
            save_scenario_copy(scenario, plan.directory)
            finished = len(plan.done_keys)
            try:
                for row in _drive(plan, pool, limit_s, threads, stop):
                    plan.runs.append(row)
                    finished += 1
                    if on_row is not None:
                        on_row(row, finished, plan.total)
            except (StorageError, UnavailableError) as exc:
                raise type(exc)(
                    f"{exc}; the sweep stopped with {_kept(plan)} of {plan.total} points kept; "
                    "rerun with --resume once that is fixed"
                ) from None
            if stop.signum is not None:
                raise Interrupted(stop.signum, _kept(plan), plan.total)
            try:
                carry_across_grid(plan.scenario, plan.directory)
            except OSError as exc:
                raise StorageError(
                    f"{StorageError.from_os_error(exc, 'write')}; every point's own row is kept, and "
                    "--resume carries the grid's facts again"
                ) from None
    return plan.runs.path


def _executor(executor: str | None, scheduler: str | None) -> tuple[str, str | None]:
    """The executor to use and the scheduler's checked address: `--scheduler` implies dask."""
    if executor is None:
        executor = "dask" if scheduler else "process"
    if executor not in EXECUTORS:
        raise UserInputError(f"--executor: unknown executor '{executor}' (use process or dask)")
    if scheduler is None:
        return executor, None
    if executor != "dask":
        raise UserInputError(f"--scheduler {scheduler}: a scheduler serves --executor dask, not --executor {executor}")
    return executor, scheduler_address(scheduler)


def _plan(scenario: Scenario, directory: Path, resume: bool) -> SweepPlan:
    """`plan_sweep`, and when resuming, the check that the folder's rows were swept with this scenario."""
    plan = plan_sweep(scenario, directory, resume)
    if resume:
        check_resumable(scenario, plan.directory)
    return plan


def _refuse_unguarded_script() -> None:
    """Refuse a sweep on local worker processes called from the top level of a script file.

    The workers start by importing the script again (multiprocessing's spawn); without `if
    __name__ == "__main__":` around the call, each worker would run the sweep itself and die
    at start-up, and every point would be recorded failed.
    """
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals
        if frame.f_code.co_name == "<module>" and module.get("__name__") == "__main__" and module.get("__file__"):
            script = Path(module["__file__"])
            if not _under_main_guard(script, frame.f_lineno):
                raise UserInputError(
                    f"{script.name}, line {frame.f_lineno}: a sweep on local worker processes must be called under "
                    '`if __name__ == "__main__":` (each worker imports the script again); or pass scheduler= for a Dask cluster'
                )
            return
        frame = frame.f_back


def _under_main_guard(script: Path, line: int) -> bool:
    """Whether `line` of `script` lies in the body of an `if __name__ == "__main__":` (True if the file cannot be read)."""
    try:
        tree = ast.parse(script.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) and "__name__" in ast.unparse(node.test):
            first, last = node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno
            if first <= line <= last:
                return True
    return False


def _kept(plan: SweepPlan) -> int:
    """How many of the plan's points have a row that need not run again (read back from disk)."""
    try:
        return len(plan.runs.done_keys() & {p.key for p in plan.scenario.points()})
    except PoetsimError:
        return len(plan.done_keys)


def _pool(executor: str, workers: int, scheduler: str | None, no_worker_wait_s: float) -> ProcessPool | DaskPool:
    if executor == "dask":
        return DaskPool(run_point, workers, scheduler, no_worker_wait_s)
    return ProcessPool(workers, run_point)


class _Grid:
    """The points left to run, what each waits for, and how to make its job once it may start."""

    def __init__(self, plan: SweepPlan, limit_s: float, threads: int):
        self.plan, self.limit_s, self.threads = plan, limit_s, threads
        cells: dict[tuple, list[Point]] = {}
        self.points: dict[str, Point] = {}
        for point in plan.scenario.points():
            cells.setdefault(point.cell, []).append(point)
            self.points[point.key] = point
        self.twins = twin_points(plan.scenario) if plan.todo else {}  # builds every point's problem: about 1 s
        self.before = {point.key: prerequisites(point, cells[point.cell]) for point in plan.todo}
        self.inputs = input_files(plan.scenario)
        #: The rows known so far: a resumed runs.csv's rows of twins, then each row as it comes.
        self.rows = _done_rows(plan, set(self.twins.values()))
        #: The points not started yet, each with the keys of the points it still waits for.
        self.blocked = {point.key: self.waits(point) for point in plan.todo}

    def waits(self, point: Point) -> set[str]:
        """The keys of the points `point` must wait for: its prerequisites and its twin, unless done."""
        keys = {other.key for other in self.before[point.key]}
        if point.key in self.twins:
            keys.add(self.twins[point.key])
        return keys - self.plan.done_keys

    def start_ready(self, pool: ProcessPool | DaskPool) -> int:
        """Submit to `pool` the job of every point that waits for nothing more; how many started."""
        started = 0
        for key in [k for k, needs in self.blocked.items() if not needs]:
            del self.blocked[key]
            pool.submit(key, self.job(self.points[key]))
            started += 1
        return started

    def finished(self, key: str, row: ResultRow) -> None:
        """Record the row of the point `key`; the points that waited for it wait no more for it."""
        self.rows[key] = row
        for needs in self.blocked.values():
            needs.discard(key)

    def job(self, point: Point) -> PointJob:
        """`point`'s job, with its starts and its twin's answer read from the results folder now."""
        directory = self.plan.directory
        starts = (read_schedule(point_folder(directory, other)) for other in self.before[point.key])
        twin_key = self.twins.get(point.key)
        twin = None if twin_key is None else self.rows.get(twin_key)
        twin_schedule = None
        if twin_key is not None and twin is not None and twin.status.has_schedule:
            twin_schedule = read_schedule(point_folder(directory, self.points[twin_key]))
        specs = dict.fromkeys((point.model, point.platform))
        return PointJob(
            self.plan.scenario,
            point,
            self.limit_s,
            self.threads,
            starts=tuple(schedule for schedule in starts if schedule is not None),
            twin=twin,
            twin_schedule=twin_schedule,
            inputs=tuple(self.inputs[spec] for spec in specs if spec in self.inputs),
        )


def _drive(plan: SweepPlan, pool: ProcessPool | DaskPool, limit_s: float, threads: int, stop: StopRequest) -> Iterator[ResultRow]:
    """Run the plan's points on `pool`, each once its prerequisites are done.

    Each point's folder is written as it comes back, then its row is yielded (the caller appends
    it to runs.csv).

    On a stop request no job starts; the rows already returned are still yielded. A job that
    raised (an environment error in a worker) stops the sweep the same way, then is raised.
    """
    grid = _Grid(plan, limit_s, threads)
    error: BaseException | None = None
    running = grid.start_ready(pool)
    while running:
        halting = stop.signum is not None or error is not None
        for _, job, outcome in pool.collect(0.0 if halting else POLL_S, dispatch=not halting):
            running -= 1
            if isinstance(outcome, Raised):
                error = error or outcome.error
                continue
            if isinstance(outcome, Died):
                if stop.signum is not None:
                    continue  # killed with the rest of the process group: not the point's fault
                outcome = PointOutcome(
                    ResultRow(
                        **point_fields(plan.scenario, job.point),
                        status=Status.FAILED,
                        message=f"{outcome.message}; rerun with --resume to try again",
                    )
                )
            write_point(plan.directory, job.point, outcome.files)
            yield outcome.row
            grid.finished(job.point.key, outcome.row)
        if halting:
            break
        if stop.signum is None and error is None:
            running += grid.start_ready(pool)
    if error is not None:
        raise error


def _done_rows(plan: SweepPlan, keys: set[str]) -> dict[str, ResultRow]:
    """The rows of `keys` that a resumed runs.csv already holds."""
    wanted = keys & plan.done_keys
    if not wanted:
        return {}
    return {
        record["point_key"]: ResultRow.from_dict(record, str(plan.runs.path))
        for record in plan.runs.records()
        if record.get("point_key") in wanted
    }
