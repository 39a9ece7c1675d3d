"""Random ops (dropout, stochastic depth, any op that draws random numbers) captured and redrawn exactly.

A recomputed dropout must draw the mask it drew the first time, or the gradients are no longer
those of the step. poetsim does what `torch.utils.checkpoint` does, per node: at a node's first
compute the executor saves the CPU generator's state (`torch.get_rng_state()`, 5,056 bytes
for the Mersenne Twister), and a recomputation of the node sets the generator to that state,
runs the node's ops, and puts the generator back as it was. The first computes of a step run
in the order of the graph, which is the order of the eager forward pass, so a scheduled step
draws the same numbers from the same generator as plain PyTorch, and leaves it where plain
PyTorch would: the next step draws on from there. The saved states are held outside the
activation budget, as the normalisation statistics are, and counted in the graph's meta
(`random_nodes`, `random_state_bytes`).

The capture must see the ops eager PyTorch runs. On the CPU, eager `F.dropout` draws a float
noise tensor, divides it by the keep probability and multiplies (ATen's `_dropout_impl`);
torch's tracing decomposition replaces it with `native_dropout`, whose `x * mask * scale` rounds
differently for some probabilities (0.15, 0.45). `eager_dropout()` makes the trace follow the
eager kernel instead. Functionalisation then turns its in-place `noise.bernoulli_(q)` into
`aten.bernoulli.p(noise, q)`, whose ATen kernel draws into a new contiguous tensor, where eager
PyTorch draws into `noise` as laid out like the layer's input (a transposed attention output):
the same numbers land on other elements. `kernel(target)` gives the executor the in-place form.
"""

import contextlib
from collections.abc import Iterator

import torch
from torch import fx

from poetsim.pytorch import tracing
from poetsim.pytorch.flops import op_name

aten = torch.ops.aten


def draws_random_numbers(n: fx.Node) -> bool:
    """Whether an op draws random numbers: tagged so by aten, unless its dropout probability is zero."""
    target = n.target
    if not isinstance(target, torch._ops.OpOverload) or torch.Tag.nondeterministic_seeded not in target.tags:
        return False
    for index, argument in enumerate(target._schema.arguments):
        if argument.name == "dropout_p" or (argument.name == "p" and op_name(target) == "native_dropout"):
            value = n.kwargs.get(argument.name, n.args[index] if index < len(n.args) else argument.default_value)
            return bool(value != 0)
    return True


def out_of_order(nodes: list[int]) -> int | None:
    """The first index at which the random ops' nodes, in graph order, go back to an earlier node.

    None if they never do. First computes run in node order, and a node redraws only what it
    drew first, so eager PyTorch's order of draws must be the nodes' order.
    """
    last = -1
    for index, node in enumerate(nodes):
        if node < last:
            return index
        last = node
    return None


def _bernoulli_like(self: torch.Tensor, p: float, *, generator=None) -> torch.Tensor:
    """`aten.bernoulli.p` as eager's in-place `bernoulli_` draws it: into a tensor laid out like `self`."""
    return torch.empty_like(self).bernoulli_(p, generator=generator)


#: Functional random ops run as the in-place draws they replace in the traced graph.
_EAGER_KERNELS = {aten.bernoulli.p: _bernoulli_like}


def kernel(target):
    """What the executor calls for an op: eager's in-place draw for a functionalised random op."""
    return _EAGER_KERNELS.get(target, target)


def state_bytes() -> int:
    """Bytes of one saved state of the CPU generator."""
    return int(torch.get_rng_state().numel())


def _dropout_as_eager(input: torch.Tensor, p: float, train: bool | None) -> torch.Tensor:
    """ATen's CPU dropout (`_dropout_impl`): noise = bernoulli(1 - p) / (1 - p); input * noise."""
    if not train or p == 0 or input.numel() == 0:
        return input.clone()  # as torch's own decomposition: a copy, no random numbers
    if p == 1:
        return input * torch.zeros((), dtype=input.dtype)
    noise = torch.empty_like(input).bernoulli_(1 - p)
    noise.div_(1 - p)
    return input * noise


def eager_dropout():
    """Trace `aten.dropout` as the eager CPU kernel runs it, not as `native_dropout` (module docstring)."""
    return tracing.traced_as({aten.dropout.default: _dropout_as_eager})


class RandomStates:
    """The generator's state at each random node's first compute, to redraw it on recomputation."""

    def __init__(self) -> None:
        self.states: dict[int, torch.Tensor] = {}

    @property
    def nbytes(self) -> int:
        """Bytes of the states saved so far."""
        return sum(int(s.numel()) for s in self.states.values())

    @contextlib.contextmanager
    def drawing(self, node: int) -> Iterator[None]:
        """Run node `node`'s ops inside, drawing what the node drew the first time.

        The first time from the generator as it is (its state is saved), again from the saved
        state, leaving the generator as it was before.
        """
        saved = self.states.get(node)
        if saved is None:
            self.states[node] = torch.get_rng_state()
            yield
            return
        current = torch.get_rng_state()
        torch.set_rng_state(saved)
        try:
            yield
        finally:
            torch.set_rng_state(current)
