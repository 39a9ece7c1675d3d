"""The reference a scheduled step is held against: a plain `loss.backward()`, compared bit for bit.

A schedule changes where and when activations live, never what is computed, so the gradients
and the updated buffers of a scheduled step must have exactly the bits of a plain keep-all step
of the same module on the same batch (`same_bits`: NaNs and signed zeros included).
"""

import copy
import functools
import operator
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from poetsim.errors import UserInputError, first_line
from poetsim.pytorch.capturing import Capture, tied_parameters

if TYPE_CHECKING:
    from poetsim.pytorch.executor import Machine


@dataclass(frozen=True)
class PlainStep:
    """The reference: gradients and buffers after a plain `loss.backward()`, and its time."""

    grads: dict
    buffers: dict
    seconds: float


def copy_module(module: torch.nn.Module) -> torch.nn.Module:
    """A deep copy of `module`, also where a hook keeps a computed tensor on it.

    `torch.nn.utils.weight_norm` and `spectral_norm` set `weight` from their parameters in a
    forward pre-hook: a tensor with a gradient history, which `copy.deepcopy` refuses. The copy
    takes it detached (the hook computes it afresh before every forward); the module keeps its own.
    The copy's parameters get the original's gradient hooks, which `copy.deepcopy` drops.
    """
    computed = [
        (m, name, value)
        for m in module.modules()
        for name, value in vars(m).items()
        if isinstance(value, torch.Tensor) and value.grad_fn is not None
    ]
    for m, name, value in computed:
        setattr(m, name, value.detach())
    try:
        twin = copy.deepcopy(module)
    finally:
        for m, name, value in computed:
            setattr(m, name, value)
    copied = dict(twin.named_parameters())
    for name, parameter in module.named_parameters():  # a deep copy drops a parameter's gradient hooks
        for hook in (parameter._backward_hooks or {}).values():
            copied[name].register_hook(hook)
    return twin


def plain_step(capture: Capture) -> PlainStep:
    """Run a plain keep-all `loss.backward()` of the step; its parameters' gradients and buffers are as they were after.

    The step itself runs, not a copy: a loss function may read the model's parameters through
    its closure (a weight penalty), which a copy of the step would not reach.
    """
    step = capture.step
    parameters = list(step.parameters())
    grads_before = [p.grad for p in parameters]
    buffers_before = [(m, name, b, b.detach().clone()) for m in step.modules() for name, b in m._buffers.items() if b is not None]
    try:
        for p in parameters:
            p.grad = None
        start = time.perf_counter()
        try:
            step(*capture.inputs).backward()
        except RuntimeError as error:
            if "deterministic implementation" in str(error):
                raise
            raise UserInputError(f"{capture.graph.name}: plain PyTorch cannot train this model: {first_line(error)}") from None
        seconds = time.perf_counter() - start
        grads = {name: p.grad for name, p in step.named_parameters()}
        buffers = {name: b.detach().clone() for name, b in step.named_buffers(remove_duplicate=False)}
    finally:
        for p, grad in zip(parameters, grads_before):
            p.grad = grad
        with torch.no_grad():
            for m, name, b, value in buffers_before:
                m._buffers[name] = b
                b.copy_(value)
    return PlainStep(grads, buffers, seconds)


def compare(reference: PlainStep, machine: "Machine") -> tuple[bool, tuple[str, ...], bool]:
    """Whether every gradient and updated buffer of the run has the reference's bits."""
    differing = []
    grads = parameter_grads(machine)
    for name, expected in reference.grads.items():
        mine = grads.get(name)
        if (expected is None) != (mine is None) or (mine is not None and not same_bits(expected, mine)):
            differing.append(name)
    buffers_equal = all(same_bits(reference.buffers[name], value) for name, value in machine.buffers.items())
    return not differing, tuple(differing), buffers_equal


def parameter_grads(machine: "Machine") -> dict[str, torch.Tensor]:
    """The run's gradient of each parameter, by the name `named_parameters()` gives it.

    A tied parameter has a gradient per name in the trace: its gradient is their sum, in the order
    the run computed them, as autograd accumulates them. Hooks registered on a parameter
    (`weight.register_hook`) are applied to its gradient, as autograd does before accumulating it.
    """
    grads = dict(machine.grads)
    order = list(machine.grads)
    for names in tied_parameters(machine.capture.step):
        parts = [grads.pop(n) for n in sorted((n for n in names if n in grads), key=order.index)]
        if parts:
            grads[names[0]] = functools.reduce(operator.add, parts)
    parameters = dict(machine.capture.step.named_parameters())
    for name in grads:  # a parameter's gradient hooks, as autograd applies them before accumulating
        for hook in (parameters[name]._backward_hooks or {}).values():
            changed = hook(grads[name])
            grads[name] = grads[name] if changed is None else changed
    return grads


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors have the same dtype, shape and bytes (NaNs and signed zeros included).

    Sparse tensors (an `nn.Embedding(sparse=True)`'s gradient) compare their indices and values as stored.
    """
    if a.dtype != b.dtype or a.shape != b.shape or a.layout != b.layout:
        return False
    if a.is_sparse:
        return same_bits(a._indices(), b._indices()) and same_bits(a._values(), b._values())
    return torch.equal(a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8))
