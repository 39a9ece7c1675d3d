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
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from poetsim import strategies as registry
from poetsim.checker import check_schedule
from poetsim.costs import INPUT_OP, CostTable
from poetsim.graph import TrainingGraph
from poetsim.pipeline import run_strategy
from poetsim.problem import make_problem
from poetsim.profiles import Platform
from poetsim.schedule import Compute, PageIn, PageOut, Schedule, Timing
from poetsim.units import RamSpec, parse_ram


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

    def to_dict(self) -> dict:
        data = asdict(self)
        data["timing"] = Timing(self.timing).value
        return data


DEFAULT_RAMS = ("100%", "70%", "50%", "35%")


def validate_run(capture, platform: Platform, *, rams=DEFAULT_RAMS, strategies=None, runtime_x: float = 2.0,
                 timing: Timing = Timing.OVERLAP, time_limit_s: float = 20.0, swap_dir: Path = Path("build/swap"),
                 threads: int | None = None, durable: bool = True, solver_threads: int | None = 1,
                 repeats: int = 3, on_row=None) -> Validation:
    """Solve, execute and compare every strategy at every RAM budget (see the module docstring).

    Each schedule runs `repeats` times; the first run's gradients are checked and its peak
    reported, the measured time is the median of the runs (the machine may be shared).
    """

    from poetsim.pytorch.executor import default_threads, execute

    graph = capture.graph
    threads = threads or default_threads()
    names = tuple(strategies or registry.names())
    for name in names:
        registry.get(name)
    rows = []
    for ram in rams:
        spec = ram if isinstance(ram, RamSpec) else parse_ram(str(ram))
        problem = make_problem(graph, platform, spec, runtime_x, timing)
        budget = problem.budgets.ram_bytes
        for name in names:
            run = run_strategy(problem, name, time_limit_s=time_limit_s, simulate=False, threads=solver_threads)
            head = dict(strategy=name, ram=str(spec), ram_budget_bytes=budget, ram_percent=spec.percent)
            if not run.ok:
                row = ValidationRow(**head, status=str(run.status.value), message=run.message)
            else:
                schedule = run.schedule
                assert schedule is not None  # a run that is ok has a checked schedule
                prediction = predict(graph, schedule, problem.costs, timing)
                results = [execute(capture, schedule, swap_dir, timing=timing, durable=durable,
                                   budget_bytes=budget, threads=threads, check_gradients=attempt == 0)
                           for attempt in range(max(repeats, 1))]
                row = _row(head, str(run.status.value), prediction, results, budget)
            rows.append(row)
            if on_row is not None:
                on_row(row)
    return Validation(graph.name, platform.name, timing, runtime_x, threads, durable, graph.keep_all_peak_bytes, tuple(rows))


def _row(head: dict, status: str, prediction: Prediction, results: list, budget: int) -> ValidationRow:
    result = results[0]
    summary = result.summary()
    total_s = statistics.median(r.total_s for r in results)
    compute_s = statistics.median(r.compute_s for r in results)
    peak = max(r.peak_activation_bytes for r in results)
    return ValidationRow(
        **head, status=status,
        predicted_runtime_s=prediction.runtime_s, measured_runtime_s=total_s,
        runtime_difference_pct=100.0 * (total_s / prediction.runtime_s - 1.0) if prediction.runtime_s else None,
        predicted_compute_s=prediction.compute_s, measured_compute_s=compute_s,
        predicted_peak_bytes=prediction.peak_ram_bytes, measured_peak_bytes=peak,
        peak_equal=all(r.peak_activation_bytes == prediction.peak_ram_bytes for r in results),
        within_budget=peak <= budget, peak_rss_bytes=max((r.peak_rss_bytes or 0) for r in results) or None,
        predicted_bytes_written=prediction.bytes_written, measured_bytes_written=result.bytes_written,
        predicted_bytes_read=prediction.bytes_read, measured_bytes_read=result.bytes_read,
        gradients_equal=result.gradients_equal, buffers_equal=result.buffers_equal,
        recomputations=summary["recomputations"], page_outs=summary["page_outs"], page_ins=summary["page_ins"],
        reference_s=result.reference_s,
    )


def write_validation(validation: Validation, directory: Path, chart: bool = True) -> list[Path]:
    """Write result.json, validation.csv and (with `chart`) validation.html/png into `directory`."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "result.json").write_text(json.dumps(validation.to_dict(), indent=1) + "\n")
    frame = pd.DataFrame([asdict(row) for row in validation.rows])
    frame.to_csv(directory / "validation.csv", index=False)
    paths = [directory / "result.json", directory / "validation.csv"]
    if chart and frame["measured_runtime_s"].notna().any():
        from poetsim.pytorch.chart import save_validation_chart

        paths += save_validation_chart(validation, directory)
    return paths
