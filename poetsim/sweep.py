"""Sweeps: run every point of a scenario's grid, in parallel, keeping every finished row.

Each point (model x platform x RAM x runtime x strategy) is solved, checked and simulated in
a worker process. Only the parent writes `runs.csv`: one row per finished point, appended with a
single `write` on a file opened in append mode and flushed to disk at once, so that a sweep
killed at any moment keeps every row it had; `--resume` skips exactly the points whose key is
already there (a torn last line, if the kill came mid-write, is dropped and that point rerun).
An infeasible or failed point is a row with its status and a one-line reason, never a crash.
"""

import csv
import io
import os
import re
import time
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

from poetsim.errors import PoetsimError, UserInputError
from poetsim.scenario import Point, Scenario

#: Columns of runs.csv: the point's parameters, then what `pipeline.result_row` reports.
POINT_COLUMNS = ("scenario", "point_key", "model", "platform", "ram", "runtime_x", "strategy")
RESULT_COLUMNS = (
    "status", "message", "model_name", "timing", "ram_budget_bytes", "deadline_s", "reserved_bytes",
    "keep_all_peak_bytes", "keep_all_energy_j", "solver", "build_s", "solve_s", "gap_total",
    "gap_overhead", "bound_j", "overhead_pct",
    "predicted_total_j", "predicted_compute_j", "predicted_recompute_j", "predicted_page_in_j",
    "predicted_page_out_j", "predicted_static_j", "predicted_peak_ram_bytes", "predicted_runtime_s",
    "predicted_recomputations", "predicted_page_ins", "predicted_page_outs",
    "simulated_total_j", "simulated_compute_j", "simulated_recompute_j", "simulated_page_in_j",
    "simulated_page_out_j", "simulated_static_j", "simulated_peak_ram_bytes", "simulated_runtime_s",
    "simulated_recomputations", "simulated_page_ins", "simulated_page_outs", "simulated_stall_s",
    "simulated_over_budget", "simulated_over_deadline", "schedule_bytes", "wall_s",
)
COLUMNS = POINT_COLUMNS + RESULT_COLUMNS


@dataclass(frozen=True)
class PointJob:
    """What a worker needs to run one point: picklable, no open files or solver state."""

    scenario: Scenario
    point: Point
    directory: Path
    time_limit_s: float
    threads: int


def point_slug(point: Point) -> str:
    """A folder name for a point's schedule and trace."""
    text = f"{Path(point.model).stem}_{Path(point.platform).stem}_ram{point.ram}_rt{point.runtime_x:g}x_{point.strategy}"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text.replace("%", "pct"))


def run_point(job: PointJob) -> dict:
    """Solve, check and simulate one point; always returns a row, whatever went wrong."""
    from poetsim.pipeline import problem_for_point, result_row, run_strategy, write_run

    point = job.point
    start = time.perf_counter()
    row = {"scenario": job.scenario.name, "point_key": point.key, "model": point.model,
           "platform": point.platform, "ram": str(point.ram), "runtime_x": point.runtime_x, "strategy": point.strategy}
    try:
        problem = problem_for_point(job.scenario, point)
        run = run_strategy(problem, point.strategy, job.scenario.solver, job.time_limit_s, simulate=True,
                           threads=job.threads)
        result = result_row(run)
        if run.schedule is not None:
            write_run(run, job.directory / "points" / point_slug(point))
    except PoetsimError as exc:
        result = {"status": "failed", "message": _one_line(str(exc))}
    except Exception as exc:  # noqa: BLE001 - a bug in one point must not end the sweep
        where = traceback.extract_tb(exc.__traceback__)[-1]
        result = {"status": "failed", "message": _one_line(f"internal error {type(exc).__name__}: {exc} "
                                                           f"({Path(where.filename).name}:{where.lineno})")}
    result["model_name"] = result.pop("model", None)
    for key in ("platform", "ram", "runtime_x", "strategy"):
        result.pop(key, None)
    row.update(result)
    row["wall_s"] = time.perf_counter() - start
    return row


def _one_line(text: str) -> str:
    return " ".join(text.split())


class RunsFile:
    """runs.csv: append-only, one complete row per write, readable while the sweep runs."""

    def __init__(self, path: Path):
        self.path = path

    def done_keys(self) -> set[str]:
        """Keys of the rows already on disk (after dropping a torn last line)."""
        self._drop_torn_tail()
        if not self.path.exists():
            return set()
        with self.path.open(newline="") as handle:
            return {row["point_key"] for row in csv.DictReader(handle)}

    def append(self, row: dict) -> None:
        """Write one row (and the header for a new file) in a single write, then fsync."""
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
        new = not self.path.exists() or self.path.stat().st_size == 0
        if new:
            writer.writeheader()
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in COLUMNS})
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, buffer.getvalue().encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def _drop_torn_tail(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            self.path.write_bytes(data[: data.rfind(b"\n") + 1])


def run_sweep(
    scenario: Scenario, directory: Path, jobs: int | None = None, resume: bool = False,
    time_limit_s: float | None = None, executor: str = "process", scheduler: str | None = None,
    on_row: Callable[[dict, int, int], None] | None = None,
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


def _execute(todo: list[PointJob], workers: int, executor: str, scheduler: str | None) -> Iterable[dict]:
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


def _execute_dask(todo: list[PointJob], workers: int, scheduler: str | None) -> Iterable[dict]:
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
    """Keep the scenario beside its results, so `compare` and `report` can find it again."""
    import yaml

    directory.mkdir(parents=True, exist_ok=True)
    data = scenario.model_dump(mode="json", exclude_defaults=True)
    data["model"] = list(scenario.model)
    data["platform"] = list(scenario.platform)
    data["budgets"] = {"ram": [str(r) for r in scenario.budgets.ram], "runtime": [f"{x:g}x" for x in scenario.budgets.runtime]}
    if "strategies" in data:
        data["strategies"] = list(scenario.strategies)
    (directory / "scenario.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
