"""A training trial on synthetic data: the scheduled model against plain PyTorch from the same seed.

`run_trial` builds the model from its factory and seed, draws `steps` synthetic batches (random
inputs as `poetsim import-torch` draws them, random class labels), trains a copy the plain way
(`loss.backward()`, `optimizer.step()`), then the model itself with its schedule
(poetsim.pytorch.training), each from the same generator state, with the same optimiser, the
same torch thread count and deterministic algorithms on. It reports each scheduled step's time
and measured activation peak beside the prediction and the budget, the plain steps' times, and
whether every parameter and buffer (BatchNorm's running statistics included) ends bitwise equal.
`poetsim train` prints it.
"""

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
from torch import nn

from poetsim.errors import UserInputError
from poetsim.pytorch.capturing import TrainingStep, default_labels
from poetsim.pytorch.executor import deterministic
from poetsim.pytorch.reference import copy_module, same_bits
from poetsim.pytorch.source import ModelSource
from poetsim.pytorch.training import ScheduledModule, StepRecord, fit, scheduled

#: Optimisers a trial can use, and their default learning rates.
OPTIMISERS = {"sgd": 0.01, "adam": 0.001}


@dataclass(frozen=True)
class Trial:
    """A scheduled training run and, if compared, what plain PyTorch training gave."""

    graph_name: str
    strategy: str
    status: str
    platform: str
    optimizer: str
    threads: int
    budget_bytes: int
    predicted_peak_bytes: int
    keep_all_peak_bytes: int  # the activation peak of plain training (every activation kept)
    predicted_step_s: float
    records: tuple[StepRecord, ...]
    plain_step_s: tuple[float, ...] = ()
    parameters_equal: bool | None = None
    buffers_equal: bool | None = None
    differing: tuple[str, ...] = ()

    @property
    def max_peak_bytes(self) -> int:
        """The largest activation peak any step measured."""
        return max(r.peak_activation_bytes for r in self.records)

    def summary(self) -> dict:
        """Plain values for JSON: the figures, the per-step records and the comparison."""
        data = asdict(self)
        data["max_peak_bytes"] = self.max_peak_bytes
        data["peaks_as_predicted"] = all(r.peak_activation_bytes == self.predicted_peak_bytes for r in self.records)
        data["within_budget"] = self.max_peak_bytes <= self.budget_bytes
        return data


def make_optimizer(name: str, parameters, lr: float | None = None) -> torch.optim.Optimizer:
    """SGD with momentum 0.9, or Adam; `lr` defaults to OPTIMISERS[name]."""
    if name not in OPTIMISERS:
        raise UserInputError(f"--optimizer: use {' or '.join(OPTIMISERS)}, not '{name}'")
    rate = lr if lr is not None else OPTIMISERS[name]
    if name == "sgd":
        return torch.optim.SGD(parameters, lr=rate, momentum=0.9)
    return torch.optim.Adam(parameters, lr=rate)


def synthetic_batches(source: ModelSource, module: nn.Module, steps: int) -> list[tuple[torch.Tensor, ...]]:
    """`steps` batches of the source's shapes: random inputs and class labels, from its seed."""
    generator = torch.Generator().manual_seed(source.seed)
    batches = []
    for step in range(steps):
        inputs = source.draw(generator)
        # labels from seeds of their own: drawn from the inputs' seed, a language model's first labels were its tokens
        labels = default_labels(module, inputs, source.factory, seed=source.seed + 1 + step)
        batches.append((*inputs, labels))
    return batches


def run_trial(
    source: ModelSource,
    *,
    steps: int,
    optimizer: str = "sgd",
    lr: float | None = None,
    compare: bool = True,
    on_step: Callable[[StepRecord], None] | None = None,
    on_plain_step: Callable[[int, float], None] | None = None,
    **settings,
) -> Trial:
    """Train `steps` steps with a schedule and, with `compare`, plainly first (module docstring).

    `settings` are `scheduled`'s: platform, ram, runtime, strategy, swap_dir, threads, ...
    """
    make_optimizer(optimizer, [torch.zeros(1, requires_grad=True)], lr)  # a bad name stops before any work
    module, _ = source.build()
    if not any(p.requires_grad for p in module.parameters()):
        raise UserInputError(f"{source.factory}: no parameter of the model requires a gradient, so there is nothing to train")
    batches = synthetic_batches(source, module, steps)
    settings.setdefault("name", source.factory.rpartition(":")[2])
    model: ScheduledModule = scheduled(module, batches[0][:-1], labels=batches[0][-1], **settings)
    threads = model._planner.threads
    plain_times: list[float] = []
    with deterministic(threads):
        plain = copy_module(module) if compare else None  # the scheduled run has not touched it yet
        if plain is not None:
            plain_times = _train_plain(plain, model.loss_function, batches, optimizer, lr, source.seed, on_plain_step)
        torch.manual_seed(source.seed)
        records = fit(model, batches, make_optimizer(optimizer, model.parameters(), lr), on_step=on_step)
    differing: list[str] = []
    parameters_equal = buffers_equal = None
    if plain is not None:
        ours, theirs = model.state_dict(), plain.state_dict()
        differing = [name for name, value in theirs.items() if not same_bits(value, ours[name])]
        buffer_names = {name for name, _ in plain.named_buffers()}
        parameters_equal = not [name for name in differing if name not in buffer_names]
        buffers_equal = not [name for name in differing if name in buffer_names]
    plan = model.plan
    return Trial(
        graph_name=plan.capture.graph.name,
        strategy=plan.strategy,
        status=plan.status,
        platform=plan.platform,
        optimizer=optimizer,
        threads=threads,
        budget_bytes=plan.budget_bytes,
        predicted_peak_bytes=plan.predicted.peak_ram_bytes,
        keep_all_peak_bytes=plan.capture.graph.keep_all_peak_bytes,
        predicted_step_s=plan.predicted.runtime_s,
        records=records,
        plain_step_s=tuple(plain_times),
        parameters_equal=parameters_equal,
        buffers_equal=buffers_equal,
        differing=tuple(differing),
    )


def _train_plain(module: nn.Module, loss: nn.Module, batches, optimizer: str, lr, seed: int, on_step) -> list[float]:
    """Plain PyTorch training on `batches`; the time of each forward and backward."""
    step = TrainingStep(module, loss)
    opt = make_optimizer(optimizer, module.parameters(), lr)
    times = []
    torch.manual_seed(seed)
    for number, batch in enumerate(batches, start=1):
        opt.zero_grad(set_to_none=True)
        start = time.perf_counter()
        step(*batch).backward()
        times.append(time.perf_counter() - start)
        opt.step()
        if on_step is not None:
            on_step(number, times[-1])
    return times
