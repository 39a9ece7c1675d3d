"""The `poetsim` command line: parse, call the library (`poetsim.api`), show the result.

One error boundary (`_boundary`) turns every `PoetsimError` into one line on stderr and the
error's exit code; anything else is a bug and keeps its traceback. Tables never cut a digit and
long work reports progress (`poetsim.cli.terminal`).
"""

import functools
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import typer

from poetsim import __version__, api, strategies
from poetsim.analysis.results import GUARD_ATOL_J, GUARD_RTOL, check_against_baseline, load_results
from poetsim.assumptions import ASSUMPTIONS, SIMULATOR_ASSUMPTIONS, TIMING_HELP, TIMING_MODELS
from poetsim.cli.terminal import Progress, duration, make_console, table
from poetsim.errors import PoetsimError, StorageError, UserInputError
from poetsim.graphs import zoo
from poetsim.graphs.io import load_graph, save_graph
from poetsim.inputs.profiles import load_platform, shipped_platforms
from poetsim.inputs.scenario import load_scenario
from poetsim.pipeline import Run, compare_prediction, result_row
from poetsim.pytorch.commands import register as register_pytorch
from poetsim.runs import ResultRow
from poetsim.status import Status
from poetsim.sweeps.runner import check_output_dir, check_output_file
from poetsim.units import format_bytes, number_text

#: Exit codes, as --help and the README list them.
EXIT_CODES = (
    "Exit codes: 0 done; 1 a regression found by `check`, or no schedule before the time limit; "
    "2 bad input (a file, field or option; one line names it); 3 infeasible budgets; "
    "4 solver not installed; 5 simulation error; 6 invalid schedule; 69 the Dask scheduler or its workers gone; "
    "70 internal error (a bug); 74 a file refused by the machine (disk full, read-only, permissions); "
    "75 another poetsim writes into that results folder; 130/143 stopped by SIGINT/SIGTERM "
    "(finished points kept; rerun with --resume)."
)

app = typer.Typer(
    help="Simulate and explore energy-optimal on-device training schedules (POET: recomputation + paging).",
    epilog=(
        f"{ASSUMPTIONS}. Timing models: {TIMING_HELP} {SIMULATOR_ASSUMPTIONS}. "
        f"Full model: docs/cost-model.md, docs/optimiser.md. {EXIT_CODES}"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = make_console()
err = make_console(stderr=True)


def _boundary(command):
    """Run a command; a PoetsimError becomes one line on stderr and its exit code.

    So does what the library does not turn into one itself: Ctrl-C outside a sweep (130), and
    a file the machine refuses (74).
    """

    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except PoetsimError as exc:
            _fail(exc)
        except KeyboardInterrupt:
            err.print("poetsim: interrupted", soft_wrap=True)
            raise typer.Exit(130) from None
        except OSError as exc:
            _fail(StorageError.from_os_error(exc, "use"))

    return run


def _fail(exc: PoetsimError):
    message = " ".join(str(exc).split())
    err.print(f"poetsim: {exc.label}: {message}", soft_wrap=True)
    raise typer.Exit(exc.exit_code) from None


def _note(text: str) -> None:
    err.print(f"poetsim: note: {text}", soft_wrap=True)


def _json(data: Any) -> None:
    """One JSON document on stdout (numbers as numbers; NaN as null)."""
    print(json.dumps(data, default=str, allow_nan=False))


def _clean(value: Any) -> Any:
    """A pandas cell as JSON: NaN becomes None, numpy scalars plain numbers."""
    if isinstance(value, float) and value != value:
        return None
    if hasattr(value, "item"):
        return _clean(value.item())
    return value


def _records(frame: pd.DataFrame) -> list[dict]:
    return [{k: _clean(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def _version(value: bool) -> None:
    if value:
        print(f"poetsim {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """poetsim: solve, simulate and sweep POET schedules."""


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document instead of a table.")]


@app.command()
@_boundary
def models(as_json: JsonOpt = False) -> None:
    """List the model zoo: name, description, nodes, parameters and forward FLOPs at batch 1."""
    rows: list[dict[str, Any]] = []
    for name, spec in sorted(zoo.MODELS.items()):
        graph = zoo.build_model(name)
        rows.append(
            {
                "model": name,
                "description": spec.description,
                "nodes": len(graph),
                "params": graph.param_bytes // 4,
                "forward_gflop": graph.forward_flops / 1e9,
            }
        )
    if as_json:
        return _json(rows)
    out.print(
        table(
            ("model", "description", "nodes", "params", "fwd GFLOP (batch 1)"),
            [(r["model"], r["description"], r["nodes"], f"{r['params'] / 1e6:.2f} M", f"{r['forward_gflop']:.3f}") for r in rows],
            right=("nodes", "params", "fwd GFLOP (batch 1)"),
        )
    )


@app.command()
@_boundary
def platforms(as_json: JsonOpt = False) -> None:
    """List the shipped hardware profiles and their key figures (sources: docs/cost-model.md)."""
    profiles = [load_platform(name) for name in shipped_platforms()]
    if as_json:
        return _json([p.model_dump(mode="json") for p in profiles])
    out.print(
        table(
            ("platform", "RAM", "compute", "compute W", "static W", "page-in", "page-out", "storage W"),
            [
                (
                    p.name,
                    format_bytes(p.ram_bytes),
                    f"{p.compute.flops_per_s:.3g} FLOP/s",
                    f"{p.compute.power_w:.3g}",
                    f"{p.static_power_w:.3g}",
                    _transfer(p.storage.page_in),
                    _transfer(p.storage.page_out),
                    f"{p.storage.power_w:.3g}",
                )
                for p in profiles
            ],
        )
    )


def _transfer(transfer) -> str:
    return f"{transfer.latency_s * 1e3:.3g} ms + {transfer.bytes_per_s / 1e6:.3g} MB/s"


@app.command()
@_boundary
def graph(
    model: str = typer.Argument(..., help="Zoo model name or graph JSON path (poetsim-graph or node-link)."),
    batch_size: int | None = typer.Option(None, "--batch-size", "-b", min=1, help="Batch size (zoo models)."),
    input_size: int | None = typer.Option(None, "--input-size", min=1, help="Image side (vision zoo models)."),
    seq_len: int | None = typer.Option(None, "--seq-len", min=1, help="Sequence length (transformer zoo models)."),
    as_json: JsonOpt = False,
    save: Path | None = typer.Option(None, "--save", help="Write the graph as poetsim-graph JSON."),
) -> None:
    """Summarise a training graph: nodes, edges, FLOPs, parameters, keep-all peak memory."""
    if save is not None:
        check_output_file(save, "--save")
    g = load_graph(model, batch_size, input_size, seq_len)
    summary = g.summary()
    if save is not None:
        save_graph(g, save)
    if as_json:
        return _json(summary)
    out.print(
        table(
            ("graph " + g.name, ""),
            [
                ("nodes (forward + backward)", f"{summary['nodes']} ({summary['forward_nodes']} + {summary['backward_nodes']})"),
                ("edges", summary["edges"]),
                ("forward FLOPs", f"{summary['forward_flops']:.4g}"),
                ("backward FLOPs", f"{summary['backward_flops']:.4g}"),
                ("parameters", f"{summary['param_bytes']:,} bytes ({format_bytes(summary['param_bytes'])})"),
                (
                    "keep-all peak activation RAM",
                    f"{summary['keep_all_peak_bytes']:,} bytes ({format_bytes(summary['keep_all_peak_bytes'])})",
                ),
                ("smallest RAM any schedule needs", f"{summary['min_feasible_ram_bytes']:,} bytes"),
            ],
        )
    )
    if save is not None:
        out.print(f"saved {save}")


@app.command()
@_boundary
def validate(scenarios: list[Path] = typer.Argument(..., help="Scenario YAML files."), as_json: JsonOpt = False) -> None:
    """Check scenario files: fields, models, platforms and budgets; one line per bad file, exit 2."""
    report = []
    for path in scenarios:
        try:
            scenario = load_scenario(path)
        except UserInputError as exc:
            report.append({"path": str(path), "ok": False, "error": " ".join(str(exc).split())})
            continue
        report.append({"path": str(path), "ok": True, "name": scenario.name, "points": len(scenario.points())})
    if as_json:
        _json(report)
    else:
        for entry in report:
            if entry["ok"]:
                out.print(f"ok  {entry['path']}: {entry['name']}, {entry['points']} points", soft_wrap=True)
            else:
                err.print(f"poetsim: error: {entry['error']}", soft_wrap=True)
    if any(not entry["ok"] for entry in report):
        raise typer.Exit(UserInputError.exit_code)


# --- solve and simulate --------------------------------------------------------------------

# Options shared by `solve` and `simulate`: which point of the scenario, and how to solve it.
ModelOpt = Annotated[str | None, typer.Option(help="Model (zoo name or graph path); overrides the scenario.")]
PlatformOpt = Annotated[str | None, typer.Option(help="Platform name or profile path; overrides the scenario.")]
StrategyOpt = Annotated[
    str | None, typer.Option(help="; ".join(f"{s.name}" for s in strategies.REGISTRY.values()) + " (see docs/optimiser.md).")
]
RamOpt = Annotated[
    str | None,
    typer.Option(
        help="RAM budget: % of keep-all (50%), bytes (1048576) or with a unit (256KiB, 1.5MB); a bare number below 1 is refused."
    ),
]
RuntimeOpt = Annotated[str | None, typer.Option(help="Runtime budget: multiple of one plain pass (1.2x).")]
TimingOpt = Annotated[str | None, typer.Option(help=TIMING_HELP)]
SolverOpt = Annotated[
    str | None, typer.Option(help="highs (default), scip, gurobi (models over 2,000 columns need a Gurobi license), glpk or cbc.")
]
TimeLimitOpt = Annotated[float | None, typer.Option("--time-limit", min=0.1, help="Solver time limit in seconds.")]
PointTimeLimitOpt = Annotated[float | None, typer.Option("--time-limit", min=0.1, help="Solver time limit per point, seconds.")]
BatchOpt = Annotated[
    int | None,
    typer.Option(
        "--batch-size", "-b", min=1, help="Batch size of zoo models; overrides the scenario (graph files fix their own)."
    ),
]


def _choose(scenario: Path, model, platform, ram, runtime, strategy, timing, batch_size) -> api.Choice:
    choice = api.choose(
        load_scenario(scenario),
        model=model,
        platform=platform,
        ram=ram,
        runtime=runtime,
        strategy=strategy,
        timing=timing,
        batch_size=batch_size,
    )
    for note in choice.notes:
        _note(note)
    return choice


def _solver_progress(progress: Progress):
    """An `on_progress` callback that shows the solver's incumbent, bound and gap."""

    def show(elapsed_s: float, incumbent_j: float | None, bound_j: float | None, phase: str = "") -> None:
        parts = [duration(elapsed_s)]
        if phase:
            parts.append(phase)
        parts.append("no schedule yet" if incumbent_j is None else f"best {incumbent_j:.9g} J")
        if bound_j is not None:
            parts.append(f"bound {bound_j:.9g} J")
        progress.update(", ".join(parts))

    return show


def _solve_with_progress(label: str, work) -> Run:
    with Progress(label) as progress:
        progress.update("building the model", force=True)
        run = work(_solver_progress(progress))
        progress.close(f"{run.status} after {duration(progress.elapsed_s)}")
    return run


@app.command()
@_boundary
def solve(
    scenario: Path = typer.Argument(..., help="Scenario YAML."),
    model: ModelOpt = None,
    platform: PlatformOpt = None,
    strategy: StrategyOpt = None,
    ram: RamOpt = None,
    runtime: RuntimeOpt = None,
    timing: TimingOpt = None,
    solver: SolverOpt = None,
    time_limit: TimeLimitOpt = None,
    batch_size: BatchOpt = None,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (the result row)."),
    out_dir: Path | None = typer.Option(None, "--out", help="Write schedule.json, schedule.bin and result.json here."),
    lp: Path | None = typer.Option(None, "--lp", help="Also write the MILP as a CPLEX LP file (for review or other solvers)."),
    start: list[Path] = typer.Option(
        [],
        "--start",
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
    api.check_out(out_dir)
    if lp is not None:
        check_output_file(lp, "--lp")
    choice = _choose(scenario, model, platform, ram, runtime, strategy, timing, batch_size)
    starts = api.load_starts(start, choice.problem)
    if lp is not None:
        _write_lp(choice, lp)
    run = _solve_with_progress(
        f"solving {choice.strategy}",
        lambda show: api.solve(scenario, solver=solver, time_limit_s=time_limit, starts=starts, on_progress=show, choice=choice),
    )
    row = result_row(run)
    if out_dir is not None:
        api.save_run(run, out_dir)
    if as_json:
        _json(_json_row(row))
    else:
        _print_summary(row)
        if out_dir is not None:
            out.print(f"wrote {out_dir}/", soft_wrap=True)
    api.require_schedule(run)


def _write_lp(choice: api.Choice, lp: Path) -> None:
    from poetsim.optimiser import write_lp

    picked = strategies.get(choice.strategy)
    if picked.kind is strategies.Kind.BASELINE:
        raise UserInputError(f"--lp: {choice.strategy} is a baseline made without a solver; it has no MILP")
    problem = choice.problem
    write_lp(problem.graph, problem.costs, problem.budgets, picked.moves, problem.timing, lp)


def _json_row(row: ResultRow) -> dict:
    """The result row with its total energy under the conventional key `total_energy_j`."""
    return {"total_energy_j": row.predicted_total_j, **row.to_dict()}


def _status_text(row: ResultRow) -> str:
    """'optimal (proven)' or 'feasible: 12.5 % of the overhead unproven (gap 0.004 % of the total)'."""
    if row.status is Status.OPTIMAL:
        return "optimal (proven)"
    if row.status is Status.FEASIBLE and row.gap_overhead is not None:
        total = f", {100 * row.gap_total:.3g} % of the total" if row.gap_total is not None else ""
        return f"feasible: {100 * row.gap_overhead:.3g} % of the overhead unproven (gap{total})"
    return row.status.value


def _print_summary(row: ResultRow) -> None:
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


@app.command()
@_boundary
def simulate(
    scenario: Path = typer.Argument(..., help="Scenario YAML."),
    model: ModelOpt = None,
    platform: PlatformOpt = None,
    strategy: StrategyOpt = None,
    ram: RamOpt = None,
    runtime: RuntimeOpt = None,
    timing: TimingOpt = None,
    solver: SolverOpt = None,
    time_limit: TimeLimitOpt = None,
    batch_size: BatchOpt = None,
    schedule: Path | None = typer.Option(None, help="Replay this saved schedule.json instead of solving."),
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
    api.check_out(out_dir)
    if schedule is not None and not schedule.is_file():
        raise UserInputError(f"--schedule: no such file {schedule}")
    choice = _choose(scenario, model, platform, ram, runtime, strategy, timing, batch_size)
    run = _solve_with_progress(
        f"simulating {choice.strategy}",
        lambda show: api.simulate(
            scenario, solver=solver, time_limit_s=time_limit, schedule=schedule, on_progress=show, choice=choice, mode=mode
        ),
    )
    api.require_schedule(run)
    directory = out_dir or api.simulate_out(choice, run, mode)
    api.save_run(run, directory)
    comparison = compare_prediction(run)
    (directory / "comparison.json").write_text(json.dumps(comparison, indent=1) + "\n")
    if charts:
        from poetsim.report.charts import save_run_charts

        save_run_charts(run, directory, title=f"{choice.scenario.name}: {run.strategy}")
    if as_json:
        return _json(comparison)
    row = result_row(run)
    out.print(f"status: {_status_text(row)}", soft_wrap=True)
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
            title=f"{run.strategy}: prediction vs simulation ({choice.problem.timing.value} timing, {mode} replay)",
            right=("predicted", "simulated", "difference"),
        )
    )
    causes = {k: v for k, v in comparison["makespan_causes_s"].items() if k != "total_s" and abs(v) > 0}
    if causes:
        out.print("makespan difference by cause: " + ", ".join(f"{k} {v:+.6g} s" for k, v in causes.items()), soft_wrap=True)
    for flag in comparison["flags"]:
        err.print(f"poetsim: flag: {flag}", soft_wrap=True)
    out.print(
        f"wrote {directory}/ (trace.csv, summary.json, comparison.json, schedule.json, schedule.bin, charts)", soft_wrap=True
    )
    timing_name = choice.problem.timing.value
    out.print(f"{ASSUMPTIONS}; timing {timing_name}: {TIMING_MODELS[timing_name]}. {SIMULATOR_ASSUMPTIONS}.", style="dim")


# --- sweeps, comparisons, reports and the guard ------------------------------------------------


def _row_progress(progress: Progress):
    """An `on_row` callback: points done, failures, elapsed and time left."""
    failures = 0

    def show(row: ResultRow, done: int, total: int) -> None:
        nonlocal failures
        failures += row.status is Status.FAILED
        elapsed = progress.elapsed_s
        left = f", about {duration(elapsed / done * (total - done))} left" if 0 < done < total else ""
        progress.update(f"{done}/{total} points, {failures} failed, {duration(elapsed)}{left}", force=done == total)

    return show


@app.command()
@_boundary
def sweep(
    scenario: Path = typer.Argument(..., help="Scenario YAML; its lists make the grid."),
    jobs: int | None = typer.Option(None, "-j", "--jobs", min=1, help="Parallel worker processes (default: the core count)."),
    out_dir: Path | None = typer.Option(None, "--out", help="Results folder (default build/<scenario name>/)."),
    resume: bool = typer.Option(False, help="Continue a sweep: skip the points already in runs.csv."),
    time_limit: PointTimeLimitOpt = None,
    batch_size: BatchOpt = None,
    executor: str = typer.Option("process", help="process (local worker processes) or dask."),
    scheduler: str | None = typer.Option(None, help="Dask scheduler address (with --executor dask; default: a local cluster)."),
    worker_wait: float = typer.Option(
        60.0,
        "--worker-wait",
        min=0.1,
        max=86400.0,
        help="With --executor dask: give up after this many seconds without any worker.",
    ),
    as_json: JsonOpt = False,
) -> None:
    """Run every point of a scenario's grid: solve, check, simulate; one row per point in runs.csv.

    Rows are appended as points finish, so a sweep stopped at any moment keeps them; infeasible
    and failed points are rows too, and --resume runs the failed ones again. Schedules and
    traces go to <out>/points/. Every option and path is checked before anything is written.
    Ctrl-C or SIGTERM keeps every finished point and exits 130 or 143; one sweep at a time may
    write into a folder (docs/dependability.md).
    """
    spec = load_scenario(scenario)
    spec, notes = api.with_batch_size(spec, batch_size)
    for note in notes:
        _note(note)
    with Progress(f"sweep {spec.name}") as progress:
        result = api.sweep(
            spec,
            out_dir,
            jobs=jobs,
            resume=resume,
            time_limit_s=time_limit,
            executor=executor,
            scheduler=scheduler,
            on_row=_row_progress(progress),
            no_worker_wait_s=worker_wait,
        )
    counts = result.counts()
    if as_json:
        return _json(
            {"directory": str(result.directory), "runs_csv": str(result.runs_csv), "points": len(result.rows), "counts": counts}
        )
    out.print(
        f"{len(result.rows)} points in {result.runs_csv}: " + ", ".join(f"{n} {s}" for s, n in counts.items()), soft_wrap=True
    )


@app.command()
@_boundary
def compare(
    target: Path = typer.Argument(..., help="A sweep's results folder (or runs.csv), or a scenario YAML (its default folder)."),
    jobs: int | None = typer.Option(None, "-j", "--jobs", min=1, help="Parallel worker processes."),
    time_limit: PointTimeLimitOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Strategies side by side: one row per model, platform, RAM and runtime; one column per strategy.

    Runs the keep-all and checkpoint-sqrt baselines (no solver) for every point that lacks
    them, then prints the table and writes compare.csv (every number) and compare.txt beside
    runs.csv. A '*' marks a schedule not proven optimal.
    """
    with Progress("compare") as progress:
        result = api.compare(target, jobs=jobs, time_limit_s=time_limit, on_row=_row_progress(progress))
    if as_json:
        return _json(_records(result.table))
    out.print(api.headline_text(result.table), soft_wrap=True)
    out.print(f"wrote {result.csv_path} and {result.text_path}", soft_wrap=True)


@app.command()
@_boundary
def report(
    results: Path = typer.Argument(..., help="Results folder or runs.csv of a sweep."),
    out_dir: Path | None = typer.Option(
        None, "--out", help="Where to write report.html, the PNGs and the SVGs (default: the results folder)."
    ),
) -> None:
    """Draw the sweep's report: report.html opens on the headline table beside the overhead chart.

    Every chart is also written as a PNG (2x) and an SVG.
    """
    from poetsim.report.report import build_report

    directory = out_dir or (results.parent if results.name == "runs.csv" else results)
    check_output_dir(directory, "--out")
    frame = load_results(results)
    name = str(frame["scenario"].iloc[0]) if "scenario" in frame and len(frame) else directory.name
    path = build_report(frame, directory, name)
    out.print(f"report: {path}", soft_wrap=True)


@app.command()
@_boundary
def paper(
    results: list[Path] = typer.Argument(..., help="Results folders of the paper_* scenarios (scenarios/paper_*.yaml)."),
    html_out: Path | None = typer.Option(None, "--html", help="Also write the comparisons as an HTML page here."),
    as_json: JsonOpt = False,
) -> None:
    """The POET paper's claims (Figures 3-5, Table 3) beside poetsim's figures, each judged under poetsim's model."""
    from poetsim.analysis import paper as exhibits

    if html_out is not None:
        check_output_file(html_out, "--html")
    found = {}
    for folder in results:
        frame = load_results(folder)
        found[str(frame["scenario"].iloc[0]) if len(frame) else Path(folder).name] = frame
    done = exhibits.comparisons(found)
    if html_out is not None:
        from poetsim.report.page import page as html_page

        html_out.write_text(
            html_page("poetsim: the POET paper's comparisons", exhibits.render_section(done), {}, ""), encoding="utf-8"
        )
    if as_json:
        return _json(
            [
                {
                    "title": c.title,
                    "scenario": c.scenario,
                    "claims": [
                        {
                            "where": k.where,
                            "statement": k.statement,
                            "paper": k.paper,
                            "poetsim": k.poetsim,
                            "verdict": k.verdict,
                            "reason": k.reason,
                        }
                        for k in c.claims
                    ],
                }
                for c in done
            ]
        )
    for comparison in done:
        out.print(
            table(
                ("claim", "paper", "poetsim", "verdict", "why"),
                [(f"{k.where}: {k.statement}", k.paper, k.poetsim, k.verdict, k.reason) for k in comparison.claims],
                title=comparison.title,
            )
        )
    if html_out is not None:
        out.print(f"wrote {html_out}", soft_wrap=True)


@app.command()
@_boundary
def check(
    results: Path = typer.Argument(..., help="Results folder or runs.csv to check."),
    baseline: Path = typer.Option(..., help="Baseline runs.csv to compare against."),
    rtol: float = typer.Option(
        GUARD_RTOL,
        min=0.0,
        help=(
            "Tolerance as a share of the baseline's energy above keep-all (and of its peak RAM): "
            "energy may rise by max(rtol x overhead, atol) before a point counts as worse."
        ),
    ),
    atol: float = typer.Option(GUARD_ATOL_J, min=0.0, help="Floor of the energy tolerance, in joules."),
    as_json: JsonOpt = False,
) -> None:
    """The energy regression guard: exit 1, one line per point, if any point regressed.

    A point fails when it is missing; its status is failed or invalid; it lost its schedule or
    a proof (optimal -> feasible, infeasible -> no-solution); its energy is missing, zero,
    negative or not finite; its predicted or simulated energy rose by more than
    max(rtol x its baseline overhead above keep-all, atol); or its predicted or simulated peak
    RAM rose by more than rtol x the baseline's. A results file that cannot be read as one
    exits 2.
    """
    changes = check_against_baseline(load_results(results), load_results(baseline), rtol, atol, str(baseline))
    failing = [c for c in changes if c.fails]
    if as_json:
        _json(
            {
                "points": len(changes),
                "failing": len(failing),
                "changes": [
                    {
                        "point_key": c.point_key,
                        "verdict": c.verdict,
                        "fails": c.fails,
                        "baseline_j": c.baseline_j,
                        "current_j": c.current_j,
                        "detail": c.detail,
                    }
                    for c in changes
                ],
            }
        )
    else:
        moved = [c for c in changes if c.verdict != "same"]
        if moved:
            out.print(
                table(
                    ("point", "verdict", "baseline J", "now J", "detail"),
                    [
                        (
                            c.point_key,
                            c.verdict,
                            "-" if c.baseline_j is None else f"{c.baseline_j:.9g}",
                            "-" if c.current_j is None else f"{c.current_j:.9g}",
                            c.detail,
                        )
                        for c in moved
                    ],
                    title=f"{len(changes)} points vs {baseline} (rtol {rtol:g}, atol {atol:g} J)",
                )
            )
        for change in failing:
            err.print(f"poetsim: regressed: {change.point_key}: {change.verdict}: {change.detail}", soft_wrap=True)
    if failing:
        err.print(
            f"poetsim: error: {len(failing)} of {len(changes)} points regressed "
            f"({', '.join(sorted({c.verdict for c in failing}))})",
            soft_wrap=True,
        )
        raise typer.Exit(1)
    if not as_json:
        better = sum(c.verdict in ("better", "now-feasible") for c in changes)
        out.print(
            f"ok: no point regressed (rtol {rtol:g} of the overhead above keep-all, atol {atol:g} J)"
            + (f"; {better} got better" if better else "")
        )


# Commands that need PyTorch (import-torch, execute, profile, validate-run): torch is imported only when they run.
register_pytorch(app)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
