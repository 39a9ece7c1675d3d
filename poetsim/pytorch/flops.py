"""FLOPs of one captured aten op, with torch's own counter where it has a formula.

`torch.utils.flop_counter` counts matrix products, convolutions (forward and backward) and
attention, with a multiply-add as two FLOPs, as poetsim does. It counts nothing for the other
ops (ReLU, BatchNorm, additions, pooling, the loss), and a node of zero FLOPs would cost no time
in poetsim's cost model. Those ops are therefore counted per element with the conventions of
poetsim's zoo (docs/graphs.md): a ReLU one FLOP per element, BatchNorm six, its backward nine,
softmax five, GELU eight, a max pooling its window per output element, the loss five per logit.
Ops the table does not know (copies, padding, concatenation) count one FLOP per element of
their largest tensor. docs/pytorch.md states the table.

An LSTM layer on oneDNN (`mkldnn_rnn_layer`, `recurrent`) is counted as its matrix products, two
FLOPs per weight per time step and batch row, plus three per gate element (activation, cell
update, output); its backward as two forwards, as for the zoo's matrix products.

CPU attention (`_scaled_dot_product_flash_attention_for_cpu`) has no formula in torch 2.13's
counter; it is counted with the counter's own attention formula. The counter's convolution
backward ignores groups in the weight gradient (a depthwise convolution's weight gradient comes
out `groups` times too large), so a convolution's backward is counted here as one forward
convolution per gradient it computes (input, weight), which holds for any groups and is the
zoo's rule.
"""

import operator
from math import prod

import torch
from torch.utils import flop_counter

aten = torch.ops.aten

#: FLOPs per element of the op's largest tensor (input or output), zoo conventions.
PER_ELEMENT = {
    "relu": 1,
    "hardtanh": 1,
    "threshold_backward": 1,
    "hardtanh_backward": 1,
    "clamp": 1,
    "add": 1,
    "sub": 1,
    "mul": 1,
    "div": 1,
    "neg": 1,
    "where": 1,
    "tanh": 1,
    "tanh_backward": 1,
    "sigmoid": 1,
    "sigmoid_backward": 1,
    "exp": 1,
    "gelu": 8,
    "gelu_backward": 8,
    "_native_batch_norm_legit_functional": 6,
    "native_batch_norm": 6,
    "native_batch_norm_backward": 9,
    "native_layer_norm": 6,
    "native_layer_norm_backward": 9,
    "_softmax": 5,
    "_softmax_backward_data": 5,
    "_log_softmax": 4,
    "_log_softmax_backward_data": 4,
    "nll_loss_forward": 1,
    "nll_loss_backward": 1,
    "mean": 1,
    "sum": 1,
    "avg_pool2d": 1,
    "avg_pool2d_backward": 1,
    "_adaptive_avg_pool2d": 1,
    "_adaptive_avg_pool2d_backward": 1,
}
#: Ops whose cost is their window per output element (the pooled side).
_WINDOWED = {"max_pool2d_with_indices", "max_pool2d_with_indices_backward"}
#: oneDNN's LSTM layer: forwards per call (the backward counts two).
_RECURRENT = {"mkldnn_rnn_layer": 1, "mkldnn_rnn_layer_backward": 2}
#: CPU attention, forward and backward, counted with torch's formula for the other kernels.
_ATTENTION = {"_scaled_dot_product_flash_attention_for_cpu": False, "_scaled_dot_product_flash_attention_for_cpu_backward": True}


def op_name(target) -> str:
    """The aten op's name without namespace or overload: 'convolution_backward'."""
    if target is operator.getitem:
        return "getitem"
    packet = getattr(target, "overloadpacket", None)
    return getattr(packet, "__name__", str(target)).split(".")[-1]


def op_flops(target, args: tuple, kwargs: dict, out) -> float:
    """FLOPs of one op, given its arguments and output as (fake or real) tensors."""
    packet = getattr(target, "overloadpacket", None)
    if packet is aten.convolution_backward:
        grad_out, x, weight = args[:3]
        transposed, mask = args[7], args[10]
        forward = flop_counter.conv_flop_count(x.shape, weight.shape, grad_out.shape, transposed)
        return float(forward * (bool(mask[0]) + bool(mask[1])))
    if packet in flop_counter.flop_registry:
        return float(flop_counter.flop_registry[packet](*args, **kwargs, out_val=out))
    name = op_name(target)
    if name in _RECURRENT:  # (input, weight_ih, weight_hh, ...)
        x, w_ih, w_hh = args[:3]
        rows = x.numel() // x.shape[-1]  # time steps x batch
        return float(_RECURRENT[name] * rows * (2 * (w_ih.numel() + w_hh.numel()) + 3 * w_ih.shape[0]))
    if name in _ATTENTION:
        if _ATTENTION[name]:  # backward: (grad_out, query, key, value, ...)
            return float(flop_counter.sdpa_backward_flop_count(*(t.shape for t in args[:4])))
        return float(flop_counter.sdpa_flop_count(*(t.shape for t in args[:3])))
    tensors = [t for t in _tensors((args, kwargs, out))]
    if not tensors:
        return 0.0
    if name in _WINDOWED:
        kernel = args[2 if name.endswith("backward") else 1]
        window = prod(kernel) if len(kernel) > 1 else kernel[0] ** 2
        pooled = min(tensors, key=lambda t: t.numel() if t.is_floating_point() else float("inf"))
        return float(window * pooled.numel())
    return float(PER_ELEMENT.get(name, 1) * max(t.numel() for t in tensors))


def _tensors(tree):
    for leaf in torch.utils._pytree.tree_leaves(tree):
        if isinstance(leaf, torch.Tensor):
            yield leaf
