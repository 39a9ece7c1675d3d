"""Recurrent layers (LSTM, GRU, plain RNN) traced as eager PyTorch runs them on the CPU.

The capture must record the ops eager PyTorch runs, or the scheduled step's gradients are not
plain PyTorch's. torch's tracing decomposition of the recurrent ops departs from eager in three
ways:

- **LSTM.** Eager `aten.lstm` on the CPU, with float32 tensors and oneDNN enabled (the default),
  runs each layer and direction as one oneDNN kernel, `aten.mkldnn_rnn_layer`, whose gradient is
  oneDNN's `mkldnn_rnn_layer_backward`. The decomposition takes that kernel only where the input
  needs no gradient (inference) and otherwise spells each time step out as separate matrix
  products and gate functions, which round differently.
- **GRU gates.** Eager's GRU cell applies the reset and update sigmoids in place to strided
  chunks of the gates; the decomposition applies them to contiguous sums, which round otherwise
  (`_RowSigmoid`).
- **Dropout between layers.** Eager applies `dropout` to the output of every layer but the last
  when training; the decomposition's layer loop never does (its condition cannot hold), for
  LSTM, GRU and plain RNN alike.

`eager_recurrent()` replaces the decomposition during the trace with one that does as eager
does: the oneDNN layer kernel where eager takes it, torch's own per-step layers elsewhere (GRU,
with eager's sigmoids, plain RNN, an LSTM with projections or without oneDNN), and the dropout
between layers through `aten.dropout`, which `randomness.eager_dropout` traces as the eager
kernel draws it.
"""

import operator
from collections.abc import Callable
from functools import partial

import torch
from torch import fx
from torch._decomp import decompositions

from poetsim.pytorch import tracing

aten = torch.ops.aten

#: oneDNN's code for an LSTM layer (ideep::rnn_kind::LSTM), the `mode` argument of mkldnn_rnn_layer.
_ONEDNN_LSTM = 2


def _onednn_takes(input: torch.Tensor, hx, params) -> bool:
    """Whether eager `aten.lstm` runs on oneDNN here: enabled, every tensor on the CPU, float32, not empty."""
    if not torch._C._get_mkldnn_enabled() or input.numel() == 0 or input.dtype != torch.float32:
        return False
    return all(t.device.type == "cpu" for t in (input, *hx, *params))


def _onednn_layer(input, hidden, params, reverse=False, *, has_biases, num_layers, train, bidirectional, batch_first):
    """One LSTM layer and direction as eager runs it: `aten.mkldnn_rnn_layer` on contiguous time-major input.

    Eager passes the op's own `bidirectional` and `batch_first` on to every layer, as here.
    """
    w_ih, w_hh = params[0], params[1]
    b_ih = params[2] if has_biases else torch.zeros(w_ih.size(), dtype=w_ih.dtype)
    b_hh = params[3] if has_biases else torch.zeros(w_hh.size(), dtype=w_hh.dtype)
    hx, cx = (t.contiguous() for t in hidden)
    output, hy, cy, _ = aten.mkldnn_rnn_layer.default(
        input.contiguous(),
        w_ih,
        w_hh,
        b_ih,
        b_hh,
        hx,
        cx,
        reverse,
        [],
        _ONEDNN_LSTM,
        hx.size(-1),
        num_layers,
        has_biases,
        bidirectional,
        batch_first,
        train,
    )
    return output, (hy, cy)


def _layers(input, hidden, params, num_layers, dropout, train, bidirectional, batch_first, layer: Callable):
    """The layer stack of every recurrent op: each layer's directions, then dropout between layers when training."""
    x = input.transpose(0, 1) if batch_first else input
    finals = []
    for index in range(num_layers):
        directions = 2 if bidirectional else 1
        outputs = []
        for direction in range(directions):
            k = index * directions + direction
            output, final = layer(x, hidden[k], params[k], reverse=direction == 1)
            outputs.append(output)
            finals.append(final)
        x = outputs[0] if directions == 1 else torch.cat(outputs, -1)
        if dropout != 0 and train and index < num_layers - 1:
            x = torch.dropout(x, dropout, True)
    return (x.transpose(0, 1) if batch_first else x), finals


def _lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    projections = hx[0].size(2) != hx[1].size(2)
    grouped = decompositions.gather_params(params, has_biases, projections)
    if not projections and _onednn_takes(input, hx, params):
        layer = partial(
            _onednn_layer,
            has_biases=has_biases,
            num_layers=num_layers,
            train=train,
            bidirectional=bidirectional,
            batch_first=batch_first,
        )
    else:
        layer = partial(decompositions.one_layer_lstm, has_biases=has_biases)
    hidden = list(zip(hx[0].unbind(0), hx[1].unbind(0)))
    out, finals = _layers(input, hidden, grouped, num_layers, dropout, train, bidirectional, batch_first, layer)
    return out, torch.stack([h for h, _ in finals], 0), torch.stack([c for _, c in finals], 0)


def _per_step(cell) -> Callable:
    """The GRU or plain-RNN op with torch's per-step layers (`cell`) and eager's dropout between layers."""

    def run(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
        grouped = decompositions.gather_params(params, has_biases, False)
        step = partial(decompositions.one_layer_rnn, has_biases=has_biases, hidden_fn=cell)
        out, finals = _layers(input, list(hx.unbind(0)), grouped, num_layers, dropout, train, bidirectional, batch_first, step)
        return out, torch.stack(finals, 0)

    return run


class _RowSigmoid(torch.autograd.Function):
    """A sigmoid over the last dimension that rounds as eager's in-place `sigmoid_` on a chunk of the gates.

    Eager's GRU cell applies `sigmoid_` to chunks of its gates: strided views, which the CPU
    kernels run row by row, forward and in the backward (which reads the result, still a view).
    A contiguous tensor runs as one long row instead, whose vector loop leaves another tail to the
    scalar code, with other bits where a row is not a whole number of vector lengths. Here the
    input and the saved result are padded by a column and read as views, so both run row by row.
    """

    @staticmethod
    def forward(ctx, x):
        y = torch.nn.functional.pad(x, (0, 1))[..., :-1].sigmoid()
        ctx.save_for_backward(torch.nn.functional.pad(y, (0, 1)))
        return y

    @staticmethod
    def backward(ctx, grad):
        (padded,) = ctx.saved_tensors
        return aten.sigmoid_backward.default(grad, padded[..., :-1])


def _gru_cell(inp, cur_hidden, ih_weight, ih_bias, hh_weight, hh_bias):
    """The GRU step of torch's decomposition (`decompositions.gru_cell`, whose graph eager's matches), with eager's sigmoids."""
    chunked_igates = inp.chunk(3, 1)
    chunked_hgates = torch.nn.functional.linear(cur_hidden, hh_weight, hh_bias).chunk(3, 2)
    reset_gate = _RowSigmoid.apply(chunked_hgates[0] + chunked_igates[0])
    input_gate = _RowSigmoid.apply(chunked_hgates[1] + chunked_igates[1])
    new_gate = (chunked_igates[2] + (chunked_hgates[2] * reset_gate)).tanh()
    return (cur_hidden - new_gate) * input_gate + new_gate


def _gru_cell_op(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """`nn.GRUCell` (`aten.gru_cell`): one step from the input itself, with eager's sigmoids."""
    return _gru_cell(torch.nn.functional.linear(input, w_ih, b_ih), hx.unsqueeze(0), w_ih, b_ih, w_hh, b_hh)[0]


_KERNELS = {
    aten.gru_cell.default: _gru_cell_op,
    aten.lstm.input: _lstm,
    aten.gru.input: _per_step(_gru_cell),
    aten.rnn_tanh.input: _per_step(decompositions.rnn_cell(torch.tanh)),
    aten.rnn_relu.input: _per_step(decompositions.rnn_cell(torch.relu)),
}


def eager_recurrent():
    """Trace the recurrent ops as eager runs them on the CPU (module docstring)."""
    return tracing.traced_as(_KERNELS)


def size_workspaces(gm: fx.GraphModule) -> None:
    """Give each oneDNN LSTM layer's workspace its real size in the traced graph.

    The layer's fake kernel returns an empty workspace, while the real kernel keeps its gates and
    states there for the backward: bytes the node holds. Each layer is run once on zeros of its
    inputs' shapes (the size depends on shapes only) and its workspace value takes that size.
    """
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    for node in gm.graph.nodes:
        if node.target is not aten.mkldnn_rnn_layer.default:
            continue
        zeros = fx.node.map_arg(node.args, lambda a: torch.zeros(a.meta["val"].shape, dtype=a.meta["val"].dtype))
        with unset_fake_temporarily(), torch.enable_grad():  # without grad mode the kernel keeps no workspace
            workspace = aten.mkldnn_rnn_layer.default(*zeros)[3]
        for user in node.users:
            if user.target is operator.getitem and user.args[1] == 3:
                fake = user.meta["val"]
                with fake.fake_mode:
                    user.meta["val"] = torch.empty(workspace.shape, dtype=workspace.dtype)
