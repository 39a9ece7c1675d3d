"""The public Python API: poetsim's main jobs as functions that return typed results.

    import poetsim

    scenario = poetsim.load_scenario("scenarios/mcu.yaml")
    run = poetsim.solve(scenario, platform="nrf52840", ram="70%", runtime="1.5x", strategy="hybrid")
    print(run.status, run.checked.total_j)           # Status.OPTIMAL, joules of one iteration
    run = poetsim.simulate(scenario, platform="nrf52840", ram="70%", strategy="hybrid")
    print(run.simulated.makespan_s)
    result = poetsim.sweep(scenario, "build/mcu", jobs=2)
    print(result.rows[0].point_key, result.rows[0].status)

The command line is a thin layer over these functions; they never print. Options left out take
the scenario's value; where the scenario lists several, the first is used and the returned
choice says so in its `notes`.
"""

import csv
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from poetsim import strategies
from poetsim.analysis import COMPARE_BASELINES
from poetsim.errors import ScheduleError, UserInputError, parsed
from poetsim.folders import StudyFolder
from poetsim.inputs.files import check_input_file, check_output_dir
from poetsim.inputs.scenario import FILE_SUFFIXES, Point, Scenario, above_platform_ram, load_scenario, source_key
from poetsim.pipeline import Run, baseline_starts, load_run, require_schedule, run_strategy, write_run
from poetsim.runs import ResultRow
from poetsim.schedule.checker import check_made_for
from poetsim.schedule.formats import SCHEDULE_FILES, load_schedule
from poetsim.schedule.model import Schedule, Timing
from poetsim.schedule.problem import Problem, build_problem
from poetsim.sweeps.dask_pool import NO_WORKER_WAIT_S
from poetsim.sweeps.runner import plan_sweep, run_sweep
from poetsim.units import RamSpec, number_text, parse_ram, parse_runtime

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "Choice",
    "StrategyComparison",
    "SweepResult",
    "choose",
    "compare",
    "default_out",
    "load_scenario",
    "require_schedule",
    "simulate",
    "solve",
    "sweep",
]

#: Where sweeps and simulations write unless told otherwise: never over the shipped results/.
BUILD_DIR = Path("build")


@dataclass(frozen=True)
class Choice:
    """One point of a scenario picked for `solve` or `simulate`, and what was assumed to pick it."""

    scenario: Scenario
    problem: Problem
    strategy: str
    notes: tuple[str, ...]
    point: Point

    def row_names(self) -> dict[str, str]:
        """The fields that name the point in a result row: its scenario and its point_key, as a sweep writes them."""
        return {"scenario": self.scenario.name, "point_key": self.point.key}


@dataclass(frozen=True)
class SweepResult:
    """A finished (or resumed) sweep: its folder, its runs.csv, the rows of its points and the others.

    `rows` are those of the scenario's points, in runs.csv's order; `others` the rows runs.csv
    holds besides them (the keep-all and checkpoint-sqrt rows `compare` adds).
    """

    directory: Path
    runs_csv: Path
    rows: tuple[ResultRow, ...]
    others: tuple[ResultRow, ...] = ()

    def counts(self) -> dict[str, int]:
        """How many of the points' rows have each status."""
        found: dict[str, int] = {}
        for row in self.rows:
            found[row.status.value] = found.get(row.status.value, 0) + 1
        return dict(sorted(found.items()))


@dataclass(frozen=True)
class StrategyComparison:
    """Strategies side by side (`poetsim.analysis.results.headline`), and the files written from it."""

    directory: Path
    table: "pd.DataFrame"
    csv_path: Path
    text_path: Path


def _scenario(scenario: Scenario | str | Path) -> Scenario:
    return scenario if isinstance(scenario, Scenario) else load_scenario(scenario)


def with_batch_size(scenario: Scenario, batch_size: int | None) -> tuple[Scenario, tuple[str, ...]]:
    """The scenario with its batch size replaced, and a note for each graph file it cannot change."""
    if batch_size is None:
        return scenario, ()
    if batch_size < 1:
        raise UserInputError(f"--batch-size: must be at least 1, got {batch_size}")
    fixed = [m for m in scenario.model if m.endswith(FILE_SUFFIXES)]
    notes = tuple(
        f"--batch-size {batch_size} does not apply to graph file {Path(m).name}, which fixes its own batch" for m in fixed
    )
    return scenario.model_copy(update={"batch_size": batch_size}), notes


def default_out(scenario: Scenario) -> Path:
    """Where a sweep of `scenario` writes by default: build/<scenario name>/."""
    return BUILD_DIR / scenario.name


def choose(
    scenario: Scenario | str | Path,
    *,
    model: str | None = None,
    platform: str | None = None,
    ram: RamSpec | str | None = None,
    runtime: float | str | None = None,
    strategy: str | None = None,
    timing: Timing | str | None = None,
    batch_size: int | None = None,
    saved: bool = False,
) -> Choice:
    """The problem and strategy of one point: the options given, else the scenario's values.

    A model or platform given here is a zoo or shipped name, or a file path relative to the
    working directory (a scenario's own paths are relative to the scenario file). `saved`: the
    point replays a saved schedule, and its strategy is `strategies.SAVED`.
    """
    scenario, _ = with_batch_size(_scenario(scenario), batch_size)
    noted: list[str] = []

    def pick(values: tuple, given, label: str, show=str):
        if given is not None:
            return given
        if len(values) > 1:
            noted.append(
                f"the scenario lists {len(values)} values for {label}; using the first, {show(values[0])} "
                f"(pass --{label} to choose)"
            )
        return values[0]

    chosen_ram = parsed(parse_ram, ram, "--ram") if isinstance(ram, (str, int, float)) else ram
    chosen_runtime = parsed(parse_runtime, runtime, "--runtime") if isinstance(runtime, str) else runtime
    chosen_timing = parsed(Timing.of, timing, "--timing") if timing is not None else scenario.timing
    if saved and strategy is not None:
        raise UserInputError("--strategy: a saved schedule is replayed as it is; leave --strategy out (or --schedule, to solve)")
    name = strategies.SAVED if saved else pick(scenario.strategies, strategy, "strategy")
    if not saved:
        parsed(strategies.known, name, "--strategy")
    chosen_model = pick(scenario.model, _file_or_name(model, "--model"), "model", _show_source)
    if chosen_model.endswith(FILE_SUFFIXES) and (batch_size is not None or "batch_size" in scenario.model_fields_set):
        stated = f"--batch-size {batch_size}" if batch_size is not None else f"the scenario's batch_size {scenario.batch_size}"
        noted.append(f"{stated} does not apply to graph file {Path(chosen_model).name}, which fixes its own batch")
    chosen_platform = pick(scenario.platform, _file_or_name(platform, "--platform"), "platform", _show_source)
    point = Point(
        scenario.name,
        chosen_model,
        chosen_platform,
        pick(scenario.budgets.ram, chosen_ram, "ram"),
        pick(scenario.budgets.runtime, chosen_runtime, "runtime", lambda x: f"{number_text(x)}x"),
        name,
        source_key(chosen_model),
        source_key(chosen_platform),
    )
    problem = build_problem(
        chosen_model,
        chosen_platform,
        point.ram,
        point.runtime_x,
        chosen_timing,
        scenario.batch_size,
        scenario.input_size,
        scenario.seq_len,
        scenario.flops_per_cost_unit,
        scenario.reserve_training_state,
    )
    total = problem.budgets.ram_bytes + problem.reserved_bytes
    if total > problem.platform.ram_bytes:
        raise UserInputError(f"the point's RAM budget: {above_platform_ram(point.ram, total, chosen_model, problem.platform)}")
    return Choice(scenario, problem, name, tuple(noted), point)


def _file_or_name(spec: str | None, option: str) -> str | None:
    """A path given on the command line, made absolute; a name as it is."""
    if spec is None or not spec.endswith(FILE_SUFFIXES):
        return spec
    path = Path(spec)
    if not path.is_file():
        raise UserInputError(f"{option}: no such file {spec}")
    return str(path.resolve())


def _show_source(spec: str) -> str:
    return Path(spec).name if spec.endswith(FILE_SUFFIXES) else spec


def solve(
    scenario: Scenario | str | Path,
    *,
    model: str | None = None,
    platform: str | None = None,
    ram: RamSpec | str | None = None,
    runtime: float | str | None = None,
    strategy: str | None = None,
    timing: Timing | str | None = None,
    batch_size: int | None = None,
    solver: str | None = None,
    time_limit_s: float | None = None,
    starts: Sequence[Schedule] = (),
    on_progress: Callable | None = None,
    choice: Choice | None = None,
    effort: float | None = None,
) -> Run:
    """Find the schedule of one point (the MILP for solved strategies, the rule for baselines), checked.

    A solved strategy starts from `starts` (schedules of the same graph, such as another
    strategy's `schedule.json`) and from every baseline whose moves it allows, so it is never
    reported worse than any of them that fits. Returns the run whatever its status
    (`run.status`, `run.message`); `require_schedule` turns a run without a schedule into the
    matching error.
    """
    choice = choice or choose(
        scenario,
        model=model,
        platform=platform,
        ram=ram,
        runtime=runtime,
        strategy=strategy,
        timing=timing,
        batch_size=batch_size,
    )
    starts, effort, limit_s = _with_baselines(choice, starts, effort, time_limit_s)
    return run_strategy(
        choice.problem,
        choice.strategy,
        solver or choice.scenario.solver,
        limit_s,
        simulate=False,
        starts=starts,
        on_progress=on_progress,
        effort=effort,
    )


def _with_baselines(
    choice: Choice,
    starts: Sequence[Schedule],
    effort: float | None,
    time_limit_s: float | None,
) -> tuple[tuple[Schedule, ...], float, float]:
    """`starts` plus the allowed baselines' schedules, the effort, and the wall-clock guard.

    The effort and the guard are the ones given, else the scenario's (`Scenario.with_limits`);
    the guard is the whole call's, so the time the baselines took comes off it.
    """
    scenario = choice.scenario.with_limits(effort, time_limit_s)
    began = time.perf_counter()
    found = tuple(starts) + baseline_starts(choice.problem, choice.strategy)
    return found, scenario.effort, max(scenario.time_limit_s - (time.perf_counter() - began), 0.1)


def load_starts(paths: Sequence[Path], problem: Problem) -> tuple[Schedule, ...]:
    """Saved schedules (schedule.json or schedule.bin) as starts for `problem`; each must be of its graph."""
    found = []
    for path in paths:
        check_input_file(path, "--start", SCHEDULE_FILES)
        schedule = load_schedule(path)
        try:
            check_made_for(schedule, problem.graph)
        except ScheduleError as exc:
            raise UserInputError(f"--start {path}: {exc}") from None
        found.append(schedule)
    return tuple(found)


def simulate(
    scenario: Scenario | str | Path,
    *,
    model: str | None = None,
    platform: str | None = None,
    ram: RamSpec | str | None = None,
    runtime: float | str | None = None,
    strategy: str | None = None,
    timing: Timing | str | None = None,
    batch_size: int | None = None,
    solver: str | None = None,
    time_limit_s: float | None = None,
    schedule: Path | None = None,
    on_progress: Callable | None = None,
    choice: Choice | None = None,
    mode: str = "barrier",
    effort: float | None = None,
) -> Run:
    """Solve (or load `schedule`, a saved schedule.json or .bin) and replay the schedule on the simulated device.

    The solve starts from every baseline the strategy allows, as `solve` does.

    `mode` is the replay mode: `barrier` (a stage ends when its computes and transfers end, the
    device the `overlap` timing model describes) or `free-running` (transfers run on into later
    stages).
    """
    choice = choice or choose(
        scenario,
        model=model,
        platform=platform,
        ram=ram,
        runtime=runtime,
        strategy=strategy,
        timing=timing,
        batch_size=batch_size,
        saved=schedule is not None,
    )
    if schedule is not None:
        return load_run(choice.problem, Path(schedule), mode=mode, timing_stated=timing is not None)
    starts, effort, limit_s = _with_baselines(choice, (), effort, time_limit_s)
    return run_strategy(
        choice.problem,
        choice.strategy,
        solver or choice.scenario.solver,
        limit_s,
        simulate=True,
        starts=starts,
        on_progress=on_progress,
        mode=mode,
        effort=effort,
    )


def simulate_out(choice: Choice, run: Run, mode: str = "barrier") -> Path:
    """Where `simulate` writes by default: build/<scenario>/simulate/<point>/."""
    problem = choice.problem
    slug = (
        f"{problem.graph.name}_{problem.platform.name}_ram{problem.ram.key}_rt{number_text(problem.runtime_x)}x_"
        f"{run.strategy}_{problem.timing.value}_{mode}"
    )
    return default_out(choice.scenario) / "simulate" / _safe(slug)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.@-]+", "-", text.replace("%", "pct"))


def save_run(run: Run, directory: Path) -> list[Path]:
    """Write a run's result row, schedule and (if simulated) trace into `directory`, in place of an earlier run's files.

    Returns the files written (`pipeline.write_run`).
    """
    return write_run(run, Path(directory))


def sweep(
    scenario: Scenario | str | Path,
    out: str | Path | None = None,
    *,
    jobs: int | None = None,
    resume: bool = False,
    time_limit_s: float | None = None,
    executor: str | None = None,
    scheduler: str | None = None,
    batch_size: int | None = None,
    on_row: Callable[[ResultRow, int, int], None] | None = None,
    no_worker_wait_s: float = NO_WORKER_WAIT_S,
    effort: float | None = None,
) -> SweepResult:
    """Run every point of the scenario's grid into `out` (default build/<scenario name>/).

    Every option and path is checked before anything is written; rows are appended to runs.csv
    as points finish, so a stopped sweep keeps them and `resume=True` runs exactly the rest.
    `executor` is `process` (local worker processes) or `dask`; a `scheduler` address (a Dask
    cluster's, `tcp://HOST:PORT`) implies `dask` (docs/scale-out.md).
    """
    scenario, _ = with_batch_size(_scenario(scenario), batch_size)
    directory = Path(out) if out is not None else default_out(scenario)
    runs_csv = run_sweep(
        scenario,
        directory,
        jobs,
        resume,
        time_limit_s,
        executor,
        scheduler,
        on_row=on_row,
        no_worker_wait_s=no_worker_wait_s,
        effort=effort,
    )
    keys = {point.key for point in scenario.points()}
    rows = read_rows(runs_csv)
    return SweepResult(
        directory, runs_csv, tuple(r for r in rows if r.point_key in keys), tuple(r for r in rows if r.point_key not in keys)
    )


def read_rows(runs_csv: Path) -> tuple[ResultRow, ...]:
    """Every row of a runs.csv as a ResultRow."""
    with Path(runs_csv).open(newline="", encoding="utf-8") as handle:
        return tuple(
            ResultRow.from_dict(record, where=f"{runs_csv}, line {n + 2}") for n, record in enumerate(csv.DictReader(handle))
        )


def results_scenario(target: str | Path) -> tuple[Scenario, Path]:
    """The scenario of a results folder (its scenario.yaml copy), and the folder."""
    directory = StudyFolder.holding(target).path
    if directory.suffix in (".yaml", ".yml"):
        scenario = load_scenario(directory)
        return scenario, default_out(scenario)
    copy = StudyFolder(directory).scenario_yaml
    if not copy.is_file():
        raise UserInputError(f"{directory}: not a sweep's results folder (no scenario.yaml; run `poetsim sweep` first)")
    return load_scenario(copy), directory


def compare(
    target: str | Path,
    *,
    jobs: int | None = None,
    time_limit_s: float | None = None,
    on_row: Callable[[ResultRow, int, int], None] | None = None,
    effort: float | None = None,
) -> StrategyComparison:
    """Strategies side by side for a sweep's results (a folder, or a scenario: its default folder).

    Runs the keep-all and checkpoint-sqrt baselines (no solver) and any point the folder lacks,
    then writes compare.csv (every number) and compare.txt (the table as text) beside runs.csv.
    """
    scenario, directory = results_scenario(target)
    wanted = tuple(dict.fromkeys(scenario.strategies + COMPARE_BASELINES))
    scenario = scenario.model_copy(update={"strategies": wanted})
    plan = plan_sweep(scenario, directory, resume=True)
    if not any(strategies.get(point.strategy).kind is strategies.Kind.SOLVED for point in plan.todo):
        effort = time_limit_s = None  # nothing to solve: the folder's effort stands, as its rows were made
    run_sweep(scenario, directory, jobs, True, time_limit_s, on_row=on_row, effort=effort)
    from poetsim.analysis.results import headline, headline_text, load_results

    table = headline(load_results(directory))
    csv_path, text_path = StudyFolder(directory).compare_csv, StudyFolder(directory).compare_txt
    table.to_csv(csv_path, index=False)
    text_path.write_text(headline_text(table) + "\n", encoding="utf-8")
    return StrategyComparison(directory, table, csv_path, text_path)


def check_out(path: Path | None, option: str = "--out") -> None:
    """UserInputError unless `path` can be used as an output folder (see `sweep.check_output_dir`)."""
    if path is not None:
        check_output_dir(path, option)
