"""Sweeps: run every point of a scenario's grid, in parallel, keeping every finished row.

Each point (model x platform x RAM x runtime x strategy) is solved, checked and simulated in a
worker process. Only the parent writes `runs.csv` (`poetsim.runs.RunsFile`): one row per
finished point, so that a sweep killed at any moment keeps every row it had; `--resume` skips
exactly the points whose key is already there. An infeasible or failed point is a row with its
status and a one-line reason, never a crash.

Points of one grid cell are ordered: a solved strategy runs after the strategies at the same
cell whose schedules it may use (baselines it allows, and solved strategies with fewer moves),
and takes their schedules from `points/` as starts. So hybrid is never reported worse than
paging-only or recompute-only at the same point: their schedules are hybrid schedules too.
"""

import os
import re
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, replace
from multiprocessing import get_context
from pathlib import Path

import yaml

from poetsim import strategies
from poetsim.errors import PoetsimError, UserInputError
from poetsim.pipeline import problem_for_point, result_row, run_strategy, write_run
from poetsim.runs import ResultRow, RunsFile
from poetsim.scenario import Point, Scenario
from poetsim.schedule import Schedule
from poetsim.schedule_io import load_json
from poetsim.status import Status
from poetsim.strategies import Kind
from poetsim.units import number_text

#: Where a point keeps its schedule, trace and result, under the sweep's folder.
POINTS_DIR = "points"


@dataclass(frozen=True)
class PointJob:
    """What a worker needs to run one point: picklable, no open files or solver state.

    `start_dirs` are the point folders of the strategies at the same grid cell whose schedules
    this point's solve may start from (read when the job runs: they finished before it).
    """

    scenario: Scenario
    point: Point
    directory: Path
    time_limit_s: float
    threads: int
    start_dirs: tuple[Path, ...] = ()


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
    """A folder name for a point's schedule and trace, unique per key."""
    text = (f"{point.model_key}_{point.platform_key}_ram{point.ram.key}_rt{number_text(point.runtime_x)}x_"
            f"{point.strategy}")
    return re.sub(r"[^A-Za-z0-9_.@-]+", "-", text.replace("%", "pct"))


def point_fields(scenario: Scenario, point: Point) -> dict:
    """The fields of a point's row that name it."""
    return {"scenario": scenario.name, "point_key": point.key, "model": point.model_key,
            "platform": point.platform_key, "ram": str(point.ram), "runtime_x": point.runtime_x,
            "strategy": point.strategy}


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


def plan_sweep(scenario: Scenario, directory: Path, resume: bool = False) -> SweepPlan:
    """Check where a sweep writes and what is left, without writing anything.

    UserInputError when `directory` is a file or cannot be made, or when it already holds a
    runs.csv and `resume` is not set.
    """
    directory = Path(directory)
    check_output_dir(directory, "--out")
    runs = RunsFile(directory / "runs.csv")
    if runs.path.exists() and not resume:
        raise UserInputError(f"{runs.path} exists: pass --resume to continue it, or choose another --out")
    done = frozenset(runs.done_keys()) if resume and runs.path.exists() else frozenset()
    todo = tuple(p for p in scenario.points() if p.key not in done)
    return SweepPlan(scenario, directory, runs, done, todo)


def check_output_dir(directory: Path, option: str) -> None:
    """UserInputError unless `directory` is a writable folder or can be made as one."""
    probe = Path(directory)
    if probe.exists() and not probe.is_dir():
        raise UserInputError(f"{option}: {directory} is a file, not a folder")
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise UserInputError(f"{option}: {probe} is a file, so {directory} cannot be made")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UserInputError(f"{option}: {probe} is not writable, so nothing can be written to {directory}")


def check_output_file(path: Path, option: str) -> None:
    """UserInputError unless `path` can be written: its folder exists and it is not a folder."""
    path = Path(path)
    if path.is_dir():
        raise UserInputError(f"{option}: {path} is a folder; give a file name")
    folder = path.parent
    if not folder.is_dir():
        raise UserInputError(f"{option}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserInputError(f"{option}: the folder {folder} is not writable")


def run_sweep(
    scenario: Scenario, directory: Path, jobs: int | None = None, resume: bool = False,
    time_limit_s: float | None = None, executor: str = "process", scheduler: str | None = None,
    on_row: Callable[[ResultRow, int, int], None] | None = None,
) -> Path:
    """Run every point not yet in `directory/runs.csv`; returns the path of runs.csv.

    Everything is checked before the first write (`plan_sweep`); the scenario is then copied
    beside the results. `on_row(row, done, total)` is called in the parent after each row is
    written (for progress).
    """
    if executor not in ("process", "dask"):
        raise UserInputError(f"--executor: unknown executor '{executor}' (use process or dask)")
    plan = plan_sweep(scenario, directory, resume)
    save_scenario_copy(scenario, plan.directory)
    workers = max(1, jobs or os.cpu_count() or 1)
    threads = max(1, (os.cpu_count() or 1) // workers)
    limit_s = time_limit_s or scenario.time_limit_s
    finished = len(plan.done_keys)
    for row in _execute(plan, workers, limit_s, threads, executor, scheduler):
        plan.runs.append(row)
        finished += 1
        if on_row is not None:
            on_row(row, finished, plan.total)
    return plan.runs.path


def _jobs(plan: SweepPlan, limit_s: float, threads: int) -> tuple[list[PointJob], dict[str, set[str]]]:
    """One job per point left, and for each the keys of the points it must wait for."""
    cells: dict[tuple, list[Point]] = {}
    for point in plan.scenario.points():
        cells.setdefault(point.cell, []).append(point)
    jobs, waits = [], {}
    for point in plan.todo:
        before = prerequisites(point, cells[point.cell])
        start_dirs = tuple(plan.directory / POINTS_DIR / point_slug(p) for p in before)
        jobs.append(PointJob(plan.scenario, point, plan.directory, limit_s, threads, start_dirs))
        waits[point.key] = {p.key for p in before if p.key not in plan.done_keys}
    return jobs, waits


def _execute(plan: SweepPlan, workers: int, limit_s: float, threads: int, executor: str,
             scheduler: str | None) -> Iterator[ResultRow]:
    """Run the plan's jobs, each once its prerequisites are done; yield rows as they finish."""
    jobs, waits = _jobs(plan, limit_s, threads)
    if not jobs:
        return
    if executor == "dask":
        yield from _execute_dask(jobs, waits, workers, scheduler)
    elif workers == 1:
        for job in _dependency_order(jobs, waits):
            yield run_point(job)
    else:
        with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
            yield from _in_order(jobs, waits, pool.submit, lambda fs: wait(fs, return_when=FIRST_COMPLETED)[0])


def _dependency_order(jobs: list[PointJob], waits: dict[str, set[str]]) -> list[PointJob]:
    """The jobs in an order where each comes after the jobs it waits for."""
    ordered, placed, left = [], set(), list(jobs)
    while left:
        ready = [job for job in left if waits[job.point.key] <= placed]
        ordered += ready
        placed |= {job.point.key for job in ready}
        left = [job for job in left if job.point.key not in placed]
    return ordered


def _in_order(jobs: list[PointJob], waits: dict[str, set[str]], submit: Callable, wait_any: Callable) -> Iterator[ResultRow]:
    """Submit each job once the jobs it waits for have finished; yield rows as futures finish."""
    blocked = {job.point.key: set(waits[job.point.key]) for job in jobs}
    by_key = {job.point.key: job for job in jobs}
    running: dict[Future, str] = {}
    for key in [k for k, w in blocked.items() if not w]:
        running[submit(run_point, by_key[key])] = key
        del blocked[key]
    while running:
        for future in wait_any(list(running)):
            key = running.pop(future)
            yield future.result()
            for other, needs in list(blocked.items()):
                needs.discard(key)
                if not needs:
                    running[submit(run_point, by_key[other])] = other
                    del blocked[other]


def _execute_dask(jobs: list[PointJob], waits: dict[str, set[str]], workers: int, scheduler: str | None) -> Iterator[ResultRow]:
    """Send the points to a Dask distributed cluster (a local one without a scheduler address)."""
    from dask.distributed import Client, LocalCluster
    from dask.distributed import wait as dask_wait

    cluster = None
    try:
        if scheduler:
            client = Client(scheduler, timeout="30s")
        else:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None, silence_logs=40)
            client = Client(cluster)
    except OSError as exc:
        raise UserInputError(f"--scheduler: cannot reach the Dask scheduler {scheduler} ({exc})") from None
    try:
        yield from _in_order(jobs, waits, lambda fn, job: client.submit(fn, job, pure=False),
                             lambda fs: dask_wait(fs, return_when="FIRST_COMPLETED").done)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def run_point(job: PointJob) -> ResultRow:
    """Solve, check and simulate one point; always returns a row, whatever went wrong."""
    point = job.point
    start = time.perf_counter()
    fields = point_fields(job.scenario, point)
    try:
        problem = problem_for_point(job.scenario, point)
        run = run_strategy(problem, point.strategy, job.scenario.solver, job.time_limit_s, simulate=True,
                           threads=job.threads, starts=_starts(job.start_dirs))
        row = result_row(run, **fields)
        if run.schedule is not None:
            write_run(run, job.directory / POINTS_DIR / point_slug(point), row)
    except PoetsimError as exc:
        row = ResultRow(**fields, status=Status.FAILED, message=_one_line(str(exc)))
    except Exception as exc:  # noqa: BLE001 - a bug in one point must not end the sweep
        where = traceback.extract_tb(exc.__traceback__)[-1]
        row = ResultRow(**fields, status=Status.FAILED, message=_one_line(
            f"internal error {type(exc).__name__}: {exc} ({Path(where.filename).name}:{where.lineno})"))
    return replace(row, wall_s=time.perf_counter() - start)


def _starts(start_dirs: tuple[Path, ...]) -> tuple[Schedule, ...]:
    """The schedules saved by the points a job waited for (those that have one)."""
    return tuple(load_json(d / "schedule.json") for d in start_dirs if (d / "schedule.json").is_file())


def _one_line(text: str) -> str:
    return " ".join(text.split())


def save_scenario_copy(scenario: Scenario, directory: Path) -> None:
    """Keep the scenario beside its results, so `compare` and `report` can find it again.

    File paths are written relative to `directory`, so the copy works wherever the repository
    (or the results folder with its inputs) is cloned or moved.
    """
    directory.mkdir(parents=True, exist_ok=True)
    data = scenario.model_dump(mode="json", exclude_defaults=True)
    data["model"] = [_relative(m, directory) for m in scenario.model]
    data["platform"] = [_relative(p, directory) for p in scenario.platform]
    data["budgets"] = {"ram": [str(r) for r in scenario.budgets.ram],
                       "runtime": [f"{number_text(x)}x" for x in scenario.budgets.runtime]}
    if "strategies" in data:
        data["strategies"] = list(scenario.strategies)
    (directory / "scenario.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def _relative(spec: str, directory: Path) -> str:
    """A file path relative to `directory`; a name as it is."""
    return os.path.relpath(spec, directory.resolve()) if Path(spec).is_absolute() else spec
