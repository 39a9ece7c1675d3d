"""The model zoo: published sizes and costs, batch scaling, graph structure, input errors."""

import time

import pytest

from poetsim.errors import UserInputError
from poetsim.graphs.zoo import MODELS, build_model, counted_macs, published_figures

ALL = sorted(MODELS)


@pytest.mark.parametrize("name", ALL)
def test_forward_macs_and_params_match_the_published_figures(name):
    """Within 2 % at the standard input, batch 1.

    Like with like: the MACs summed are those of the node ops the source counts (convolutions
    and dense layers for torchvision's tables and the CNN papers; dense layers plus the two
    attention matmuls for the Narayanan et al. transformer formula), and parameters are the
    learnable ones (float32, so param_bytes / 4).
    """
    graph = build_model(name)
    figures = published_figures(name)
    assert counted_macs(graph, figures.counted_ops) == pytest.approx(figures.forward_macs, rel=0.02)
    assert graph.param_bytes / 4 == pytest.approx(figures.param_count, rel=0.02)
    assert figures.source


def test_published_figures_are_the_cited_numbers():
    """Guards against 'matching' by editing the reference: the headline figures as published."""
    assert published_figures("resnet18").forward_macs == 1.81e9
    assert published_figures("resnet18").param_count == 11_689_512
    assert published_figures("resnet50").forward_macs == 4.09e9
    assert published_figures("vgg16").param_count == 138_357_544
    assert published_figures("mobilenet_v2").forward_macs == 300e6
    assert published_figures("bert_base").param_count == 109_482_240
    assert published_figures("gpt2_small").param_count == 124_439_808
    # Narayanan et al.: 24 s l h^2 (1 + s/6h) + 2 s h V FLOPs, for GPT-2 small at s = 1024
    # (s sequence length, l layers, h hidden size, V vocabulary).
    s, layers, h, v = 1024, 12, 768, 50257
    flops = 24 * s * layers * h * h * (1 + s / (6 * h)) + 2 * s * h * v
    assert published_figures("gpt2_small").forward_macs == pytest.approx(flops / 2)


@pytest.mark.parametrize("name", ALL)
def test_batch_scales_activations_and_flops_linearly_and_leaves_params(name):
    one, three = build_model(name, batch_size=1), build_model(name, batch_size=3)
    assert len(one) == len(three)
    for a, b in zip(one.nodes, three.nodes):
        assert b.output_bytes == 3 * a.output_bytes, a.name
        assert b.flops == pytest.approx(3 * a.flops), a.name
        assert b.param_bytes == a.param_bytes and b.deps == a.deps, a.name


@pytest.mark.parametrize("name", ALL)
def test_graph_is_forward_then_loss_then_backward_in_reverse(name):
    graph = build_model(name)
    nodes = graph.nodes
    assert nodes[0].op == "input" and not nodes[0].backward
    loss = [n.id for n in nodes if n.op == "loss"]
    assert len(loss) == 1
    forward, backward = nodes[: loss[0] + 1], nodes[loss[0] + 1 :]
    assert not any(n.backward for n in forward) and all(n.backward for n in backward)
    assert backward[0].name == "loss.grad"
    # One backward node per forward layer with something to do, in reverse forward order.
    by_name = {n.name: n.id for n in forward}
    mirrored = [by_name[n.name.removesuffix(".grad")] for n in backward]
    assert mirrored == sorted(mirrored, reverse=True)
    assert all(n.op == nodes[by_name[n.name.removesuffix(".grad")]].op + "_grad" for n in backward)
    assert len(backward) == len(forward) - 1  # every layer but the input has one in the zoo
    assert all(n.param_bytes == 0 for n in backward)


@pytest.mark.parametrize(
    "name, options",
    [
        ("resnet18", {"input_size": 64}),
        ("mobilenet_v2", {"input_size": 96}),
        ("bert_base", {"seq_len": 64}),
    ],
)
def test_input_size_changes_activations_but_not_parameters(name, options):
    standard, other = build_model(name), build_model(name, **options)
    assert other.param_bytes == standard.param_bytes
    assert sum(other.output_bytes) < sum(standard.output_bytes)
    assert dict(other.meta)[next(iter(options))] == str(next(iter(options.values())))


@pytest.mark.parametrize("name", ["gpt2_small", "resnet50"])
def test_large_models_build_in_well_under_a_second(name):
    start = time.perf_counter()
    build_model(name)
    assert time.perf_counter() - start < 0.5


def test_unknown_model_raises_user_input_error_listing_known_ones():
    with pytest.raises(UserInputError, match=r"unknown model 'resnet19'.*resnet18"):
        build_model("resnet19")
    with pytest.raises(UserInputError, match="unknown model"):
        published_figures("nope")


@pytest.mark.parametrize("batch", [0, -2, 1.5, True, "4"])
def test_bad_batch_size_raises_user_input_error(batch):
    with pytest.raises(UserInputError, match="batch_size"):
        build_model("mlp", batch_size=batch)


@pytest.mark.parametrize(
    "name, options, option",
    [
        ("vgg16", {"input_size": 16}, "input_size"),  # five 2x2 poolings need 32 pixels
        ("resnet18", {"input_size": 0}, "input_size"),
        ("bert_base", {"seq_len": 513}, "seq_len"),  # 512 learned positions
        ("gpt2_small", {"seq_len": 0}, "seq_len"),
        ("bert_base", {"input_size": 224}, "input_size"),  # a sequence model takes seq_len
        ("resnet18_cifar", {"seq_len": 128}, "seq_len"),
    ],
)
def test_bad_sizes_raise_user_input_error_naming_the_option(name, options, option):
    with pytest.raises(UserInputError, match=option):
        build_model(name, **options)


def test_specs_state_their_default_input():
    assert MODELS["resnet18_cifar"].input_size == 32 and MODELS["resnet18_cifar"].seq_len is None
    assert MODELS["gpt2_small"].seq_len == 1024 and MODELS["gpt2_small"].input_size is None
    assert dict(build_model("bert_base").meta)["seq_len"] == "128"
    assert all(spec.description and spec.source for spec in MODELS.values())
