"""The device program of a training graph: each node as an operation the runtime executes.

A `TrainingGraph` keeps what scheduling needs (dependencies, sizes, FLOPs), not what running a
node needs: window sizes, strides, which input is which. So the program is made by building the
zoo model again with a `Network` that keeps those too (`_Recorder`), and then checked against
the graph node by node (name, op, dependencies, output bytes): a graph that is not that zoo
model, or that holds an operation the runtime lacks, is refused with one line naming the node.

Operand order is the runtime's: a backward node reads its upstream gradients first (ascending
node id, summed in that order), then the forward tensors its derivative needs, by role.
"""

from collections.abc import Callable
from dataclasses import dataclass
from math import prod

from poetsim.device.formats import MAX_LOSS_ROWS, MAX_NODES, Kind, NodeRecord
from poetsim.errors import InternalError, UserInputError
from poetsim.graphs.graph import TrainingGraph
from poetsim.graphs.layers import Layer, Network, Tensor
from poetsim.graphs.zoo import record_model

#: The graph ops the runtime executes, and their kinds.
FORWARD_KINDS = {
    "input": Kind.INPUT,
    "linear": Kind.LINEAR,
    "conv": Kind.CONV,
    "depthwise_conv": Kind.CONV,
    "relu": Kind.RELU,
    "relu6": Kind.RELU6,
    "batchnorm": Kind.BATCHNORM,
    "add": Kind.ADD,
    "maxpool": Kind.MAXPOOL,
    "avgpool": Kind.AVGPOOL,
    "loss": Kind.LOSS,
}
BACKWARD_KINDS = {
    Kind.LINEAR: Kind.LINEAR_GRAD,
    Kind.CONV: Kind.CONV_GRAD,
    Kind.RELU: Kind.RELU_GRAD,
    Kind.ADD: Kind.ADD_GRAD,
    Kind.MAXPOOL: Kind.MAXPOOL_GRAD,
    Kind.AVGPOOL: Kind.AVGPOOL_GRAD,
    Kind.BATCHNORM: Kind.BATCHNORM_GRAD,
    Kind.RELU6: Kind.RELU6_GRAD,
    Kind.LOSS: Kind.LOSS_GRAD,
}
DTYPE_BYTES = 4


class _Recorder(Network):
    """A Network that also keeps each layer's window, stride, padding and bias, by layer index."""

    def __init__(self, name: str):
        super().__init__(name)
        self.settings: dict[int, dict] = {}

    def conv(self, x, out_channels, kernel, *, stride=1, padding=0, groups=1, bias=False, name=None, op="conv"):
        """`Network.conv`, keeping the window, stride, padding, groups and bias."""
        t = super().conv(x, out_channels, kernel, stride=stride, padding=padding, groups=groups, bias=bias, name=name, op=op)
        self.settings[t.layer] = {"kernel": kernel, "stride": stride, "padding": padding, "groups": groups, "bias": bias}
        return t

    def linear(self, x, out_features, *, bias=True, tied=False, name=None):
        """`Network.linear`, keeping the bias and whether the weights are tied."""
        t = super().linear(x, out_features, bias=bias, tied=tied, name=name)
        self.settings[t.layer] = {"bias": bias, "tied": tied}
        return t

    def maxpool(self, x, kernel, *, stride=None, padding=0, name=None):
        """`Network.maxpool`, keeping the window, stride and padding."""
        t = super().maxpool(x, kernel, stride=stride, padding=padding, name=name)
        self.settings[t.layer] = {"kernel": kernel, "stride": stride or kernel, "padding": padding}
        return t

    @property
    def recorded(self) -> tuple[Layer, ...]:
        """The forward layers recorded, the loss last."""
        return tuple(self._layers)


@dataclass(frozen=True)
class ParamBlock:
    """One layer's weights (and bias, after them) in the flat weights array."""

    layer: str
    offset: int  # first float
    weight_shape: tuple[int, ...]
    bias: int  # bias floats (0: none)
    scale_shift: bool = False  # batch norm's: the scale (weight_shape) and the shift (bias) of each channel

    @property
    def floats(self) -> int:
        """Floats of the block: the weights and the bias."""
        return prod(self.weight_shape) + self.bias


@dataclass(frozen=True)
class DeviceProgram:
    """The graph as the runtime runs it: one record per node, and where each layer's weights lie.

    `input_shape` is the batch's data shape and `classes` the loss's width, so that a batch and
    a reference step can be made for it.
    """

    graph: TrainingGraph
    records: tuple[NodeRecord, ...]
    params: tuple[ParamBlock, ...]
    input_shape: tuple[int, ...]
    labels: int
    classes: int

    @property
    def weight_floats(self) -> int:
        """Floats of every layer's weights and biases: the size of the weights region."""
        return sum(block.floats for block in self.params)


def device_program(graph: TrainingGraph) -> DeviceProgram:
    """The program of `graph`, a zoo model made of the runtime's operations; UserInputError if not."""
    meta = dict(graph.meta)
    model = meta.get("model")
    if model is None:
        raise UserInputError(
            f"graph '{graph.name}' is not a zoo model: the device runtime runs zoo models (such as mlp and mcu_cnn) "
            "whose layers it knows"
        )
    unsupported = [n for n in graph.nodes if not n.backward and n.op not in FORWARD_KINDS]
    if unsupported:
        node = unsupported[0]
        raise UserInputError(
            f"model {model}: node {node.id} ({node.name}): the device runtime does not run {node.op} "
            f"(it runs {', '.join(FORWARD_KINDS)} and their gradients)"
        )
    if len(graph) > MAX_NODES:
        raise UserInputError(f"model {model}: {len(graph)} nodes, more than the device runtime's {MAX_NODES}")
    batch = int(meta.get("batch_size", "1"))
    if batch > MAX_LOSS_ROWS:
        raise UserInputError(
            f"model {model}: batch size {batch}, more than the {MAX_LOSS_ROWS} samples whose losses the device runtime reports"
        )
    recorder = _Recorder(model)
    # Every model of the runtime's operations is an image model (sequence models need embeddings).
    rebuilt = record_model(recorder, batch, int(meta.get("input_size", "0")) or None)
    _same_graph(graph, rebuilt)
    return _Builder(graph, recorder).program()


def network_program(name: str, build: Callable[[Network], Tensor]) -> DeviceProgram:
    """The program of a network that `build` records (returning its logits) from the runtime's operations.

    This is how `poetsim device profile` makes the networks it measures.
    """
    recorder = _Recorder(name)
    graph = recorder.build(build(recorder), meta={"model": name})
    return _Builder(graph, recorder).program()


def _same_graph(graph: TrainingGraph, rebuilt: TrainingGraph) -> None:
    """UserInputError unless `graph` is node for node the zoo model it names."""
    if len(graph) != len(rebuilt):
        raise UserInputError(f"graph '{graph.name}' has {len(graph)} nodes, the zoo model it names {len(rebuilt)}")
    for ours, theirs in zip(graph.nodes, rebuilt.nodes):
        if (ours.name, ours.op, ours.deps, ours.output_bytes) != (theirs.name, theirs.op, theirs.deps, theirs.output_bytes):
            raise UserInputError(f"graph '{graph.name}': node {ours.id} ({ours.name}) differs from the zoo model it names")


class _Builder:
    """Turns the recorded layers into node records, checked against the graph's dependencies."""

    def __init__(self, graph: TrainingGraph, recorder: _Recorder):
        self.graph = graph
        self.layers = recorder.recorded
        self.settings = recorder.settings
        self.ids = {node.name: node.id for node in graph.nodes}
        self.consumers: list[list[int]] = [[] for _ in self.layers]
        for i, layer in enumerate(self.layers):
            for producer in sorted({t.layer for t in layer.inputs}):
                self.consumers[producer].append(i)
        self.params: list[ParamBlock] = []
        self.offsets: dict[int, int] = {}

    def program(self) -> DeviceProgram:
        """Every node's record, in node order, and the weights' layout."""
        forward = [self._forward(i, layer) for i, layer in enumerate(self.layers)]
        records: list[NodeRecord | None] = [None] * len(self.graph)
        for i, record in enumerate(forward):
            records[i] = record
        for i, layer in enumerate(self.layers):
            grad_id = self.ids.get(f"{layer.name}.grad")
            if grad_id is not None:
                records[grad_id] = self._backward(i, layer, forward[i], grad_id)
        if any(r is None for r in records):
            raise InternalError(f"graph '{self.graph.name}' has nodes that are neither a layer nor a layer's gradient")
        data = self.layers[0]
        loss = self.layers[-1]
        return DeviceProgram(
            graph=self.graph,
            records=tuple(r for r in records if r is not None),
            params=tuple(self.params),
            input_shape=data.shape,
            labels=loss.shape[0],
            classes=loss.inputs[0].elements // loss.shape[0],
        )

    def _refuse(self, i: int, why: str) -> UserInputError:
        return UserInputError(f"model {self.graph.name}: node {i} ({self.layers[i].name}) {why}")

    def _param_offset(self, i: int, weight_shape: tuple[int, ...], bias: int, scale_shift: bool = False) -> int:
        if i not in self.offsets:
            offset = sum(block.floats for block in self.params)
            self.params.append(ParamBlock(self.layers[i].name, offset, weight_shape, bias, scale_shift))
            self.offsets[i] = offset
        block = next(b for b in self.params if b.offset == self.offsets[i])
        if block.floats != self.layers[i].param_count:
            raise InternalError(
                f"{self.layers[i].name}: {block.floats} weights recorded, the layer counts {self.layers[i].param_count}"
            )
        return self.offsets[i]

    def _forward(self, i: int, layer: Layer) -> NodeRecord:
        kind = FORWARD_KINDS[layer.op]
        inputs = tuple(t.layer for t in layer.inputs)
        settings = self.settings.get(i, {})
        if kind is Kind.INPUT:
            data_bytes = prod(layer.shape) * DTYPE_BYTES
            dims: tuple[int, ...] = (data_bytes, (layer.output_bytes - data_bytes) // DTYPE_BYTES)
            return NodeRecord(kind, layer.output_bytes, (), (), dims)
        if kind is Kind.LINEAR:
            if settings.get("tied"):
                raise self._refuse(i, "has tied weights, which the device runtime does not share")
            x = layer.inputs[0]
            k, n = x.shape[-1], layer.shape[-1]
            dims = (x.elements // k, k, n)
            bias = n if settings["bias"] else 0
            return NodeRecord(kind, layer.output_bytes, (), inputs, dims, self._param_offset(i, (n, k), bias), bias > 0)
        if kind is Kind.CONV:
            n, c, h, w = layer.inputs[0].shape
            _, o, oh, ow = layer.shape
            k, groups = settings["kernel"], settings["groups"]
            dims = (n, c, h, w, o, oh, ow, k, settings["stride"], settings["padding"], groups)
            bias = o if settings["bias"] else 0
            offset = self._param_offset(i, (o, c // groups, k, k), bias)
            return NodeRecord(kind, layer.output_bytes, (), inputs, dims, offset, bias > 0)
        if kind is Kind.BATCHNORM:
            n, c = layer.shape[:2]
            dims = (n, c, prod(layer.shape[2:]))
            return NodeRecord(kind, layer.output_bytes, (), inputs, dims, self._param_offset(i, (c,), c, scale_shift=True))
        if kind in (Kind.RELU, Kind.RELU6, Kind.ADD):
            return NodeRecord(kind, layer.output_bytes, (), inputs, (prod(layer.shape),))
        if kind is Kind.MAXPOOL:
            n, c, h, w = layer.inputs[0].shape
            _, _, oh, ow = layer.shape
            dims = (n * c, h, w, oh, ow, settings["kernel"], settings["stride"], settings["padding"])
            return NodeRecord(kind, layer.output_bytes, (), inputs, dims)
        if kind is Kind.AVGPOOL:
            if len(layer.shape) != 2:
                raise self._refuse(i, "is a windowed average pooling; the device runtime pools globally only")
            planes = prod(layer.shape)
            return NodeRecord(kind, layer.output_bytes, (), inputs, (planes, layer.inputs[0].elements // planes))
        # The loss reads the logits and the labels, which sit after the data in the input node.
        logits, _ = layer.inputs
        rows = layer.shape[0]
        data_bytes = prod(self.layers[0].shape) * DTYPE_BYTES
        return NodeRecord(kind, layer.output_bytes, (), (logits.layer, 0), (rows, logits.elements // rows, data_bytes))

    def _backward(self, i: int, layer: Layer, forward: NodeRecord, grad_id: int) -> NodeRecord:
        """The gradient node of layer i: upstream gradients, then what its derivative reads."""
        kind = BACKWARD_KINDS[forward.kind]
        upstream = tuple(sorted(self.ids[f"{self.layers[c].name}.grad"] for c in self.consumers[i]))
        saved = {
            Kind.LINEAR_GRAD: forward.inputs,
            Kind.CONV_GRAD: forward.inputs,
            Kind.RELU_GRAD: (i,),
            Kind.ADD_GRAD: (),
            Kind.MAXPOOL_GRAD: (forward.inputs[0], i),
            Kind.AVGPOOL_GRAD: (),
            Kind.BATCHNORM_GRAD: forward.inputs,
            Kind.RELU6_GRAD: forward.inputs,
            Kind.LOSS_GRAD: forward.inputs,
        }[kind]
        node = self.graph.nodes[grad_id]
        if set(upstream) | set(saved) != set(node.deps):
            raise InternalError(
                f"{node.name}: the runtime would read {sorted(set(upstream) | set(saved))}, the graph says {node.deps}"
            )
        grads = () if kind is Kind.LOSS_GRAD else upstream
        return NodeRecord(kind, node.output_bytes, grads, saved, forward.dims, forward.param_offset, forward.bias)
