"""`poetsim train`: train a model on synthetic data with a schedule, against plain PyTorch training.

torch and the library's PyTorch layer are imported only when the command runs.
"""

from pathlib import Path

import typer

from poetsim.cli.app import command, emit_json
from poetsim.cli.app import out as console
from poetsim.cli.options import TimeLimitOpt, TrainEffortOpt, number_option
from poetsim.cli.terminal import Progress, table
from poetsim.cli.torch import DtypeOpt, DurableOpt, FactoryArg, HighOpt, SeedOpt, ShapeOpt, SwapOpt, ThreadsOpt
from poetsim.errors import InternalError, parsed
from poetsim.inputs.files import check_output_dir
from poetsim.schedule.model import Timing
from poetsim.strategies import known
from poetsim.units import parse_ram, parse_runtime


@command("train")
def train(
    factory: str = FactoryArg,
    input_shape: list[str] = ShapeOpt,
    input_dtype: list[str] | None = DtypeOpt,
    input_high: int = HighOpt,
    seed: int = SeedOpt,
    steps: int = typer.Option(20, "--steps", min=1, help="Training steps, one synthetic batch each."),
    ram: str = typer.Option("50%", help="RAM budget for activations: bytes, units or % of the keep-all peak."),
    runtime: str = typer.Option("1.2x", help="Deadline, a multiple of one plain pass on the platform."),
    strategy: str = typer.Option("hybrid", help="The strategy whose schedule the steps follow."),
    platform: str = typer.Option("rpi4", help="Platform profile: a shipped name, or a YAML such as `poetsim profile` writes."),
    optimizer: str = typer.Option("sgd", help="sgd (momentum 0.9) or adam."),
    lr: float | None = number_option(None, "--lr", at_least=0.0, help="Learning rate (default 0.01 for sgd, 0.001 for adam)."),
    effort: TrainEffortOpt = None,
    time_limit: TimeLimitOpt = None,
    timing: str = typer.Option("overlap", help="compute-only or overlap."),
    compare: bool = typer.Option(True, "--compare/--no-compare", help="Train a copy plainly first and compare the parameters."),
    threads: int | None = ThreadsOpt,
    durable: bool = DurableOpt,
    swap_dir: Path = SwapOpt,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Train with a schedule: N steps on synthetic data, each following the solved schedule for real.

    Captures one training step (forward, cross-entropy, backward), solves it at --ram and
    --runtime on --platform, then trains: each step runs the schedule's forward stages, pages
    to --swap-dir and recomputes as it says, and its backward stages at loss.backward().
    Reports each step's time and measured activation peak beside the prediction and the budget,
    and (with --compare, the default) whether every parameter and buffer after the last step is
    bitwise equal to plain PyTorch training of the same model from the same seed, with the same
    batches, optimiser and thread count.
    """
    from poetsim.pytorch.source import ModelSource, parse_inputs
    from poetsim.pytorch.trial import run_trial

    check_output_dir(swap_dir, "--swap-dir")
    stated_ram = parsed(parse_ram, ram, "--ram")
    runtime_x = parsed(parse_runtime, runtime, "--runtime")
    parsed(known, strategy, "--strategy")
    chosen_timing = parsed(Timing.of, timing, "--timing")
    shapes, dtypes = parse_inputs(input_shape, input_dtype)
    source = ModelSource(factory, shapes, dtypes, seed, input_high)
    with Progress(f"training {factory.rpartition(':')[2]}") as progress:
        trial = run_trial(
            source,
            steps=steps,
            optimizer=optimizer,
            lr=lr,
            compare=compare,
            on_step=lambda r: progress.update(
                f"step {r.step}/{steps}: loss {r.loss:.4f}, {r.step_s:.3g} s, activation peak {r.peak_activation_bytes:,} bytes"
            ),
            on_plain_step=lambda n, s: progress.update(f"plain step {n}/{steps}: {s:.3g} s"),
            platform=platform,
            ram=stated_ram,
            runtime=runtime_x,
            strategy=strategy,
            timing=chosen_timing,
            effort=effort,
            time_limit_s=time_limit,
            swap_dir=swap_dir,
            durable=durable,
            threads=threads,
        )
    summary = trial.summary()
    if as_json:
        emit_json(summary)
    else:
        _print(trial, summary)
    if trial.parameters_equal is False or trial.buffers_equal is False:
        raise InternalError(f"after {steps} steps, {', '.join(trial.differing[:3])} differ from plain PyTorch training")
    if not summary["peaks_as_predicted"] or not summary["within_budget"]:
        raise InternalError(
            f"a step held {trial.max_peak_bytes:,} activation bytes; predicted {trial.predicted_peak_bytes:,}, "
            f"budget {trial.budget_bytes:,}"
        )


def _print(trial, summary: dict) -> None:
    steps = table(
        ("step", "loss", "step s", "plain s", "activation peak, bytes", "written / read, bytes", "recomputations"),
        (),
        title=f"{trial.graph_name}: {trial.strategy} ({trial.status}) at a budget of {trial.budget_bytes:,} bytes, "
        f"{trial.optimizer}, {trial.threads} thread(s)",
    )
    for index, r in enumerate(trial.records):
        plain = f"{trial.plain_step_s[index]:.4g}" if index < len(trial.plain_step_s) else ""
        steps.add_row(
            str(r.step),
            f"{r.loss:.5f}",
            f"{r.step_s:.4g}",
            plain,
            f"{r.peak_activation_bytes:,}",
            f"{r.bytes_written:,} / {r.bytes_read:,}",
            str(r.recomputations),
        )
    console.print(steps)
    times = sorted(r.step_s for r in trial.records)
    plain_times = sorted(trial.plain_step_s)
    lines = [
        (
            "step time",
            f"median {times[len(times) // 2]:.4g} s on this machine"
            + (f" (plain training {plain_times[len(plain_times) // 2]:.4g} s)" if plain_times else "")
            + f"; on {trial.platform}, the platform the schedule was solved for, predicted {trial.predicted_step_s:.4g} s",
        ),
        (
            "activation peak",
            f"largest {trial.max_peak_bytes:,} bytes; predicted {trial.predicted_peak_bytes:,}; budget {trial.budget_bytes:,} "
            f"({'every step as predicted' if summary['peaks_as_predicted'] else 'NOT as predicted'}); "
            f"plain training keeps every activation: {trial.keep_all_peak_bytes:,}",
        ),
    ]
    if trial.parameters_equal is not None:
        equal = trial.parameters_equal and trial.buffers_equal
        lines.append(
            (
                "against plain PyTorch",
                "parameters and buffers bitwise equal" if equal else f"DIFFERENT: {', '.join(trial.differing[:3])}",
            )
        )
    console.print(table(("", ""), lines))
