"""The closed loop: import a model, profile the host, solve for budgets, execute, compare.

`predict` states what poetsim's model says a schedule costs on a profile: the checker's peak
RAM and runtime under the schedule's timing model, and the bytes its page-outs, page-ins and
batch reads move. `validate_run` makes the schedules (poetsim.pipeline.run_strategy: every
schedule has passed the independent checker), runs each for real (poetsim.pytorch.executor)
and sets prediction and measurement side by side, one `ValidationRow` per budget and strategy,
written to `result.json`, `validation.csv` and a chart.
"""

import json
import statistics
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from poetsim import strategies as registry
from poetsim.errors import NotApplicableError
from poetsim.graphs.graph import TrainingGraph
from poetsim.inputs.profiles import Platform
from poetsim.pipeline import run_strategy
from poetsim.schedule.checker import check_schedule
from poetsim.schedule.costs import INPUT_OP, CostTable, node_costs
from poetsim.schedule.model import Compute, PageIn, PageOut, Schedule, Timing
from poetsim.schedule.problem import make_problem
from poetsim.units import RamSpec, limits_or, parse_ram

if TYPE_CHECKING:  # the capture and the executor import torch; this module is imported without it
    from poetsim.pytorch.capturing import Capture
    from poetsim.pytorch.executor import Execution


@dataclass(frozen=True)
class Prediction:
    """What poetsim's model says a schedule costs: peak RAM, time and bytes moved."""

    peak_ram_bytes: int
    runtime_s: float
    compute_s: float
    bytes_written: int
    bytes_read: int
    batch_bytes_read: int


def predict(graph: TrainingGraph, schedule: Schedule, costs: CostTable, timing: Timing) -> Prediction:
    """The checker's figures of `schedule` under `timing`, and the bytes it moves to and from storage."""
    figures = check_schedule(schedule, graph, costs, timing)
    written = read = batch = 0
    compute_s = 0.0
    for _, ins in schedule.instructions():
        size = graph.nodes[ins.node].output_bytes
        if isinstance(ins, PageOut):
            written += size
        elif isinstance(ins, PageIn):
            read += size
        elif isinstance(ins, Compute):
            compute_s += costs.compute_s[ins.node]
            if graph.nodes[ins.node].op == INPUT_OP:
                batch += size
    return Prediction(int(figures.peak_ram_bytes), figures.runtime_s, compute_s, written, read, batch)


@dataclass(frozen=True)
class ValidationRow:
    """One budget and strategy: status, prediction, measurement and their differences."""

    strategy: str
    ram: str
    ram_budget_bytes: int
    ram_percent: float | None
    status: str
    message: str = ""
    predicted_runtime_s: float | None = None
    measured_runtime_s: float | None = None
    runtime_difference_pct: float | None = None
    measured_median_s: float | None = None
    measured_spread_pct: float | None = None
    timed_runs: int | None = None
    predicted_compute_s: float | None = None
    measured_compute_s: float | None = None
    predicted_peak_bytes: int | None = None
    measured_peak_bytes: int | None = None
    peak_equal: bool | None = None
    within_budget: bool | None = None
    peak_rss_bytes: int | None = None
    predicted_bytes_written: int | None = None
    measured_bytes_written: int | None = None
    predicted_bytes_read: int | None = None
    measured_bytes_read: int | None = None
    gradients_equal: bool | None = None
    buffers_equal: bool | None = None
    recomputations: int | None = None
    page_outs: int | None = None
    page_ins: int | None = None
    reference_s: float | None = None


@dataclass(frozen=True)
class Validation:
    """The closed loop's result: the rows, and what they were made with."""

    graph_name: str
    platform_name: str
    timing: Timing
    runtime_x: float
    threads: int
    durable: bool
    keep_all_peak_bytes: int
    rows: tuple[ValidationRow, ...] = field(default=())
    profile: Platform | None = field(default=None, repr=False, compare=False)  # the one the predictions used

    def to_dict(self) -> dict:
        """The validation as plain data for result.json: the profile left out, the timing by its name."""
        data = asdict(replace(self, profile=None))
        del data["profile"]
        data["timing"] = Timing(self.timing).value
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Validation":
        """The validation a result.json holds (`to_dict`), without its profile."""
        rows = tuple(ValidationRow(**row) for row in data["rows"])
        return cls(**{**data, "timing": Timing(data["timing"]), "rows": rows})


DEFAULT_RAMS = ("100%", "70%", "50%", "35%")
#: The optimiser's work (units) per solved point when neither an effort nor a time limit is given.
VALIDATE_EFFORT = 2.0
#: The status of a strategy that does not apply to the graph (POFO on a graph that is not a chain).
SKIPPED = "skipped"


@dataclass
class _Point:
    """A budget and strategy with a checked schedule: its prediction and its runs so far."""

    head: dict
    status: str
    schedule: Schedule
    prediction: Prediction
    budget: int
    checked: "Execution"  # the first run: gradients compared, peak and bytes measured
    timed: list["Execution"] = field(default_factory=list)  # the timed rounds' runs


def validate_run(
    capture: "Capture",
    platform: Platform,
    *,
    rams: Iterable[str | RamSpec] = DEFAULT_RAMS,
    strategies: Iterable[str] | None = None,
    runtime_x: float = 2.0,
    timing: Timing = Timing.OVERLAP,
    effort: float | None = None,
    time_limit_s: float | None = None,
    swap_dir: Path = Path("build/swap"),
    threads: int | None = None,
    durable: bool = True,
    solver_threads: int | None = 1,
    repeats: int = 5,
    recalibrate: bool = False,
    on_progress: Callable[[str], object] | None = None,
) -> Validation:
    """Solve, execute and compare every strategy at every RAM budget (see the module docstring).

    Every point is solved and its schedule run once with its gradients checked (that run also
    warms the point's allocations up); then `repeats` rounds run every schedule once more, in
    turn, so that a slow minute of a shared machine falls on all points alike. A point's
    measured time is its fastest timed run, as the host profile's figures are the fastest of
    theirs (poetsim.pytorch.host); the median and the spread are reported beside it. Its peak
    is the largest of all its runs. `on_progress` gets a line of text per step. A strategy that
    does not apply to the graph (POFO on a graph that is not a chain) is skipped with one line
    saying why: its row, at the first budget, has status `skipped`. Each solve does `effort`
    work units (default VALIDATE_EFFORT) within `time_limit_s` (default `units.GUARD_S_PER_UNIT`
    seconds a unit; given alone, it sets the effort to a tenth of it).

    With `recalibrate`, each round also runs the model's keep-all schedule, and the predictions
    use the profile's compute rates re-measured on the fastest of those runs
    (poetsim.pytorch.host.recalibrated): a profile measured minutes before the runs misses how
    the speed of a shared machine drifts meanwhile (docs/pytorch.md). The schedules stay those
    solved with the given profile; `Validation.profile` is the one the predictions used.
    """
    from poetsim.pytorch.executor import default_threads, execute
    from poetsim.pytorch.host import keep_all_schedule, recalibrated

    graph = capture.graph
    threads = threads or default_threads()
    effort_units, guard_s = limits_or(VALIDATE_EFFORT, effort, time_limit_s)
    names = tuple(strategies or registry.names())
    for name in names:
        registry.get(name)
    say = on_progress or (lambda text: None)
    slots: list[ValidationRow | _Point] = []
    skipped: set[str] = set()  # strategies that do not apply to the graph, whatever the budget
    for ram in rams:
        spec = ram if isinstance(ram, RamSpec) else parse_ram(str(ram))
        problem = make_problem(graph, platform, spec, runtime_x, timing)
        budget = problem.budgets.ram_bytes
        for name in names:
            head: dict[str, Any] = dict(strategy=name, ram=str(spec), ram_budget_bytes=budget, ram_percent=spec.percent)
            if name in skipped:
                continue
            try:
                run = run_strategy(
                    problem, name, effort=effort_units, time_limit_s=guard_s, simulate=False, threads=solver_threads
                )
            except NotApplicableError as error:
                skipped.add(name)
                slots.append(ValidationRow(**head, status=SKIPPED, message=str(error)))
                say(f"{name:>16}: skipped, it does not apply to this graph: {str(error).removeprefix(f'{name}: ')}")
                continue
            if not run.ok:
                slots.append(ValidationRow(**head, status=str(run.status.value), message=run.message))
                say(f"{name:>16} {spec}: {run.status.value}: {run.message.removeprefix(f'{run.status.value}: ')}")
                continue
            schedule = run.schedule
            assert schedule is not None  # a run that is ok has a checked schedule
            checked = execute(capture, schedule, swap_dir, timing=timing, durable=durable, budget_bytes=budget, threads=threads)
            prediction = predict(graph, schedule, problem.costs, timing)
            slots.append(_Point(head, str(run.status.value), schedule, prediction, budget, checked))
            say(
                f"{name:>16} {spec}: {run.status.value}, ran once: peak "
                f"{'as predicted' if checked.peak_activation_bytes == prediction.peak_ram_bytes else 'DIFFERENT'}, "
                f"gradients {'bitwise equal' if checked.gradients_equal else 'DIFFERENT'}"
            )
    points = [slot for slot in slots if isinstance(slot, _Point)]
    rounds = max(repeats, 1)
    keep_all = keep_all_schedule(graph) if recalibrate else None
    calibration = _timed_rounds(capture, points, keep_all, rounds, swap_dir, timing, durable, threads, say)
    if calibration:
        fastest = min(calibration, key=lambda r: r.total_s)
        platform = recalibrated(
            platform,
            graph,
            fastest,
            f"the fastest of {rounds} keep-all runs, one in each round of poetsim validate-run's timed runs",
        )
        costs = node_costs(graph, platform)
        for point in points:
            point.prediction = predict(graph, point.schedule, costs, timing)
    rows = tuple(slot if isinstance(slot, ValidationRow) else _row(slot) for slot in slots)
    return Validation(
        graph.name, platform.name, timing, runtime_x, threads, durable, graph.keep_all_peak_bytes, rows, profile=platform
    )


def _timed_rounds(
    capture: "Capture",
    points: list[_Point],
    keep_all: Schedule | None,
    rounds: int,
    swap_dir: Path,
    timing: Timing,
    durable: bool,
    threads: int,
    say: Callable[[str], object],
) -> list["Execution"]:
    """Run every point's schedule once in each of `rounds` rounds; the keep-all runs, if any.

    Each run joins its point's `timed`. With a `keep_all` schedule, each round runs that first,
    and those runs are returned for the recalibration; without one, the list is empty.
    """
    from poetsim.pytorch.executor import execute

    calibration: list[Execution] = []
    if not points:
        say("no schedule to time: every point is infeasible, over its budget or skipped")
        return calibration
    for round_number in range(1, rounds + 1):
        if keep_all is not None:
            calibration.append(
                execute(capture, keep_all, swap_dir, timing=timing, durable=durable, threads=threads, check_gradients=False)
            )
        for point in points:
            point.timed.append(
                execute(
                    capture,
                    point.schedule,
                    swap_dir,
                    timing=timing,
                    durable=durable,
                    budget_bytes=point.budget,
                    threads=threads,
                    check_gradients=False,
                )
            )
        say(f"timed round {round_number} of {rounds}: every schedule ran once")
    return calibration


def _row(point: _Point) -> ValidationRow:
    prediction, checked = point.prediction, point.checked
    runs = [checked, *point.timed]
    fastest = min(point.timed, key=lambda r: r.total_s)
    times = [r.total_s for r in point.timed]
    summary = checked.summary()
    peak = max(r.peak_activation_bytes for r in runs)
    return ValidationRow(
        **point.head,
        status=point.status,
        predicted_runtime_s=prediction.runtime_s,
        measured_runtime_s=fastest.total_s,
        runtime_difference_pct=100.0 * (fastest.total_s / prediction.runtime_s - 1.0) if prediction.runtime_s else None,
        measured_median_s=statistics.median(times),
        measured_spread_pct=100.0 * (max(times) / min(times) - 1.0),
        timed_runs=len(times),
        predicted_compute_s=prediction.compute_s,
        measured_compute_s=fastest.compute_s,
        predicted_peak_bytes=prediction.peak_ram_bytes,
        measured_peak_bytes=peak,
        peak_equal=all(r.peak_activation_bytes == prediction.peak_ram_bytes for r in runs),
        within_budget=peak <= point.budget,
        peak_rss_bytes=max((r.peak_rss_bytes or 0) for r in runs) or None,
        predicted_bytes_written=prediction.bytes_written,
        measured_bytes_written=checked.bytes_written,
        predicted_bytes_read=prediction.bytes_read,
        measured_bytes_read=checked.bytes_read,
        gradients_equal=checked.gradients_equal,
        buffers_equal=checked.buffers_equal,
        recomputations=summary["recomputations"],
        page_outs=summary["page_outs"],
        page_ins=summary["page_ins"],
        reference_s=checked.reference_s,
    )


def write_validation(validation: Validation, directory: Path, chart: bool = True) -> list[Path]:
    """Write result.json, validation.csv and (with `chart`) validation.html/png/svg into `directory`; return the paths.

    The page is written whatever ran; the images only when a schedule ran
    (poetsim.report.validation.save_validation_page).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "result.json").write_text(json.dumps(validation.to_dict(), indent=1) + "\n")
    frame = pd.DataFrame([asdict(row) for row in validation.rows])
    frame.to_csv(directory / "validation.csv", index=False)
    paths = [directory / "result.json", directory / "validation.csv"]
    if chart:
        from poetsim.report.validation import save_validation_page

        paths += save_validation_page(validation, directory)
    return paths
