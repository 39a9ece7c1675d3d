"""Benchmark of the PyTorch bridge: import speed and fidelity, and the closed loop on ResNet-18.

Import (results/bench/pytorch.csv): each target model is imported in a fresh process (Python,
torch, the model with random weights, the capture and the saved graph: what `poetsim
import-torch` costs), then its graph is set beside the zoo's graph of the same network: node
count, forward MACs of convolutions, dense layers and matmuls, total FLOPs, keep-all peak and
parameters. Targets: under 30 s each, FLOPs within 2 % and keep-all peak within 5 % of the zoo.

Closed loop (results/bench/pytorch_validate.csv and its chart in results/bench/pytorch_validate/):
ResNet-18 for CIFAR at batch 8, every strategy at 100, 70, 50 and 35 % of the keep-all peak,
executed for real on this host with a profile measured just before (each schedule once with its
gradients checked, then once per timed round, all schedules in turn; the fastest run counts, as
in the profile, whose compute rates are re-measured on keep-all runs taken in the same rounds).
Targets: gradients bitwise equal to loss.backward() in every run, the activation peak equal to
the prediction and within the budget, the step time within 15 % of the prediction.

Random ops (results/bench/pytorch_random.csv): the nine outside architectures
(poetsim.pytorch.architectures, their committed graphs under scenarios/graphs/outside/) with
their own dropout and stochastic depth. For each: the capture's time, its random nodes, the
bytes of the generator states saved to redraw them (what poetsim holds) beside the bytes of the
noise tensors they draw (what keeping the masks through the step instead would hold), a
checkpoint-sqrt step (every segment recomputed) executed with its gradients compared, and the
time one save and one restore of the generator's state take.

    python -m benchmarks pytorch             # import and validate
    python -m benchmarks.pytorch import      # one part: import, validate or random
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from benchmarks.common import machine
from poetsim.graphs import zoo
from poetsim.graphs.io import read_graph_file
from poetsim.pytorch.source import ModelSource
from poetsim.pytorch.validate import validate_run, write_validation

DEFAULT_OUT = Path("results/bench/pytorch.csv")
VALIDATE_OUT = Path("results/bench/pytorch_validate.csv")
RANDOM_OUT = Path("results/bench/pytorch_random.csv")
OUTSIDE = Path("scenarios/graphs/outside")
FACTORIES = "poetsim.pytorch.models"
#: (row name, factory, input shapes, dtype, int high, zoo model, zoo options)
TARGETS = (
    ("resnet18_cifar", "resnet18_cifar", ((8, 3, 32, 32),), "float32", 2, "resnet18_cifar", {"batch_size": 8}),
    ("resnet18 (224)", "resnet18", ((1, 3, 224, 224),), "float32", 2, "resnet18", {"batch_size": 1}),
    ("resnet18 (32)", "resnet18", ((8, 3, 32, 32),), "float32", 2, "resnet18", {"batch_size": 8, "input_size": 32}),
    ("mobilenet_v2", "mobilenet_v2", ((1, 3, 224, 224),), "float32", 2, "mobilenet_v2", {"batch_size": 1}),
    ("transformer", "transformer", ((1, 128),), "int64", 8192, "transformer", {"batch_size": 1, "seq_len": 128}),
    ("mlp", "mlp", ((1, 1, 28, 28),), "float32", 2, "mlp", {"batch_size": 1}),
)
COUNTED_OPS = frozenset({"conv", "depthwise_conv", "linear", "matmul", "attention"})
_IMPORT_ONE = """
import sys, time
start = time.perf_counter()
from poetsim.graphs.io import save_graph
from poetsim.pytorch.capturing import capture
from poetsim.pytorch.source import ModelSource
source = ModelSource({factory!r}, {shapes!r}, {dtypes!r}, 0, {high!r})
module, inputs = source.build()
save_graph(capture(module, inputs, name={name!r}, meta=source.meta()).graph, {path!r})
print(time.perf_counter() - start)
"""


def run(out_csv: Path = DEFAULT_OUT) -> pd.DataFrame:
    """Import every target in a fresh process and compare it with the zoo; one row per target."""
    rows = []
    scratch = Path("build/bench/pytorch-graphs")  # scratch: the graphs are remade on every run
    scratch.mkdir(parents=True, exist_ok=True)
    for name, factory, shapes, dtype, high, zoo_name, options in TARGETS:
        path = scratch / f"{name.replace(' ', '_').replace('(', '').replace(')', '')}.json"
        code = _IMPORT_ONE.format(
            factory=f"{FACTORIES}:{factory}", shapes=shapes, dtypes=(dtype,) * len(shapes), high=high, name=name, path=str(path)
        )
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        wall_s = time.perf_counter() - start
        graph, reference = read_graph_file(path), zoo.build_model(zoo_name, **options)
        macs, zoo_macs = (sum(n.flops for n in g.nodes if not n.backward and n.op in COUNTED_OPS) / 2 for g in (graph, reference))
        flops, zoo_flops = (g.forward_flops + g.backward_flops for g in (graph, reference))
        rows.append(
            {
                "model": name,
                "input": "x".join(map(str, shapes[0])),
                "import_wall_s": round(wall_s, 2),
                "capture_s": round(float(done.stdout.strip().splitlines()[-1]), 2),
                "nodes": len(graph),
                "zoo_nodes": len(reference),
                "fwd_macs": macs,
                "zoo_fwd_macs": zoo_macs,
                "macs_diff_pct": _pct(macs, zoo_macs),
                "flops": flops,
                "zoo_flops": zoo_flops,
                "flops_diff_pct": _pct(flops, zoo_flops),
                "keep_all_peak_bytes": graph.keep_all_peak_bytes,
                "zoo_keep_all_peak_bytes": reference.keep_all_peak_bytes,
                "peak_diff_pct": _pct(graph.keep_all_peak_bytes, reference.keep_all_peak_bytes),
                "param_bytes": graph.param_bytes,
                "zoo_param_bytes": reference.param_bytes,
                "saved_bytes": saved_after_loss(graph),
                "eager_saved_bytes": eager_saved_bytes(f"{FACTORIES}:{factory}", shapes, dtype, high),
                "machine": machine(),
            }
        )
    result = pd.DataFrame(rows)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    result.to_csv(out_csv, index=False)
    return result


def saved_after_loss(graph) -> int:
    """Bytes of the forward nodes still held when the loss is computed (what the backward reads)."""
    loss = next(n.id for n in graph.nodes if n.op == "loss")
    return sum(n.output_bytes for n in graph.nodes[:loss] if graph.last_use[n.id] > loss)


def eager_saved_bytes(factory: str, shapes, dtype: str, high: int) -> int:
    """Bytes of the distinct storages plain PyTorch saves for backward in one forward pass.

    Measured with `torch.autograd.graph.saved_tensors_hooks` on the same model and batch,
    parameters excluded: what `saved_bytes` equals once the normalisation statistics (which
    poetsim keeps with the parameters) and the loss's own log-probabilities (the loss node is
    not counted in `saved_bytes`) are added.
    """
    import torch

    module, inputs = ModelSource(factory, shapes, (dtype,) * len(shapes), 0, high).build()
    params = {p.untyped_storage().data_ptr() for p in module.parameters()}
    saved: dict[int, int] = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        output = module(*inputs)
        labels = torch.zeros(output.shape[:-1], dtype=torch.int64)
        torch.nn.functional.cross_entropy(output.reshape(-1, output.shape[-1]), labels.reshape(-1))
    return sum(saved.values())


def run_validation(
    out_csv: Path = VALIDATE_OUT, threads: int | None = None, time_limit_s: float = 20.0, repeats: int = 5
) -> pd.DataFrame:
    """The closed loop on ResNet-18 CIFAR, batch 8 (see the module docstring); one row per point."""
    from poetsim.pytorch.capturing import capture
    from poetsim.pytorch.executor import default_threads
    from poetsim.pytorch.host import profile_host, write_profile

    source = ModelSource(f"{FACTORIES}:resnet18_cifar", ((8, 3, 32, 32),), ("float32",))
    module, inputs = source.build()
    captured = capture(module, inputs, name="resnet18_cifar", meta=source.meta())
    folder = out_csv.with_suffix("")
    swap_dir = Path("build/swap")
    threads = threads or default_threads()
    load_start = os.getloadavg()[0]
    start = time.perf_counter()
    profile = profile_host(swap_dir, captures=[captured], threads=threads)
    profile_s = time.perf_counter() - start
    validation = validate_run(
        captured, profile, time_limit_s=time_limit_s, swap_dir=swap_dir, threads=threads, repeats=repeats, recalibrate=True
    )
    folder.mkdir(parents=True, exist_ok=True)
    write_profile(validation.profile or profile, folder / "host.yaml")
    write_validation(validation, folder)
    frame = pd.DataFrame([row.__dict__ for row in validation.rows])
    frame["profile_s"] = round(profile_s, 1)
    frame["load_start"], frame["load_end"] = round(load_start, 2), round(os.getloadavg()[0], 2)
    frame["threads"] = threads
    frame["machine"] = machine()
    frame.to_csv(out_csv, index=False)
    (folder / "summary.json").write_text(json.dumps(_summary(frame), indent=1) + "\n")
    return frame


def run_random(out_csv: Path = RANDOM_OUT, threads: int = 1) -> pd.DataFrame:
    """Random ops in the outside architectures (see the module docstring); one row per architecture."""
    import tempfile
    import timeit

    import torch

    from poetsim.inputs.profiles import load_platform
    from poetsim.optimiser import checkpoint_sqrt
    from poetsim.pytorch.executor import execute
    from poetsim.pytorch.randomness import draws_random_numbers
    from poetsim.pytorch.source import capture_graph_file
    from poetsim.schedule.costs import node_costs
    from poetsim.schedule.model import Timing

    state = torch.get_rng_state()
    calls = 2000
    save_us = 1e6 * timeit.timeit(torch.get_rng_state, number=calls) / calls
    restore_us = 1e6 * timeit.timeit(lambda: torch.set_rng_state(state), number=calls) / calls
    rows = []
    for path in sorted(OUTSIDE.glob("*.json")):
        start = time.perf_counter()
        captured = capture_graph_file(path)
        capture_s = time.perf_counter() - start
        graph = captured.graph
        noise = [
            op.meta["val"].untyped_storage().nbytes()
            for op in captured.fx_graph.nodes
            if op.op == "call_function" and draws_random_numbers(op)
        ]
        schedule, _ = checkpoint_sqrt(graph, node_costs(graph, load_platform("rpi4")), Timing.OVERLAP)
        with tempfile.TemporaryDirectory() as swap:
            result = execute(captured, schedule, Path(swap), threads=threads)
        random = {k for k, program in enumerate(captured.programs) if program.random}
        meta = dict(graph.meta)
        rows.append(
            {
                "model": graph.name,
                "nodes": len(graph),
                "params": int(meta["param_count"]),
                "keep_all_peak_bytes": graph.keep_all_peak_bytes,
                "capture_s": round(capture_s, 2),
                "random_ops": len(noise),
                "random_nodes": len(random),
                "state_bytes": int(meta["random_state_bytes"]),
                "noise_bytes": sum(noise),
                "recomputations": sum(r.kind == "recompute" for r in result.records),
                "random_recomputations": sum(r.kind == "recompute" and r.node in random for r in result.records),
                "gradients_equal": result.gradients_equal,
                "buffers_equal": result.buffers_equal,
                "step_s": round(result.total_s, 4),
                "plain_step_s": round(result.reference_s or float("nan"), 4),
                "state_save_us": round(save_us, 2),
                "state_restore_us": round(restore_us, 2),
                "threads": threads,
                "machine": machine(),
            }
        )
    frame = pd.DataFrame(rows)
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out_csv, index=False)
    return frame


def _summary(frame: pd.DataFrame) -> dict:
    executed = frame[frame["measured_runtime_s"].notna()]
    return {
        "points": len(frame),
        "executed": len(executed),
        "gradients_equal_everywhere": bool(executed["gradients_equal"].all()),
        "peak_equal_everywhere": bool(executed["peak_equal"].all()),
        "within_budget_everywhere": bool(executed["within_budget"].all()),
        "max_abs_runtime_difference_pct": float(executed["runtime_difference_pct"].abs().max()),
        "within_15_pct": int((executed["runtime_difference_pct"].abs() <= 15).sum()),
        "median_spread_pct": float(executed["measured_spread_pct"].median()),
        "load_start": float(frame["load_start"].iloc[0]),
        "load_end": float(frame["load_end"].iloc[0]),
    }


def _pct(value: float, reference: float) -> float:
    return round(100.0 * (value / reference - 1.0), 3)


if __name__ == "__main__":
    parts = sys.argv[1:] or ["import", "validate"]
    if "import" in parts:
        print(run().to_string(index=False))
    if "validate" in parts:
        print(run_validation().to_string(index=False))
    if "random" in parts:
        print(run_random().to_string(index=False))
