"""The layer algebra: describe a network forward, get its training graph with the backward derived.

A `Network` records forward layers one call at a time. Every call returns a `Tensor` whose
shape the builder worked out, so sizes are never typed in twice. `Network.build(logits)` adds
the loss (softmax cross-entropy against the labels carried by the input batch) and derives one
backward node per layer. A backward node reads the gradients coming from every consumer of its
layer's output, plus only the forward tensors its derivative really needs (a ReLU its output,
a convolution its input, an addition nothing). Those dependencies are what recomputation and
paging trade on; docs/graphs.md states the rule for every op kind.

Conventions: shapes put the batch first, (N, C, H, W) for images and (N, L, D) for sequences;
a multiply-add is two FLOPs and bias additions are not counted (published MAC counts leave them
out); activations take `dtype_bytes` each, token ids and labels are 4-byte integers.
"""

from dataclasses import dataclass
from math import ceil, prod

from poetsim.graphs.graph import Node, TrainingGraph

INDEX_BYTES = 4
"""Bytes of one token id or class label (int32)."""

POOL_INDEX_BYTES = 8
"""Bytes of one max-pooling index: PyTorch's `max_pool2d_with_indices` returns int64 indices."""

# Forward FLOPs per output element of the cheap ops; a transcendental (exp, tanh) counts as one.
_FLOPS_PER_ELEMENT = {
    "relu": 1,  # compare and select
    "relu6": 1,  # clip to [0, 6] (the second compare is ignored)
    "tanh": 1,
    "gelu": 8,  # tanh approximation: cube, 3 multiplies, 2 adds, tanh, final multiply
    "add": 1,
    "softmax": 5,  # max, subtract, exp, sum, divide
    "batchnorm": 6,  # mean 1, variance 2, normalise 1, scale and shift 2
    "layernorm": 6,
    "loss": 5,  # softmax of the logits (4) and the log of the label's probability (1)
}
# Gradients of a norm's scale and shift (sum of dy * x_hat, sum of dy), per element.
_NORM_WEIGHT_GRAD_FLOPS = 3


class ShapeError(ValueError):
    """A layer cannot take the tensor it was given (an image too small, features that differ)."""


@dataclass(frozen=True)
class Tensor:
    """A handle to a forward layer's output, or to a view of it.

    Views (`Network.flatten`, `Network.select_token`) share their layer's storage, as in
    PyTorch, so they add no node: `layer` is the producing layer and `shape` the view's shape.
    `tokens` marks integer token ids, which only an embedding may read.
    """

    layer: int
    shape: tuple[int, ...]
    tokens: bool = False

    @property
    def elements(self) -> int:
        """How many elements the tensor holds."""
        return prod(self.shape)


@dataclass(frozen=True)
class Layer:
    """One recorded forward layer and what its backward needs.

    `saved` are the forward layers whose outputs the backward reads (besides gradients).
    `weight_grad_flops` is the parameter-gradient work, above zero exactly for layers with
    weights (tied ones included); `input_grad_flops` the work to pass a gradient to the
    activation inputs, spent only when some input needs one.
    """

    name: str
    op: str
    inputs: tuple[Tensor, ...]
    shape: tuple[int, ...]
    output_bytes: int
    flops: float
    param_count: int
    saved: tuple[int, ...]
    weight_grad_flops: float
    input_grad_flops: float


class Network:
    """Records forward layers with their shapes, then builds the training graph.

    The first call must be `input`. Layer names must be unique; unnamed layers are called
    after their op and position. Shape mistakes raise `ShapeError` naming the layer. `name`
    is the graph's; every activation element takes `dtype_bytes`.
    """

    def __init__(self, name: str, dtype_bytes: int = 4):
        if dtype_bytes <= 0:
            raise ValueError("dtype_bytes must be positive")
        self.name = name
        self.dtype_bytes = dtype_bytes
        self._layers: list[Layer] = []
        self._names: set[str] = set()
        self._labels = 0
        self._tokens = False

    # -- recording ---------------------------------------------------------------------------

    def _record(
        self,
        op: str,
        inputs: tuple[Tensor, ...],
        shape: tuple[int, ...],
        flops: float,
        *,
        name: str | None = None,
        params: int = 0,
        saved: tuple[int, ...] = (),
        weight_grad_flops: float = 0.0,
        input_grad_flops: float | None = None,
        output_bytes: int | None = None,
    ) -> Tensor:
        """Append a layer; `input_grad_flops` defaults to the forward FLOPs (1x)."""
        name = name or f"{op}{len(self._layers)}"
        if name in self._names:
            raise ValueError(f"layer name '{name}' is used twice")
        if op != "input" and not self._layers:
            raise ValueError(f"{name}: the first layer must be the input")
        if op not in ("embedding", "loss") and any(t.tokens for t in inputs):
            raise ShapeError(f"{name}: token ids can only feed an embedding")
        if any(d <= 0 for d in shape):
            raise ShapeError(f"{name}: empty output shape {shape}")
        self._names.add(name)
        self._layers.append(
            Layer(
                name=name,
                op=op,
                inputs=tuple(inputs),
                shape=tuple(shape),
                output_bytes=prod(shape) * self.dtype_bytes if output_bytes is None else output_bytes,
                flops=float(flops),
                param_count=params,
                saved=tuple(saved),
                weight_grad_flops=float(weight_grad_flops),
                input_grad_flops=float(flops if input_grad_flops is None else input_grad_flops),
            )
        )
        return Tensor(len(self._layers) - 1, tuple(shape))

    @property
    def _next(self) -> int:
        """The id the next recorded layer gets: what ops whose backward reads their own output save."""
        return len(self._layers)

    def input(self, shape, *, labels: int, tokens: bool = False, name: str = "input") -> Tensor:
        """The data batch: images or token ids, plus `labels` integer class labels.

        The labels travel in the same node because the loss reads them with the logits; its
        output size counts both. `tokens=True` makes the data int32 token ids.
        """
        if self._layers:
            raise ValueError("the input must be the first layer")
        if labels < 1:
            raise ShapeError(f"{name}: a batch needs at least one label")
        self._labels, self._tokens = labels, tokens
        data_bytes = prod(shape) * (INDEX_BYTES if tokens else self.dtype_bytes)
        t = self._record("input", (), shape, 0, name=name, output_bytes=data_bytes + labels * INDEX_BYTES)
        return Tensor(t.layer, t.shape, tokens=tokens)

    def conv(
        self,
        x: Tensor,
        out_channels: int,
        kernel: int,
        *,
        stride: int = 1,
        padding: int = 0,
        groups: int = 1,
        bias: bool = False,
        name: str | None = None,
        op: str = "conv",
    ) -> Tensor:
        """2-D convolution with square kernels; the backward reads x for the weight gradient."""
        n, c, h, w = self._image(x, name)
        if c % groups or out_channels % groups:
            raise ShapeError(f"{name or op}: {c} in and {out_channels} out channels are not divisible by {groups} groups")
        oh, ow = (_window_out(size, kernel, stride, padding, name or op) for size in (h, w))
        macs = n * out_channels * oh * ow * (c // groups) * kernel * kernel
        params = out_channels * (c // groups) * kernel * kernel + (out_channels if bias else 0)
        return self._record(
            op, (x,), (n, out_channels, oh, ow), 2 * macs, name=name, params=params, saved=(x.layer,), weight_grad_flops=2 * macs
        )

    def depthwise_conv(
        self, x: Tensor, kernel: int, *, stride: int = 1, padding: int = 0, bias: bool = False, name: str | None = None
    ) -> Tensor:
        """One filter per channel (groups = channels); same backward rule as `conv`."""
        channels = self._image(x, name)[1]
        return self.conv(
            x, channels, kernel, stride=stride, padding=padding, groups=channels, bias=bias, name=name, op="depthwise_conv"
        )

    def linear(self, x: Tensor, out_features: int, *, bias: bool = True, tied: bool = False, name: str | None = None) -> Tensor:
        """Dense layer over the last axis; the backward reads x for the weight gradient.

        `tied=True` reuses another layer's weights (GPT-2's output layer is its token
        embedding), so no parameters are counted here, but the weight gradient is still computed.
        """
        in_features = x.shape[-1]
        macs = x.elements * out_features
        params = 0 if tied else in_features * out_features + (out_features if bias else 0)
        return self._record(
            "linear",
            (x,),
            (*x.shape[:-1], out_features),
            2 * macs,
            name=name,
            params=params,
            saved=(x.layer,),
            weight_grad_flops=2 * macs,
        )

    def attention_scores(self, q: Tensor, k: Tensor, heads: int, *, name: str | None = None) -> Tensor:
        """Q K^T per head: (N, L, D) x (N, L, D) -> (N, heads, L, L); reads both for its backward.

        Splitting D into heads is a view, so it adds no node. The 1/sqrt(d) scaling and any
        causal mask are folded into this node and the softmax: they change no size.
        """
        n, length, dim = self._sequence(q, name)
        if k.shape != q.shape:
            raise ShapeError(f"{name or 'attention scores'}: keys {k.shape} do not match queries {q.shape}")
        if dim % heads:
            raise ShapeError(f"{name or 'attention scores'}: width {dim} is not divisible by {heads} heads")
        macs = n * length * length * dim
        return self._record(
            "matmul", (q, k), (n, heads, length, length), 2 * macs, name=name, saved=(q.layer, k.layer), input_grad_flops=4 * macs
        )

    def attention_context(self, probs: Tensor, v: Tensor, *, name: str | None = None) -> Tensor:
        """P V per head, heads merged back: (N, H, L, L) x (N, L, D) -> (N, L, D); reads both."""
        n, heads, length, keys = probs.shape
        if v.shape[:2] != (n, keys) or v.shape[2] % heads:
            raise ShapeError(f"{name or 'attention context'}: values {v.shape} do not fit attention weights {probs.shape}")
        macs = n * length * keys * v.shape[2]
        return self._record(
            "matmul",
            (probs, v),
            (n, length, v.shape[2]),
            2 * macs,
            name=name,
            saved=(probs.layer, v.layer),
            input_grad_flops=4 * macs,
        )

    def fused_attention(self, q: Tensor, k: Tensor, v: Tensor, heads: int, *, name: str | None = None) -> Tensor:
        """softmax(Q K^T / sqrt(d)) V per head as one kernel: (N, L, D) x 3 -> (N, L, D).

        This is how PyTorch runs `scaled_dot_product_attention`, which `nn.MultiheadAttention`
        calls whenever no attention weights are asked for (`nn.TransformerEncoderLayer` asks
        for none): on the CPU `_scaled_dot_product_flash_attention_for_cpu`, the flash-attention
        algorithm (Dao et al., NeurIPS 2022). The L x L scores and probabilities are never kept:
        the output holds the context and the log-sum-exp of each row of scores (N x heads x L
        numbers), and the backward reads q, k, v and that output and computes the scores again.
        FLOPs are those of `torch.utils.flop_counter`: two products forward (Q K^T, P V), five
        backward (Q K^T again, then the gradients of P, V, Q and K); the softmax's per-element
        work is not counted, as there.
        """
        n, length, dim = self._sequence(q, name)
        if k.shape != q.shape or v.shape != q.shape:
            raise ShapeError(f"{name or 'attention'}: queries {q.shape}, keys {k.shape} and values {v.shape} differ")
        if dim % heads:
            raise ShapeError(f"{name or 'attention'}: width {dim} is not divisible by {heads} heads")
        product_flops = 2 * n * length * length * dim  # one L x L x D product over all heads
        log_sum_exp = n * heads * length * self.dtype_bytes
        return self._record(
            "attention",
            (q, k, v),
            q.shape,
            2 * product_flops,
            name=name,
            saved=(q.layer, k.layer, v.layer, self._next),
            input_grad_flops=5 * product_flops,
            output_bytes=q.elements * self.dtype_bytes + log_sum_exp,
        )

    def attention(self, x: Tensor, heads: int, *, name: str, fused: bool = False) -> Tensor:
        """Multi-head self-attention: q, k, v, then the attention, then out.

        The attention is scores, softmax and context as three nodes (the probabilities are kept,
        as an implementation that materialises them does), or with `fused` one `fused_attention`
        node (PyTorch's).
        """
        dim = x.shape[-1]
        q, k, v = (self.linear(x, dim, name=f"{name}.{p}") for p in "qkv")
        if fused:
            context = self.fused_attention(q, k, v, heads, name=f"{name}.sdpa")
        else:
            scores = self.attention_scores(q, k, heads, name=f"{name}.scores")
            probs = self.softmax(scores, name=f"{name}.softmax")
            context = self.attention_context(probs, v, name=f"{name}.context")
        return self.linear(context, dim, name=f"{name}.out")

    def batchnorm(self, x: Tensor, *, name: str | None = None) -> Tensor:
        """Batch normalisation over (N, H, W) per channel; the backward reads its input x.

        The per-channel batch mean and inverse deviation (2 C numbers) are kept with the
        layer's parameters, outside activation memory, like the running statistics.
        """
        channels = self._image(x, name)[1]
        return self._norm("batchnorm", x, 2 * channels, name)

    def layernorm(self, x: Tensor, *, name: str | None = None) -> Tensor:
        """Layer normalisation over the last axis; the backward reads x (statistics as batchnorm)."""
        return self._norm("layernorm", x, 2 * x.shape[-1], name)

    def _norm(self, op, x, params, name) -> Tensor:
        flops = _FLOPS_PER_ELEMENT[op] * x.elements
        return self._record(
            op,
            (x,),
            x.shape,
            flops,
            name=name,
            params=params,
            saved=(x.layer,),
            weight_grad_flops=_NORM_WEIGHT_GRAD_FLOPS * x.elements,
        )

    def relu(self, x: Tensor, *, name: str | None = None) -> Tensor:
        """ReLU; the backward reads its own output as the mask.

        That is PyTorch's `threshold_backward(grad, result, 0)`, so an in-place ReLU keeps no
        other copy.
        """
        return self._record("relu", (x,), x.shape, x.elements, name=name, saved=(self._next,))

    def relu6(self, x: Tensor, *, name: str | None = None) -> Tensor:
        """ReLU6, min(max(x, 0), 6); the backward reads its input x, not its output.

        That is PyTorch's rule (`hardtanh_backward(grad, self, 0, 6)`, tools/autograd/
        derivatives.yaml), measured with `torch.autograd.graph.saved_tensors_hooks`: out of
        place, autograd saves x; in place (torchvision's `ReLU6(inplace=True)`), it saves a copy
        of x before overwriting it. Either way x stays beside the output until the backward:
        one more activation per conv-BN-ReLU6 than ReLU's rule would keep.
        """
        return self._record("relu6", (x,), x.shape, x.elements, name=name, saved=(x.layer,))

    def tanh(self, x: Tensor, *, name: str | None = None) -> Tensor:
        """tanh; the backward reads its output (1 - y^2)."""
        return self._record("tanh", (x,), x.shape, x.elements, name=name, saved=(self._next,))

    def gelu(self, x: Tensor, *, name: str | None = None) -> Tensor:
        """GELU; the backward reads its input x (the derivative is a function of x)."""
        return self._record("gelu", (x,), x.shape, _FLOPS_PER_ELEMENT["gelu"] * x.elements, name=name, saved=(x.layer,))

    def softmax(self, x: Tensor, *, name: str | None = None) -> Tensor:
        """Softmax over the last axis; the backward reads its output y."""
        return self._record("softmax", (x,), x.shape, _FLOPS_PER_ELEMENT["softmax"] * x.elements, name=name, saved=(self._next,))

    def add(self, a: Tensor, b: Tensor, *, name: str | None = None) -> Tensor:
        """Elementwise sum (a residual join); the backward reads no forward tensor."""
        if a.shape != b.shape:
            raise ShapeError(f"{name or 'add'}: cannot add {a.shape} and {b.shape}")
        return self._record("add", (a, b), a.shape, a.elements, name=name)

    def maxpool(self, x: Tensor, kernel: int, *, stride: int | None = None, padding: int = 0, name: str | None = None) -> Tensor:
        """Max pooling; its output holds the pooled values and the argmax indices.

        The backward reads them together with its input x.

        That is PyTorch's rule: `max_pool2d_with_indices` returns int64 indices beside the
        values and its backward, `max_pool2d_with_indices_backward(grad, self, ..., indices)`,
        takes both the input and the indices (tools/autograd/derivatives.yaml). The indices
        (8 bytes per pooled element, twice the float32 values) stay in RAM until the backward.
        """
        return self._pool(
            "maxpool", x, kernel, stride or kernel, padding, name, saved=(x.layer, self._next), index_bytes=POOL_INDEX_BYTES
        )

    def avgpool(self, x: Tensor, kernel: int, *, stride: int | None = None, padding: int = 0, name: str | None = None) -> Tensor:
        """Average pooling; the backward spreads the gradient evenly and reads no forward tensor."""
        return self._pool("avgpool", x, kernel, stride or kernel, padding, name, saved=(), index_bytes=0)

    def adaptive_avgpool(self, x: Tensor, size: int, *, name: str | None = None) -> Tensor:
        """Average pooling to a size x size map whatever the input (torchvision's VGG head)."""
        n, c, h, w = self._image(x, name)
        window = ceil(h / size) * ceil(w / size)
        return self._record("avgpool", (x,), (n, c, size, size), n * c * size * size * window, name=name)

    def global_avgpool(self, x: Tensor, *, name: str | None = None) -> Tensor:
        """Average over all positions: (N, C, H, W) -> (N, C), the flatten included as a view."""
        n, c = self._image(x, name)[:2]
        return self._record("avgpool", (x,), (n, c), x.elements, name=name)

    def _pool(self, op, x, kernel, stride, padding, name, saved, index_bytes: int) -> Tensor:
        """A pooling window; the output holds the pooled values and `index_bytes` per value besides."""
        n, c, h, w = self._image(x, name)
        oh, ow = (_window_out(size, kernel, stride, padding, name or op) for size in (h, w))
        pooled = n * c * oh * ow
        return self._record(
            op,
            (x,),
            (n, c, oh, ow),
            pooled * kernel * kernel,
            name=name,
            saved=saved,
            output_bytes=pooled * (self.dtype_bytes + index_bytes),
        )

    def embedding(
        self, ids: Tensor, vocab: int, dim: int, *, max_positions: int = 0, token_types: int = 0, name: str | None = None
    ) -> Tensor:
        """Token (+ learned position, + token-type) lookups summed: (N, L) ids -> (N, L, dim).

        The backward reads the token ids (to scatter-add the gradient into the tables) and
        passes no gradient on: ids are integers.
        """
        if not ids.tokens:
            raise ShapeError(f"{name or 'embedding'}: an embedding reads token ids (an input with tokens=True)")
        n, length = ids.shape
        if max_positions and length > max_positions:
            raise ShapeError(f"{name or 'embedding'}: sequence length {length} exceeds the {max_positions} learned positions")
        tables = 1 + bool(max_positions) + bool(token_types)
        out = (n, length, dim)
        return self._record(
            "embedding",
            (ids,),
            out,
            (tables - 1) * prod(out),
            name=name,
            params=(vocab + max_positions + token_types) * dim,
            saved=(ids.layer,),
            weight_grad_flops=tables * prod(out),
            input_grad_flops=0,
        )

    # -- views -------------------------------------------------------------------------------

    @staticmethod
    def flatten(x: Tensor) -> Tensor:
        """(N, ...) -> (N, features): a view, no node."""
        return Tensor(x.layer, (x.shape[0], prod(x.shape[1:])))

    @staticmethod
    def select_token(x: Tensor, index: int = 0) -> Tensor:
        """One position of a sequence, (N, L, D) -> (N, D) (BERT's [CLS]): a view, no node."""
        if not 0 <= index < x.shape[1]:
            raise ShapeError(f"token {index} is outside a sequence of {x.shape[1]}")
        return Tensor(x.layer, (x.shape[0], x.shape[2]))

    # -- shape checks ------------------------------------------------------------------------

    @staticmethod
    def _image(x: Tensor, name) -> tuple[int, int, int, int]:
        if len(x.shape) != 4:
            raise ShapeError(f"{name or 'layer'}: expects an (N, C, H, W) tensor, got {x.shape}")
        return x.shape

    @staticmethod
    def _sequence(x: Tensor, name) -> tuple[int, int, int]:
        if len(x.shape) != 3:
            raise ShapeError(f"{name or 'layer'}: expects an (N, L, D) tensor, got {x.shape}")
        return x.shape

    # -- the training graph ------------------------------------------------------------------

    def build(self, logits: Tensor, *, meta: dict[str, str] | None = None) -> TrainingGraph:
        """Add the loss on `logits`, derive the backward, and return the checked graph.

        Order: forward nodes (the input first), the loss, then backward nodes in reverse
        forward order; node ids are positions. Per-label losses are the loss's output (their
        mean is negligible), so every size scales with the batch.
        """
        if not self._layers:
            raise ValueError("the network has no input")
        data = self._layers[0]
        if prod(logits.shape[:-1]) != self._labels:
            raise ShapeError(f"loss: logits {logits.shape} do not give one row per label ({self._labels} labels)")
        self._record(
            "loss",
            (logits, Tensor(0, data.shape, tokens=self._tokens)),
            (self._labels,),
            _FLOPS_PER_ELEMENT["loss"] * logits.elements,
            name="loss",
            saved=(logits.layer, 0),
        )
        return _derive(self.name, self._layers, self.dtype_bytes, meta or {})


def _derive(name: str, layers: list[Layer], dtype_bytes: int, meta: dict[str, str]) -> TrainingGraph:
    """Forward nodes as recorded, then one backward node per layer that needs a gradient."""
    consumers: list[list[int]] = [[] for _ in layers]
    for i, layer in enumerate(layers):
        for producer in sorted({t.layer for t in layer.inputs}):
            consumers[producer].append(i)
    for layer, readers in zip(layers[:-1], consumers):
        if not readers:
            raise ValueError(f"layer '{layer.name}' does not lead to the loss")
    # A layer needs a backward node when it has weights or some input carries a gradient.
    needs_grad: list[bool] = []
    for layer in layers:
        needs_grad.append(layer.weight_grad_flops > 0 or any(needs_grad[t.layer] for t in layer.inputs))

    nodes = [
        Node(
            id=i,
            name=layer.name,
            op=layer.op,
            backward=False,
            deps=tuple(sorted({t.layer for t in layer.inputs})),
            output_bytes=layer.output_bytes,
            param_bytes=layer.param_count * dtype_bytes,
            flops=layer.flops,
        )
        for i, layer in enumerate(layers)
    ]
    grad_node: dict[int, int] = {}
    for i in reversed(range(len(layers))):
        if not needs_grad[i]:
            continue
        layer = layers[i]
        upstream = {grad_node[c] for c in consumers[i]}
        receivers = {(t.layer, t.shape) for t in layer.inputs if needs_grad[t.layer]}
        # Gradients arriving from several consumers are summed here: one add per element each.
        fan_in_sum_flops = max(len(consumers[i]) - 1, 0) * prod(layer.shape)
        flops = layer.weight_grad_flops + (layer.input_grad_flops if receivers else 0.0) + fan_in_sum_flops
        if layer.op == "add":
            # Both summands receive the same gradient tensor: it is passed on, not copied.
            grad_bytes = layer.output_bytes if receivers else 0
        else:
            grad_bytes = sum(prod(shape) for _, shape in receivers) * dtype_bytes
        grad_node[i] = len(nodes)
        nodes.append(
            Node(
                id=len(nodes),
                name=f"{layer.name}.grad",
                op=f"{layer.op}_grad",
                backward=True,
                deps=tuple(sorted(upstream | set(layer.saved))),
                output_bytes=grad_bytes,
                flops=flops,
            )
        )
    param_count = sum(layer.param_count for layer in layers)
    return TrainingGraph.create(name, nodes, meta={"dtype_bytes": str(dtype_bytes), "param_count": str(param_count), **meta})


def _window_out(size: int, kernel: int, stride: int, padding: int, name) -> int:
    """Output length of a sliding window; ShapeError when the window does not fit."""
    out = (size + 2 * padding - kernel) // stride + 1
    if out < 1:
        raise ShapeError(
            f"{name or 'layer'}: a {kernel}-wide window with stride {stride} and padding {padding} "
            f"does not fit an input of {size}"
        )
    return out
