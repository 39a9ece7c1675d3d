"""Commands over a whole study: `sweep`, `compare`, `report`, `paper` and the energy guard `check`."""

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from poetsim.analysis import GUARD_ATOL_J, GUARD_RTOL
from poetsim.cli.app import JsonOpt, command, emit_json, err, note, out, records
from poetsim.cli.options import BatchOpt, PointEffortOpt, PointTimeLimitOpt, number_option
from poetsim.cli.terminal import Progress, duration, table
from poetsim.folders import StudyFolder
from poetsim.inputs.files import check_output_dir, check_output_file
from poetsim.status import Status

if TYPE_CHECKING:
    from poetsim.runs import ResultRow


def _row_progress(progress: Progress):
    """An `on_row` callback: points done, failures, elapsed and time left."""
    failures = 0

    def show(row: "ResultRow", done: int, total: int) -> None:
        nonlocal failures
        failures += row.status is Status.FAILED
        elapsed = progress.elapsed_s
        left = f", about {duration(elapsed / done * (total - done))} left" if 0 < done < total else ""
        progress.update(f"{done}/{total} points, {failures} failed, {duration(elapsed)}{left}", force=done == total)

    return show


@command()
def sweep(
    scenario: Path = typer.Argument(..., help="Scenario YAML; its lists make the grid."),
    jobs: int | None = typer.Option(
        None, "-j", "--jobs", min=1, help="Points run at once (default: the core count; with --scheduler, the cluster's workers)."
    ),
    out_dir: Path | None = typer.Option(None, "--out", help="Results folder (default build/<scenario name>/)."),
    resume: bool = typer.Option(False, help="Continue a sweep: skip the points already in runs.csv."),
    effort: PointEffortOpt = None,
    time_limit: PointTimeLimitOpt = None,
    batch_size: BatchOpt = None,
    executor: str | None = typer.Option(
        None, help="process (local worker processes; the default) or dask (the default with --scheduler)."
    ),
    scheduler: str | None = typer.Option(
        None,
        help="A Dask scheduler's address, tcp://HOST:PORT: run the points on its cluster (implies --executor dask; "
        "without it, dask starts a local cluster). Workers need the same poetsim, not the results folder (docs/scale-out.md).",
    ),
    worker_wait: float | None = number_option(
        None,
        "--worker-wait",
        at_least=0.1,
        at_most=86400.0,
        help="With dask: give up after this many seconds without any worker (default 60).",
    ),
    as_json: JsonOpt = False,
) -> None:
    """Run every point of a scenario's grid: solve, check, simulate; one row per point in runs.csv.

    Rows are appended as points finish, so a sweep stopped at any moment keeps them; infeasible
    and failed points are rows too, and --resume runs the failed ones again. Schedules and
    traces go to <out>/points/. Every option and path is checked before anything is written.
    Ctrl-C or SIGTERM keeps every finished point and exits 130 or 143; one sweep at a time may
    write into a folder (docs/dependability.md). With --scheduler the points run on a Dask
    cluster, and this process alone writes the results folder (docs/scale-out.md).
    """
    from poetsim import api
    from poetsim.errors import UserInputError
    from poetsim.inputs.scenario import load_scenario
    from poetsim.sweeps.dask_pool import NO_WORKER_WAIT_S

    if worker_wait is not None and executor != "dask" and scheduler is None:
        raise UserInputError("--worker-wait: it applies to --executor dask (or --scheduler) only")

    spec = load_scenario(scenario)
    spec, notes = api.with_batch_size(spec, batch_size)
    for text in notes:
        note(text)
    with Progress(f"sweep {spec.name}") as progress:
        result = api.sweep(
            spec,
            out_dir,
            jobs=jobs,
            resume=resume,
            effort=effort,
            time_limit_s=time_limit,
            executor=executor,
            scheduler=scheduler,
            on_row=_row_progress(progress),
            no_worker_wait_s=NO_WORKER_WAIT_S if worker_wait is None else worker_wait,
        )
    counts = result.counts()
    if as_json:
        return emit_json(
            {
                "directory": str(result.directory),
                "runs_csv": str(result.runs_csv),
                "points": len(result.rows),
                "counts": counts,
                "other_rows": len(result.others),
            }
        )
    others = ""
    if result.others:
        from poetsim.strategies import COMPARE_BASELINES

        compared = all(r.strategy in COMPARE_BASELINES for r in result.others)
        whose = "compare's baselines" if compared else "points outside the scenario"
        others = f"; it also holds {len(result.others)} rows of {whose}"
    summary = ", ".join(f"{n} {s}" for s, n in counts.items())
    out.line(f"{len(result.rows)} points in {result.runs_csv}: {summary}{others}")


@command()
def compare(
    target: Path = typer.Argument(..., help="A sweep's results folder (or runs.csv), or a scenario YAML (its default folder)."),
    jobs: int | None = typer.Option(None, "-j", "--jobs", min=1, help="Parallel worker processes."),
    effort: PointEffortOpt = None,
    time_limit: PointTimeLimitOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Strategies side by side: one row per model, platform, RAM and runtime; one column per strategy.

    Runs the keep-all and checkpoint-sqrt baselines (no solver) for every point that lacks
    them, and solves any point of the scenario's strategies that runs.csv lacks (an interrupted
    sweep), then prints the table and writes compare.csv (every number) and compare.txt beside
    runs.csv. A '*' marks a schedule not proven optimal.
    """
    from poetsim import api
    from poetsim.analysis.results import HEADLINE_NOTE, headline_cells

    with Progress("compare") as progress:
        result = api.compare(target, jobs=jobs, effort=effort, time_limit_s=time_limit, on_row=_row_progress(progress))
    if as_json:
        return emit_json(records(result.table))
    headers, rows = headline_cells(result.table)
    out.print(table(headers, rows))
    out.print(HEADLINE_NOTE)
    out.line(f"wrote {result.csv_path} and {result.text_path}")


@command()
def report(
    results: Path = typer.Argument(..., help="A sweep's results folder (or runs.csv), or a scenario YAML (its default folder)."),
    out_dir: Path | None = typer.Option(
        None, "--out", help="Where to write report.html, the PNGs and the SVGs (default: the results folder)."
    ),
) -> None:
    """Draw the sweep's report: report.html opens on the finding, then the overhead chart and the table.

    Every chart is also written as a PNG (2x) and an SVG; the tightest budget each strategy meets
    is replayed from the sweep's points/ into schedules.html.
    """
    from poetsim import api
    from poetsim.analysis.results import load_results
    from poetsim.report.report import build_report

    if results.suffix in (".yaml", ".yml"):
        results = api.results_scenario(results)[1]
    directory = out_dir or StudyFolder.holding(results).path
    check_output_dir(directory, "--out")
    frame = load_results(results)
    name = str(frame["scenario"].iloc[0]) if "scenario" in frame and len(frame) else directory.name
    sweep_dir = results.parent if results.name == "runs.csv" else results
    path = build_report(frame, directory, name, sweep_dir=sweep_dir)
    out.line(f"report: {path}")


@command()
def paper(
    results: list[Path] = typer.Argument(..., help="Results folders of the paper_* scenarios (scenarios/paper_*.yaml)."),
    html_out: Path | None = typer.Option(None, "--html", help="Also write the comparisons as an HTML page here."),
    as_json: JsonOpt = False,
) -> None:
    """The POET paper's claims (Figures 3-5, Table 3) beside poetsim's figures, each judged under poetsim's model.

    With --html, a page that opens on the count of verdicts, with a chart per exhibit that
    overlays the paper's numbers on poetsim's, linked to each study's report.
    """
    from poetsim.analysis import paper as exhibits
    from poetsim.analysis.results import load_results

    if html_out is not None:
        check_output_file(html_out, "--html")
    found, studies = {}, {}
    for folder in results:
        frame = load_results(folder)
        name = str(frame["scenario"].iloc[0]) if len(frame) else Path(folder).name
        found[name] = frame
        studies[name] = folder.parent if folder.name == "runs.csv" else folder
    done = exhibits.comparisons(found)
    if html_out is not None:
        from poetsim.report.paper_page import write_paper_page

        write_paper_page(done, html_out, studies)
    if as_json:
        return emit_json(
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
                            "verdict": k.verdict.value,
                            "qualifier": k.qualifier,
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
                [
                    (
                        f"{k.where}: {k.statement}",
                        k.paper,
                        k.poetsim,
                        k.verdict.value + (f" ({k.qualifier})" if k.qualifier else ""),
                        k.reason,
                    )
                    for k in comparison.claims
                ],
                title=comparison.title,
            )
        )
    if html_out is not None:
        out.line(f"wrote {html_out}")


@command()
def check(
    results: Path = typer.Argument(..., help="Results folder or runs.csv to check."),
    baseline: Path = typer.Option(..., help="Baseline runs.csv to compare against."),
    rtol: float = number_option(
        GUARD_RTOL,
        at_least=0.0,
        help=(
            "Tolerance as a share of the baseline's energy above keep-all (and of its peak RAM): "
            "energy may rise by max(rtol x overhead, atol) before a point counts as worse."
        ),
    ),
    atol: float = number_option(GUARD_ATOL_J, at_least=0.0, help="Floor of the energy tolerance, in joules."),
    as_json: JsonOpt = False,
) -> None:
    """The energy regression guard: exit 1, one line per point, if any point regressed.

    A point fails when it is missing; its status is failed or invalid; it lost its schedule or
    a proof (optimal -> feasible, infeasible -> no-solution); its energy is missing, zero,
    negative or not finite; its predicted or simulated energy rose by more than
    max(rtol x its baseline overhead above keep-all, atol); or its predicted or simulated peak
    RAM rose by more than rtol x the baseline's. A results file that cannot be read as one
    exits 2. Like is compared with like: points of the baselines that `poetsim compare` adds
    (keep-all, checkpoint-sqrt) are left out where only one of the two files holds them.
    """
    from poetsim.analysis.guard import Verdict, check_against_baseline
    from poetsim.analysis.results import load_results

    changes = check_against_baseline(load_results(results), load_results(baseline), rtol, atol, str(baseline))
    failing = [c for c in changes if c.fails]
    if as_json:
        emit_json(
            {
                "points": len(changes),
                "failing": len(failing),
                "changes": [
                    {
                        "point_key": c.point_key,
                        "verdict": c.verdict.value,
                        "fails": c.fails,
                        "baseline_j": c.baseline_j,
                        "current_j": c.current_j,
                        "detail": c.detail,
                        "strategy": c.strategy,
                    }
                    for c in changes
                ],
            }
        )
    else:
        moved = [c for c in changes if c.verdict not in (Verdict.SAME, Verdict.NOT_COMPARED)]
        if moved:
            out.print(
                table(
                    ("point", "verdict", "baseline J", "now J", "detail"),
                    [
                        (
                            c.point_key,
                            str(c.verdict),
                            "-" if c.baseline_j is None else f"{c.baseline_j:.9g}",
                            "-" if c.current_j is None else f"{c.current_j:.9g}",
                            c.detail,
                        )
                        for c in moved
                    ],
                    title=f"{len(changes)} points vs {baseline} (rtol {rtol:g}, atol {atol:g} J)",
                )
            )
        _note_not_compared([c for c in changes if c.verdict is Verdict.NOT_COMPARED])
        for change in failing:
            err.print(f"poetsim: regressed: {change.point_key}: {change.verdict}: {change.detail}", soft_wrap=True)
    if failing:
        err.print(
            f"poetsim: error: {len(failing)} of {len(changes)} points regressed "
            f"({', '.join(sorted({c.verdict.value for c in failing}))})",
            soft_wrap=True,
        )
        raise typer.Exit(1)
    if not as_json:
        better = sum(c.verdict.improved for c in changes)
        out.print(
            f"ok: no point regressed (rtol {rtol:g} of the overhead above keep-all, atol {atol:g} J)"
            + (f"; {better} got better" if better else "")
        )


def _note_not_compared(changes: list) -> None:
    """One note for the points that only one file holds because `poetsim compare` added them there."""
    if changes:
        names = ", ".join(sorted({str(c.strategy) for c in changes}))
        note(
            f"not compared: {len(changes)} points of {names}, the baselines `poetsim compare` adds, in one of the two files only"
        )
