"""Ops traced as eager PyTorch runs them, where torch's tracing decomposition would not.

The importer's capture must record the ops eager PyTorch runs, or a scheduled step's gradients
are not plain PyTorch's bits. Where torch's Python decomposition of an op departs from the eager
CPU kernel (`randomness`: dropout; `recurrent`: LSTM, GRU, RNN; `eager_upsampling` here), the
capture replaces it for the trace with a kernel of poetsim's own, or removes it so that the op's
C++ kernels run as in eager.
"""

import contextlib
import copy
from collections.abc import Callable, Iterator

import torch


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


def eager_upsampling():
    """Trace `F.interpolate` as eager runs it: the C++ upsampling kernels, not torch's Python decompositions."""
    aten = torch.ops.aten
    return traced_as({getattr(getattr(aten, name), overload): None for name in UPSAMPLING for overload in ("default", "vec")})


@contextlib.contextmanager
def attributes_kept(module: torch.nn.Module) -> Iterator[None]:
    """On leaving the block, the tensors that `module`'s submodules held as plain attributes when it began.

    A forward pre-hook may store a tensor it computes on the module (`torch.nn.utils.weight_norm`
    and `spectral_norm` set `weight`), and a forward hook may keep features in a dict or list
    attribute; under a trace those are fake or traced tensors, which must not outlive the trace:
    the module's own forward, a copy of it and its training use it after. A dict or list attribute
    that holds a tensor before or after gets its items back.
    """
    internal = set(vars(torch.nn.Module()))
    saved = [(vars(m), dict(vars(m))) for m in module.modules()]
    containers = [
        (value, copy.copy(value))
        for attributes, _ in saved
        for name, value in attributes.items()
        if name not in internal and isinstance(value, (dict, list))
    ]
    try:
        yield
    finally:
        for attributes, before in saved:
            for name in [n for n, v in attributes.items() if isinstance(v, torch.Tensor) and n not in before]:
                del attributes[name]
            attributes.update((n, v) for n, v in before.items() if isinstance(v, torch.Tensor))
        for container, items in containers:
            if not (_holds_tensors(container) or _holds_tensors(items)):
                continue
            container.clear()
            if isinstance(container, dict):
                container.update(items)
            else:
                container.extend(items)


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
