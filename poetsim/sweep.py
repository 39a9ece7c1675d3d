"""Sweeps: run every point of a scenario's grid, in parallel, keeping every finished row.

Each point (model x platform x RAM x runtime x strategy) is solved, checked and simulated in
a worker process. Only the parent writes `runs.csv` (`poetsim.runs.RunsFile`): one row per
finished point, so that a sweep killed at any moment keeps every row it had; `--resume` skips
exactly the points whose key is already there.
An infeasible or failed point is a row with its status and a one-line reason, never a crash.
"""

import os
import re
import time
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from multiprocessing import get_context
from pathlib import Path

import yaml

from poetsim.errors import PoetsimError, UserInputError
from poetsim.pipeline import problem_for_point, result_row, run_strategy, write_run
from poetsim.runs import ResultRow, RunsFile
from poetsim.scenario import Point, Scenario
from poetsim.status import Status


@dataclass(frozen=True)
class PointJob:
    """What a worker needs to run one point: picklable, no open files or solver state."""

    scenario: Scenario
    point: Point
    directory: Path
    time_limit_s: float
    threads: int


def point_slug(point: Point) -> str:
    """A folder name for a point's schedule and trace, unique per key."""
    text = f"{point.model_key}_{point.platform_key}_ram{point.ram.key}_rt{point.runtime_x!r}x_{point.strategy}"
    return re.sub(r"[^A-Za-z0-9_.@-]+", "-", text.replace("%", "pct"))


def point_fields(job: PointJob) -> dict:
    """The fields of a point's row that name it."""
    point = job.point
    return {"scenario": job.scenario.name, "point_key": point.key, "model": point.model_key,
            "platform": point.platform_key, "ram": str(point.ram), "runtime_x": point.runtime_x,
            "strategy": point.strategy}


def run_point(job: PointJob) -> ResultRow:
    """Solve, check and simulate one point; always returns a row, whatever went wrong."""
    point = job.point
    start = time.perf_counter()
    fields = point_fields(job)
    try:
        problem = problem_for_point(job.scenario, point)
        run = run_strategy(problem, point.strategy, job.scenario.solver, job.time_limit_s, simulate=True,
                           threads=job.threads)
        row = result_row(run, **fields)
        if run.schedule is not None:
            write_run(run, job.directory / "points" / point_slug(point), row)
    except PoetsimError as exc:
        row = ResultRow(**fields, status=Status.FAILED, message=_one_line(str(exc)))
    except Exception as exc:  # noqa: BLE001 - a bug in one point must not end the sweep
        where = traceback.extract_tb(exc.__traceback__)[-1]
        row = ResultRow(**fields, status=Status.FAILED, message=_one_line(
            f"internal error {type(exc).__name__}: {exc} ({Path(where.filename).name}:{where.lineno})"))
    return _with_wall(row, time.perf_counter() - start)


def _with_wall(row: ResultRow, wall_s: float) -> ResultRow:
    return replace(row, wall_s=wall_s)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def run_sweep(
    scenario: Scenario, directory: Path, jobs: int | None = None, resume: bool = False,
    time_limit_s: float | None = None, executor: str = "process", scheduler: str | None = None,
    on_row: Callable[[ResultRow, int, int], None] | None = None,
) -> Path:
    """Run every point not yet in `directory/runs.csv`; returns the path of runs.csv.

    `on_row(row, done, total)` is called in the parent after each row is written (for progress).
    """
    directory.mkdir(parents=True, exist_ok=True)
    runs = RunsFile(directory / "runs.csv")
    if runs.path.exists() and not resume:
        raise UserInputError(f"{runs.path} exists: pass --resume to continue it, or choose another --out")
    done = runs.done_keys() if resume else set()
    points = [p for p in scenario.points() if p.key not in done]
    total = len(scenario.points())
    workers = max(1, jobs or os.cpu_count() or 1)
    threads = max(1, (os.cpu_count() or 1) // workers)
    todo = [PointJob(scenario, p, directory, time_limit_s or scenario.time_limit_s, threads) for p in points]
    finished = len(done)
    for row in _execute(todo, workers, executor, scheduler):
        runs.append(row)
        finished += 1
        if on_row is not None:
            on_row(row, finished, total)
    return runs.path


def _execute(todo: list[PointJob], workers: int, executor: str, scheduler: str | None) -> Iterable[ResultRow]:
    if not todo:
        return
    if executor == "dask":
        yield from _execute_dask(todo, workers, scheduler)
        return
    if executor != "process":
        raise UserInputError(f"--executor: unknown executor '{executor}' (use process or dask)")
    if workers == 1:
        for job in todo:
            yield run_point(job)
        return
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(run_point, job) for job in todo]
        for future in as_completed(futures):
            yield future.result()


def _execute_dask(todo: list[PointJob], workers: int, scheduler: str | None) -> Iterable[ResultRow]:
    """Send the points to a Dask distributed cluster (a local one without a scheduler address)."""
    from dask.distributed import Client, LocalCluster, as_completed as dask_completed

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
        futures = client.map(run_point, todo, pure=False)
        for future in dask_completed(futures):
            yield future.result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def save_scenario_copy(scenario: Scenario, directory: Path) -> None:
    """Keep the scenario beside its results, so `compare` and `report` can find it again.

    File paths are written relative to `directory`, so the copy works wherever the repository
    (or the results folder with its inputs) is cloned or moved.
    """
    directory.mkdir(parents=True, exist_ok=True)
    data = scenario.model_dump(mode="json", exclude_defaults=True)
    data["model"] = [_relative(m, directory) for m in scenario.model]
    data["platform"] = [_relative(p, directory) for p in scenario.platform]
    data["budgets"] = {"ram": [str(r) for r in scenario.budgets.ram], "runtime": [f"{x:g}x" for x in scenario.budgets.runtime]}
    if "strategies" in data:
        data["strategies"] = list(scenario.strategies)
    (directory / "scenario.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def _relative(spec: str, directory: Path) -> str:
    """A file path relative to `directory`; a name as it is."""
    return os.path.relpath(spec, directory.resolve()) if Path(spec).is_absolute() else spec
