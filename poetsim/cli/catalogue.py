"""Commands that describe what poetsim knows: the zoo, the platforms, a graph, scenario files."""

from pathlib import Path
from typing import Any

import typer

from poetsim.cli.app import JsonOpt, command, emit_json, err, out
from poetsim.cli.terminal import table
from poetsim.errors import UserInputError
from poetsim.inputs.files import check_output_file
from poetsim.units import format_bytes


@command()
def models(as_json: JsonOpt = False) -> None:
    """List the model zoo: name, description, nodes, parameters and forward FLOPs at batch 1."""
    from poetsim.graphs import zoo

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
        return emit_json(rows)
    out.print(
        table(
            ("model", "description", "nodes", "params", "fwd MFLOP (batch 1)"),
            [(r["model"], r["description"], r["nodes"], f"{r['params']:,}", f"{r['forward_gflop'] * 1e3:,.2f}") for r in rows],
            right=("nodes", "params", "fwd MFLOP (batch 1)"),
        )
    )


@command()
def platforms(as_json: JsonOpt = False) -> None:
    """List the shipped hardware profiles and their key figures (sources: docs/cost-model.md)."""
    from poetsim.inputs.profiles import load_platform, shipped_platforms

    profiles = [load_platform(name) for name in shipped_platforms()]
    if as_json:
        return emit_json([p.model_dump(mode="json") for p in profiles])
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


@command()
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
    from poetsim.graphs.io import load_graph, save_graph

    g = load_graph(model, batch_size, input_size, seq_len)
    summary = g.summary()
    if save is not None:
        save_graph(g, save)
    if as_json:
        return emit_json(summary)
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


@command()
def validate(scenarios: list[Path] = typer.Argument(..., help="Scenario YAML files."), as_json: JsonOpt = False) -> None:
    """Check scenario files: fields, models, platforms and budgets; one line per bad file, exit 2."""
    from poetsim.inputs.scenario import load_scenario

    report = []
    for path in scenarios:
        try:
            scenario = load_scenario(path)
        except UserInputError as exc:
            report.append({"path": str(path), "ok": False, "error": " ".join(str(exc).split())})
            continue
        report.append({"path": str(path), "ok": True, "name": scenario.name, "points": len(scenario.points())})
    if as_json:
        emit_json(report)
    else:
        for entry in report:
            if entry["ok"]:
                out.line(f"ok  {entry['path']}: {entry['name']}, {entry['points']} points")
            else:
                err.print(f"poetsim: error: {entry['error']}", soft_wrap=True)
    if any(not entry["ok"] for entry in report):
        raise typer.Exit(UserInputError.exit_code)
