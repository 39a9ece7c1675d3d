"""The host reference of a device step: the same forward and backward pass in NumPy, float64.

Independent of the runtime's C (other code, other precision, other summation order), so the
device's gradients are held to it within a tolerance, not bitwise: `REFERENCE_RTOL` of each
gradient tensor's largest magnitude. The loss is the mean softmax cross-entropy over the
labels, as PyTorch's default; max pooling picks the first largest value of a window.
"""

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from poetsim.device.formats import Kind
from poetsim.device.program import DeviceProgram
from poetsim.device.tensors import StepTensors

#: Largest difference from the reference allowed, as a share of the reference tensor's largest
#: magnitude: float32 sums of up to a few thousand terms stay far within it.
REFERENCE_RTOL = 1e-4


@dataclass(frozen=True)
class ReferenceStep:
    """The reference's per-row losses and weight gradients (flat, laid out as the weights)."""

    losses: np.ndarray
    grads: np.ndarray


def reference_step(program: DeviceProgram, tensors: StepTensors) -> ReferenceStep:
    """One forward and backward pass of `program` on `tensors`, in float64."""
    weights = tensors.weights.astype(np.float64)
    grads = np.zeros_like(weights)
    forward = [(i, r) for i, r in enumerate(program.records) if r.kind in _FORWARD_KINDS]
    values: dict[int, np.ndarray] = {}
    saved: dict[int, Any] = {}
    losses = np.zeros(0)
    for i, r in forward:
        if r.kind is Kind.INPUT:
            values[i] = tensors.data.astype(np.float64)
        elif r.kind is Kind.LOSS:
            logits = values[r.inputs[0]].reshape(r.dims[0], r.dims[1])
            losses, probs = _cross_entropy(logits, tensors.labels)
            saved[i] = probs
        else:
            values[i], saved[i] = _LAYERS[r.kind](r, [values[j] for j in r.inputs], weights)
    # Backward: the gradient of each layer's output, summed over its readers.
    upstream: dict[int, np.ndarray] = {}
    for i, r in reversed(forward):
        if r.kind is Kind.INPUT:
            continue
        if r.kind is Kind.LOSS:
            probs = saved[i]
            onehot = np.eye(r.dims[1])[tensors.labels]
            received = [(probs - onehot) / r.dims[0]]
        else:
            received = _BACKWARD[r.kind](r, upstream.pop(i), [values[j] for j in r.inputs], saved[i], weights, grads)
        for j, g in zip(r.inputs, received):
            if j != 0 and g is not None:
                g = g.reshape(values[j].shape)
                upstream[j] = upstream[j] + g if j in upstream else g
    return ReferenceStep(losses, grads)


def _cross_entropy(logits: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    probs = exp / exp.sum(axis=1, keepdims=True)
    losses = np.log(exp.sum(axis=1)) - shifted[np.arange(len(labels)), labels]
    return losses, probs


def _params(r, weights: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray | None]:
    count = int(np.prod(shape))
    w = weights[r.param_offset : r.param_offset + count].reshape(shape)
    b = weights[r.param_offset + count : r.param_offset + count + shape[0]] if r.bias else None
    return w, b


def _linear(r, inputs, weights):
    m, k, n = r.dims[:3]
    w, b = _params(r, weights, (n, k))
    x = inputs[0].reshape(m, k)
    return x @ w.T + (b if b is not None else 0.0), x


def _linear_grad(r, g, inputs, x, weights, grads):
    m, k, n = r.dims[:3]
    w, _ = _params(r, weights, (n, k))
    g = g.reshape(m, n)
    count = n * k
    grads[r.param_offset : r.param_offset + count] = (g.T @ x).ravel()
    if r.bias:
        grads[r.param_offset + count : r.param_offset + count + n] = g.sum(axis=0)
    return [g @ w]


def _windows(x: np.ndarray, k: int, stride: int, pad: int, fill: float) -> np.ndarray:
    """(N, C, OH, OW, k, k) views of x's padded windows."""
    padded = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=fill)
    return sliding_window_view(padded, (k, k), axis=(2, 3))[:, :, ::stride, ::stride]


def _conv(r, inputs, weights):
    """Convolution by groups: (N, G, C/G, ...) windows against (G, O/G, C/G, k, k) weights."""
    n, c, h, w_, o, oh, ow, k, stride, pad, groups = r.dims
    w, b = _params(r, weights, (o, c // groups, k, k))
    x = inputs[0].reshape(n, c, h, w_)
    cols = _windows(x, k, stride, pad, 0.0)[:, :, :oh, :ow].reshape(n, groups, c // groups, oh, ow, k, k)
    y = np.einsum("ngcyxij,gocij->ngoyx", cols, w.reshape(groups, o // groups, c // groups, k, k)).reshape(n, o, oh, ow)
    if b is not None:
        y += b[None, :, None, None]
    return y, cols


def _conv_grad(r, g, inputs, cols, weights, grads):
    n, c, h, w_, o, oh, ow, k, stride, pad, groups = r.dims
    w, _ = _params(r, weights, (o, c // groups, k, k))
    g = g.reshape(n, groups, o // groups, oh, ow)
    count = w.size
    grads[r.param_offset : r.param_offset + count] = np.einsum("ngoyx,ngcyxij->gocij", g, cols).ravel()
    if r.bias:
        grads[r.param_offset + count : r.param_offset + count + o] = g.sum(axis=(0, 3, 4)).ravel()
    dcols = np.einsum("ngoyx,gocij->ngcyxij", g, w.reshape(groups, o // groups, c // groups, k, k)).reshape(n, c, oh, ow, k, k)
    dx = np.zeros((n, c, h + 2 * pad, w_ + 2 * pad))
    for i in range(k):
        for j in range(k):
            dx[:, :, i : i + stride * oh : stride, j : j + stride * ow : stride] += dcols[..., i, j]
    return [dx[:, :, pad : pad + h, pad : pad + w_]]


def _relu(r, inputs, weights):
    y = np.maximum(inputs[0], 0.0)
    return y, y


def _relu_grad(r, g, inputs, y, weights, grads):
    return [np.where(y > 0, g, 0.0)]


def _add(r, inputs, weights):
    return inputs[0] + inputs[1], None


def _add_grad(r, g, inputs, saved, weights, grads):
    return [g, g]


def _maxpool(r, inputs, weights):
    planes, h, w, oh, ow, k, stride, pad = r.dims[:8]
    x = inputs[0].reshape(1, planes, h, w)
    windows = _windows(x, k, stride, pad, -np.inf)[:, :, :oh, :ow].reshape(planes, oh, ow, k * k)
    first = windows.argmax(axis=-1)  # the first largest, rows then columns
    y = np.take_along_axis(windows, first[..., None], axis=-1)[..., 0]
    rows = np.arange(oh)[:, None] * stride - pad + first // k
    cols = np.arange(ow)[None, :] * stride - pad + first % k
    return y.reshape((*inputs[0].shape[:2], oh, ow)), rows * w + cols


def _maxpool_grad(r, g, inputs, index, weights, grads):
    planes, h, w, oh, ow = r.dims[:5]
    dx = np.zeros((planes, h * w))
    g = g.reshape(planes, oh * ow)
    flat = index.reshape(planes, oh * ow)
    for p in range(planes):
        np.add.at(dx[p], flat[p], g[p])
    return [dx]


def _relu6(r, inputs, weights):
    x = inputs[0]
    return np.clip(x, 0.0, 6.0), x


def _relu6_grad(r, g, inputs, x, weights, grads):
    return [np.where((x > 0) & (x < 6), g, 0.0)]


#: Batch norm's epsilon, as PyTorch's default and the runtime's (POET_BN_EPS).
BN_EPS = 1e-5


def _batchnorm(r, inputs, weights):
    """Training mode: each channel by its batch mean and biased variance, then scaled and shifted."""
    n, c, positions = r.dims[:3]
    gamma = weights[r.param_offset : r.param_offset + c]
    beta = weights[r.param_offset + c : r.param_offset + 2 * c]
    x = inputs[0].reshape(n, c, positions)
    mean = x.mean(axis=(0, 2), keepdims=True)
    invstd = 1.0 / np.sqrt(x.var(axis=(0, 2), keepdims=True) + BN_EPS)
    xhat = (x - mean) * invstd
    return xhat * gamma[None, :, None] + beta[None, :, None], (xhat, invstd)


def _batchnorm_grad(r, g, inputs, saved, weights, grads):
    n, c, positions = r.dims[:3]
    xhat, invstd = saved
    gamma = weights[r.param_offset : r.param_offset + c]
    g = g.reshape(n, c, positions)
    sum_g, sum_gx = g.sum(axis=(0, 2)), (g * xhat).sum(axis=(0, 2))
    grads[r.param_offset : r.param_offset + c] = sum_gx
    grads[r.param_offset + c : r.param_offset + 2 * c] = sum_g
    count = n * positions
    dx = (gamma[None, :, None] * invstd / count) * (count * g - sum_g[None, :, None] - xhat * sum_gx[None, :, None])
    return [dx]


def _avgpool(r, inputs, weights):
    planes, positions = r.dims[:2]
    return inputs[0].reshape(planes, positions).mean(axis=1), None


def _avgpool_grad(r, g, inputs, saved, weights, grads):
    planes, positions = r.dims[:2]
    return [np.repeat(g.reshape(planes, 1) / positions, positions, axis=1)]


_LAYERS = {
    Kind.LINEAR: _linear,
    Kind.CONV: _conv,
    Kind.RELU: _relu,
    Kind.ADD: _add,
    Kind.MAXPOOL: _maxpool,
    Kind.AVGPOOL: _avgpool,
    Kind.BATCHNORM: _batchnorm,
    Kind.RELU6: _relu6,
}
_FORWARD_KINDS = {Kind.INPUT, Kind.LOSS, *_LAYERS}
_BACKWARD = {
    Kind.LINEAR: _linear_grad,
    Kind.CONV: _conv_grad,
    Kind.RELU: _relu_grad,
    Kind.ADD: _add_grad,
    Kind.MAXPOOL: _maxpool_grad,
    Kind.AVGPOOL: _avgpool_grad,
    Kind.BATCHNORM: _batchnorm_grad,
    Kind.RELU6: _relu6_grad,
}
