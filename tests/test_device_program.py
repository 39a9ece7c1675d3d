"""The device program and the host reference.

Zoo graphs as the runtime's operations, refusals in one line, and the NumPy reference step held
to PyTorch's autograd.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from device_networks import grouped

from poetsim.device.formats import Kind, pack_program
from poetsim.device.program import device_program, network_program
from poetsim.device.reference import BN_EPS, reference_step
from poetsim.device.tensors import make_tensors
from poetsim.errors import UserInputError
from poetsim.graphs.graph import TrainingGraph
from poetsim.graphs.layers import Network, Tensor
from poetsim.graphs.zoo import build_model


def _linear(r, x, values, flat):
    m, k, n = r.dims
    w = flat[r.param_offset : r.param_offset + n * k].reshape(n, k)
    b = flat[r.param_offset + n * k : r.param_offset + n * k + n] if r.bias else None
    return F.linear(x.reshape(m, k), w, b)


def _conv(r, x, values, flat):
    n, c, h, w_, o, _, _, k, stride, pad, groups = r.dims
    count = o * c // groups * k * k
    w = flat[r.param_offset : r.param_offset + count].reshape(o, c // groups, k, k)
    b = flat[r.param_offset + count : r.param_offset + count + o] if r.bias else None
    return F.conv2d(x.reshape(n, c, h, w_), w, b, stride=stride, padding=pad, groups=groups)


def _batchnorm(r, x, values, flat):
    c = r.dims[1]
    gamma, beta = flat[r.param_offset : r.param_offset + c], flat[r.param_offset + c : r.param_offset + 2 * c]
    return F.batch_norm(x, None, None, gamma, beta, training=True, eps=BN_EPS)


#: Each forward operation of the runtime in PyTorch: (record, its first input, every value, the weights) -> output.
_TORCH = {
    Kind.LINEAR: _linear,
    Kind.CONV: _conv,
    Kind.BATCHNORM: _batchnorm,
    Kind.RELU: lambda r, x, values, flat: F.relu(x),
    Kind.RELU6: lambda r, x, values, flat: F.relu6(x),
    Kind.ADD: lambda r, x, values, flat: x + values[r.inputs[1]],
    Kind.MAXPOOL: lambda r, x, values, flat: F.max_pool2d(x, *r.dims[5:8]),
    Kind.AVGPOOL: lambda r, x, values, flat: x.mean(dim=(2, 3)),
}


def _torch_gradients(program, tensors) -> tuple[np.ndarray, np.ndarray]:
    """Per-row losses and the flat weight gradients of one step, by PyTorch's autograd in float64."""
    flat = torch.tensor(tensors.weights, dtype=torch.float64, requires_grad=True)
    values: dict[int, torch.Tensor] = {}
    losses = None
    for i, r in enumerate(program.records):
        if r.kind is Kind.INPUT:
            values[i] = torch.tensor(tensors.data, dtype=torch.float64)
        elif r.kind in _TORCH:
            values[i] = _TORCH[r.kind](r, values[r.inputs[0]], values, flat)
        elif r.kind is Kind.LOSS:
            rows, classes = r.dims[:2]
            logits = values[r.inputs[0]].reshape(rows, classes)
            losses = F.cross_entropy(logits, torch.tensor(tensors.labels, dtype=torch.long), reduction="none")
            losses.mean().backward()
    assert losses is not None and flat.grad is not None
    return losses.detach().numpy(), flat.grad.numpy()


PROGRAMS = {
    "mlp, batch 2": lambda: device_program(build_model("mlp", batch_size=2)),
    "mcu_cnn": lambda: device_program(build_model("mcu_cnn")),
    "mcu_cnn, batch 3": lambda: device_program(build_model("mcu_cnn", batch_size=3)),
    "mcu_dscnn": lambda: device_program(build_model("mcu_dscnn")),
    "mcu_dscnn, batch 2": lambda: device_program(build_model("mcu_dscnn", batch_size=2)),
    "grouped": lambda: network_program("grouped", grouped),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_the_numpy_reference_is_pytorch_s_autograd(name):
    program = PROGRAMS[name]()
    tensors = make_tensors(program, seed=len(name))
    reference = reference_step(program, tensors)
    losses, grads = _torch_gradients(program, tensors)
    assert reference.losses == pytest.approx(losses, rel=1e-12)
    assert np.abs(reference.grads - grads).max() <= 1e-12 * np.abs(grads).max()


@pytest.mark.parametrize("model, weights", [("mcu_cnn", 3426), ("mcu_dscnn", 2858)])
def test_a_device_model_s_program_reads_what_the_graph_says(model, weights):
    graph = build_model(model)
    program = device_program(graph)
    for node, record in zip(graph.nodes, program.records):
        assert set(record.grads) | set(record.inputs) == set(node.deps), node.name
        assert record.output_bytes == node.output_bytes
    assert program.weight_floats == graph.param_bytes // 4 == weights
    assert len(pack_program(program.records)) == 16 + 100 * len(graph)


def test_the_two_cnns_and_relu6_hold_every_operation_of_the_runtime():
    cnn, dscnn = (device_program(build_model(model)) for model in ("mcu_cnn", "mcu_dscnn"))
    assert {r.kind for r in cnn.records} | {r.kind for r in dscnn.records} == set(Kind) - {Kind.RELU6, Kind.RELU6_GRAD}
    convs = [r.dims for r in cnn.records if r.kind is Kind.CONV]
    # 3x3 and 1x1, strides 1 and 2, one group
    assert {(d[7], d[8], d[9], d[10]) for d in convs} == {(3, 2, 1, 1), (3, 1, 1, 1), (1, 2, 0, 1)}
    assert {r.kind for r in network_program("grouped", grouped).records} >= {Kind.RELU6, Kind.RELU6_GRAD}
    depthwise = [r for r in dscnn.records if r.kind is Kind.CONV and r.dims[10] > 1]
    assert len(depthwise) == 3 and all(r.dims[10] == r.dims[1] == r.dims[4] for r in depthwise)  # one filter per channel
    first = next(b for b in dscnn.params if b.layer == "block1.dw")
    assert first.weight_shape == (8, 1, 3, 3)


def test_a_windowed_average_pooling_is_refused_naming_the_node():
    def pooled(net: Network) -> Tensor:
        x = net.input((1, 2, 8, 8), labels=1)
        x = net.avgpool(net.relu(net.conv(x, 4, 3, padding=1, name="conv")), 2, name="window")
        return net.linear(net.flatten(x), 3, name="fc")

    with pytest.raises(UserInputError, match=r"node 3 \(window\) is a windowed average pooling"):
        network_program("pooled", pooled)


def test_a_model_with_operations_the_runtime_lacks_is_refused_naming_the_node():
    with pytest.raises(UserInputError, match=r"node 1 \(embeddings\): the device runtime does not run embedding"):
        device_program(build_model("bert_base"))
    with pytest.raises(UserInputError, match=r"\(it runs input, linear, conv, .*batchnorm.* and their gradients\)"):
        device_program(build_model("transformer"))


def test_a_batch_larger_than_the_losses_the_result_holds_is_refused():
    assert device_program(build_model("mlp", batch_size=64)).graph.name
    with pytest.raises(UserInputError, match="batch size 65, more than the 64 samples whose losses the device runtime reports"):
        device_program(build_model("mlp", batch_size=65))


def test_a_graph_that_is_not_the_zoo_model_it_names_is_refused():
    graph = build_model("mcu_cnn")
    bigger = build_model("mcu_cnn", batch_size=2)
    lying = TrainingGraph.create(bigger.name, bigger.nodes, meta={**dict(bigger.meta), "batch_size": "1"})
    with pytest.raises(UserInputError, match="differs from the zoo model it names"):
        device_program(lying)
    no_meta = TrainingGraph.create("mine", graph.nodes)
    with pytest.raises(UserInputError, match="not a zoo model"):
        device_program(no_meta)
