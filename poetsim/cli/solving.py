"""`solve` and `simulate`: one scenario point, solved (or loaded), checked, and replayed."""

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from poetsim import strategies
from poetsim.assumptions import ASSUMPTIONS, SIMULATOR_ASSUMPTIONS, TIMING_MODELS
from poetsim.cli.app import command, emit_json, err, out
from poetsim.cli.options import (
    BatchOpt,
    EffortOpt,
    ModelOpt,
    PlatformOpt,
    RamOpt,
    RuntimeOpt,
    SolverOpt,
    StrategyOpt,
    TimeLimitOpt,
    TimingOpt,
    choose_point,
)
from poetsim.cli.terminal import Progress, duration, table
from poetsim.errors import UserInputError, parsed
from poetsim.folders import RunFolder
from poetsim.inputs.files import check_input_file, check_output_file
from poetsim.status import Status
from poetsim.tolerances import SAME_RTOL
from poetsim.units import number_text

if TYPE_CHECKING:
    from poetsim import api
    from poetsim.runs import ResultRow


def _solver_progress(progress: Progress, strategy: str):
    """An `on_progress` callback that shows the solver's incumbent, bound and gap."""

    def show(elapsed_s: float, incumbent_j: float | None, bound_j: float | None, phase: str = "") -> None:
        parts = [f"solving {strategy}", duration(elapsed_s)]
        if phase:
            parts.append(phase)
        parts.append("no schedule yet" if incumbent_j is None else f"best {incumbent_j:.9g} J")
        if bound_j is not None:
            parts.append(f"bound {bound_j:.9g} J")
        progress.update(", ".join(parts))

    return show


@command()
def solve(
    scenario: Path = typer.Argument(..., help="Scenario YAML."),
    model: ModelOpt = None,
    platform: PlatformOpt = None,
    strategy: StrategyOpt = None,
    ram: RamOpt = None,
    runtime: RuntimeOpt = None,
    timing: TimingOpt = None,
    solver: SolverOpt = None,
    effort: EffortOpt = None,
    time_limit: TimeLimitOpt = None,
    batch_size: BatchOpt = None,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (the result row)."),
    out_dir: Path | None = typer.Option(None, "--out", help="Write schedule.json, schedule.bin and result.json here."),
    lp: Path | None = typer.Option(None, "--lp", help="Also write the MILP as a CPLEX LP file (for review or other solvers)."),
    start: list[Path] = typer.Option(
        [],
        "--start",
        metavar="FILE",
        help="A schedule of the same point to start from (schedule.json or .bin of another strategy, say); repeatable.",
    ),
) -> None:
    """Find the energy-optimal schedule of one scenario point, check it, and report it.

    Every schedule shown has passed the independent checker. Energy in joules; the overhead is
    relative to keep-all (every node computed once, nothing paged). The status says whether the
    optimum is proven: `optimal`, or `feasible` with the share of the overhead still unproven.
    A solved strategy starts from every baseline it allows and from each --start schedule, so it
    is never reported worse than any of them that fits the budgets.
    """
    with Progress("solve") as progress:  # from the start: the library's imports alone take a second
        progress.update("reading the scenario")
        from poetsim import api
        from poetsim.pipeline import result_row

        api.check_out(out_dir)
        if lp is not None:
            check_output_file(lp, "--lp")
        choice = choose_point(scenario, model, platform, ram, runtime, strategy, timing, batch_size)
        starts = api.load_starts(start, choice.problem)
        if lp is not None:
            progress.update(f"writing {lp}")
            _write_lp(choice, lp)
        progress.update(f"solving {choice.strategy}: building the model", force=True)
        run = api.solve(
            scenario,
            solver=solver,
            effort=effort,
            time_limit_s=time_limit,
            starts=starts,
            on_progress=_solver_progress(progress, choice.strategy),
            choice=choice,
        )
        row = result_row(run, **choice.row_names())
        written = []
        if out_dir is not None:
            progress.update(f"writing {out_dir}/")
            written = api.save_run(run, out_dir)
        progress.close(f"{run.status} after {duration(progress.elapsed_s)}")
    if as_json:
        emit_json(_json_row(row))
    else:
        _print_summary(row)
        if out_dir is not None:
            out.line(f"wrote {out_dir}/ ({', '.join(p.name for p in written)})")
    api.require_schedule(run)


def _write_lp(choice: "api.Choice", lp: Path) -> None:
    from poetsim.optimiser import write_lp

    picked = strategies.get(choice.strategy)
    if picked.kind is strategies.Kind.BASELINE:
        raise UserInputError(f"--lp: {choice.strategy} is a baseline made without a solver; it has no MILP")
    problem = choice.problem
    write_lp(problem.graph, problem.costs, problem.budgets, picked.moves, problem.timing, lp)


def _json_row(row: "ResultRow") -> dict:
    """The result row with its total energy under the conventional key `total_energy_j`."""
    return {"total_energy_j": row.predicted_total_j, **row.to_dict()}


def _status_text(row: "ResultRow") -> str:
    """'optimal (proven)' or 'feasible: 12.5 % of the overhead unproven (gap 0.004 % of the total)'."""
    if row.status is Status.OPTIMAL:
        return "optimal (proven)"
    if row.status is Status.FEASIBLE and row.gap_overhead is not None:
        total = f", {100 * row.gap_total:.3g} % of the total" if row.gap_total is not None else ""
        return f"feasible: {100 * row.gap_overhead:.3g} % of the overhead unproven (gap{total})"
    return row.status.value


def _print_summary(row: "ResultRow") -> None:
    lines: list[tuple[str, str]] = [("status", _status_text(row))]
    if row.message:
        lines.append(("note", row.message))
    lines.append(
        (
            "budgets",
            f"RAM {row.ram} = {row.ram_budget_bytes:,} bytes; deadline {number_text(row.runtime_x or 0)}x "
            f"= {row.deadline_s:.4g} s",
        )
    )
    if row.predicted_total_j is not None:
        lines += [
            ("energy", f"{row.predicted_total_j:.6g} J ({row.overhead_pct:+.3f} % vs keep-all {row.keep_all_energy_j:.6g} J)"),
            (
                "  breakdown",
                ", ".join(
                    f"{k} {getattr(row, 'predicted_' + k + '_j'):.4g} J"
                    for k in ("compute", "recompute", "page_in", "page_out", "static")
                ),
            ),
            ("peak RAM", f"{row.predicted_peak_ram_bytes:,.0f} bytes"),
            ("runtime", f"{row.predicted_runtime_s:.6g} s"),
            (
                "operations",
                f"{row.predicted_recomputations} recomputations, {row.predicted_page_ins} page-ins, "
                f"{row.predicted_page_outs} page-outs",
            ),
            ("schedule", f"{row.schedule_bytes} bytes (binary)"),
        ]
    if row.bound_j is not None:
        lines.append(("lower bound", f"{row.bound_j:.9g} J (no {row.strategy} schedule costs less)"))
    if row.solve_s is not None:
        # build_s is all the time before the first MILP run (covers, plans and the model's build).
        lines.append(
            (
                "solver",
                f"{row.solver}: {row.build_s:.2f} s before any MILP run (covers, plans, the "
                f"model's build), {row.solve_s:.2f} s in MILP runs",
            )
        )
    if row.simulated_total_j is not None:
        lines.append(
            (
                "simulated",
                f"{row.simulated_total_j:.6g} J, makespan {row.simulated_runtime_s:.6g} s, "
                f"peak {row.simulated_peak_ram_bytes:,.0f} bytes, stalls {row.simulated_stall_s:.4g} s",
            )
        )
    out.print(table((f"{row.strategy} on {row.model} / {row.platform} ({row.timing} timing)", ""), lines))
    out.print(f"{ASSUMPTIONS}; timing {row.timing}: {TIMING_MODELS[str(row.timing)]}.", style="dim")


@command()
def simulate(
    scenario: Path = typer.Argument(..., help="Scenario YAML."),
    model: ModelOpt = None,
    platform: PlatformOpt = None,
    strategy: StrategyOpt = None,
    ram: RamOpt = None,
    runtime: RuntimeOpt = None,
    timing: TimingOpt = None,
    solver: SolverOpt = None,
    effort: EffortOpt = None,
    time_limit: TimeLimitOpt = None,
    batch_size: BatchOpt = None,
    schedule: Path | None = typer.Option(
        None,
        help=(
            "Replay this saved schedule (schedule.json or schedule.bin) instead of solving: it must fit the point's "
            "budgets, and replays with the timing model it was made for."
        ),
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (prediction against simulation)."),
    out_dir: Path | None = typer.Option(None, "--out", help="Output folder (default build/<scenario name>/simulate/<point>/)."),
    charts: bool = typer.Option(
        True, help="Write run.html (figures, simulated timeline, schedule grid) and each chart as PNG and SVG."
    ),
    mode: str = typer.Option(
        "barrier",
        "--mode",
        help=(
            "Replay mode: barrier (default; a stage ends when its computes and transfers have ended: the device the "
            "overlap timing model describes) or free-running (no barrier: transfers run on into later stages; computes "
            "wait for inputs still landing and for RAM)."
        ),
    ),
) -> None:
    """Solve (or load) a schedule and replay it on a SimPy model of the device.

    The machine: one compute engine, DMA channel(s) to storage (latency + bytes / bandwidth each),
    a memory bus shared by compute and DMA (fluid sharing: when demand exceeds the bus bandwidth,
    every active transfer and op slows by the same factor), and RAM as a hard capacity. The
    prediction (the optimiser's model) and the simulation are set side by side in
    comparison.json; the simulator's own figures are in summary.json, every event in trace.csv.
    """
    with Progress("simulate") as progress:  # from the start: imports, solve and charts take seconds each
        progress.update("reading the scenario")
        from poetsim import api
        from poetsim.pipeline import compare_prediction, result_row
        from poetsim.schedule.formats import SCHEDULE_FILES
        from poetsim.simulator import Mode

        api.check_out(out_dir)
        parsed(Mode.of, mode, "--mode")
        if schedule is not None:
            check_input_file(schedule, "--schedule", SCHEDULE_FILES)
        choice = choose_point(scenario, model, platform, ram, runtime, strategy, timing, batch_size, saved=schedule is not None)
        progress.update(f"{'loading the schedule' if schedule else f'solving {choice.strategy}'}, then the device simulation")
        run = api.simulate(
            scenario,
            solver=solver,
            effort=effort,
            time_limit_s=time_limit,
            schedule=schedule,
            on_progress=_solver_progress(progress, choice.strategy),
            choice=choice,
            timing=timing,
            mode=mode,
        )
        api.require_schedule(run)
        directory = out_dir or api.simulate_out(choice, run, mode)
        progress.update(f"writing the trace into {directory}/")
        written = api.save_run(run, directory)
        comparison = compare_prediction(run)
        RunFolder(directory).comparison_json.write_text(json.dumps(comparison, indent=1) + "\n")
        written.append(RunFolder(directory).comparison_json)
        if charts:
            progress.update("drawing run.html and the charts (PNG, SVG)", force=True)
            from poetsim.report.charts import save_run_charts

            written += save_run_charts(run, directory, title=f"{choice.scenario.name}: {run.strategy}")
        progress.close(f"{run.status} after {duration(progress.elapsed_s)}")
    if as_json:
        return emit_json(comparison)
    row = result_row(run, **choice.row_names())
    saved = schedule is not None
    status = f"a saved schedule ({run.message}), checked within the budgets" if saved else _status_text(row)
    out.line(f"status: {status}")
    out.print(
        table(
            ("figure", "predicted", "simulated", "difference"),
            [
                (
                    name,
                    f"{comparison['predicted'][name]:.6g}",
                    f"{comparison['simulated'][name]:.6g}",
                    f"{comparison['difference_pct'][name]:+.3f} %",
                )
                for name in ("makespan_s", "peak_ram_bytes", "energy_j")
            ],
            title=f"{schedule if saved else run.strategy}: prediction vs simulation ({choice.problem.timing.value} timing, "
            f"{mode} replay)",
            right=("predicted", "simulated", "difference"),
        )
    )
    # A cause within rounding of the makespan (a difference of sums of thousands of durations) is none.
    makespan_s = comparison["predicted"]["makespan_s"]
    causes = {k: v for k, v in comparison["makespan_causes_s"].items() if k != "total_s" and abs(v) > SAME_RTOL * makespan_s}
    if causes:
        out.line("makespan difference by cause: " + ", ".join(f"{k} {v:+.6g} s" for k, v in causes.items()))
    for flag in comparison["flags"]:
        err.print(f"poetsim: flag: {flag}", soft_wrap=True)
    out.line(f"wrote {directory}/ ({', '.join(p.name for p in written)})")
    timing_name = choice.problem.timing.value
    out.print(f"{ASSUMPTIONS}; timing {timing_name}: {TIMING_MODELS[timing_name]}. {SIMULATOR_ASSUMPTIONS}.", style="dim")
