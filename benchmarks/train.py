"""Benchmark of training with a schedule (results/bench/train.csv): ResNet-18 for CIFAR at batch 8.

Three ways to train the same model on the same batches, from the same weights and generator
state, with the same optimiser (SGD, momentum 0.9) and torch thread count:

- **plain**: `loss.backward()`, every activation kept until the backward pass reads it;
- **poetsim**: `poetsim.pytorch.scheduled` at 50 % of the keep-all activation peak (hybrid,
  recompute-only and paging-only, 1.2x on the rpi4 profile), page files on this machine's disk,
  written durably (fsync, dropped from the page cache);
- **torch.utils.checkpoint**: `checkpoint_sequential` over the network's 14 blocks (stem layers,
  the eight residual blocks, pooling, classifier) in 2 to 14 segments, non-reentrant, its random
  state preserved; its ReLUs run out of place, since a checkpointed segment's saved input must
  not be changed in place by the next one (the same values, bit for bit).

The ways take turns, one step each per round, so that a slow minute of a shared machine falls on
all of them alike. For each: the median and fastest step time (forward and backward; the
optimiser step apart) over `steps` rounds after one warm-up round, and, in one more round, the
peak of the bytes the C heap holds above its level at the step's start, less the parameter
gradients held at that moment (alike for all three), sampled after every aten op (glibc's
`mallinfo2`): the activations and the ops' scratch memory. poetsim's own activation accounting,
measured by its executor, is reported beside it with the budget; plain training's is the graph's
keep-all peak. Whether the parameters and the buffers (BatchNorm's running statistics) after the
steps are bitwise equal to plain training's is reported for every row: a checkpointed segment's
recomputed forward updates the running statistics a second time.
Targets: poetsim's activation peak equal to the prediction and within the budget in every step;
its parameters equal to plain training's.

    python -m benchmarks train
"""

import copy
import ctypes
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks.common import machine

OUT = Path("results/bench/train.csv")
FACTORY = "poetsim.pytorch.models:resnet18_cifar"
#: One way to train: its name, its configuration, its model, its step on a batch, the parameter
#: gradients it holds now, and its own columns.
Way = tuple[str, str, Any, Callable[..., None], Callable[[], list], dict[str, Any]]


def _heap_bytes():
    """The C heap's bytes in use (glibc's mallinfo2: arena and mmapped blocks), or None elsewhere."""

    class MallInfo2(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in (
                "arena",
                "ordblks",
                "smblks",
                "hblks",
                "hblkhd",
                "usmblks",
                "fsmblks",
                "uordblks",
                "fordblks",
                "keepcost",
            )
        ]

    try:
        function = ctypes.CDLL(None).mallinfo2
    except AttributeError:
        return None
    function.restype = MallInfo2

    def used() -> int:
        info = function()
        return int(info.uordblks + info.hblkhd)

    return used


def run(out_csv: Path = OUT, steps: int = 10, ram: str = "50%", runtime: str = "1.2x", platform: str = "rpi4") -> pd.DataFrame:
    """Train plainly, with poetsim's schedules and with torch.utils.checkpoint; one row per way."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from poetsim.pytorch.capturing import TrainingStep, capture
    from poetsim.pytorch.executor import default_threads
    from poetsim.pytorch.reference import same_bits
    from poetsim.pytorch.source import ModelSource
    from poetsim.pytorch.swap import storage_bytes
    from poetsim.pytorch.training import scheduled
    from poetsim.pytorch.trial import make_optimizer, synthetic_batches

    heap = _heap_bytes()

    class HeapPeak(TorchDispatchMode):
        """The largest heap level above the start, less the gradients then held, after any aten op.

        `gradients()` gives the gradients held at the moment it is called.
        """

        def __init__(self, gradients):
            super().__init__()
            self.gradients = gradients
            self.start = heap() if heap else 0
            self.peak = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            if heap:
                self.peak = max(self.peak, heap() - self.start - storage_bytes(self.gradients()))
            return result

    source = ModelSource(FACTORY, ((8, 3, 32, 32),), ("float32",))
    base, _ = source.build()
    batches = synthetic_batches(source, base, steps + 2)
    threads = default_threads()
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    loss_of = torch.nn.CrossEntropyLoss()
    swap = Path("build/swap-train")
    ways: list[Way] = []

    plain = copy.deepcopy(base)
    plain_step = TrainingStep(plain, loss_of)
    keep_all = capture(copy.deepcopy(base), batches[0][:-1], labels=batches[0][-1]).graph.keep_all_peak_bytes
    ways.append(
        (
            "plain",
            "keep every activation",
            plain,
            lambda b: plain_step(*b).backward(),
            _gradients_of(plain),
            {"activation_peak_bytes": keep_all},
        )
    )
    for strategy in ("hybrid", "recompute-only", "paging-only"):
        model = copy.deepcopy(base)
        wrapped = scheduled(
            model,
            batches[0][:-1],
            labels=batches[0][-1],
            platform=platform,
            ram=ram,
            runtime=runtime,
            strategy=strategy,
            swap_dir=swap / strategy,
            threads=threads,
        )
        peaks: list[int] = []
        running: list[Any] = []

        def step(batch, wrapped=wrapped, peaks=peaks, running=running):
            loss = wrapped(*batch)
            running.append(wrapped._pending.machine)  # its gradients, until autograd has put them in .grad
            loss.backward()
            running.clear()
            peaks.append(wrapped.last_step.peak_activation_bytes)

        def gradients(wrapped=wrapped, running=running):
            held = list(running[0].grads.values()) if running else []
            return held + [p.grad for p in wrapped.parameters() if p.grad is not None]

        plan = wrapped.plan
        extra = {
            "activation_peaks": peaks,
            "predicted_peak_bytes": plan.predicted.peak_ram_bytes,
            "budget_bytes": plan.budget_bytes,
            "predicted_step_s": round(plan.predicted.runtime_s, 4),
        }
        ways.append(("poetsim", f"{strategy} ({plan.status}) at {ram}, {runtime} on {platform}", model, step, gradients, extra))
    ways.extend(_checkpoint_ways(base, loss_of))

    optimisers = [make_optimizer("sgd", model.parameters()) for _, _, model, _, _, _ in ways]
    times, heap_peaks = _take_turns(ways, optimisers, batches, HeapPeak)
    rows = _rows(ways, plain, times, heap_peaks if heap else None, same_bits)
    frame = pd.DataFrame(rows)
    frame["threads"] = threads
    frame["machine"] = machine()
    out_csv.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out_csv, index=False)
    return frame


def _gradients_of(model: Any) -> Callable[[], list]:
    """The parameter gradients `model` holds at the moment of the call."""
    return lambda: [p.grad for p in model.parameters() if p.grad is not None]


def _checkpoint_ways(base: Any, loss_of: Callable) -> list[Way]:
    """The torch.utils.checkpoint ways: copies of `base` checkpointed in 2 to 14 segments."""
    import torch
    from torch.utils.checkpoint import checkpoint_sequential

    ways: list[Way] = []
    for segments in range(2, 15):
        model = copy.deepcopy(base)
        for module in model.modules():  # a checkpoint's saved input must not be changed in place
            if isinstance(module, torch.nn.ReLU):
                module.inplace = False
        blocks = torch.nn.Sequential(
            model.conv1,
            model.bn1,
            model.relu,
            *model.layer1,
            *model.layer2,
            *model.layer3,
            *model.layer4,
            model.avgpool,
            torch.nn.Flatten(),
            model.fc,
        )

        def checkpointed(batch, blocks=blocks, segments=segments):
            x, labels = batch
            loss_of(checkpoint_sequential(blocks, segments, x, use_reentrant=False), labels).backward()

        ways.append(
            (
                "torch.utils.checkpoint",
                f"checkpoint_sequential, {segments} segments",
                model,
                checkpointed,
                _gradients_of(model),
                {},
            )
        )
    return ways


def _take_turns(ways: list[Way], optimisers: list, batches: list, sampler: Callable) -> tuple[list[list[float]], list[int]]:
    """Run the ways in turn, one step each per batch; each way's step times and its heap peak.

    The first round warms up and is not timed; in the last, `sampler(gradients)` (a dispatch mode)
    watches each way's step for its heap peak instead of a clock.
    """
    times: list[list[float]] = [[] for _ in ways]
    heap_peaks = [0] * len(ways)
    for number, batch in enumerate(batches):
        for index, (_, _, _, step, gradients, _) in enumerate(ways):
            optimisers[index].zero_grad(set_to_none=True)
            if number == len(batches) - 1:
                with sampler(gradients) as watching:
                    step(batch)
                heap_peaks[index] = watching.peak
            else:
                start = time.perf_counter()
                step(batch)
                if number:
                    times[index].append(time.perf_counter() - start)
            optimisers[index].step()
    return times, heap_peaks


def _rows(
    ways: list[Way], plain: Any, times: list[list[float]], heap_peaks: list[int] | None, same_bits: Callable[[Any, Any], bool]
) -> list[dict]:
    """One row per way: its step times, its heap peak and whether it trained as plain training did.

    The heap peaks are None where the C library cannot measure them. A way trained as `plain`
    did when its parameters (and, apart, its buffers) are bitwise equal to plain's after the steps.
    """
    reference = plain.state_dict()
    buffer_names = {name for name, _ in plain.named_buffers()}
    rows = []
    for index, (way, config, model, _, _, extra) in enumerate(ways):
        state = model.state_dict()
        differing = {name for name, value in reference.items() if not same_bits(value, state[name])}
        row = {
            "way": way,
            "config": config,
            "step_s_median": round(statistics.median(times[index]), 4),
            "step_s_min": round(min(times[index]), 4),
            "heap_peak_bytes": heap_peaks[index] if heap_peaks is not None else None,
            "parameters_equal_plain": not differing - buffer_names,
            "buffers_equal_plain": not differing & buffer_names,
            **{k: v for k, v in extra.items() if k != "activation_peaks"},
        }
        if "activation_peaks" in extra:
            row["activation_peak_bytes"] = max(extra["activation_peaks"])
            row["peaks_as_predicted"] = set(extra["activation_peaks"]) == {extra["predicted_peak_bytes"]}
        rows.append(row)
    return rows


if __name__ == "__main__":
    print(run().to_string(index=False))
