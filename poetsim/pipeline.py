"""The one module that chains the stages: graph -> costs -> optimise -> check -> simulate -> row.

Every schedule that leaves this module has passed the independent checker
(`poetsim.schedule.checker`), whose figures must equal the optimiser's own within 1e-6 relative;
otherwise the run's status is "invalid" and no schedule is reported.
"""

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from poetsim import optimiser, strategies
from poetsim.errors import InfeasibleBudgetError, InternalError, PoetsimError, ScheduleError, UserInputError, parsed
from poetsim.folders import RunFolder
from poetsim.inputs.scenario import Point, Scenario
from poetsim.optimiser import SolveOutcome
from poetsim.runs import ResultRow
from poetsim.schedule.checker import check_schedule, compare_figures
from poetsim.schedule.formats import encode_binary, load_schedule, save_json, with_node_names
from poetsim.schedule.model import Budgets, Figures, Schedule, Timing
from poetsim.schedule.problem import Problem, build_problem
from poetsim.status import Status
from poetsim.strategies import SAVED, Kind

if TYPE_CHECKING:  # the simulator imports simpy, which a run without simulation does not need
    from poetsim.simulator import SimulationResult

#: Tolerance of the agreement between the optimiser's figures and the checker's.
CHECK_RTOL = 1e-6


@dataclass(frozen=True)
class Run:
    """The outcome of one strategy on one problem, with its checked and simulated figures."""

    problem: Problem
    strategy: str
    status: Status
    message: str
    schedule: Schedule | None = None
    predicted: Figures | None = None  # the optimiser's own figures (baselines: the checker's)
    checked: Figures | None = None
    keep_all: Figures | None = None
    solve: SolveOutcome | None = None
    simulated: "SimulationResult | None" = None

    @property
    def ok(self) -> bool:
        """Whether the run has a checked schedule within the budgets."""
        return self.checked is not None and self.status.has_schedule


def problem_for_point(scenario: Scenario, point: Point) -> Problem:
    """The problem of one grid point of a scenario."""
    return build_problem(
        point.model,
        point.platform,
        point.ram,
        point.runtime_x,
        scenario.timing,
        scenario.batch_size,
        scenario.input_size,
        scenario.seq_len,
        scenario.flops_per_cost_unit,
        scenario.reserve_training_state,
    )


def run_strategy(
    problem: Problem,
    strategy: str,
    solver: str = "highs",
    time_limit_s: float | None = None,
    simulate: bool = True,
    threads: int | None = None,
    starts: Sequence[Schedule] = (),
    on_progress: Callable | None = None,
    mode: str = "barrier",
    effort: float | None = None,
) -> Run:
    """Solve (or build, for a baseline), check and optionally simulate one strategy.

    `starts` are schedules of other strategies at the same point (a sweep passes those whose
    moves this strategy allows); `on_progress` hears from the solver while it works. `mode` is
    the simulator's replay mode (`poetsim.simulator.Mode`): `barrier`, the device that runs the
    `overlap` stage model, or `free-running`. `effort` (work units) and `time_limit_s` (the
    wall-clock guard) bound the solve (`optimise`).
    """
    spec = strategies.get(strategy)
    keep_all_schedule, _ = optimiser.keep_all(problem.graph, problem.costs, problem.timing)
    keep_all_figures = _check(problem, keep_all_schedule, budgets=None)
    if spec.kind is Kind.BASELINE:
        schedule = spec.build(problem)
        figures = _check(problem, schedule, budgets=None)
        over = problem.budgets.overruns(figures)
        if over:
            run = Run(problem, spec.name, Status.OVER_BUDGET, "; ".join(over), None, figures, None, keep_all_figures)
        else:
            run = Run(problem, spec.name, Status.BASELINE, "", schedule, figures, figures, keep_all_figures)
    else:
        outcome = optimiser.optimise(
            problem.graph,
            problem.costs,
            problem.budgets,
            spec.moves,
            problem.timing,
            solver=solver,
            effort=effort,
            time_limit_s=time_limit_s,
            threads=threads,
            starts=starts,
            on_progress=on_progress,
        )
        run = Run(
            problem, spec.name, outcome.status, outcome.message, None, outcome.predicted, None, keep_all_figures, solve=outcome
        )
        if outcome.schedule is not None:
            run = _verified(run, outcome.schedule)
    return _simulated(run, mode) if simulate and run.ok else run


def adopt_schedule(
    problem: Problem,
    strategy: str,
    schedule: Schedule | None,
    message: str,
    mode: str = "barrier",
    status: Status = Status.FEASIBLE,
) -> Run | None:
    """A run of `strategy` whose schedule was found elsewhere, checked here and simulated.

    The schedule comes from another point of a sweep and is checked against this problem's
    budgets; None if the checker refuses it here.

    The status is `status`, `feasible` unless the caller knows better: what proves a schedule
    optimal is the caller's to judge. Without a schedule (a point that shares the solve of
    another whose answer was `infeasible` or `no-solution`) the run has only that status.
    """
    keep_all_schedule, _ = optimiser.keep_all(problem.graph, problem.costs, problem.timing)
    keep_all_figures = _check(problem, keep_all_schedule, budgets=None)
    if schedule is None:
        return Run(problem, strategy, status, message, keep_all=keep_all_figures)
    try:
        checked = _check(problem, schedule, problem.budgets)
    except PoetsimError:
        return None
    run = Run(problem, strategy, status, message, schedule, checked, checked, keep_all_figures)
    return _simulated(run, mode)


def _simulated(run: Run, mode: str) -> Run:
    from poetsim.simulator import simulate as replay

    assert run.schedule is not None
    problem = run.problem
    result = replay(
        run.schedule,
        problem.graph,
        problem.costs,
        problem.platform,
        mode=mode,
        ram_capacity_bytes=problem.ram_capacity_bytes,
        budgets=problem.budgets,
    )
    return replace(run, simulated=result)


def baseline_starts(problem: Problem, strategy: str) -> tuple[Schedule, ...]:
    """The schedules of every baseline whose moves `strategy` allows, as starts for its solve.

    So a solved strategy is never reported worse than a baseline that fits the same budgets
    (Capuchin and POFO included), even outside a sweep. A baseline that cannot be built here
    (POFO on a graph that is not a chain) is skipped: a start is a hint, not a requirement.
    """
    spec = strategies.get(strategy)
    if spec.kind is not Kind.SOLVED:
        return ()
    found = []
    for name in strategies.names(Kind.BASELINE):
        other = strategies.get(name)
        if not spec.moves.allows(other.moves):
            continue
        try:
            found.append(other.build(problem))
        except PoetsimError:
            continue
    return tuple(found)


def _check(problem: Problem, schedule: Schedule, budgets: Budgets | None) -> Figures:
    return check_schedule(schedule, problem.graph, problem.costs, problem.timing, budgets)


def _verified(run: Run, schedule: Schedule) -> Run:
    """Accept a solver's schedule only if the checker agrees with the optimiser's figures."""
    try:
        checked = _check(run.problem, schedule, run.problem.budgets)
    except PoetsimError as exc:
        return replace(run, status=Status.INVALID, message=f"the checker rejected the schedule: {exc}")
    assert run.predicted is not None
    differing = compare_figures(run.predicted, checked, rtol=CHECK_RTOL)
    if differing:
        return replace(
            run, status=Status.INVALID, checked=checked, message=f"checker and optimiser disagree on {', '.join(differing)}"
        )
    return replace(run, schedule=schedule, checked=checked)


def problem_fields(problem: Problem) -> dict[str, Any]:
    """The fields of a result row that the problem alone gives: its graph, timing and budgets."""
    return {
        "model_name": problem.graph.name,
        "timing": problem.timing.value,
        "ram_budget_bytes": problem.budgets.ram_bytes,
        "deadline_s": problem.budgets.runtime_s,
        "reserved_bytes": problem.reserved_bytes,
        "keep_all_peak_bytes": problem.graph.keep_all_peak_bytes,
    }


def result_row(run: Run, **point: object) -> ResultRow:
    """The ResultRow of a run; `point` gives the point's fields (scenario, point_key, model, ...)."""
    problem = run.problem
    solve = run.solve
    figures = run.checked if run.ok else None
    sim = run.simulated
    overhead = None
    if figures is not None and run.keep_all is not None:
        overhead = 100.0 * (figures.total_j / run.keep_all.total_j - 1.0)
    fields: dict = {
        "model": problem.graph.name,
        "platform": problem.platform.name,
        "ram": str(problem.ram),
        "runtime_x": problem.runtime_x,
        "strategy": run.strategy,
        **point,
        "status": run.status,
        "message": run.message,
        **problem_fields(problem),
        "keep_all_energy_j": run.keep_all.total_j if run.keep_all else None,
        "overhead_pct": overhead,
        **ResultRow.figure_columns("predicted", figures),
        **ResultRow.figure_columns("simulated", sim.figures if sim is not None else None),
        "schedule_bytes": len(encode_binary(run.schedule)) if run.schedule is not None else None,
    }
    if solve is not None:
        fields.update(
            solver=solve.solver,
            build_s=solve.build_s,
            solve_s=solve.solve_s,
            work=solve.work,
            bound_j=solve.bound_j,
            gap_total=solve.gap_total,
            gap_overhead=solve.gap_overhead,
        )
    if sim is not None:
        fields.update(
            simulated_stall_s=sim.stall_s,
            simulated_over_budget=sim.over_budget,
            simulated_over_deadline=sim.over_deadline,
            simulated_mode=getattr(sim.mode, "value", sim.mode),
        )
    return ResultRow(**fields)


def write_run(run: Run, directory: Path, row: ResultRow | None = None) -> list[Path]:
    """Save a run's result row, its schedule (JSON and binary) and, if simulated, its trace; return the files written.

    A folder holds one run: the files an earlier run left there (a schedule where this run has
    none, its trace, page or device record) are removed, so that none is read as this run's.
    """
    directory.mkdir(parents=True, exist_ok=True)
    row = row or result_row(run)
    folder = RunFolder(directory)
    for earlier in folder.made_from_a_run():
        earlier.unlink(missing_ok=True)
    folder.result_json.write_text(json.dumps(row.to_dict(), indent=1) + "\n")
    written = [folder.result_json]
    if run.schedule is not None:
        save_json(with_node_names(run.schedule, run.problem.graph), folder.schedule_json)
        folder.schedule_bin.write_bytes(encode_binary(run.schedule))
        written += [folder.schedule_json, folder.schedule_bin]
    if run.simulated is not None:
        from poetsim.simulator import write_trace

        write_trace(run.simulated, directory)
        written += [folder.trace_csv, folder.summary_json]
    return written


def saved_timing(schedule: Schedule, stated: Timing | str | None, path: Path) -> Timing:
    """The timing model a saved schedule runs under: its own; UserInputError if `stated` (--timing) names another."""
    own = Timing(schedule.timing)
    if stated is not None and parsed(Timing.of, stated, "--timing") is not own:
        raise UserInputError(
            f"--timing: {path} was made for {own.value} timing, not {Timing(stated).value}; a saved schedule runs "
            "with its own (leave --timing out)"
        )
    return own


def load_run(problem: Problem, schedule_path: Path, mode: str = "barrier", *, timing_stated: bool = False) -> Run:
    """A run from a saved schedule (JSON or binary): checked against the problem within its budgets, then simulated in `mode`.

    The schedule is replayed with the timing model it was made for; with `timing_stated` (the
    caller named the problem's timing), a schedule made for another is refused.
    """
    from poetsim.simulator import simulate

    schedule = load_schedule(schedule_path)
    timing = saved_timing(schedule, problem.timing if timing_stated else None, schedule_path)
    if timing != problem.timing:
        problem = replace(problem, timing=timing)
    try:
        checked = _check(problem, schedule, problem.budgets)
    except ScheduleError as exc:
        raise exc.about(schedule_path) from None
    keep_all_schedule, _ = optimiser.keep_all(problem.graph, problem.costs, problem.timing)
    keep_all_figures = _check(problem, keep_all_schedule, None)
    run = Run(problem, SAVED, Status.CHECKED, f"loaded from {schedule_path}", schedule, checked, checked, keep_all_figures)
    result = simulate(
        schedule,
        problem.graph,
        problem.costs,
        problem.platform,
        mode=mode,
        ram_capacity_bytes=problem.ram_capacity_bytes,
        budgets=problem.budgets,
    )
    return replace(run, simulated=result)


def compare_prediction(run: Run) -> dict:
    """The checked prediction beside the simulation, differences by cause and what breaks: comparison.json.

    Built by `poetsim.simulator.comparison.compare`; the run's strategy and status are added.
    The simulator's own record is summary.json (`write_run`), in one schema whatever the mode.
    """
    from poetsim.simulator.comparison import compare

    if run.checked is None or run.simulated is None:
        raise InternalError("compare_prediction needs a checked and simulated run")
    comparison = compare(run.checked, run.problem.timing, run.simulated, run.problem.budgets)
    return {"strategy": run.strategy, "status": run.status.value, **comparison.to_dict()}


def require_schedule(run: Run) -> Run:
    """The run if it has a checked schedule; otherwise the error its status means (one line)."""
    if run.ok:
        return run
    if run.status is Status.INFEASIBLE:
        message = (
            run.message
            if run.message.startswith("infeasible")
            else (f"infeasible: no {run.strategy} schedule meets the budgets ({run.message})")
        )
        raise InfeasibleBudgetError(message)
    if run.status is Status.OVER_BUDGET:
        raise InfeasibleBudgetError(f"over-budget: the {run.strategy} schedule misses the budgets: {run.message}")
    if run.status is Status.INVALID:
        raise InternalError(f"invalid schedule: {run.message}")
    raise PoetsimError(f"{run.status}: {run.message}")
