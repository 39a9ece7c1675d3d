"""The layer algebra: shapes propagate, and every backward node reads exactly what it should."""

import pytest

from poetsim.graphs.layers import Network, ShapeError


def _by_name(graph):
    return {node.name: node for node in graph.nodes}


def _deps(graph, name):
    """A node's dependencies, by name."""
    nodes = _by_name(graph)
    return {graph.nodes[d].name for d in nodes[name].deps}


@pytest.fixture
def mlp():
    """4 -> 8 -> 6 -> 3 with ReLUs, batch 2."""
    net = Network("mlp3")
    x = net.input((2, 4), labels=2)
    h = net.relu(net.linear(x, 8, name="fc1"), name="relu1")
    h = net.relu(net.linear(h, 6, name="fc2"), name="relu2")
    return net.build(net.linear(h, 3, name="fc3"))


@pytest.fixture
def residual_block():
    """Stem conv-bn-relu0, then conv1-bn1-relu1-conv2-bn2 + identity shortcut, add, relu2."""
    net = Network("block")
    x = net.input((1, 4, 8, 8), labels=1)
    x = net.relu(net.batchnorm(net.conv(x, 4, 3, padding=1, name="stem"), name="bn0"), name="relu0")
    out = net.relu(net.batchnorm(net.conv(x, 4, 3, padding=1, name="conv1"), name="bn1"), name="relu1")
    out = net.batchnorm(net.conv(out, 4, 3, padding=1, name="conv2"), name="bn2")
    out = net.relu(net.add(out, x, name="add"), name="relu2")
    return net.build(net.linear(net.global_avgpool(out, name="pool"), 10, name="fc"))


def test_mlp_node_order_is_forward_loss_then_backward_reversed(mlp):
    assert [n.name for n in mlp.nodes] == [
        "input",
        "fc1",
        "relu1",
        "fc2",
        "relu2",
        "fc3",
        "loss",
        "loss.grad",
        "fc3.grad",
        "relu2.grad",
        "fc2.grad",
        "relu1.grad",
        "fc1.grad",
    ]
    assert [n.backward for n in mlp.nodes] == [False] * 7 + [True] * 6
    assert [n.id for n in mlp.nodes] == list(range(13))


def test_mlp_backward_dependencies_exactly(mlp):
    """Each backward node reads its upstream gradient plus only the forward tensor it needs."""
    expected = {
        "loss": {"input", "fc3"},  # logits and the labels in the input batch
        "loss.grad": {"input", "fc3"},  # recomputes the softmax from the logits
        "fc3.grad": {"loss.grad", "relu2"},  # its input, for the weight gradient
        "relu2.grad": {"fc3.grad", "relu2"},  # its own output, the mask
        "fc2.grad": {"relu2.grad", "relu1"},
        "relu1.grad": {"fc2.grad", "relu1"},
        "fc1.grad": {"relu1.grad", "input"},
    }
    for name, deps in expected.items():
        assert _deps(mlp, name) == deps, name


def test_mlp_sizes_flops_and_params(mlp):
    """Bytes are float32 activations, int32 labels; the first layer passes no gradient on."""
    n = _by_name(mlp)
    assert n["input"].output_bytes == 2 * 4 * 4 + 2 * 4
    assert n["fc1"].output_bytes == 2 * 8 * 4 and n["fc3"].output_bytes == 2 * 3 * 4
    assert n["loss"].output_bytes == 2 * 4  # per-label losses
    assert n["loss.grad"].output_bytes == n["fc3"].output_bytes
    assert n["fc2.grad"].output_bytes == n["relu1"].output_bytes
    assert n["fc1.grad"].output_bytes == 0
    assert n["fc1"].param_bytes == (4 * 8 + 8) * 4 and n["relu1"].param_bytes == 0
    assert n["fc1"].flops == 2 * 2 * 4 * 8  # a multiply-add is two FLOPs
    assert n["fc2.grad"].flops == 2 * n["fc2"].flops  # input gradient + weight gradient
    assert n["fc1.grad"].flops == n["fc1"].flops  # weight gradient only
    assert n["relu1.grad"].flops == n["relu1"].flops
    assert all(node.param_bytes == 0 for node in mlp.nodes if node.backward)


def test_residual_add_backward_reads_no_forward_tensor(residual_block):
    assert _deps(residual_block, "add.grad") == {"relu2.grad"}
    n = _by_name(residual_block)
    # Both summands receive the same gradient tensor: one tensor of the sum's size.
    assert n["add.grad"].output_bytes == n["add"].output_bytes == 4 * 8 * 8 * 4


def test_residual_block_input_gradient_sums_both_paths(residual_block):
    """relu0 feeds conv1 and the shortcut: its backward waits for both and adds them."""
    assert _deps(residual_block, "relu0.grad") == {"relu0", "conv1.grad", "add.grad"}
    n = _by_name(residual_block)
    assert n["relu0.grad"].flops == n["relu0"].flops + 4 * 8 * 8  # ReLU grad + one sum per element


def test_residual_block_reads_the_right_forward_tensors(residual_block):
    assert _deps(residual_block, "relu2.grad") == {"relu2", "pool.grad"}
    assert _deps(residual_block, "relu1.grad") == {"relu1", "conv2.grad"}
    assert _deps(residual_block, "conv2.grad") == {"relu1", "bn2.grad"}
    assert _deps(residual_block, "conv1.grad") == {"relu0", "bn1.grad"}
    assert _deps(residual_block, "bn2.grad") == {"conv2", "add.grad"}
    assert _deps(residual_block, "bn1.grad") == {"conv1", "relu1.grad"}
    assert _deps(residual_block, "stem.grad") == {"input", "bn0.grad"}
    assert _deps(residual_block, "pool.grad") == {"fc.grad"}  # average pooling reads nothing


def test_residual_block_outputs_only_the_next_layer_reads(residual_block):
    """BN and add outputs are never read by backward: free to drop after the forward pass."""
    n = _by_name(residual_block)
    for name, reader in (("bn1", "relu1"), ("bn2", "add"), ("add", "relu2")):
        assert residual_block.consumers[n[name].id] == (n[reader].id,)


def test_strided_conv_and_pooling_shapes_propagate():
    net = Network("shapes")
    x = net.input((2, 3, 9, 9), labels=2)
    conv = net.conv(x, 16, 7, stride=2, padding=3, name="conv")
    pool = net.maxpool(conv, 3, stride=2, padding=1, name="pool")
    avg = net.avgpool(pool, 2, name="avg")
    graph = net.build(net.linear(net.flatten(avg), 5, name="fc"))
    n = _by_name(graph)
    assert conv.shape == (2, 16, 5, 5) and n["conv"].output_bytes == 2 * 16 * 5 * 5 * 4
    # Max pooling's output holds the float32 values and PyTorch's int64 argmax indices.
    assert pool.shape == (2, 16, 3, 3) and n["pool"].output_bytes == 2 * 16 * 3 * 3 * (4 + 8)
    assert n["avg"].output_bytes == 2 * 16 * 1 * 1 * 4  # average pooling keeps no indices
    assert avg.shape == (2, 16, 1, 1)
    assert n["fc"].param_bytes == (16 * 5 + 5) * 4  # the flatten is a view: no node of its own
    assert "flatten" not in {node.op for node in graph.nodes}
    assert n["pool.grad"].output_bytes == n["conv"].output_bytes
    # As PyTorch's max_pool2d_with_indices_backward: the input and the indices.
    assert _deps(graph, "pool.grad") == {"conv", "pool", "avg.grad"}
    assert n["conv"].flops == 2 * 2 * 16 * 5 * 5 * 3 * 7 * 7


def test_depthwise_conv_counts_one_filter_per_channel():
    net = Network("dw")
    x = net.input((1, 8, 6, 6), labels=1)
    y = net.depthwise_conv(x, 3, stride=2, padding=1, name="dw")
    graph = net.build(net.linear(net.global_avgpool(y, name="pool"), 2, name="fc"))
    n = _by_name(graph)
    assert y.shape == (1, 8, 3, 3)
    assert n["dw"].op == "depthwise_conv" and n["dw"].param_bytes == 8 * 9 * 4
    assert n["dw"].flops == 2 * 8 * 3 * 3 * 9


def test_attention_matmuls_read_both_operands_and_softmax_its_output():
    net = Network("attn")
    ids = net.input((2, 5), labels=2, tokens=True)
    x = net.embedding(ids, 11, 8, max_positions=16, name="emb")
    y = net.attention(x, 2, name="attn")
    graph = net.build(net.linear(net.select_token(y), 3, name="head"))
    n = _by_name(graph)
    assert n["attn.scores"].op == "matmul" and n["attn.scores"].output_bytes == 2 * 2 * 5 * 5 * 4
    assert _deps(graph, "attn.scores.grad") == {"attn.q", "attn.k", "attn.softmax.grad"}
    assert n["attn.scores.grad"].output_bytes == 2 * (2 * 5 * 8 * 4)  # gradients of q and k
    assert n["attn.scores.grad"].flops == 2 * n["attn.scores"].flops
    assert _deps(graph, "attn.softmax.grad") == {"attn.softmax", "attn.context.grad"}
    assert _deps(graph, "attn.context.grad") == {"attn.softmax", "attn.v", "attn.out.grad"}
    # The embedding reads the token ids and passes no gradient to integers.
    assert _deps(graph, "emb.grad") == {"input", "attn.q.grad", "attn.k.grad", "attn.v.grad"}
    assert n["emb.grad"].output_bytes == 0
    assert n["emb"].param_bytes == (11 + 16) * 8 * 4
    assert n["input"].output_bytes == 2 * 5 * 4 + 2 * 4  # int32 ids and labels


def test_relu6_backward_reads_its_input_and_relu_its_output():
    """PyTorch's rules: hardtanh_backward(grad, self), threshold_backward(grad, result)."""
    net = Network("relu6")
    x = net.batchnorm(net.conv(net.input((1, 3, 4, 4), labels=1), 4, 1, name="conv"), name="bn")
    y = net.relu(net.relu6(x, name="relu6"), name="relu")
    graph = net.build(net.linear(net.global_avgpool(y, name="pool"), 2, name="fc"))
    n = _by_name(graph)
    assert n["relu6"].op == "relu6" and n["relu6"].flops == 4 * 4 * 4
    assert _deps(graph, "relu6.grad") == {"bn", "relu.grad"}
    assert _deps(graph, "relu.grad") == {"relu", "pool.grad"}
    # So BatchNorm's output stays until the backward: conv (for bn), bn (for relu6), relu (its mask).
    assert graph.last_use[n["bn"].id] == n["relu6.grad"].id


def test_fused_attention_keeps_no_probabilities_and_reads_its_inputs_and_output():
    """PyTorch's fused attention keeps no probabilities and reads its inputs and output.

    scaled_dot_product_attention (flash attention on the CPU): the output holds the context and
    one log-sum-exp per head and query; the backward reads q, k, v and the output.
    """
    net = Network("sdpa")
    ids = net.input((2, 5), labels=2, tokens=True)
    x = net.embedding(ids, 11, 8, max_positions=16, name="emb")
    y = net.attention(x, 2, name="attn", fused=True)
    graph = net.build(net.linear(net.select_token(y), 3, name="head"))
    n = _by_name(graph)
    assert "attn.softmax" not in n and "attn.scores" not in n
    assert n["attn.sdpa"].op == "attention"
    assert n["attn.sdpa"].output_bytes == 2 * 5 * 8 * 4 + 2 * 2 * 5 * 4  # context + log-sum-exp
    assert _deps(graph, "attn.sdpa.grad") == {"attn.q", "attn.k", "attn.v", "attn.sdpa", "attn.out.grad"}
    assert n["attn.sdpa.grad"].output_bytes == 3 * (2 * 5 * 8 * 4)  # gradients of q, k and v
    products = 2 * 2 * 5 * 5 * 8  # one 5 x 5 x 8 product per batch row, all heads
    assert n["attn.sdpa"].flops == 2 * products  # Q K^T and P V
    assert n["attn.sdpa.grad"].flops == 5 * products  # Q K^T again, then four gradient products
    # The materialised variant computes the same products forward.
    plain = Network("plain")
    x = plain.embedding(plain.input((2, 5), labels=2, tokens=True), 11, 8, max_positions=16, name="emb")
    m = _by_name(plain.build(plain.linear(plain.select_token(plain.attention(x, 2, name="attn")), 3, name="head")))
    assert m["attn.scores"].flops + m["attn.context"].flops == n["attn.sdpa"].flops


def test_layers_without_weights_before_them_get_no_backward_node():
    """A pooling on the raw data has neither parameters nor a gradient to pass."""
    net = Network("pool-first")
    x = net.maxpool(net.input((1, 2, 4, 4), labels=1), 2, name="pool")
    graph = net.build(net.linear(net.flatten(x), 3, name="fc"))
    assert [n.name for n in graph.nodes if n.backward] == ["loss.grad", "fc.grad"]
    assert _by_name(graph)["fc.grad"].output_bytes == 0


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda net, x: net.conv(x, 4, 5, name="big"), "big"),
        (lambda net, x: net.add(x, net.conv(x, 4, 1, name="c"), name="join"), "join"),
        (lambda net, x: net.conv(x, 4, 1, groups=2, name="grouped"), "grouped"),
    ],
)
def test_shape_mistakes_raise_shape_error_naming_the_layer(build, message):
    net = Network("bad")
    x = net.input((1, 3, 3, 3), labels=1)
    with pytest.raises(ShapeError, match=message):
        build(net, x)


def test_a_layer_that_does_not_reach_the_loss_is_rejected():
    net = Network("dangling")
    x = net.input((1, 4), labels=1)
    net.relu(x, name="orphan")
    with pytest.raises(ValueError, match="orphan"):
        net.build(net.linear(x, 2, name="fc"))


def test_logits_must_give_one_row_per_label():
    net = Network("labels")
    x = net.input((3, 4), labels=2)
    with pytest.raises(ShapeError, match="label"):
        net.build(net.linear(x, 2, name="fc"))
