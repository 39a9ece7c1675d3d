"""`poetsim device ...`: run schedules on an emulated microcontroller, and measure it as a profile.

The library (poetsim.device) is imported when a command runs, so that `poetsim --help` stays fast.
"""

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from poetsim.assumptions import DEVICE_ASSUMPTIONS
from poetsim.cli.app import command, emit_json, group, note, out
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
    number_option,
)
from poetsim.cli.terminal import table
from poetsim.errors import DeviceError, ScheduleError, UserInputError
from poetsim.units import number_text

if TYPE_CHECKING:
    import pandas as pd

device = group(
    "device",
    help="Run schedules on an emulated microcontroller (QEMU Cortex-M) and hold them to the prediction.",
    epilog=f"{DEVICE_ASSUMPTIONS}.",
)

TimeoutOpt = number_option(120.0, "--timeout", at_least=1.0, help="Seconds the emulator may run one step before it is stopped.")
SeedOpt = typer.Option(0, "--seed", min=0, help="Seed of the weights and the batch.")


@command("run", group=device)
def run(
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
        None, "--schedule", help="Run this schedule (schedule.json or schedule.bin) instead of solving; it is checked first."
    ),
    seed: int = SeedOpt,
    timeout: float = TimeoutOpt,
    out_dir: Path | None = typer.Option(
        None,
        "--out",
        help="Keep the emulator's files here: image.bin, result.bin and grads.bin of each run, in schedule/ and keep-all/.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON document instead of tables."),
) -> None:
    """Solve (or load) one schedule and run it on the emulated microcontroller of the platform.

    The runtime executes the schedule instruction by instruction in an arena of exactly the RAM
    budget, paging to an emulated flash; it runs the keep-all schedule too. Reported, and checked:
    the gradients bitwise equal to keep-all's and within 1e-4 of a NumPy reference, the arena's
    peak equal to the prediction and within the budget, bytes paged and recomputations as
    scheduled. Measured instruction time is shown beside the predicted compute time. Exits 7
    when a check fails or the device refuses the schedule.
    """
    from poetsim import api
    from poetsim.device.run import Session, check_runnable, require_tools, run_on_device
    from poetsim.inputs.files import check_input_file
    from poetsim.inputs.scenario import load_scenario
    from poetsim.pipeline import saved_timing
    from poetsim.schedule.formats import SCHEDULE_FILES, load_schedule

    api.check_out(out_dir)
    require_tools()
    if schedule is not None:
        check_input_file(schedule, "--schedule", SCHEDULE_FILES)
    loaded = load_scenario(scenario)
    given = load_schedule(schedule) if schedule is not None else None
    if given is not None and schedule is not None:
        timing = saved_timing(given, timing, schedule).value  # a schedule is checked, and runs, under its own
    choice = choose_point(loaded, model, platform, ram, runtime, strategy, timing, batch_size, saved=given is not None)
    problem = choice.problem
    check_runnable(problem)
    if given is not None and schedule is not None:
        picked, label = given, schedule.name
    else:
        solved = api.require_schedule(api.solve(scenario, solver=solver, effort=effort, time_limit_s=time_limit, choice=choice))
        assert solved.schedule is not None
        picked, label = solved.schedule, choice.strategy
    try:
        result = run_on_device(problem, picked, out_dir=out_dir, session=Session(seed=seed, timeout_s=timeout))
    except ScheduleError as exc:
        if given is None:
            raise
        raise exc.about(schedule) from None
    if as_json:
        emit_json({"schedule": label, **result.summary()})
    else:
        _print_run(result, label)
    if not result.ok:
        raise DeviceError(
            "the device disagreed with the prediction: " + "; ".join(f"{c.name}: {c.detail}" for c in result.failed)
        )


#: The device table's text columns; the others are numbers, shown as `_device_cells` says.
_DEVICE_TEXT = frozenset({"model", "platform", "ram", "strategy", "device"})


def _device_cells(shown: "pd.DataFrame") -> Iterator[tuple[str, ...]]:
    """The device table's rows as text: bytes and counts whole with thousands separators, seconds to 6 digits.

    runs.csv holds them as floats (a column with gaps reads back as float); the table shows them
    as the quantities they are.
    """
    import pandas as pd

    for row in shown.itertuples(index=False):
        cells = []
        for column, value in zip(shown.columns, row):
            if column in _DEVICE_TEXT or pd.isna(value):
                cells.append("" if pd.isna(value) else str(value))
            elif column == "runtime":
                cells.append(f"{number_text(value)}x")
            elif column.startswith("compute s"):
                cells.append(f"{float(value):.6g}")
            elif column == "device / predicted":
                cells.append(f"{float(value):.3f}")
            else:
                cells.append(f"{int(value):,}")
        yield tuple(cells)


def _print_run(result, label: str) -> None:
    summary = result.summary()
    out.print(
        table(
            ("check", "", "detail"),
            [(c.name, "ok" if c.ok else "FAILED", c.detail) for c in result.checks],
            title=f"{label} on {result.model} / {result.platform}: {result.target} at {result.clock_hz / 1e6:g} MHz "
            f"({result.timing} timing)",
        )
    )
    by_op: dict[str, list[float]] = {}
    for node in result.nodes:
        row = by_op.setdefault(node.op, [0, 0.0, 0.0])
        row[0] += node.computes
        row[1] += node.measured_s
        row[2] += node.predicted_s
    rows = [(op, n, f"{m:.6g}", f"{p:.6g}", f"{m / p:.3f}" if p else "") for op, (n, m, p) in by_op.items()]
    rows.append(
        (
            "all but the batch read",
            sum(n.computes for n in result.nodes if n.op != "input"),
            f"{result.compute_s:.6g}",
            f"{result.predicted_compute_s:.6g}",
            f"{result.compute_s / result.predicted_compute_s:.3f}",
        )
    )
    out.print(
        table(
            ("operation", "computes", "measured s", "predicted s", "ratio"),
            rows,
            title="compute time by operation (measured: emulated instructions at the clock)",
            right=("computes", "measured s", "predicted s", "ratio"),
        )
    )
    instr = summary["instructions"]
    out.print(
        table(
            ("figure", "value"),
            [
                ("arena", f"{summary['arena_bytes']:,} bytes (the RAM budget); keep-all peak {summary['keep_all_peak_bytes']:,}"),
                ("compaction", f"{summary['compactions']} times, {summary['moved_bytes']:,} bytes moved"),
                (
                    "step",
                    f"{instr['step']:,.0f} instructions = {result.step_s:.6g} s; "
                    f"predicted runtime {result.predicted.runtime_s:.6g} s",
                ),
                (
                    "  of which",
                    f"compute {instr['compute']:,.0f}, copies to and from storage {instr['transfer']:,.0f}, "
                    f"compaction {instr['compact']:,.0f}",
                ),
                ("schedule", f"{summary['schedule_bytes']} bytes (binary)"),
                ("runtime flash", f"{summary['runtime_flash_bytes']:,} bytes (code, constants, data initialisers)"),
                (
                    "runtime RAM",
                    f"{summary['runtime_static_bytes']:,} bytes of state, "
                    f"{summary['runtime_stack_bytes']:,} bytes of stack at most",
                ),
                (
                    "loss per sample",
                    ", ".join(f"{v:.6g}" for v in summary["losses"]) + f" (a batch of {len(summary['losses'])})",
                ),
                ("emulator", f"{summary['emulator_wall_s']:.2f} s wall for the step"),
            ],
        )
    )
    out.print(DEVICE_ASSUMPTIONS + ".", style="dim")


@command("profile", group=device)
def profile(
    platform: str = typer.Option(..., "--platform", help="The datasheet profile (name or YAML) whose core to measure."),
    out_file: Path = typer.Option(..., "--out", help="The measured profile YAML to write."),
    name: str | None = typer.Option(
        None, "--name", help="The new profile's name (default: <platform>-qemu; a measured profile keeps its own)."
    ),
    timeout: float = TimeoutOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the fits as one JSON document."),
) -> None:
    """Measure each operation kind on the platform's emulated core and write a platform profile.

    Probe networks of the runtime's operations run at several sizes (keep-all steps); each graph
    op kind's time (instructions at the profile's clock) is fitted as a fixed cost per call plus
    FLOPs over a rate. The profile written is the datasheet profile with those compute costs;
    powers, storage and memory bus are kept with their sources. Predictions made with it rest on
    measured costs.
    """
    import tempfile

    from poetsim.device.profile import measured_name, profile_device, write_profile
    from poetsim.device.run import require_tools
    from poetsim.inputs.files import check_output_file
    from poetsim.inputs.profiles import load_platform

    check_output_file(out_file, "--out")
    if name is not None and not name.strip():
        raise UserInputError("--name: give the new profile a name, or leave --name out for <platform>-qemu")
    base = load_platform(platform)
    require_tools()
    with tempfile.TemporaryDirectory(prefix="poetsim-profile-") as work:
        measured, fits = profile_device(base, name if name is not None else measured_name(base), Path(work), timeout)
    write_profile(measured, out_file, f"poetsim device profile --platform {platform}")
    if as_json:
        emit_json(
            {
                op: {"call_s": f.call_s, "flops_per_s": f.flops_per_s, "samples": f.samples, "worst_error": f.worst_error}
                for op, f in fits.items()
            }
        )
        return
    out.print(
        table(
            ("op", "call (us)", "rate (MFLOP/s)", "samples", "largest error"),
            [
                (op, f"{1e6 * f.call_s:.3f}", f"{f.flops_per_s / 1e6:.4g}", f.samples, f"{100 * f.worst_error:.1f} %")
                for op, f in fits.items()
            ],
            title=f"{measured.name}: compute costs measured on {base.device.core if base.device else ''} at "
            f"{(base.device.clock_hz if base.device else 0) / 1e6:g} MHz",
            right=("call (us)", "rate (MFLOP/s)", "samples", "largest error"),
        )
    )
    out.line(f"wrote {out_file}")
    out.print(DEVICE_ASSUMPTIONS + ".", style="dim")


@command("sweep", group=device)
def sweep(
    target: Path = typer.Argument(
        ..., help="A scenario YAML (swept first, with compare's baselines) or a sweep's results folder."
    ),
    out_dir: Path | None = typer.Option(None, "--out", help="Results folder for a scenario (default build/<scenario name>/)."),
    seed: int = SeedOpt,
    timeout: float = TimeoutOpt,
    as_json: bool = typer.Option(False, "--json", help="Print the device table as JSON records."),
) -> None:
    """Run every schedule of a sweep on the emulated device and record it in runs.csv.

    Given a scenario, it is swept first (poetsim sweep); a results folder is taken as it is. Then
    compare's baselines are added (poetsim compare) and each row with a schedule runs on its
    platform's emulated core and gains the device_* columns: checks passed, measured peak,
    traffic, recomputations, and measured beside predicted compute time; compare.csv and
    compare.txt are written again with them, and `poetsim report` shows them. A row the device
    cannot run (a platform without a device section, a model without its kernels) is left unrun,
    saying why. Exits 7 if any row's checks fail.
    """
    from poetsim import api
    from poetsim.analysis.results import load_results
    from poetsim.cli.app import records
    from poetsim.cli.terminal import Progress
    from poetsim.device.run import require_tools
    from poetsim.device.study import NOT_RUN, device_sweep, device_table

    require_tools()
    if target.suffix in (".yaml", ".yml"):
        api.check_out(out_dir)
        scenario = api.load_scenario(target)
        directory = out_dir or api.default_out(scenario)
        with Progress(f"sweeping {scenario.name}") as progress:
            api.sweep(scenario, directory, resume=True, on_row=lambda row, done, total: progress.update(f"{done}/{total} points"))
    else:
        if out_dir is not None:
            raise UserInputError(f"--out: {target} is a results folder, whose runs.csv is rewritten in place; leave --out out")
        directory = target
        if not (directory / "runs.csv").is_file():
            raise UserInputError(f"{directory}: not a sweep's results folder (no runs.csv; run `poetsim sweep` first)")
    api.compare(directory)  # the baselines compare sets beside each strategy are run on the device too
    with Progress("running schedules on the device") as progress:
        rows = device_sweep(
            directory, seed, timeout, on_row=lambda row, done, total: progress.update(f"{done}/{total} schedules")
        )
    api.compare(directory)  # compare.csv and compare.txt again, now with the device's verdicts
    shown = device_table(load_results(directory))
    if as_json:
        emit_json(records(shown))
    else:
        out.print(
            table(
                list(shown.columns),
                _device_cells(shown),
                title=f"{directory}: measured beside predicted",
                right=[c for c in shown.columns if c not in _DEVICE_TEXT],
            )
        )
        out.line(f"wrote the device's columns into {directory}/runs.csv; the folder of each point run has device.json")
        out.print(DEVICE_ASSUMPTIONS + ".", style="dim")
    unrun = [row for row in rows if row.device_ok is None]
    if unrun:
        first = unrun[0]
        why = (first.device_message or "").removeprefix(NOT_RUN)
        said = f"{len(unrun)} of {len(rows)} schedules not run; first {first.point_key}: {why}"
        if as_json:
            note(said)  # stdout holds the JSON document alone
        else:
            out.line(said)
    failed = [row for row in rows if row.device_ok is False]
    if failed:
        first = failed[0]
        raise DeviceError(
            f"{len(failed)} of {len(rows)} schedules failed on the device; first {first.point_key}: {first.device_message}"
        )
