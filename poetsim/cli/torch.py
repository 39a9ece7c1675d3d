"""The PyTorch commands: import-torch, execute, profile and validate-run.

torch and the library's PyTorch layer are imported only when one of them runs, so that
`poetsim --help` stays fast.
"""

import csv
import json
from pathlib import Path

import typer

from poetsim.cli.app import command, emit_json
from poetsim.cli.app import out as console
from poetsim.cli.options import PointTimeLimitOpt, ValidateEffortOpt
from poetsim.cli.terminal import table
from poetsim.errors import InfeasibleBudgetError, InternalError, PoetsimError, UserInputError, parsed
from poetsim.inputs.files import check_output_dir, check_output_file
from poetsim.schedule.model import Timing
from poetsim.units import parse_ram, parse_runtime

DEFAULT_SWAP_DIR = Path("build/swap")

_ACCOUNTING = (
    "Activation bytes are the storages of the tensors the executor holds between nodes (parameters, "
    "gradients, static tensors and normalisation statistics apart), summed when the checker takes its "
    "peak; see docs/pytorch.md."
)


FactoryArg = typer.Argument(
    ..., help="The model factory, PACKAGE.MODULE:FUNCTION, called without arguments (e.g. poetsim.pytorch.models:resnet18_cifar)."
)
ShapeOpt = typer.Option(..., "--input-shape", help="Shape of one model input, e.g. 8,3,32,32 (repeat for several inputs).")
DtypeOpt = typer.Option(
    None, "--input-dtype", help="float32 (default), int64, bool (a quarter True: a padding mask), ...: one, or one per input."
)
HighOpt = typer.Option(2, "--input-high", min=1, help="Integer inputs are drawn from [0, this) (token ids: the vocabulary).")
SeedOpt = typer.Option(0, "--seed", help="Seed of the random weights and batch.")
SwapOpt = typer.Option(DEFAULT_SWAP_DIR, "--swap-dir", help="Folder of the page files.")
ThreadsOpt = typer.Option(
    None,
    "--threads",
    min=1,
    help="torch threads (default: the cores less one, left to the I/O thread); profile and execute alike.",
)
DurableOpt = typer.Option(
    True,
    "--durable/--page-cache",
    help="fsync page-outs and drop them from the page cache (default), or leave them in the kernel's cache.",
)


@command("import-torch")
def import_torch(
    factory: str = FactoryArg,
    input_shape: list[str] = ShapeOpt,
    input_dtype: list[str] | None = DtypeOpt,
    input_high: int = HighOpt,
    seed: int = SeedOpt,
    name: str | None = typer.Option(None, help="The graph's name (default: the factory's)."),
    out: Path = typer.Option(..., "--out", help="The poetsim-graph JSON to write."),
) -> None:
    """Import a PyTorch model: capture one training step (forward, cross-entropy loss, backward) as a poetsim graph.

    One node per layer (leaf module call) and one per layer's backward, named by module path;
    FLOPs from torch.utils.flop_counter (per element for other ops); output bytes from the real
    shapes and dtypes. Random weights; nothing is downloaded.
    """
    from poetsim.graphs.io import save_graph
    from poetsim.pytorch.capturing import capture
    from poetsim.pytorch.source import ModelSource, parse_inputs

    check_output_file(out, "--out")
    shapes, dtypes = parse_inputs(input_shape, input_dtype)
    source = ModelSource(factory, shapes, dtypes, seed, input_high)
    module, inputs = source.build()
    captured = capture(module, inputs, name=name or factory.rpartition(":")[2], meta=source.meta())
    try:
        save_graph(captured.graph, out)
    except OSError as error:
        raise UserInputError(f"{out}: cannot write: {error.strerror or error}") from None
    summary = captured.graph.summary()
    console.print(
        f"{captured.graph.name}: {summary['nodes']} nodes ({summary['forward_nodes']} forward, "
        f"{summary['backward_nodes']} backward), {summary['forward_flops'] / 1e9:.4g} GFLOP forward, "
        f"{summary['backward_flops'] / 1e9:.4g} GFLOP backward, keep-all peak "
        f"{summary['keep_all_peak_bytes']:,} bytes, parameters {summary['param_bytes']:,} bytes"
    )
    random = int(dict(captured.graph.meta).get("random_nodes", "0"))
    if random:
        console.print(
            f"{random} random node(s) (dropout, stochastic depth): a recomputation redraws the same numbers from the "
            f"generator state saved at the first compute ({dict(captured.graph.meta)['random_state_bytes']} bytes, "
            "held with the parameters)"
        )
    console.line(f"wrote {out}")


@command("execute")
def execute(
    target: Path = typer.Argument(..., help="A graph JSON made by import-torch, or a scenario YAML whose model is one."),
    schedule: Path = typer.Option(..., "--schedule", help="schedule.json or schedule.bin (from poetsim solve --out)."),
    swap_dir: Path = SwapOpt,
    platform: str | None = typer.Option(
        None, help="Profile to predict with (default: the scenario's; a graph alone gets no time prediction)."
    ),
    ram: str | None = typer.Option(None, help="Stop if the executor holds more activation RAM (bytes, units or % of keep-all)."),
    timing: str | None = typer.Option(None, help="compute-only or overlap (default: the schedule's)."),
    threads: int | None = ThreadsOpt,
    durable: bool = DurableOpt,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    out: Path | None = typer.Option(None, help="Write execution.json and instructions.csv here."),
) -> None:
    """Run one real training step on the CPU, instruction by instruction, as the schedule says.

    Computes and recomputes run the nodes' aten ops, frees drop their tensors, page-outs write
    them to files in --swap-dir and page-ins read them back. Reports whether every parameter
    gradient is bitwise equal to a plain loss.backward(), the activation peak held (beside the
    prediction) and the process's peak RSS, the time per instruction and in total, and the
    bytes written and read. A schedule that cannot run stops with one line naming the instruction.
    """
    from poetsim.pytorch.executor import execute as run
    from poetsim.pytorch.source import capture_graph_file
    from poetsim.schedule.formats import load_schedule

    check_output_dir(swap_dir, "--swap-dir")
    if out is not None:
        check_output_dir(out, "--out")
    stated_timing = parsed(Timing.of, timing, "--timing") if timing is not None else None
    stated_ram = parsed(parse_ram, ram, "--ram") if ram is not None else None
    graph_path, profile = _target(target, platform)
    loaded = load_schedule(schedule)
    captured = capture_graph_file(graph_path)
    chosen = stated_timing or loaded.timing
    budget = stated_ram.resolve(captured.graph.keep_all_peak_bytes) if stated_ram is not None else None
    result = run(captured, loaded, swap_dir, timing=chosen, durable=durable, budget_bytes=budget, threads=threads)
    report = _execution_report(captured.graph, loaded, result, profile, chosen)
    if out is not None:
        _write_execution(report, result, out)
    if as_json:
        emit_json(report)
    else:
        _print_execution(report)
        if out is not None:
            console.line(f"wrote {out}/ (execution.json, instructions.csv)")
    _fail_on_mismatch(report)


@command("profile")
def profile(
    out: Path = typer.Option(..., "--out", help="The profile YAML to write (use it as --platform)."),
    swap_dir: Path = SwapOpt,
    threads: int | None = ThreadsOpt,
    durable: bool = DurableOpt,
    repeats: int = typer.Option(5, min=1, help="Timed keep-all runs per calibration model (the fastest counts)."),
    model: str | None = typer.Option(
        None, help="Calibrate compute on this model factory (PACKAGE.MODULE:FUNCTION) instead of poetsim's small calibration set."
    ),
    input_shape: list[str] | None = typer.Option(None, "--input-shape", help="With --model: its input shape(s)."),
    input_dtype: list[str] | None = DtypeOpt,
    input_high: int = HighOpt,
    name: str = typer.Option("host", help="The profile's name."),
) -> None:
    """Measure this machine as a platform profile: compute per operator kind, storage, memory bus.

    Every figure's source says "measured on <cpu> on <date>"; without readable RAPL energy
    counters the powers are poetsim assumptions and the profile says energy is modelled.
    """
    from poetsim.pytorch.host import profile_host, write_profile

    check_output_file(out, "--out")
    check_output_dir(swap_dir, "--swap-dir")
    if model is None and (input_shape or input_dtype):
        raise UserInputError(
            f"{'--input-shape' if input_shape else '--input-dtype'}: describes the inputs of --model; give --model too"
        )
    captures = None
    if model is not None:
        captures = [_capture_factory(model, input_shape or [], input_dtype, input_high, 0)]
    measured = profile_host(swap_dir, captures=captures, durable=durable, threads=threads, repeats=repeats, name=name)
    write_profile(measured, out)
    shown = table(("figure", "value"), (), title=f"profile {measured.name}: {measured.title}")
    shown.add_row("compute (all nodes)", f"{measured.compute.flops_per_s / 1e9:.3g} GFLOP/s")
    for op, rate in measured.compute.op_flops_per_s.items():
        shown.add_row(f"  {op}", f"{rate / 1e9:.3g} GFLOP/s")
    for label, transfer in (("page-out", measured.storage.page_out), ("page-in", measured.storage.page_in)):
        shown.add_row(label, f"{transfer.latency_s * 1e3:.3g} ms + {transfer.bytes_per_s / 1e6:.4g} MB/s")
    shown.add_row("memory bus", f"{measured.memory_bus_bytes_per_s / 1e9:.3g} GB/s")
    console.print(shown)
    for note in measured.notes:
        console.print(note, style="dim")
    console.line(f"wrote {out}")


@command("validate-run")
def validate_run(
    factory: str = FactoryArg,
    input_shape: list[str] = ShapeOpt,
    input_dtype: list[str] | None = DtypeOpt,
    input_high: int = HighOpt,
    seed: int = SeedOpt,
    ram: list[str] | None = typer.Option(None, help="RAM budgets (repeat; default 100%, 70%, 50%, 35%)."),
    strategy: list[str] | None = typer.Option(None, help="Strategies (repeat; default all of the registry)."),
    runtime: str = typer.Option("2x", help="Deadline, a multiple of one plain pass."),
    timing: str = typer.Option("overlap", help="compute-only or overlap."),
    effort: ValidateEffortOpt = None,
    time_limit: PointTimeLimitOpt = None,
    platform: str | None = typer.Option(None, "--profile", help="Use this profile instead of measuring the host."),
    calibrate: str | None = typer.Option(
        None,
        help="Profile compute on the model itself (model, the default) or on poetsim's calibration set (suite); "
        "not with --profile.",
    ),
    repeats: int = typer.Option(
        5, min=1, help="Timed rounds, each running every schedule once; a schedule's measured time is its fastest run."
    ),
    threads: int | None = ThreadsOpt,
    durable: bool = DurableOpt,
    swap_dir: Path = SwapOpt,
    out: Path = typer.Option(
        Path("build/validate"), help="Folder of graph.json, host.yaml, result.json, validation.csv and the chart."
    ),
) -> None:
    """Close the loop: import, profile the host, solve each budget, execute, compare prediction and measurement.

    For every RAM budget and strategy: the checked schedule runs for real, once with its
    gradients compared, then once in each of --repeats rounds (the fastest run counts, as in
    the profile: other jobs only add time); its predicted and measured step time, activation
    peak and storage traffic are set side by side in a table, result.json, validation.csv and
    validation.html/png. A profile calibrated on the model (the default) has its compute rates
    re-measured on keep-all runs taken in the same rounds, so that the machine's drift falls
    on prediction and measurement alike; host.yaml is the profile the predictions used.
    """
    from poetsim.graphs.io import save_graph
    from poetsim.inputs.profiles import load_platform
    from poetsim.pytorch.host import profile_host, write_profile
    from poetsim.pytorch.validate import DEFAULT_RAMS, write_validation
    from poetsim.pytorch.validate import validate_run as run_validation
    from poetsim.strategies import known

    if calibrate is not None and platform is not None:
        raise UserInputError("--calibrate: applies when the host is measured; --profile gives the profile instead")
    calibrate = calibrate or "model"
    if calibrate not in ("model", "suite"):
        raise UserInputError(f"--calibrate: use model or suite, not '{calibrate}'")
    rams = tuple(parsed(parse_ram, text, "--ram") for text in ram) if ram else DEFAULT_RAMS
    for name in strategy or ():
        parsed(known, name, "--strategy")
    runtime_x = parsed(parse_runtime, runtime, "--runtime")
    chosen_timing = parsed(Timing.of, timing, "--timing")
    check_output_dir(out, "--out")
    check_output_dir(swap_dir, "--swap-dir")
    profile_given = load_platform(platform) if platform is not None else None
    captured = _capture_factory(factory, input_shape, input_dtype, input_high, seed)
    out.mkdir(parents=True, exist_ok=True)
    save_graph(captured.graph, out / "graph.json")
    if profile_given is not None:
        profile_used = profile_given
    else:
        console.print("measuring the host ...")
        profile_used = profile_host(
            swap_dir, captures=[captured] if calibrate == "model" else None, durable=durable, threads=threads
        )
    shown = table(
        (
            "strategy",
            "RAM",
            "status",
            "time pred s",
            "time meas s",
            "diff",
            "spread",
            "peak pred",
            "peak meas",
            "written",
            "read",
            "grads",
        ),
        (),
        title=f"{captured.graph.name}: prediction vs measurement",
    )

    validation = run_validation(
        captured,
        profile_used,
        rams=rams,
        strategies=strategy,
        runtime_x=runtime_x,
        timing=chosen_timing,
        effort=effort,
        time_limit_s=time_limit,
        swap_dir=swap_dir,
        threads=threads,
        durable=durable,
        repeats=repeats,
        recalibrate=platform is None and calibrate == "model",
        on_progress=console.print,
    )
    if platform is None:
        write_profile(validation.profile or profile_used, out / "host.yaml")
    for row in validation.rows:
        shown.add_row(
            row.strategy,
            row.ram,
            row.status,
            *(
                ("", "", "", "", "", "", "", "", "")
                if row.measured_runtime_s is None
                else (
                    f"{row.predicted_runtime_s:.3f}",
                    f"{row.measured_runtime_s:.3f}",
                    f"{row.runtime_difference_pct:+.1f} %",
                    f"{row.measured_spread_pct:.0f} %",
                    f"{row.predicted_peak_bytes:,}",
                    f"{row.measured_peak_bytes:,}",
                    f"{row.measured_bytes_written:,}",
                    f"{row.measured_bytes_read:,}",
                    "equal" if row.gradients_equal else "DIFFERENT",
                )
            ),
        )
    console.print(shown)
    written = write_validation(validation, out)
    files = ["graph.json", *([] if platform else ["host.yaml"]), *(path.name for path in written)]
    console.line(f"wrote {out}/ ({', '.join(files)})")
    console.print(_ACCOUNTING, style="dim")
    if all(row.measured_runtime_s is None for row in validation.rows):
        raise InfeasibleBudgetError(
            "no schedule ran: at every budget each strategy was infeasible, over the budget or skipped (see the table)"
        )
    bad = [r for r in validation.rows if r.measured_runtime_s is not None and not (r.gradients_equal and r.peak_equal)]
    if bad:
        raise PoetsimError(
            f"{len(bad)} run(s) broke an invariant: gradients or peak differ from the prediction "
            f"(first: {bad[0].strategy} at {bad[0].ram})"
        )


# -- helpers -------------------------------------------------------------------------------------


def _capture_factory(factory: str, shapes, dtypes, high: int, seed: int):
    from poetsim.pytorch.capturing import capture
    from poetsim.pytorch.source import ModelSource, parse_inputs

    parsed_shapes, parsed_dtypes = parse_inputs(shapes, dtypes)
    source = ModelSource(factory, parsed_shapes, parsed_dtypes, seed, high)
    module, inputs = source.build()
    return capture(module, inputs, name=factory.rpartition(":")[2], meta=source.meta())


def _target(target: Path, platform: str | None):
    """(graph path, profile or None) of a graph file, or of a scenario whose model is a graph file."""
    from poetsim.inputs.profiles import load_platform
    from poetsim.inputs.scenario import load_scenario

    if target.suffix not in (".yaml", ".yml"):
        return target, (load_platform(platform) if platform else None)
    scenario = load_scenario(target, check_references=False)
    model = str(scenario.model[0])
    if not model.endswith(".json"):
        raise UserInputError(f"{target}: model: '{model}' is a zoo name; execute needs a graph made by import-torch")
    return Path(model), load_platform(platform or scenario.platform[0])


def _execution_report(graph, schedule, result, profile, timing) -> dict:
    from poetsim.pytorch.validate import predict
    from poetsim.schedule.costs import node_costs

    summary = result.summary()
    report = {"graph": graph.name, "measured": summary, "predicted": None}
    costs = node_costs(graph, profile) if profile is not None else node_costs(graph, _neutral_profile())
    prediction = predict(graph, schedule, costs, timing)
    report["predicted"] = {
        "peak_ram_bytes": prediction.peak_ram_bytes,
        "runtime_s": prediction.runtime_s if profile is not None else None,
        "bytes_written": prediction.bytes_written,
        "bytes_read": prediction.bytes_read,
        "platform": profile.name if profile is not None else None,
    }
    report["peak_equal"] = prediction.peak_ram_bytes == result.peak_activation_bytes
    report["traffic_equal"] = (prediction.bytes_written, prediction.bytes_read) == (result.bytes_written, result.bytes_read)
    return report


def _neutral_profile():
    """Any profile: RAM accounting does not depend on costs, and no time is predicted without one."""
    from poetsim.inputs.profiles import load_platform

    return load_platform("rpi4")


def _print_execution(report: dict) -> None:
    measured, predicted = report["measured"], report["predicted"]
    shown = table(
        ("figure", "predicted", "measured"),
        (),
        title=f"{report['graph']}: one training step ({measured['timing']} timing, {measured['threads']} thread(s))",
    )
    runtime = predicted["runtime_s"]
    shown.add_row(
        "step time",
        f"{runtime:.4g} s ({predicted['platform']})" if runtime is not None else "(no profile)",
        f"{measured['total_s']:.4g} s (compute {measured['compute_s']:.4g} s, transfers {measured['transfer_s']:.4g} s)",
    )
    shown.add_row(
        "activation peak",
        f"{predicted['peak_ram_bytes']:,} bytes",
        f"{measured['peak_activation_bytes']:,} bytes ({'equal' if report['peak_equal'] else 'DIFFERENT'})",
    )
    shown.add_row("process peak RSS", "", f"{measured['peak_rss_bytes']:,} bytes" if measured["peak_rss_bytes"] else "n/a")
    shown.add_row(
        "bytes written / read",
        f"{predicted['bytes_written']:,} / {predicted['bytes_read']:,}",
        f"{measured['bytes_written']:,} / {measured['bytes_read']:,} (+ batch {measured['batch_bytes_read']:,})",
    )
    shown.add_row(
        "operations",
        "",
        f"{measured['recomputations']} recomputations, {measured['page_outs']} page-outs, {measured['page_ins']} page-ins",
    )
    grads = measured["gradients_equal"]
    shown.add_row(
        "gradients vs loss.backward()",
        "",
        "bitwise equal" if grads else f"DIFFERENT: {', '.join(measured['differing_gradients'][:3])}",
    )
    console.print(shown)
    console.print(_ACCOUNTING, style="dim")


def _write_execution(report: dict, result, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "execution.json").write_text(json.dumps(report, indent=1) + "\n")
    with open(out / "instructions.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["stage", "kind", "node", "name", "start_s", "end_s", "duration_s", "bytes"])
        for r in result.records:
            writer.writerow(
                [r.stage, r.kind, r.node, r.name, f"{r.start_s:.9f}", f"{r.end_s:.9f}", f"{r.duration_s:.9f}", r.nbytes]
            )


def _fail_on_mismatch(report: dict) -> None:
    measured = report["measured"]
    if measured["gradients_equal"] is False:
        raise InternalError(f"gradients differ from a plain loss.backward() for {', '.join(measured['differing_gradients'][:3])}")
    if not report["peak_equal"]:
        raise InternalError(
            f"the executor held {measured['peak_activation_bytes']:,} activation bytes at its peak, "
            f"the schedule predicts {report['predicted']['peak_ram_bytes']:,}"
        )
