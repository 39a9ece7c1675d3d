"""Ops traced as eager PyTorch runs them, where torch's tracing decomposition would not.

The importer's capture must record the ops eager PyTorch runs, or a scheduled step's gradients
are not plain PyTorch's bits. Where torch's Python decomposition of an op departs from the eager
CPU kernel (`randomness`: dropout; `recurrent`: LSTM, GRU, RNN), the capture replaces it for the
trace with a kernel of poetsim's own.
"""

import contextlib
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def traced_as(kernels: dict) -> Iterator[None]:
    """Within the block, trace each op of `kernels` (an aten overload) by its function.

    The function replaces the op's Python kernels for autograd and for the composite
    decomposition, which the tracer dispatches to; the op's own are put back on leaving.
    """
    from torch._C import DispatchKey

    keys = (DispatchKey.CompositeImplicitAutograd, DispatchKey.Autograd)
    saved: dict[tuple, Callable | None] = {(op, key): op.py_kernels.get(key) for op in kernels for key in keys}
    try:
        for op, kernel in kernels.items():
            for key in keys:
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
