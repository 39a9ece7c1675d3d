"""The `poetsim` command line: parse, call the library, show the result.

One error boundary (`_boundary`) turns every `PoetsimError` into one line on stderr and the
error's exit code; anything else is a bug and keeps its traceback.
"""

import functools
import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from poetsim import __version__
from poetsim.errors import PoetsimError
from poetsim.units import format_bytes

app = typer.Typer(
    help="Simulate and explore energy-optimal on-device training schedules (POET: recomputation + paging).",
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

    table = Table("model", "description", "nodes", "params", "fwd GFLOP (batch 1)")
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

    table = Table("platform", "title", "RAM", "compute", "compute W", "static W",
                  "page-in", "page-out", "storage W")
    for name in shipped_platforms():
        p = load_platform(name)
        table.add_row(
            name, p.title, format_bytes(p.ram_bytes), f"{p.compute.flops_per_s / 1e6:g} MFLOP/s",
            f"{p.compute.power_w:g}", f"{p.static_power_w:g}",
            f"{p.storage.page_in.latency_s * 1e3:g} ms + {p.storage.page_in.bytes_per_s / 1e6:g} MB/s",
            f"{p.storage.page_out.latency_s * 1e3:g} ms + {p.storage.page_out.bytes_per_s / 1e6:g} MB/s",
            f"{p.storage.power_w:g}",
        )
    console.print(table)


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
