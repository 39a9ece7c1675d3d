"""The device program and the host reference.

Zoo graphs as the runtime's operations, refusals in one line, and the NumPy reference step held
to PyTorch's autograd.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from poetsim.device.formats import Kind, pack_program
from poetsim.device.program import device_program
from poetsim.device.reference import reference_step
from poetsim.device.tensors import make_tensors
from poetsim.errors import UserInputError
from poetsim.graphs.graph import TrainingGraph
from poetsim.graphs.zoo import build_model


def _torch_gradients(program, tensors) -> tuple[np.ndarray, np.ndarray]:
    """Per-row losses and the flat weight gradients of one step, by PyTorch's autograd in float64."""
    flat = torch.tensor(tensors.weights, dtype=torch.float64, requires_grad=True)
    values: dict[int, torch.Tensor] = {}
    losses = None
    for i, r in enumerate(program.records):
        if r.kind is Kind.INPUT:
            values[i] = torch.tensor(tensors.data, dtype=torch.float64)
            continue
        if r.kind not in (Kind.LINEAR, Kind.CONV, Kind.RELU, Kind.ADD, Kind.MAXPOOL, Kind.LOSS):
            continue
        x = values[r.inputs[0]]
        if r.kind is Kind.LINEAR:
            m, k, n = r.dims
            w = flat[r.param_offset : r.param_offset + n * k].reshape(n, k)
            b = flat[r.param_offset + n * k : r.param_offset + n * k + n] if r.bias else None
            values[i] = F.linear(x.reshape(m, k), w, b)
        elif r.kind is Kind.CONV:
            n, c, h, w_, o, _, _, k, stride, pad = r.dims
            count = o * c * k * k
            w = flat[r.param_offset : r.param_offset + count].reshape(o, c, k, k)
            b = flat[r.param_offset + count : r.param_offset + count + o] if r.bias else None
            values[i] = F.conv2d(x.reshape(n, c, h, w_), w, b, stride=stride, padding=pad)
        elif r.kind is Kind.RELU:
            values[i] = F.relu(x)
        elif r.kind is Kind.ADD:
            values[i] = x + values[r.inputs[1]]
        elif r.kind is Kind.MAXPOOL:
            k, stride, pad = r.dims[5:8]
            values[i] = F.max_pool2d(x, k, stride, pad)
        else:
            rows, classes = r.dims[:2]
            logits = x.reshape(rows, classes)
            losses = F.cross_entropy(logits, torch.tensor(tensors.labels, dtype=torch.long), reduction="none")
            losses.mean().backward()
    assert losses is not None and flat.grad is not None
    return losses.detach().numpy(), flat.grad.numpy()


@pytest.mark.parametrize("model, batch", [("mlp", 2), ("mcu_cnn", 1), ("mcu_cnn", 3)])
def test_the_numpy_reference_is_pytorch_s_autograd(model, batch):
    program = device_program(build_model(model, batch_size=batch))
    tensors = make_tensors(program, seed=batch)
    reference = reference_step(program, tensors)
    losses, grads = _torch_gradients(program, tensors)
    assert reference.losses == pytest.approx(losses, rel=1e-12)
    assert np.abs(reference.grads - grads).max() <= 1e-12 * np.abs(grads).max()


def test_the_cnn_s_program_has_every_operation_of_the_runtime_and_reads_what_the_graph_says():
    graph = build_model("mcu_cnn")
    program = device_program(graph)
    assert {r.kind for r in program.records} == set(Kind)
    for node, record in zip(graph.nodes, program.records):
        assert set(record.grads) | set(record.inputs) == set(node.deps), node.name
        assert record.output_bytes == node.output_bytes
    assert program.weight_floats == graph.param_bytes // 4 == 3426
    convs = [r.dims for r in program.records if r.kind is Kind.CONV]
    assert {(d[7], d[8], d[9]) for d in convs} == {(3, 2, 1), (3, 1, 1), (1, 2, 0)}  # 3x3 and 1x1, strides 1 and 2
    assert len(pack_program(program.records)) == 16 + 96 * len(graph)


def test_a_model_with_operations_the_runtime_lacks_is_refused_naming_the_node():
    with pytest.raises(UserInputError, match=r"node 2 \(bn1\) is a batchnorm"):
        device_program(build_model("resnet18_cifar"))
    with pytest.raises(UserInputError, match="embedding"):
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
