"""The `poetsim` command line: parse, call the library, show the result.

One error boundary (`_boundary`) turns every `PoetsimError` into one line on stderr and the
error's exit code; anything else is a bug and keeps its traceback.
"""

import functools
import json
import re
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Column, Table

from poetsim import __version__
from poetsim.assumptions import ASSUMPTIONS, SIMULATOR_ASSUMPTIONS, TIMING_HELP, TIMING_MODELS
from poetsim.errors import PoetsimError
from poetsim.status import Status
from poetsim.units import format_bytes

app = typer.Typer(
    help="Simulate and explore energy-optimal on-device training schedules (POET: recomputation + paging).",
    epilog=f"{ASSUMPTIONS}. Timing models: {TIMING_HELP} {SIMULATOR_ASSUMPTIONS}. Full model: docs/cost-model.md, docs/optimiser.md.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()


def _boundary(command):
    """Run a command; a PoetsimError becomes one line on stderr and a non-zero exit."""
    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except PoetsimError as exc:
            message = " ".join(str(exc).split("\n"))
            print(f"poetsim: error: {message}", file=sys.stderr)
            raise typer.Exit(exc.exit_code) from None
    return run


def _version(value: bool) -> None:
    if value:
        print(f"poetsim {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """poetsim: solve, simulate and sweep POET schedules."""


@app.command()
@_boundary
def models() -> None:
    """List the model zoo: name, default input, nodes, parameters and forward FLOPs at batch 1."""
    from poetsim import zoo

    table = Table("description", "nodes", "params", "fwd GFLOP (batch 1)")
    table.columns.insert(0, Column("model", no_wrap=True))
    for name, spec in sorted(zoo.MODELS.items()):
        graph = zoo.build_model(name)
        table.add_row(name, spec.description, str(len(graph)), f"{graph.param_bytes / 4 / 1e6:.2f} M",
                      f"{graph.forward_flops / 1e9:.3f}")
    console.print(table)


@app.command()
@_boundary
def platforms() -> None:
    """List the shipped hardware profiles and their key figures."""
    from poetsim.profiles import load_platform, shipped_platforms

    table = Table("RAM", "compute", "compute W", "static W", "page-in", "page-out", "storage W")
    table.columns.insert(0, Column("platform", no_wrap=True))
    for name in shipped_platforms():
        p = load_platform(name)
        table.add_row(
            name, format_bytes(p.ram_bytes), f"{p.compute.flops_per_s:.3g} FLOP/s", f"{p.compute.power_w:.3g}",
            f"{p.static_power_w:.3g}", _transfer(p.storage.page_in), _transfer(p.storage.page_out), f"{p.storage.power_w:.3g}",
        )
    console.print(table)


def _transfer(transfer) -> str:
    return f"{transfer.latency_s * 1e3:.3g} ms + {transfer.bytes_per_s / 1e6:.3g} MB/s"


@app.command()
@_boundary
def graph(
    model: str = typer.Argument(..., help="Zoo model name or graph JSON path (poetsim-graph or node-link)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", "-b", min=1, help="Batch size (zoo models)."),
    input_size: Optional[int] = typer.Option(None, "--input-size", min=1, help="Image side (vision zoo models)."),
    seq_len: Optional[int] = typer.Option(None, "--seq-len", min=1, help="Sequence length (transformer zoo models)."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as one JSON object."),
    save: Optional[Path] = typer.Option(None, "--save", help="Write the graph as poetsim-graph JSON."),
) -> None:
    """Summarise a training graph: nodes, edges, FLOPs, parameters, keep-all peak memory."""
    from poetsim.graphio import load_graph, save_graph

    g = load_graph(model, batch_size, input_size, seq_len)
    summary = g.summary()
    if save is not None:
        save_graph(g, save)
    if as_json:
        print(json.dumps(summary))
        return
    table = Table(title=f"graph {g.name}", show_header=False)
    table.add_row("nodes (forward + backward)", f"{summary['nodes']} ({summary['forward_nodes']} + {summary['backward_nodes']})")
    table.add_row("edges", str(summary["edges"]))
    table.add_row("forward FLOPs", f"{summary['forward_flops']:.4g}")
    table.add_row("backward FLOPs", f"{summary['backward_flops']:.4g}")
    table.add_row("parameters", f"{summary['param_bytes']:,} bytes ({format_bytes(summary['param_bytes'])})")
    table.add_row("keep-all peak activation RAM", f"{summary['keep_all_peak_bytes']:,} bytes ({format_bytes(summary['keep_all_peak_bytes'])})")
    table.add_row("smallest RAM any schedule needs", f"{summary['min_feasible_ram_bytes']:,} bytes")
    console.print(table)
    if save is not None:
        console.print(f"saved {save}")


@app.command()
@_boundary
def validate(scenarios: list[Path] = typer.Argument(..., help="Scenario YAML files.")) -> None:
    """Check scenario files: fields, models, platforms and budgets; one line per bad file, exit 2."""
    from poetsim.errors import UserInputError
    from poetsim.scenario import load_scenario

    failures = 0
    for path in scenarios:
        try:
            scenario = load_scenario(path)
        except UserInputError as exc:
            print(f"poetsim: error: {exc}", file=sys.stderr)
            failures += 1
            continue
        console.print(f"ok  {path}: {scenario.name}, {len(scenario.points())} points")
    if failures:
        raise typer.Exit(UserInputError.exit_code)


# --- solve and simulate --------------------------------------------------------------------

# Options shared by `solve` and `simulate`: which point of the scenario, and how to solve it.
ModelOpt = Annotated[Optional[str], typer.Option(help="Model (zoo name or graph path); overrides the scenario.")]
PlatformOpt = Annotated[Optional[str], typer.Option(help="Platform name or profile path; overrides the scenario.")]
StrategyOpt = Annotated[Optional[str], typer.Option(help="hybrid, recompute-only, paging-only, keep-all or checkpoint-sqrt.")]
RamOpt = Annotated[Optional[str], typer.Option(help="RAM budget: bytes (1048576), units (256KiB) or % of keep-all.")]
RuntimeOpt = Annotated[Optional[str], typer.Option(help="Runtime budget: multiple of one plain pass (1.2x).")]
TimingOpt = Annotated[Optional[str], typer.Option(help=TIMING_HELP)]
SolverOpt = Annotated[Optional[str], typer.Option(help="highs (default), glpk or cbc.")]
TimeLimitOpt = Annotated[Optional[float], typer.Option("--time-limit", min=0.1, help="Solver time limit in seconds.")]
PointTimeLimitOpt = Annotated[Optional[float], typer.Option("--time-limit", min=0.1, help="Solver time limit per point, seconds.")]


def _pick(values: tuple, override, label: str, parse=lambda v: v):
    """An option's value if given, else the scenario's only value, or its first with a note."""
    if override is not None:
        return parse(override)
    if len(values) > 1:
        print(f"poetsim: note: the scenario lists {len(values)} values for {label}; using the first,",
              f"{values[0]:g}x" if label == "runtime" else f"{values[0]}", f"(pass --{label} to choose)", file=sys.stderr)
    return values[0]


def _selected_problem(scenario_path, model, platform, ram, runtime, timing):
    from poetsim.errors import UserInputError
    from poetsim.problem import build_problem
    from poetsim.scenario import load_scenario
    from poetsim.schedule import Timing
    from poetsim.units import parse_ram, parse_runtime

    scenario = load_scenario(scenario_path, check_references=False)

    def parsed(parse, label):
        def run(value):
            try:
                return parse(value)
            except ValueError as exc:
                raise UserInputError(f"--{label}: {exc}") from None
        return run

    problem = build_problem(
        _pick(scenario.model, model, "model"), _pick(scenario.platform, platform, "platform"),
        _pick(scenario.budgets.ram, ram, "ram", parsed(parse_ram, "ram")),
        _pick(scenario.budgets.runtime, runtime, "runtime", parsed(parse_runtime, "runtime")),
        Timing(timing) if timing else scenario.timing, scenario.batch_size, scenario.input_size,
        scenario.seq_len, scenario.flops_per_cost_unit, scenario.reserve_training_state)
    return scenario, problem


def _strategy(scenario, strategy: Optional[str]) -> str:
    from poetsim.errors import UserInputError
    from poetsim.strategies import REGISTRY

    chosen = _pick(scenario.strategies, strategy, "strategy")
    if chosen not in REGISTRY:
        raise UserInputError(f"--strategy: unknown strategy '{chosen}' (use {', '.join(REGISTRY)})")
    return chosen


def _fail_if_unsolved(run) -> None:
    from poetsim.errors import InfeasibleBudgetError, InternalError, PoetsimError

    if run.ok:
        return
    if run.status is Status.INFEASIBLE:
        message = run.message if run.message.startswith("infeasible") else (
            f"infeasible: no {run.strategy} schedule meets the budgets ({run.message})")
        raise InfeasibleBudgetError(message)
    if run.status is Status.INVALID:
        raise InternalError(f"invalid schedule: {run.message}")
    raise PoetsimError(f"{run.status}: {run.message}")


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
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    out: Optional[Path] = typer.Option(None, help="Write schedule.json, schedule.bin and result.json here."),
    lp: Optional[Path] = typer.Option(None, "--lp", help="Also write the MILP as a CPLEX LP file (for review or other solvers)."),
) -> None:
    """Find the energy-optimal schedule of one scenario point, check it, and report it.

    Every schedule shown has passed the independent checker. Energy in joules; the overhead is
    relative to keep-all (every node computed once, nothing paged).
    """
    from poetsim.pipeline import result_row, run_strategy, write_run

    spec, problem = _selected_problem(scenario, model, platform, ram, runtime, _timing_value(timing))
    chosen = _strategy(spec, strategy)
    if lp is not None:
        from poetsim.errors import UserInputError
        from poetsim.optimiser import write_lp
        from poetsim import strategies

        picked = strategies.get(chosen)
        if picked.kind is strategies.Kind.BASELINE:
            raise UserInputError(f"--lp: {chosen} is a baseline made without a solver; it has no MILP")
        write_lp(problem.graph, problem.costs, problem.budgets, picked.moves, problem.timing, lp)
    run = run_strategy(problem, chosen, solver or spec.solver,
                       time_limit if time_limit is not None else spec.time_limit_s, simulate=False)
    row = result_row(run).to_dict()
    if out is not None:
        write_run(run, out)
    if as_json:
        print(json.dumps(_json_row(row)))
    else:
        _print_summary(row)
        if out is not None:
            console.print(f"wrote {out}/")
    _fail_if_unsolved(run)


def _timing_value(timing: Optional[str]) -> Optional[str]:
    from poetsim.errors import UserInputError

    if timing is not None and timing not in ("compute-only", "overlap"):
        raise UserInputError(f"--timing: unknown timing model '{timing}' (use compute-only or overlap)")
    return timing


def _json_row(row: dict) -> dict:
    """The result row with its total energy under the conventional key `total_energy_j`."""
    return {"total_energy_j": row["predicted_total_j"], **row}


def _print_summary(row: dict) -> None:
    table = Table(title=f"{row['strategy']} on {row['model']} / {row['platform']} ({row['timing']} timing)", show_header=False)
    gap = row.get("gap_total")
    table.add_row("status", f"{row['status']}" + (f" (gap {gap:.3%} of total, {row['gap_overhead']:.1%} of overhead)"
                                                   if gap and row.get("gap_overhead") is not None else ""))
    if row["message"]:
        table.add_row("note", row["message"])
    table.add_row("budgets", f"RAM {row['ram']} = {row['ram_budget_bytes']:,} bytes; deadline {row['runtime_x']:g}x = {row['deadline_s']:.4g} s")
    if row["predicted_total_j"] is not None:
        table.add_row("energy", f"{row['predicted_total_j']:.6g} J ({row['overhead_pct']:+.3f} % vs keep-all {row['keep_all_energy_j']:.6g} J)")
        table.add_row("  breakdown", ", ".join(f"{k} {row['predicted_' + k + '_j']:.4g} J"
                                              for k in ("compute", "recompute", "page_in", "page_out", "static")))
        table.add_row("peak RAM", f"{row['predicted_peak_ram_bytes']:,.0f} bytes")
        table.add_row("runtime", f"{row['predicted_runtime_s']:.6g} s")
        table.add_row("operations", f"{row['predicted_recomputations']} recomputations, {row['predicted_page_ins']} page-ins, {row['predicted_page_outs']} page-outs")
        table.add_row("schedule", f"{row['schedule_bytes']} bytes (binary)")
    if row.get("solve_s") is not None:
        table.add_row("solver", f"{row['solver']}: build {row['build_s']:.2f} s, solve {row['solve_s']:.2f} s")
    if row.get("simulated_total_j") is not None:
        table.add_row("simulated", f"{row['simulated_total_j']:.6g} J, makespan {row['simulated_runtime_s']:.6g} s, "
                                   f"peak {row['simulated_peak_ram_bytes']:,.0f} bytes, stalls {row['simulated_stall_s']:.4g} s")
    console.print(table)
    console.print(f"[dim]{ASSUMPTIONS}; timing {row['timing']}: {TIMING_MODELS[row['timing']]}.[/dim]")


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
    schedule: Optional[Path] = typer.Option(None, help="Replay this saved schedule.json instead of solving."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    out: Optional[Path] = typer.Option(None, help="Output folder (default results/<scenario name>/simulate/<point>/)."),
    charts: bool = typer.Option(True, help="Draw the schedule and timeline charts (HTML and PNG)."),
) -> None:
    """Solve (or load) a schedule and replay it on a SimPy model of the device.

    The machine: one compute engine, DMA channel(s) to storage (latency + bytes / bandwidth each),
    a memory bus shared by compute and DMA (fluid sharing: when demand exceeds the bus bandwidth,
    every active transfer and op slows by the same factor), and RAM as a hard capacity (the
    platform's RAM less reserved training state). Prediction (the optimiser's model) and
    simulation are set side by side; what breaks is flagged.
    """
    from poetsim.pipeline import compare_prediction, load_run, run_strategy, write_run

    spec, problem = _selected_problem(scenario, model, platform, ram, runtime, _timing_value(timing))
    if schedule is not None:
        run = load_run(problem, schedule)
    else:
        run = run_strategy(problem, _strategy(spec, strategy), solver or spec.solver,
                           time_limit if time_limit is not None else spec.time_limit_s, simulate=True)
    _fail_if_unsolved(run)
    if out is None:  # beside the sweep's results, never over them
        slug = re.sub(r"[^A-Za-z0-9_.%-]+", "-", f"{problem.graph.name}_{problem.platform.name}_ram{problem.ram}"
                      f"_rt{problem.runtime_x:g}x_{run.strategy}_{problem.timing.value}").replace("%", "pct")
        out = Path("results") / spec.name / "simulate" / slug
    write_run(run, out)
    comparison = compare_prediction(run)
    (out / "summary.json").write_text(json.dumps(comparison, indent=1) + "\n")
    if charts:
        from poetsim.report.charts import save_run_charts

        save_run_charts(run, out, title=f"{spec.name}: {run.strategy}")
    if as_json:
        print(json.dumps(comparison))
        return
    table = Table("figure", "predicted", "simulated", "difference", title=f"{run.strategy}: prediction vs simulation ({problem.timing.value} timing)")
    for name in ("makespan_s", "peak_ram_bytes", "energy_j"):
        p, s, d = comparison["predicted"][name], comparison["simulated"][name], comparison["difference_pct"][name]
        table.add_row(name, f"{p:.6g}", f"{s:.6g}", f"{d:+.3f} %")
    console.print(table)
    for flag in comparison["flags"]:
        console.print(f"[yellow]flag:[/yellow] {flag}")
    console.print(f"wrote {out}/ (trace.csv, summary.json, schedule.json, schedule.bin, charts)")
    console.print(f"[dim]{ASSUMPTIONS}; timing {problem.timing.value}: {TIMING_MODELS[problem.timing.value]}. {SIMULATOR_ASSUMPTIONS}.[/dim]")


# --- sweeps, comparisons, reports and the guard ------------------------------------------------

def _results_dir(target: Path) -> Path:
    return target.parent if target.name == "runs.csv" else target


def _scenario_for(target: Path):
    """A scenario file, or the scenario a results folder was swept from; and its results folder."""
    from poetsim.scenario import load_scenario

    if target.suffix in (".yaml", ".yml"):
        scenario = load_scenario(target)
        return scenario, Path("results") / scenario.name
    directory = _results_dir(target)
    return load_scenario(directory / "scenario.yaml"), directory


def _sweep_with_progress(scenario, directory: Path, jobs, resume: bool, time_limit, executor, scheduler) -> Path:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from poetsim.sweep import run_sweep, save_scenario_copy

    save_scenario_copy(scenario, directory)
    failures = 0
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[failures]} failed"), TimeElapsedColumn(), TextColumn("ETA"),
                  TimeRemainingColumn(), console=Console(stderr=True)) as progress:
        task = progress.add_task(scenario.name, total=len(scenario.points()), failures=0)

        def on_row(row, done, total):
            nonlocal failures
            failures += row.status is Status.FAILED
            progress.update(task, completed=done, failures=failures)

        progress.update(task, completed=0)
        path = run_sweep(scenario, directory, jobs, resume, time_limit, executor, scheduler, on_row=on_row)
        progress.update(task, completed=len(scenario.points()))
    return path


@app.command()
@_boundary
def sweep(
    scenario: Path = typer.Argument(..., help="Scenario YAML; its lists make the grid."),
    jobs: Optional[int] = typer.Option(None, "-j", "--jobs", min=1, help="Parallel worker processes (default: the core count)."),
    out: Optional[Path] = typer.Option(None, help="Results folder (default results/<scenario name>/)."),
    resume: bool = typer.Option(False, help="Continue a sweep: skip the points already in runs.csv."),
    time_limit: PointTimeLimitOpt = None,
    executor: str = typer.Option("process", help="process (local worker processes) or dask."),
    scheduler: Optional[str] = typer.Option(None, help="Dask scheduler address (with --executor dask; default: a local cluster)."),
) -> None:
    """Run every point of a scenario's grid: solve, check, simulate; one row per point in runs.csv.

    Rows are appended as points finish, so a sweep stopped at any moment keeps them; infeasible
    and failed points are rows too. Schedules and traces go to <out>/points/.
    """
    from poetsim.results import load_results
    from poetsim.scenario import load_scenario

    spec = load_scenario(scenario)
    directory = out or Path("results") / spec.name
    path = _sweep_with_progress(spec, directory, jobs, resume, time_limit, executor, scheduler)
    frame = load_results(path)
    counts = frame["status"].value_counts().to_dict()
    console.print(f"{len(frame)} points in {path}: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))


@app.command()
@_boundary
def compare(
    target: Path = typer.Argument(..., help="Scenario YAML, or a results folder / runs.csv from a sweep."),
    jobs: Optional[int] = typer.Option(None, "-j", "--jobs", min=1, help="Parallel worker processes."),
    time_limit: PointTimeLimitOpt = None,
) -> None:
    """Strategies side by side for each point, with the keep-all and checkpoint-sqrt baselines.

    Runs whatever the results folder lacks (the baselines take no solver), prints the table and
    writes compare.csv beside runs.csv.
    """
    from poetsim.results import compare_strategies, load_results
    scenario, directory = _scenario_for(target)
    wanted = tuple(dict.fromkeys(scenario.strategies + ("keep-all", "checkpoint-sqrt")))
    scenario = scenario.model_copy(update={"strategies": wanted})
    _sweep_with_progress(scenario, directory, jobs, True, time_limit, "process", None)
    table = compare_strategies(load_results(directory))
    table.to_csv(directory / "compare.csv", index=False)
    view = Table(*("model", "platform", "RAM", "runtime", "strategy", "status", "energy J", "overhead %", "peak RAM", "makespan s"))
    for row in table.itertuples(index=False):
        ok = Status(row.status).has_schedule
        view.add_row(Path(str(row.model)).stem, Path(str(row.platform)).stem, str(row.ram), f"{row.runtime_x:g}x", row.strategy,
                     row.status, f"{row.predicted_total_j:.6g}" if ok else "-", f"{row.overhead_pct:+.3f}" if ok else "-",
                     f"{row.predicted_peak_ram_bytes:,.0f}" if ok else "-", f"{row.predicted_runtime_s:.4g}" if ok else "-")
    console.print(view)
    console.print(f"wrote {directory / 'compare.csv'}")


@app.command()
@_boundary
def report(
    results: Path = typer.Argument(..., help="Results folder or runs.csv of a sweep."),
    out: Optional[Path] = typer.Option(None, help="Where to write report.html and the PNGs (default: the results folder)."),
) -> None:
    """Draw the sweep's charts: overhead vs RAM, vs runtime, per platform, Pareto front, predicted vs simulated."""
    from poetsim.report.report import build_report
    from poetsim.results import load_results

    frame = load_results(results)
    directory = out or _results_dir(results)
    name = str(frame["scenario"].iloc[0]) if "scenario" in frame and len(frame) else _results_dir(results).name
    path = build_report(frame, directory, name)
    console.print(f"report: {path}")


@app.command()
@_boundary
def check(
    results: Path = typer.Argument(..., help="Results folder or runs.csv to check."),
    baseline: Path = typer.Option(..., help="Baseline runs.csv to compare against."),
    rtol: float = typer.Option(1e-3, min=0.0, help="Relative energy tolerance before a point counts as worse."),
) -> None:
    """The energy regression guard: exit 1 if a point got worse, became infeasible, or is missing."""
    from poetsim.results import check_against_baseline, load_results

    changes = check_against_baseline(load_results(results), load_results(baseline), rtol)
    moved = [c for c in changes if c.verdict != "same"]
    table = Table("point", "verdict", "baseline J", "now J", "detail", title=f"{len(changes)} points vs {baseline} (rtol {rtol:g})")
    for change in moved:
        style = "red" if change.fails else "green"
        table.add_row(change.point_key, f"[{style}]{change.verdict}[/{style}]",
                      "-" if change.baseline_j is None else f"{change.baseline_j:.6g}",
                      "-" if change.current_j is None else f"{change.current_j:.6g}", change.detail)
    if moved:
        console.print(table)
    failing = [c for c in changes if c.fails]
    better = sum(c.verdict in ("better", "now-feasible") for c in changes)
    if failing:
        print(f"poetsim: error: {len(failing)} of {len(changes)} points regressed "
              f"({', '.join(sorted({c.verdict for c in failing}))})", file=sys.stderr)
        raise typer.Exit(1)
    console.print(f"ok: no point got worse beyond {rtol:g}" + (f"; {better} got better" if better else ""))
