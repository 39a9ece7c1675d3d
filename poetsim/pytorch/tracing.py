"""Ops traced as eager PyTorch runs them, where torch's tracing decomposition would not.

The importer's capture must record the ops eager PyTorch runs, or a scheduled step's gradients
are not plain PyTorch's bits. Where torch's Python decomposition of an op departs from the eager
CPU kernel (`randomness`: dropout; `recurrent`: LSTM, GRU, RNN; `eager_kernels` here: upsampling and a loss), the
capture replaces it for the trace with a kernel of poetsim's own, or removes it so that the op's
C++ kernels run as in eager.
"""

import contextlib
import copy
from collections.abc import Callable, Iterator

import torch

from poetsim.errors import UserInputError


@contextlib.contextmanager
def traced_as(kernels: dict) -> Iterator[None]:
    """Within the block, trace each op of `kernels` (an aten overload) by its function.

    The function replaces the op's Python kernels for autograd and for the composite
    decomposition, which the tracer dispatches to; None removes them, so that the op's C++
    kernels, eager's own, run. The op's Python kernels are put back on leaving.
    """
    from torch._C import DispatchKey

    keys = (DispatchKey.CompositeImplicitAutograd, DispatchKey.Autograd)
    saved: dict[tuple, Callable | None] = {(op, key): op.py_kernels.get(key) for op in kernels for key in keys}
    try:
        for op, kernel in kernels.items():
            for key in keys:
                if kernel is None:
                    op.py_kernels.pop(key, None)
                else:
                    op.py_kernels[key] = kernel
            op._dispatch_cache.clear()
        yield
    finally:
        for (op, key), before in saved.items():
            if before is None:
                op.py_kernels.pop(key, None)
            else:
                op.py_kernels[key] = before
        for op in kernels:
            op._dispatch_cache.clear()


#: `F.interpolate`'s ops, each overload. torch decomposes the linear, bilinear, bicubic and trilinear
#: modes into index arithmetic whose rounding is not the C++ kernels' (nearest happens to agree).
UPSAMPLING = (
    "upsample_nearest1d",
    "upsample_nearest2d",
    "upsample_nearest3d",
    "_upsample_nearest_exact1d",
    "_upsample_nearest_exact2d",
    "_upsample_nearest_exact3d",
    "upsample_linear1d",
    "upsample_bilinear2d",
    "upsample_trilinear3d",
    "upsample_bicubic2d",
    "_upsample_bilinear2d_aa",
    "_upsample_bicubic2d_aa",
)


#: Losses whose Python decomposition computes other values than the C++ kernel: torch 2.13's
#: `multilabel_margin_loss_forward` reads past the -1 that ends a row's targets.
LOSSES = ("multilabel_margin_loss_forward",)


def eager_kernels():
    """Trace `F.interpolate` and the losses of LOSSES as eager runs them: C++ kernels, not torch's Python decompositions."""
    aten = torch.ops.aten
    upsampling = [getattr(getattr(aten, name), overload) for name in UPSAMPLING for overload in ("default", "vec")]
    return traced_as(dict.fromkeys([*upsampling, *(getattr(aten, name).default for name in LOSSES)]))


@contextlib.contextmanager
def attributes_kept(module: torch.nn.Module) -> Iterator[Callable[[], None]]:
    """Within the block, trace `module`; on leaving, its submodules' attributes as they were when it began.

    A trace runs the forward, whose side effects must not outlive it: a forward pre-hook may store
    a tensor it computes on the module (`torch.nn.utils.weight_norm` and `spectral_norm` set
    `weight`), a forward hook may keep features in a dict or list attribute, a forward may cache a
    tensor on the module or register a buffer. Under a trace those are fake or traced tensors,
    which the module's own forward, a copy of it and its training use after. Tensor attributes,
    parameters, buffers, and dict or list attributes that hold a tensor get their values back.

    A forward that changes one of its modules' public attributes from one plain value to another
    (a call counter, an `initialized` flag set by a data-dependent initialisation) or registers a
    buffer has Python state that a replayed step cannot follow: leaving the block without an error
    then raises `PythonState`, naming it. A tensor cached in an attribute (None before) is not
    such state: the captured step computes it. The block gets the restoring function, for a tracer
    that runs the forward more than once to call before each run.
    """
    kept = _Kept(module)
    try:
        with _buffers_updated_in_place(module) as rebound:
            yield kept.restore
        changed = rebound[0] if rebound else kept.python_state()
    finally:
        kept.restore(buffers_too=True)
    if changed:
        raise PythonState(changed)


@contextlib.contextmanager
def _buffers_updated_in_place(module: torch.nn.Module) -> Iterator[list[str]]:
    """Within the block, a forward's new tensor for one of its buffers is copied into the buffer.

    `self.running = 0.9 * self.running + 0.1 * h.mean(0)` gives the buffer new values as eager
    runs it; traced, the assignment would only rebind the tracer's stand-in and the update would
    be lost. Copied in place it is a buffer update of the captured step, as BatchNorm's running
    statistics are, with the same values. A new tensor of another shape or dtype, or one that
    wants a gradient, is noted in words in the list the block gets instead.
    """
    tree = {id(m): path for path, m in module.named_modules(remove_duplicate=False)}
    rebound: list[str] = []
    assign = torch.nn.Module.__setattr__

    def setting(self, name: str, value) -> None:
        buffers = self.__dict__.get("_buffers", {})
        old = buffers.get(name)
        if id(self) not in tree or not isinstance(old, torch.Tensor) or not isinstance(value, torch.Tensor):
            return assign(self, name, value)
        if value.shape == old.shape and value.dtype == old.dtype and not value.requires_grad:
            with torch.no_grad():
                old.copy_(value)
            return None
        path = tree[id(self)].removeprefix("model.").removeprefix("model")
        rebound.append(
            f"{f'module {path!r}' if path else 'the model'} gives its buffer '{name}' a new tensor of "
            f"{tuple(value.shape)} {value.dtype}{' that wants a gradient' if value.requires_grad else ''} in its forward, "
            f"where it was {tuple(old.shape)} {old.dtype}: a scheduled step updates a buffer in place; keep its shape and "
            "dtype and detach what it holds"
        )
        return assign(self, name, value)

    torch.nn.Module.__setattr__ = setting  # type: ignore[method-assign]
    try:
        yield rebound
    finally:
        torch.nn.Module.__setattr__ = assign  # type: ignore[method-assign]


class _Kept:
    """A module tree's attributes, buffers and dict or list attributes as they were, to put back."""

    def __init__(self, module: torch.nn.Module):
        internal = set(vars(torch.nn.Module()))
        self.named = list(module.named_modules())
        self.saved = [(vars(m), dict(vars(m)), dict(m._buffers)) for _, m in self.named]
        #: The tracer swaps parameters by name and back; a module registered under two names (an
        #: ALBERT-style shared block, `self.dec = self.enc`) is swapped twice and back once.
        self.parameters = [dict(m._parameters) for _, m in self.named]
        self.containers = [
            (value, copy.copy(value))
            for attributes, _, _ in self.saved
            for name, value in attributes.items()
            if name not in internal and isinstance(value, (dict, list))
        ]

    def restore(self, buffers_too: bool = False) -> None:
        """Put the attributes back; with `buffers_too` the buffers too (a tracer swaps them while it runs)."""
        for (_, m), (attributes, before, buffers) in zip(self.named, self.saved):
            for name in [n for n, v in attributes.items() if isinstance(v, torch.Tensor) and n not in before]:
                del attributes[name]
            attributes.update((n, v) for n, v in before.items() if isinstance(v, torch.Tensor) or plain_attribute(n, v))
            attributes.update((n, before[n]) for n, v in list(attributes.items()) if isinstance(v, torch.Tensor) and n in before)
            if buffers_too:
                m._buffers.clear()
                m._buffers.update(buffers)
        if buffers_too:
            for (_, m), parameters in zip(self.named, self.parameters):
                m._parameters.clear()
                m._parameters.update(parameters)
        for container, items in self.containers:
            if not (_holds_tensors(container) or _holds_tensors(items)):
                continue
            container.clear()
            if isinstance(container, dict):
                container.update(items)
            else:
                container.extend(items)

    def python_state(self) -> str:
        """The first plain attribute the forward changed, or buffer it registered, in words ("" if none)."""
        for (path, m), (attributes, before, buffers) in zip(self.named, self.saved):
            where = f"module '{path.removeprefix('model.')}'" if path not in ("", "model") else "the model"
            for name, value in before.items():
                after = attributes.get(name, value)
                if plain_attribute(name, value) and plain_attribute(name, after) and after != value:
                    return (
                        f"{where} changes its attribute '{name}' in its forward ({value!r} before the capture, "
                        f"{after!r} after): a scheduled step replays the captured forward, which cannot follow "
                        "Python state; set it outside the forward"
                    )
            for name in m._buffers.keys() - buffers.keys():
                return (
                    f"{where} registers the buffer '{name}' in its forward: register it in __init__ (a scheduled step "
                    "replays the captured forward, which cannot follow Python state)"
                )
        return ""


class PythonState(UserInputError):
    """A forward that changes its modules' Python attributes, which a replayed step cannot follow."""


@contextlib.contextmanager
def attribute_reads(modules: list[torch.nn.Module]) -> Iterator[set[tuple[int, str]]]:
    """Within the block, the public attributes read from `modules`, as (id of the module, name).

    A capture follows the Python code of one forward, so the plain attributes it read are the
    ones its graph may depend on; one it never read (a step counter the training loop keeps on the
    model) cannot have shaped it. `nn.Module` gets a `__getattribute__` that notes each read for
    the block's length. A module whose class defines its own `__getattribute__` is noted as reading
    every attribute, since reads through it are not seen.
    """
    watched = {id(m) for m in modules}
    reads: set[tuple[int, str]] = set()
    get = object.__getattribute__

    def reading(self, name: str):
        if name[:1] != "_" and id(self) in watched:
            reads.add((id(self), name))
        return get(self, name)

    torch.nn.Module.__getattribute__ = reading  # type: ignore[method-assign]
    try:
        yield reads
    finally:
        del torch.nn.Module.__getattribute__
        reads.update((id(m), name) for m in modules if type(m).__getattribute__ is not get for name in vars(m))


def plain_attribute(name: str, value: object) -> bool:
    """Whether an attribute is a public one of a plain value (bool, number, string, None)."""
    return not name.startswith("_") and isinstance(value, (bool, int, float, str, type(None)))


def _holds_tensors(container: dict | list) -> bool:
    return any(isinstance(v, torch.Tensor) for v in (container.values() if isinstance(container, dict) else container))


class UnknownCausality(Exception):
    """An attention mask whose causality eager PyTorch decides by its values, which a trace does not have."""


@contextlib.contextmanager
def eager_causal_masks() -> Iterator[None]:
    """Within the block, decide `nn.Transformer`'s causal-mask check as eager does, without values.

    `nn.TransformerEncoder`, `nn.TransformerDecoder` and `nn.Transformer` compare an attention mask
    given without an `is_causal` hint to the causal mask of its size, by value, and take attention's
    causal path if they are equal: another kernel. A trace has no values. A mask that
    `nn.Transformer.generate_square_subsequent_mask` made within the block is causal by
    construction, and a mask of another shape is not; any other mask stops the trace
    (`UnknownCausality`), naming the hint that decides.
    """
    from torch.nn.modules import transformer

    generate, detect = transformer._generate_square_subsequent_mask, transformer._detect_is_causal_mask
    made: list[torch.Tensor] = []

    def generated(sz: int, device=None, dtype=None) -> torch.Tensor:
        mask = generate(sz, device=device, dtype=dtype)
        made.append(mask)
        return mask

    def detected(mask: torch.Tensor | None, is_causal: bool | None = None, size: int | None = None) -> bool:
        if is_causal is not None or mask is None:
            return is_causal is True
        side = size if size is not None else mask.size(-2)
        if tuple(mask.size()) != (side, side):
            return False
        if any(mask is m for m in made):
            return True
        raise UnknownCausality(
            "an attention mask given without is_causal: PyTorch then checks its values to choose the causal "
            "kernel, which a traced step cannot; pass is_causal=True or False with it (nn.Transformer: "
            "tgt_is_causal, src_is_causal), or make it with nn.Transformer.generate_square_subsequent_mask"
        )

    transformer._generate_square_subsequent_mask, transformer._detect_is_causal_mask = generated, detected
    try:
        yield
    finally:
        transformer._generate_square_subsequent_mask, transformer._detect_is_causal_mask = generate, detect
