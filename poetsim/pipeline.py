"""The one module that chains the stages: graph -> costs -> optimise -> check -> simulate -> row.

Every schedule that leaves this module has passed the independent checker
(`poetsim.checker`), whose figures must equal the optimiser's own within 1e-6 relative;
otherwise the run's status is "invalid" and no schedule is reported.
"""

from dataclasses import dataclass, replace
from pathlib import Path

from poetsim.costs import CostTable, node_costs
from poetsim.errors import PoetsimError
from poetsim.graph import TrainingGraph
from poetsim.graphio import load_graph
from poetsim.profiles import Platform, load_platform
from poetsim.scenario import BASELINES, Point, Scenario, reserved_bytes
from poetsim.schedule import Budgets, Figures, Schedule, Strategy, Timing
from poetsim.units import RamSpec

#: Tolerance of the agreement between the optimiser's figures and the checker's.
CHECK_RTOL = 1e-6


@dataclass(frozen=True)
class Problem:
    """A graph on a platform under resolved budgets: everything a strategy needs."""

    graph: TrainingGraph
    platform: Platform
    costs: CostTable
    budgets: Budgets
    ram: RamSpec
    runtime_x: float
    timing: Timing
    reserved_bytes: int

    @property
    def ram_capacity_bytes(self) -> int:
        """What the simulator may allocate: the platform's RAM less the reserved training state."""
        return self.platform.ram_bytes - self.reserved_bytes


@dataclass(frozen=True)
class Run:
    """The outcome of one strategy on one problem, with its checked and simulated figures."""

    problem: Problem
    strategy: str
    status: str                       # optimal | feasible | infeasible | no-solution | invalid | baseline | failed
    message: str
    schedule: Schedule | None = None
    predicted: Figures | None = None  # the optimiser's own figures (baselines: the checker's)
    checked: Figures | None = None
    keep_all: Figures | None = None
    solve: object | None = None       # poetsim.optimiser.SolveOutcome for solved strategies
    simulated: object | None = None   # poetsim.simulator.SimulationResult when simulated

    @property
    def ok(self) -> bool:
        return self.checked is not None and self.status in ("optimal", "feasible", "baseline")


def build_problem(
    model: str, platform: str, ram: RamSpec, runtime_x: float, timing: Timing = Timing.OVERLAP,
    batch_size: int | None = None, input_size: int | None = None, seq_len: int | None = None,
    flops_per_cost_unit: float = 1e6, reserve_training_state: str = "none",
) -> Problem:
    """Load the graph and platform, derive costs and resolve the budgets to bytes and seconds."""
    graph = load_graph(model, batch_size, input_size, seq_len, flops_per_cost_unit)
    profile = load_platform(platform)
    costs = node_costs(graph, profile)
    budgets = Budgets(ram_bytes=ram.resolve(graph.keep_all_peak_bytes), runtime_s=runtime_x * costs.plain_runtime_s)
    return Problem(graph, profile, costs, budgets, ram, runtime_x, timing, reserved_bytes(graph, reserve_training_state))


def problem_for_point(scenario: Scenario, point: Point) -> Problem:
    """The problem of one grid point of a scenario."""
    return build_problem(
        point.model, point.platform, point.ram, point.runtime_x, scenario.timing, scenario.batch_size,
        scenario.input_size, scenario.seq_len, scenario.flops_per_cost_unit, scenario.reserve_training_state)


def run_strategy(
    problem: Problem, strategy: str, solver: str = "highs", time_limit_s: float | None = None,
    simulate: bool = True, threads: int | None = None,
) -> Run:
    """Solve (or build, for a baseline), check and optionally simulate one strategy."""
    from poetsim import optimiser

    keep_all_schedule, keep_all_figures = optimiser.keep_all(problem.graph, problem.costs, problem.timing)
    keep_all_figures = _check(problem, keep_all_schedule, budgets=None)
    if strategy in BASELINES:
        build = optimiser.keep_all if strategy == "keep-all" else optimiser.checkpoint_sqrt
        schedule, _ = build(problem.graph, problem.costs, problem.timing)
        figures = _check(problem, schedule, budgets=None)
        over = _over_budget(figures, problem.budgets)
        run = Run(problem, strategy, "infeasible" if over else "baseline", over, schedule if not over else None,
                  figures, figures if not over else None, keep_all_figures)
    else:
        outcome = optimiser.optimise(problem.graph, problem.costs, problem.budgets, Strategy(strategy),
                                     problem.timing, solver=solver, time_limit_s=time_limit_s,
                                     threads=threads)
        run = Run(problem, strategy, outcome.status, outcome.message, None, outcome.predicted, None,
                  keep_all_figures, solve=outcome)
        if outcome.schedule is not None:
            run = _verified(run, outcome.schedule)
    if simulate and run.ok:
        from poetsim.simulator import simulate as replay

        result = replay(run.schedule, problem.graph, problem.costs, problem.platform,
                        ram_capacity_bytes=problem.ram_capacity_bytes, budgets=problem.budgets)
        run = replace(run, simulated=result)
    return run


def _check(problem: Problem, schedule: Schedule, budgets: Budgets | None) -> Figures:
    from poetsim.checker import check_schedule

    return check_schedule(schedule, problem.graph, problem.costs, problem.timing, budgets)


def _verified(run: Run, schedule: Schedule) -> Run:
    """Accept a solver's schedule only if the checker agrees with the optimiser's figures."""
    from poetsim.checker import compare_figures

    try:
        checked = _check(run.problem, schedule, run.problem.budgets)
    except PoetsimError as exc:
        return replace(run, status="invalid", message=f"the checker rejected the schedule: {exc}")
    differing = compare_figures(run.predicted, checked, rtol=CHECK_RTOL)
    if differing:
        return replace(run, status="invalid", checked=checked,
                       message=f"checker and optimiser disagree on {', '.join(differing)}")
    return replace(run, schedule=schedule, checked=checked)


def _over_budget(figures: Figures, budgets: Budgets) -> str:
    """Why a baseline's schedule misses the budgets, or '' if it meets them."""
    reasons = []
    if figures.peak_ram_bytes > budgets.ram_bytes:
        reasons.append(f"needs {figures.peak_ram_bytes:,.0f} bytes of RAM, budget {budgets.ram_bytes:,}")
    if figures.runtime_s > budgets.runtime_s * (1 + 1e-9):
        reasons.append(f"needs {figures.runtime_s:.4g} s, deadline {budgets.runtime_s:.4g} s")
    return "; ".join(reasons)


def result_row(run: Run) -> dict:
    """One flat record of a run: parameters, status, energies, RAM, time and counts."""
    problem = run.problem
    row = {
        "model": problem.graph.name, "platform": problem.platform.name, "ram": str(problem.ram),
        "ram_budget_bytes": problem.budgets.ram_bytes, "runtime_x": problem.runtime_x,
        "deadline_s": problem.budgets.runtime_s, "timing": problem.timing.value, "strategy": run.strategy,
        "status": run.status, "message": run.message, "reserved_bytes": problem.reserved_bytes,
        "keep_all_peak_bytes": problem.graph.keep_all_peak_bytes,
        "keep_all_energy_j": run.keep_all.total_j if run.keep_all else None,
    }
    solve = run.solve
    row.update({
        "solver": getattr(solve, "solver", None), "solve_s": getattr(solve, "solve_s", None),
        "build_s": getattr(solve, "build_s", None), "gap_total": getattr(solve, "gap_total", None),
        "gap_overhead": getattr(solve, "gap_overhead", None), "bound_j": getattr(solve, "bound_j", None),
    })
    figures = run.checked if run.ok else None
    row.update(_figure_columns("predicted", figures))
    if figures is not None and run.keep_all is not None:
        row["overhead_pct"] = 100.0 * (figures.total_j / run.keep_all.total_j - 1.0)
    else:
        row["overhead_pct"] = None
    sim = run.simulated
    row.update(_figure_columns("simulated", sim.figures if sim is not None else None))
    row.update({
        "simulated_stall_s": sim.stall_s if sim is not None else None,
        "simulated_over_budget": sim.over_budget if sim is not None else None,
        "simulated_over_deadline": sim.over_deadline if sim is not None else None,
        "schedule_bytes": _binary_size(run.schedule),
    })
    return row


def _figure_columns(prefix: str, figures: Figures | None) -> dict:
    names = ("total_j", "compute_j", "recompute_j", "page_in_j", "page_out_j", "static_j",
             "peak_ram_bytes", "runtime_s", "recomputations", "page_ins", "page_outs")
    return {f"{prefix}_{name}": (getattr(figures, name) if figures is not None else None) for name in names}


def _binary_size(schedule: Schedule | None) -> int | None:
    if schedule is None:
        return None
    from poetsim.schedule_io import encode_binary

    return len(encode_binary(schedule))


def write_run(run: Run, directory: Path) -> None:
    """Save a run's schedule (JSON and binary), its result row and, if simulated, its trace."""
    import json

    from poetsim.schedule_io import encode_binary, save_json

    directory.mkdir(parents=True, exist_ok=True)
    (directory / "result.json").write_text(json.dumps(result_row(run), indent=1, default=str) + "\n")
    if run.schedule is not None:
        save_json(run.schedule, directory / "schedule.json")
        (directory / "schedule.bin").write_bytes(encode_binary(run.schedule))
    if run.simulated is not None:
        from poetsim.simulator import write_trace

        write_trace(run.simulated, directory)


def load_run(problem: Problem, schedule_path: Path) -> Run:
    """A run from a saved schedule: checked against the problem, then simulated."""
    from poetsim.checker import check_schedule
    from poetsim.schedule_io import load_json
    from poetsim.simulator import simulate

    schedule = load_json(schedule_path)
    if schedule.timing != problem.timing:
        problem = replace(problem, timing=schedule.timing)
    checked = check_schedule(schedule, problem.graph, problem.costs, problem.timing, None)
    from poetsim import optimiser

    keep_all_schedule, _ = optimiser.keep_all(problem.graph, problem.costs, problem.timing)
    keep_all_figures = _check(problem, keep_all_schedule, None)
    run = Run(problem, "saved", "baseline", f"loaded from {schedule_path}", schedule, checked, checked, keep_all_figures)
    result = simulate(schedule, problem.graph, problem.costs, problem.platform,
                      ram_capacity_bytes=problem.ram_capacity_bytes, budgets=problem.budgets)
    return replace(run, simulated=result)


def compare_prediction(run: Run) -> dict:
    """The optimiser's prediction beside the simulation, with differences and what breaks."""
    predicted, sim = run.checked, run.simulated
    pairs = {
        "makespan_s": (predicted.runtime_s, sim.makespan_s),
        "peak_ram_bytes": (predicted.peak_ram_bytes, sim.figures.peak_ram_bytes),
        "energy_j": (predicted.total_j, sim.figures.total_j),
    }
    flags = []
    budgets = run.problem.budgets
    if sim.figures.peak_ram_bytes > budgets.ram_bytes:
        flags.append(f"simulated peak RAM {sim.figures.peak_ram_bytes:,.0f} bytes is over the budget of {budgets.ram_bytes:,}")
    if sim.makespan_s > budgets.runtime_s * (1 + 1e-9):
        flags.append(f"simulated makespan {sim.makespan_s:.6g} s is over the deadline of {budgets.runtime_s:.6g} s "
                     f"({100 * (sim.makespan_s / budgets.runtime_s - 1):+.2f} %)")
    if sim.stall_s > 0:
        flags.append(f"compute stalled {sim.stall_s:.6g} s waiting for DMA or RAM")
    return {
        "strategy": run.strategy, "timing": run.problem.timing.value, "status": run.status,
        "predicted": {k: p for k, (p, _) in pairs.items()},
        "simulated": {k: s for k, (_, s) in pairs.items()},
        "difference_pct": {k: (100.0 * (s - p) / p if p else 0.0) for k, (p, s) in pairs.items()},
        "simulated_breakdown_j": {k: getattr(sim.figures, k) for k in ("compute_j", "recompute_j", "page_in_j", "page_out_j", "static_j")},
        "stall_s": sim.stall_s, "busy": {"compute": sim.compute_busy, "dma": sim.dma_busy, "bus": sim.bus_busy},
        "flags": flags,
        "budgets": {"ram_bytes": budgets.ram_bytes, "runtime_s": budgets.runtime_s},
    }
