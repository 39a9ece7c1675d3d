"""Sweeps: run every point of a scenario's grid, in parallel, keeping every finished row.

Each point (model x platform x RAM x runtime x strategy) is solved, checked and simulated in a
worker process (`poetsim.sweeps.workers`, or a Dask cluster: `poetsim.sweeps.dask_pool`). Only the parent
writes `runs.csv` (`poetsim.runs.RunsFile`): one row per finished point, so that a sweep killed
at any moment keeps every row it had; `--resume` runs exactly the points without a row, and
those whose row says `failed`. An infeasible or failed point is a row with its status and a
one-line reason, never a crash.

What a sweep does when things go wrong (docs/dependability.md has the whole story):

- SIGINT or SIGTERM: no new point starts, the rows the workers already returned are written,
  the workers end, and `Interrupted` is raised (exit 130 or 143), within a second or so;
- another process writing into the same folder: `FolderBusyError` at once (`FolderLock`);
- the machine refuses a file (disk full, read-only, permissions), in the parent or in a
  worker: `StorageError`; that point is not recorded, so `--resume` runs it again;
- a worker that dies twice on one point: that point is a `failed` row, the rest go on.

Points of one grid cell are ordered: a solved strategy runs after the strategies at the same
cell whose schedules it may use (baselines it allows, and solved strategies with fewer moves),
and takes their schedules from `points/` as starts. So hybrid is never reported worse than
paging-only or recompute-only at the same point: their schedules are hybrid schedules too.
Two points that ask the solver the same question (`twin_points`: recompute-only on rpi4 and on
rpi4-nocache, which differ only in storage) are solved once: the later takes the earlier's
answer, checked and simulated on its own platform. Once every point has its row, what points
tell about each other is carried across the grid (`carry_across_grid`, `poetsim.sweeps.implied`): a
cheaper schedule of another point that fits, a relaxation proven infeasible, a higher lower
bound.
"""

import hashlib
import json
import os
import re
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from poetsim import strategies
from poetsim.errors import (
    Interrupted,
    PoetsimError,
    StorageError,
    UnavailableError,
    UserInputError,
)
from poetsim.inputs.files import check_output_dir
from poetsim.inputs.scenario import Point, Scenario
from poetsim.pipeline import Run, adopt_schedule, problem_for_point, result_row, run_strategy, write_run
from poetsim.runs import FolderLock, ResultRow, RunsFile
from poetsim.schedule.checker import check_schedule
from poetsim.schedule.formats import load_json
from poetsim.schedule.model import Schedule
from poetsim.schedule.problem import Problem
from poetsim.status import Status
from poetsim.strategies import Kind
from poetsim.sweeps.dask_pool import NO_WORKER_WAIT_S, DaskPool
from poetsim.sweeps.implied import apply_implied, is_open, judged, moves_used, same_graph, schedule_donor
from poetsim.sweeps.implied import name as implied_name
from poetsim.sweeps.interrupts import StopRequest
from poetsim.sweeps.workers import Died, ProcessPool, Raised
from poetsim.tolerances import cheaper, same
from poetsim.units import number_text

#: Where a point keeps its schedule, trace and result, under the sweep's folder.
POINTS_DIR = "points"
#: How often the sweep looks up from waiting for points to see whether it was asked to stop.
POLL_S = 0.2
#: Longest point folder name before it is cut and given a hash (file systems allow 255 bytes).
MAX_SLUG_CHARS = 120


@dataclass(frozen=True)
class PointJob:
    """What a worker needs to run one point: picklable, no open files or solver state.

    `start_dirs` are the point folders of the strategies at the same grid cell whose schedules
    this point's solve may start from (read when the job runs: they finished before it).
    `twin_key` and `twin_dir` name an earlier point whose problem is this one's (`twin_points`)
    and its folder; `twin` is that point's row, set when the job starts: the point then takes
    that solve's answer.
    """

    scenario: Scenario
    point: Point
    directory: Path
    time_limit_s: float
    threads: int
    start_dirs: tuple[Path, ...] = ()
    twin_key: str | None = None
    twin_dir: Path | None = None
    twin: ResultRow | None = None


@dataclass(frozen=True)
class SweepPlan:
    """A checked sweep: where it writes, what is already done and what is left to run."""

    scenario: Scenario
    directory: Path
    runs: RunsFile
    done_keys: frozenset[str]
    todo: tuple[Point, ...]

    @property
    def total(self) -> int:
        return len(self.done_keys) + len(self.todo)


def point_slug(point: Point) -> str:
    """A folder name for a point's schedule and trace.

    Readable where the key's parts are plain (letters, digits, `_.@-`) and short; otherwise (a
    file name with spaces or other characters, a very long name) cut and followed by a hash of
    the key, so that such names never meet. `plan_sweep` checks that no two points of a sweep
    share a folder.
    """
    ram = point.ram.key.replace("%", "pct")
    text = f"{point.model_key}_{point.platform_key}_ram{ram}_rt{number_text(point.runtime_x)}x_{point.strategy}"
    safe = re.sub(r"[^A-Za-z0-9_.@-]+", "-", text)
    if safe == text and len(text) <= MAX_SLUG_CHARS:
        return text
    digest = hashlib.sha256(point.key.encode("utf-8")).hexdigest()[:12]
    return f"{safe[:MAX_SLUG_CHARS]}~{digest}"


def point_fields(scenario: Scenario, point: Point) -> dict:
    """The fields of a point's row that name it."""
    return {
        "scenario": scenario.name,
        "point_key": point.key,
        "model": point.model_key,
        "platform": point.platform_key,
        "ram": str(point.ram),
        "runtime_x": point.runtime_x,
        "strategy": point.strategy,
    }


def prerequisites(point: Point, cell: list[Point]) -> list[Point]:
    """The points of the same cell whose schedules `point`'s solve may start from.

    A baseline needs nothing. A solved strategy takes the baselines whose moves it allows and
    the solved strategies with strictly fewer moves (so that two strategies never wait for each
    other): hybrid waits for paging-only and recompute-only, both wait for keep-all.
    """
    own = strategies.get(point.strategy)
    if own.kind is Kind.BASELINE:
        return []
    found = []
    for other in cell:
        theirs = strategies.get(other.strategy)
        if other.strategy == point.strategy or not own.moves.allows(theirs.moves):
            continue
        if theirs.kind is Kind.BASELINE or _count(theirs.moves) < _count(own.moves):
            found.append(other)
    return found


def _count(moves) -> int:
    return int(moves.recompute) + int(moves.page)


def twin_points(scenario: Scenario) -> dict[str, str]:
    """For each solved point whose solve would repeat an earlier point's, that point's key.

    Two points are twins when they have the same strategy, the same solver inputs
    (`Problem.solver_inputs`: for recompute-only, rpi4 and rpi4-nocache are one problem) and,
    point by point, twin prerequisites (so the same starts). A solve is then the same
    question asked twice: the later point waits for the earlier and takes its answer (its
    schedule checked and simulated on its own platform, its bound and status). A point whose
    problem cannot be built here has no twin; it fails on its own.
    """
    points = scenario.points()
    cells: dict[tuple, list[Point]] = {}
    for point in points:
        cells.setdefault(point.cell, []).append(point)
    signatures: dict[str, object] = {}

    def signature(point: Point) -> object:
        if point.key not in signatures:
            inputs: object = point.key  # equal to no other point's, if the problem cannot be built
            try:
                inputs = problem_for_point(scenario, point).solver_inputs(strategies.get(point.strategy).moves)
            except PoetsimError:
                pass
            starts = tuple(signature(other) for other in prerequisites(point, cells[point.cell]))
            signatures[point.key] = (point.strategy, inputs, starts)
        return signatures[point.key]

    leaders: list[tuple[object, str]] = []
    twins = {}
    for point in points:
        if strategies.get(point.strategy).kind is Kind.BASELINE:
            continue
        mine = signature(point)
        leader = next((key for theirs, key in leaders if theirs == mine), None)
        if leader is None:
            leaders.append((mine, point.key))
        else:
            twins[point.key] = leader
    return twins


def plan_sweep(scenario: Scenario, directory: Path, resume: bool = False) -> SweepPlan:
    """Check where a sweep writes and what is left, without writing anything.

    UserInputError when `directory` is a file or cannot be made, when it already holds a
    runs.csv and `resume` is not set, when that runs.csv is not one poetsim can extend, or when
    two points would share a folder.
    """
    directory = Path(directory)
    check_output_dir(directory, "--out")
    runs = RunsFile(directory / "runs.csv")
    if runs.path.exists() and not resume:
        raise UserInputError(f"{runs.path} exists: pass --resume to continue it, or choose another --out")
    done = frozenset(runs.done_keys()) if resume and runs.path.exists() else frozenset()
    points = scenario.points()
    _check_distinct_folders(points)
    todo = tuple(p for p in points if p.key not in done)
    return SweepPlan(scenario, directory, runs, done & {p.key for p in points}, todo)


def _check_distinct_folders(points: list[Point]) -> None:
    seen: dict[str, Point] = {}
    for point in points:
        slug = point_slug(point)
        if slug in seen:
            raise UserInputError(
                f"points {seen[slug].key} and {point.key} would share the folder {POINTS_DIR}/{slug}; rename one of their files"
            )
        seen[slug] = point


def run_sweep(
    scenario: Scenario,
    directory: Path,
    jobs: int | None = None,
    resume: bool = False,
    time_limit_s: float | None = None,
    executor: str = "process",
    scheduler: str | None = None,
    on_row: Callable[[ResultRow, int, int], None] | None = None,
    no_worker_wait_s: float = NO_WORKER_WAIT_S,
    effort: float | None = None,
) -> Path:
    """Run every point not yet done in `directory/runs.csv`; returns the path of runs.csv.

    `effort` and `time_limit_s`, when given, replace the scenario's (`Scenario.with_limits`).

    Everything is checked before the first write (`plan_sweep`); the folder is then locked for
    the sweep's life (`FolderLock`), a resumed runs.csv is tidied (`RunsFile.tidy`: its failed
    rows go, so those points run again) and the scenario is copied beside the results.
    `on_row(row, done, total)` is called in the parent after each row is written (for progress).

    Raises Interrupted on SIGINT or SIGTERM (when called from the main thread), FolderBusyError,
    StorageError or UnavailableError (the Dask scheduler or its workers gone); in every case the
    rows already written stay, and the message says how many.
    """
    if executor not in ("process", "dask"):
        raise UserInputError(f"--executor: unknown executor '{executor}' (use process or dask)")
    scenario = scenario.with_limits(effort, time_limit_s)
    plan = plan_sweep(scenario, directory, resume)
    _make_folder(plan.directory)
    with FolderLock(plan.directory), StopRequest() as stop:
        if resume:
            plan.runs.tidy()
        plan = plan_sweep(scenario, directory, resume)  # again, now that no one else can write
        save_scenario_copy(scenario, plan.directory)
        workers = max(1, jobs or os.cpu_count() or 1)
        threads = max(1, (os.cpu_count() or 1) // workers)
        limit_s = scenario.time_limit_s
        finished = len(plan.done_keys)
        try:
            with _pool(executor, workers, scheduler, no_worker_wait_s) as pool:
                for row in _drive(plan, pool, limit_s, threads, stop):
                    plan.runs.append(row)
                    finished += 1
                    if on_row is not None:
                        on_row(row, finished, plan.total)
        except (StorageError, UnavailableError) as exc:
            raise type(exc)(
                f"{exc}; the sweep stopped with {_kept(plan)} of {plan.total} points kept; rerun with --resume once that is fixed"
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


def carry_across_grid(scenario: Scenario, directory: Path) -> int:
    """Apply what the points of a sweep tell about each other (`poetsim.sweeps.implied`); how many rows changed.

    First schedules: a point takes the cheapest checked schedule of another point that fits its
    budgets and moves, if cheaper than its own (`_Donors`: of the same graph, on any platform);
    it is checked again against this point's budgets, simulated, and written to its folder.
    Then proofs: infeasibility and lower bounds of relaxations. Run once every point has its
    row, so that the result does not depend on which point ran first; runs.csv is rewritten
    atomically (the unchanged rows byte for byte) and each changed point's result.json with it.
    """
    runs = RunsFile(directory / "runs.csv")
    rows = [ResultRow.from_dict(record, str(runs.path)) for record in runs.records()]
    points = {point.key: point for point in scenario.points()}
    donors = _Donors(scenario, directory, points, rows)
    adopted = list(rows)
    for position, row in enumerate(rows):
        donor = donors.best_for(row)
        if donor is None:
            continue
        try:
            schedule = donors.schedule(donor)
            if schedule is not None:
                adopted[position] = (
                    _adopt(scenario, donors.problem(row.point_key), directory, points[row.point_key], row, schedule, donor) or row
                )
        except PoetsimError:
            continue  # the donor's files cannot be read or checked here: the point keeps its own
    carried = apply_implied(adopted)
    changed = {position: new for position, (old, new) in enumerate(zip(rows, carried)) if new is not old}
    for row in changed.values():
        result = directory / POINTS_DIR / point_slug(points[row.point_key]) / "result.json" if row.point_key in points else None
        if result is not None and result.exists():
            result.write_text(json.dumps(row.to_dict(), indent=1) + "\n")
    if changed:
        runs.rewrite(changed)
    return len(changed)


class _Donors:
    """The checked schedules of a sweep, offered to its points that a solve left unproven.

    A schedule of the same graph, timing and platform is judged by its row's figures
    (`implied.schedule_donor`). One made on another platform is an instruction list like any
    other: its peak RAM is the same there (bytes do not depend on the platform), and its time
    and energy are the checker's under this point's costs. So rpi4 and rpi4-nocache, whose
    recompute-only schedules cost the same, never report different ones.
    """

    def __init__(self, scenario: Scenario, directory: Path, points: dict[str, Point], rows: list[ResultRow]):
        self.scenario, self.directory, self.points, self.rows = scenario, directory, points, rows
        self._schedules: dict[str, Schedule | None] = {}
        self._problems: dict[str, Problem] = {}

    def best_for(self, row: ResultRow) -> ResultRow | None:
        """The row whose schedule costs least at `row`'s point, fits and beats `row`'s own; or None."""
        if row.point_key not in self.points or not is_open(row):
            return None
        same = schedule_donor(row, self.rows)
        best = None if same is None or same.point_key not in self.points else (same.predicted_total_j, same.point_key, same)
        others = [other for other in self.rows if self._elsewhere(other, row)]
        if not others:
            return None if best is None else best[2]
        try:
            problem = self.problem(row.point_key)
        except PoetsimError:
            return None if best is None else best[2]
        own_j = row.predicted_total_j
        for other in others:
            schedule = self.schedule(other)
            if schedule is None:
                continue
            try:
                figures = check_schedule(schedule, problem.graph, problem.costs, problem.timing, problem.budgets)
            except PoetsimError:
                continue  # invalid here, or over this point's budgets
            if own_j is not None and not cheaper(figures.total_j, own_j):
                continue
            if best is None or (figures.total_j, other.point_key) < best[:2]:
                best = (figures.total_j, other.point_key, other)
        return None if best is None else best[2]

    def _elsewhere(self, other: ResultRow, row: ResultRow) -> bool:
        """Whether `other` has a schedule of `row`'s graph, made on another platform, that may fit."""
        if other.platform == row.platform or not other.status.has_schedule or other.point_key not in self.points:
            return False
        if not same_graph(other, row) or other.predicted_peak_ram_bytes is None or row.ram_budget_bytes is None:
            return False
        return other.predicted_peak_ram_bytes <= row.ram_budget_bytes and strategies.get(row.strategy).moves.allows(
            moves_used(other)
        )

    def problem(self, point_key: str) -> Problem:
        """The problem of a point (built once: the donors are judged on it, then one is adopted)."""
        if point_key not in self._problems:
            self._problems[point_key] = problem_for_point(self.scenario, self.points[point_key])
        return self._problems[point_key]

    def schedule(self, row: ResultRow) -> Schedule | None:
        """`row`'s saved schedule (read once), or None if it cannot be read."""
        if row.point_key not in self._schedules:
            path = self.directory / POINTS_DIR / point_slug(self.points[row.point_key]) / "schedule.json"
            try:
                self._schedules[row.point_key] = load_json(path)
            except PoetsimError:
                self._schedules[row.point_key] = None
        return self._schedules[row.point_key]


def _adopt(
    scenario: Scenario, problem: Problem, directory: Path, point: Point, row: ResultRow, schedule: Schedule, donor: ResultRow
) -> ResultRow | None:
    """`row` (a point of `problem`) with `donor`'s schedule, checked here, simulated and saved; None
    if it does not check."""
    where = "" if donor.platform == row.platform else f" on {donor.platform}"
    found_by = f"the schedule of {implied_name(donor)}{where}"
    run = adopt_schedule(
        problem, row.strategy, schedule, f"{found_by}, which fits here and costs less than this point's own solve found"
    )
    if run is None:
        return None
    new = replace(
        result_row(run, **point_fields(scenario, point)),
        solver=row.solver,
        build_s=row.build_s,
        solve_s=row.solve_s,
        wall_s=row.wall_s,
    )
    if row.bound_j is not None:
        new = judged(new, row.bound_j, "this point's solve")
        if new.status is Status.OPTIMAL:
            new = replace(new, message=f"proven optimal: {found_by} fits here and meets this point's lower bound")
    meta = {
        **dict(schedule.meta),
        "found_by": found_by,
        "status": new.status.value,
        "ram_budget_bytes": str(run.problem.budgets.ram_bytes),
        "runtime_budget_s": repr(run.problem.budgets.runtime_s),
    }
    write_run(
        replace(run, schedule=replace(schedule, meta=tuple(sorted(meta.items())))),
        directory / POINTS_DIR / point_slug(point),
        new,
    )
    return new


def _kept(plan: SweepPlan) -> int:
    """How many of the plan's points have a row that need not run again (read back from disk)."""
    try:
        return len(plan.runs.done_keys() & {p.key for p in plan.scenario.points()})
    except PoetsimError:
        return len(plan.done_keys)


def _make_folder(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError.from_os_error(exc, "make the folder", directory) from None


def _pool(executor: str, workers: int, scheduler: str | None, no_worker_wait_s: float):
    if executor == "dask":
        return DaskPool(run_point, workers, scheduler, no_worker_wait_s)
    return ProcessPool(workers, run_point)


def _jobs(plan: SweepPlan, limit_s: float, threads: int) -> tuple[list[PointJob], dict[str, set[str]]]:
    """One job per point left, and for each the keys of the points it must wait for."""
    cells: dict[tuple, list[Point]] = {}
    points = {}
    for point in plan.scenario.points():
        cells.setdefault(point.cell, []).append(point)
        points[point.key] = point
    twins = twin_points(plan.scenario) if plan.todo else {}  # builds every point's problem: about 1 s
    jobs, waits = [], {}
    for point in plan.todo:
        before = prerequisites(point, cells[point.cell])
        start_dirs = tuple(plan.directory / POINTS_DIR / point_slug(p) for p in before)
        twin = twins.get(point.key)
        twin_dir = None if twin is None else plan.directory / POINTS_DIR / point_slug(points[twin])
        jobs.append(PointJob(plan.scenario, point, plan.directory, limit_s, threads, start_dirs, twin, twin_dir))
        waits[point.key] = {p.key for p in before if p.key not in plan.done_keys}
        if twin is not None and twin not in plan.done_keys:
            waits[point.key].add(twin)
    return jobs, waits


def _drive(plan: SweepPlan, pool, limit_s: float, threads: int, stop: StopRequest) -> Iterator[ResultRow]:
    """Run the plan's jobs on `pool`, each once its prerequisites are done; yield rows as they finish.

    On a stop request no job starts; the rows already returned are still yielded. A job that
    raised (an environment error in a worker) stops the sweep the same way, then is raised.
    """
    jobs, waits = _jobs(plan, limit_s, threads)
    blocked = {job.point.key: set(waits[job.point.key]) for job in jobs}
    by_key = {job.point.key: job for job in jobs}
    rows = _done_rows(plan, {job.twin_key for job in jobs if job.twin_key is not None})
    running = 0
    error: BaseException | None = None

    def start_ready() -> None:
        nonlocal running
        for key in [k for k, needs in blocked.items() if not needs]:
            del blocked[key]
            job = by_key[key]
            if job.twin_key is not None:
                job = replace(job, twin=rows.get(job.twin_key))
            pool.submit(key, job)
            running += 1

    start_ready()
    while running:
        halting = stop.signum is not None or error is not None
        for key, job, outcome in pool.collect(0.0 if halting else POLL_S, dispatch=not halting):
            running -= 1
            if isinstance(outcome, Raised):
                error = error or outcome.error
                continue
            if isinstance(outcome, Died):
                if stop.signum is not None:
                    continue  # killed with the rest of the process group: not the point's fault
                outcome = ResultRow(
                    **point_fields(plan.scenario, job.point),
                    status=Status.FAILED,
                    message=f"{outcome.message}; rerun with --resume to try again",
                )
            yield outcome
            rows[key] = outcome
            for needs in blocked.values():
                needs.discard(key)
        if halting:
            break
        if stop.signum is None and error is None:
            start_ready()
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


def run_point(job: PointJob) -> ResultRow:
    """Solve, check and simulate one point; a row whatever went wrong with the point itself.

    What goes wrong with the machine is not the point's result: an OSError (disk full,
    read-only, permissions) while writing the point's folder, or anywhere else, is raised as
    StorageError, so the sweep stops and the point is not recorded.
    """
    point = job.point
    start = time.perf_counter()
    fields = point_fields(job.scenario, point)
    try:
        problem = problem_for_point(job.scenario, point)
        shared = _twin_run(job, problem, fields)
        if shared is not None:
            run, row = shared
        else:
            run = run_strategy(
                problem,
                point.strategy,
                job.scenario.solver,
                job.time_limit_s,
                simulate=True,
                threads=job.threads,
                starts=_starts(job.start_dirs),
                effort=job.scenario.effort,
            )
            row = result_row(run, **fields)
    except OSError as exc:
        raise StorageError.from_os_error(exc, "use") from None
    except PoetsimError as exc:
        row, run = ResultRow(**fields, status=Status.FAILED, message=_one_line(str(exc))), None
    except Exception as exc:  # noqa: BLE001 - a bug in one point must not end the sweep
        where = traceback.extract_tb(exc.__traceback__)[-1]
        row, run = (
            ResultRow(
                **fields,
                status=Status.FAILED,
                message=_one_line(f"internal error {type(exc).__name__}: {exc} ({Path(where.filename).name}:{where.lineno})"),
            ),
            None,
        )
    if run is not None and run.schedule is not None:
        try:
            write_run(run, job.directory / POINTS_DIR / point_slug(point), row)
        except OSError as exc:
            raise StorageError.from_os_error(exc, "write") from None
    return replace(row, wall_s=time.perf_counter() - start)


def _twin_run(job: PointJob, problem: Problem, fields: dict) -> tuple[Run, ResultRow] | None:
    """The run and row of a point that takes its twin's answer (`twin_points`); None when it
    must solve on its own: no twin, the twin failed, or its schedule cannot be read or does not
    cost the same here (which would mean the two problems differ after all)."""
    twin = job.twin
    if twin is None or job.twin_dir is None or twin.status is Status.FAILED:
        return None
    schedule = None
    if twin.status.has_schedule:
        try:
            schedule = load_json(job.twin_dir / "schedule.json")
        except PoetsimError:
            return None
    message = (
        f"{twin.message} (the answer of {twin.point_key}, one solve for both: for {job.point.strategy} "
        "the two points are the same problem)"
    )
    run = adopt_schedule(problem, job.point.strategy, schedule, message, status=twin.status)
    if run is None:
        return None
    row = replace(
        result_row(run, **fields),
        solver=twin.solver,
        build_s=0.0,
        solve_s=0.0,
        bound_j=twin.bound_j,
        gap_total=twin.gap_total,
        gap_overhead=twin.gap_overhead,
    )
    if schedule is not None and not _same_energy(row.predicted_total_j, twin.predicted_total_j):
        return None
    return run, row


def _same_energy(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and same(a, b)


def _starts(start_dirs: tuple[Path, ...]) -> tuple[Schedule, ...]:
    """The schedules saved by the points a job waited for (those that have a readable one).

    Starts are hints: a schedule file cut short by a kill in an earlier run is skipped.
    """
    found = []
    for directory in start_dirs:
        try:
            if (directory / "schedule.json").is_file():
                found.append(load_json(directory / "schedule.json"))
        except (PoetsimError, OSError):
            continue
    return tuple(found)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def save_scenario_copy(scenario: Scenario, directory: Path) -> None:
    """Keep the scenario beside its results, so `compare` and `report` can find it again.

    File paths are written relative to `directory`, so the copy works wherever the repository
    (or the results folder with its inputs) is cloned or moved.
    """
    data = scenario.model_dump(mode="json", exclude_defaults=True)
    data["model"] = [_relative(m, directory) for m in scenario.model]
    data["platform"] = [_relative(p, directory) for p in scenario.platform]
    data["budgets"] = {
        "ram": [str(r) for r in scenario.budgets.ram],
        "runtime": [f"{number_text(x)}x" for x in scenario.budgets.runtime],
    }
    if "strategies" in data:
        data["strategies"] = list(scenario.strategies)
    path, temporary = directory / "scenario.yaml", directory / "scenario.yaml.tmp"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        temporary.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        os.replace(temporary, path)  # whole or not at all: `compare` and `report` read it later
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise StorageError.from_os_error(exc, "write", path) from None


def _relative(spec: str, directory: Path) -> str:
    """A file path relative to `directory`; a name as it is."""
    return os.path.relpath(spec, directory.resolve()) if Path(spec).is_absolute() else spec
