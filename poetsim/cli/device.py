"""`poetsim device ...`: run schedules on an emulated microcontroller, and measure it as a profile.

The library (poetsim.device) is imported when a command runs, so that `poetsim --help` stays fast.
"""

from pathlib import Path

import typer

from poetsim.cli.app import app, command, emit_json, note, out
from poetsim.cli.options import (
    BatchOpt,
    ModelOpt,
    PlatformOpt,
    RamOpt,
    RuntimeOpt,
    SolverOpt,
    StrategyOpt,
    TimeLimitOpt,
    TimingOpt,
)
from poetsim.cli.terminal import table
from poetsim.errors import DeviceError, UserInputError

#: What a device figure measures, where users read it (tables, --help, docs/device.md).
DEVICE_ASSUMPTIONS = (
    "Device: the runtime (poetsim/device/runtime, C99, no heap) on QEMU's emulated Cortex-M; time is the "
    "emulated instruction count at the profile's clock, one instruction a cycle (QEMU is not cycle-accurate: no "
    "wait states or stalls); weights, their gradients, the batch and paged activations live outside the arena, "
    "which is exactly the RAM budget; paging copies to an emulated flash region, its time is the profile's, not "
    "measured; docs/device.md"
)

device = typer.Typer(help="Run schedules on an emulated microcontroller (QEMU Cortex-M) and hold them to the prediction.")
app.add_typer(device, name="device")

TimeoutOpt = typer.Option(120.0, "--timeout", min=1.0, help="Seconds the emulator may run one step before it is stopped.")
SeedOpt = typer.Option(0, "--seed", help="Seed of the weights and the batch.")


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
    time_limit: TimeLimitOpt = None,
    batch_size: BatchOpt = None,
    schedule: Path | None = typer.Option(
        None, "--schedule", help="Run this schedule (schedule.json or schedule.bin) instead of solving; it is checked first."
    ),
    seed: int = SeedOpt,
    timeout: float = TimeoutOpt,
    out_dir: Path | None = typer.Option(None, "--out", help="Keep the emulator's files here (image.bin, result.bin, grads.bin)."),
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
    from poetsim.device.run import Session, check_runnable, run_on_device
    from poetsim.inputs.scenario import load_scenario
    from poetsim.schedule.formats import load_schedule

    api.check_out(out_dir)
    if schedule is not None and not schedule.is_file():
        raise UserInputError(f"--schedule: no such file {schedule}")
    loaded = load_scenario(scenario)
    if schedule is not None and strategy is None:
        strategy = loaded.strategies[0]  # not used: a given schedule is run, so nothing to note
    choice = api.choose(
        loaded,
        model=model,
        platform=platform,
        ram=ram,
        runtime=runtime,
        strategy=strategy,
        timing=timing,
        batch_size=batch_size,
    )
    for text in choice.notes:
        note(text)
    problem = choice.problem
    check_runnable(problem)
    if schedule is not None:
        picked = load_schedule(schedule)
        label = schedule.name
    else:
        solved = api.require_schedule(api.solve(scenario, solver=solver, time_limit_s=time_limit, choice=choice))
        assert solved.schedule is not None
        picked, label = solved.schedule, choice.strategy
    result = run_on_device(problem, picked, out_dir=out_dir, session=Session(seed=seed, timeout_s=timeout))
    if as_json:
        emit_json({"schedule": label, **result.summary()})
    else:
        _print_run(result, label)
    if not result.ok:
        raise DeviceError(
            "the device disagreed with the prediction: " + "; ".join(f"{c.name}: {c.detail}" for c in result.failed)
        )


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
                (
                    "runtime RAM",
                    f"{summary['runtime_static_bytes']:,} bytes of state, "
                    f"{summary['runtime_stack_bytes']:,} bytes of stack at most",
                ),
                ("loss", ", ".join(f"{v:.6g}" for v in summary["losses"])),
                ("emulator", f"{summary['emulator_wall_s']:.2f} s wall for the step"),
            ],
        )
    )
    out.print(DEVICE_ASSUMPTIONS + ".", style="dim")
