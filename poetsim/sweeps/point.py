"""One point of a sweep as a worker runs it: solved, checked and simulated, then sent back whole.

A worker computes and returns; it writes nothing the sweep keeps. The point's files (schedule,
its binary form, result, trace, summary) travel back with its row in a `PointOutcome`, and the
sweep's client alone writes them and the row (`poetsim.sweeps.folder`, `poetsim.runs`): so a
cluster needs no shared file system, nothing is written once the client has stopped, and a
point is recorded once however often a worker computes it. For the same reasons everything a
point reads comes with its job (`PointJob`): the schedules it may start from, its twin's
answer, and the bytes of its graph and platform files.
"""

import hashlib
import os
import tempfile
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

from poetsim.errors import NotApplicableError, PoetsimError, StorageError
from poetsim.inputs.scenario import Point, Scenario
from poetsim.pipeline import Run, adopt_schedule, problem_fields, problem_for_point, result_row, run_strategy, write_run
from poetsim.runs import ResultRow
from poetsim.schedule.model import Schedule
from poetsim.schedule.problem import Problem
from poetsim.status import Status
from poetsim.sweeps.grid import point_fields
from poetsim.tolerances import same


@dataclass(frozen=True)
class InputFile:
    """A graph or platform file of a point: the path the scenario names, and its bytes as the client read them."""

    path: str
    data: bytes


@dataclass(frozen=True)
class PointJob:
    """What a worker needs to run one point: picklable, and nothing it must read from the results folder.

    `starts` are the schedules of the strategies at the same grid cell that this point's solve
    may start from (`poetsim.sweeps.grid.prerequisites`). `twin` is the row of an earlier point
    whose problem is this one's (`poetsim.sweeps.grid.twin_points`) and `twin_schedule` that
    point's schedule: the point then takes that solve's answer. `inputs` are the point's graph
    and platform files, for a worker on a machine where those paths hold nothing (or something
    else).
    """

    scenario: Scenario
    point: Point
    time_limit_s: float
    threads: int
    starts: tuple[Schedule, ...] = ()
    twin: ResultRow | None = None
    twin_schedule: Schedule | None = None
    inputs: tuple[InputFile, ...] = ()


@dataclass(frozen=True)
class PointOutcome:
    """A point's row and the files of its folder, as (name, bytes); no files when it has no schedule."""

    row: ResultRow
    files: tuple[tuple[str, bytes], ...] = ()


def input_files(scenario: Scenario) -> dict[str, InputFile]:
    """The scenario's graph and platform files, read once by the client.

    Paths only: zoo and shipped names need none. A file the client cannot read is left out, and
    a worker then fails on it as the client would.
    """
    found = {}
    for spec in (*scenario.model, *scenario.platform):
        if Path(spec).is_absolute():
            try:
                found[spec] = InputFile(spec, Path(spec).read_bytes())
            except OSError:
                continue
    return found


def run_point(job: PointJob) -> PointOutcome:
    """Solve, check and simulate one point; a row whatever went wrong with the point itself.

    What goes wrong with the machine is not the point's result: an OSError (disk full,
    read-only, permissions) anywhere is raised as StorageError, so the sweep stops and the
    point is not recorded.
    """
    start = time.perf_counter()
    fields = point_fields(job.scenario, job.point)
    try:
        point = _with_local_inputs(job.point, job.inputs)
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
                starts=job.starts,
                effort=job.scenario.effort,
            )
            row = result_row(run, **fields)
    except OSError as exc:
        raise StorageError.from_os_error(exc, "use") from None
    except NotApplicableError as exc:  # raised once the problem is built: its fields are known
        row = ResultRow(**fields, status=Status.NOT_APPLICABLE, message=_one_line(str(exc)))
        row, run = replace(row, **problem_fields(problem)), None
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
    files = _files(run, row) if run is not None and run.schedule is not None else ()
    return PointOutcome(replace(row, wall_s=time.perf_counter() - start), files)


def _files(run: Run, row: ResultRow) -> tuple[tuple[str, bytes], ...]:
    """The point folder's files, as `write_run` makes them, in a scratch folder of this worker's own.

    `write_run` is the one writer of a point's files (the client's grid pass uses it too), so
    a folder written from these bytes is the folder a local run writes, byte for byte.
    """
    try:
        with tempfile.TemporaryDirectory(prefix="poetsim-point-") as scratch:
            write_run(run, Path(scratch), row)
            return tuple((path.name, path.read_bytes()) for path in sorted(Path(scratch).iterdir()) if path.is_file())
    except OSError as exc:
        raise StorageError.from_os_error(exc, "write") from None


def _with_local_inputs(point: Point, inputs: tuple[InputFile, ...]) -> Point:
    """`point` loading its graph and platform from paths that hold the client's bytes on this machine.

    The scenario's own path when it holds them (one machine, or a shared file system: messages
    name the user's file); else a copy in this machine's temporary folder, named by content.
    """
    local = {item.path: _local_path(item) for item in inputs}
    return replace(point, model=local.get(point.model, point.model), platform=local.get(point.platform, point.platform))


def _local_path(item: InputFile) -> str:
    try:
        if Path(item.path).read_bytes() == item.data:
            return item.path
    except OSError:
        pass
    digest = hashlib.sha256(item.data).hexdigest()[:16]
    copy = Path(tempfile.gettempdir()) / f"poetsim-inputs-{os.getuid()}" / digest / Path(item.path).name
    if not copy.is_file() or copy.read_bytes() != item.data:
        copy.parent.mkdir(parents=True, exist_ok=True)
        partial = copy.with_name(f".{copy.name}.{os.getpid()}")
        partial.write_bytes(item.data)
        os.replace(partial, copy)  # whole: another worker of this machine may read it meanwhile
    return str(copy)


def _twin_run(job: PointJob, problem: Problem, fields: dict) -> tuple[Run, ResultRow] | None:
    """The run and row of a point that takes its twin's answer (`twin_points`).

    None when it must solve on its own: no twin, the twin failed, or its schedule could not be
    read or does not cost the same here (which would mean the two problems differ after all).
    """
    twin = job.twin
    if twin is None or twin.status is Status.FAILED:
        return None
    schedule = job.twin_schedule
    if twin.status.has_schedule and schedule is None:
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
        work=0.0,
        bound_j=twin.bound_j,
        gap_total=twin.gap_total,
        gap_overhead=twin.gap_overhead,
    )
    if schedule is not None and not _same_energy(row.predicted_total_j, twin.predicted_total_j):
        return None
    return run, row


def _same_energy(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and same(a, b)


def _one_line(text: str) -> str:
    return " ".join(text.split())
