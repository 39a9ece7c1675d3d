"""The model zoo: training graphs of the networks POET and its users care about, by name.

Each model is written with the layer algebra (`poetsim.graphs.layers`) and checked against a
published figure: forward multiply-accumulates (MACs) and parameter count at the standard
input, batch 1 (tests/test_zoo.py holds every one within 2 %). Published MAC counts cover the
convolutions, dense layers and (for transformers) the attention matmuls only, so the comparison
sums the MACs of exactly those nodes (`PublishedFigures.counted_ops`); parameters are the
learnable ones (BatchNorm running statistics are buffers, not counted anywhere). Dropout is
left out of every model: it changes no shape, and its mask is small next to the activations.

What a backward node keeps is PyTorch's (tools/autograd/derivatives.yaml, and what
`torch.autograd.graph.saved_tensors_hooks` shows an eager step saving; docs/graphs.md): max
pooling keeps its int64 indices, ReLU6 its input, and the `transformer`, which is
`nn.TransformerEncoder`, runs attention as one fused kernel that keeps no L x L probabilities.
BERT and GPT-2 keep them, as their reference implementations (and Hugging Face's `eager`
attention) do. `python -m benchmarks pytorch` sets each zoo model beside the same network
imported from PyTorch.
"""

from collections.abc import Callable
from dataclasses import dataclass

from poetsim.errors import UserInputError
from poetsim.graphs.graph import TrainingGraph
from poetsim.graphs.layers import Network, ShapeError, Tensor

_CONV_OPS = frozenset({"conv", "depthwise_conv", "linear"})
_TRANSFORMER_OPS = frozenset({"linear", "matmul", "attention"})


@dataclass(frozen=True)
class PublishedFigures:
    """A model's published size and cost at its standard input, batch 1, and where they come from.

    `forward_macs` counts multiply-accumulates of the node ops in `counted_ops` only (what the
    source counts); `param_count` is learnable parameters.
    """

    forward_macs: float
    param_count: int
    counted_ops: frozenset[str]
    source: str


@dataclass(frozen=True)
class ModelSpec:
    """A zoo entry: what it is, its default batch and input, and its published figures.

    Exactly one of `input_size` (image side, or MNIST side for the MLP) and `seq_len` is set:
    it says which option the model takes.
    """

    name: str
    description: str
    batch_size: int
    input_size: int | None
    seq_len: int | None
    figures: PublishedFigures

    @property
    def source(self) -> str:
        """Where the published figures come from."""
        return self.figures.source


def counted_macs(graph: TrainingGraph, ops: frozenset[str]) -> float:
    """Forward MACs of the nodes whose op is in `ops` (their FLOPs are 2 per MAC)."""
    return sum(node.flops for node in graph.nodes if not node.backward and node.op in ops) / 2


# -- the networks -----------------------------------------------------------------------------


def _mlp(net: Network, batch: int, side: int) -> Tensor:
    """Flattened side x side images through 512 and 256 ReLU units to 10 classes."""
    x = net.flatten(net.input((batch, 1, side, side), labels=batch))
    for i, width in enumerate((512, 256), start=1):
        x = net.relu(net.linear(x, width, name=f"fc{i}"), name=f"relu{i}")
    return net.linear(x, 10, name="fc3")


def _mcu_cnn(net: Network, batch: int, side: int) -> Tensor:
    """A small CNN for grey side x side images, to 10 classes.

    A strided 3x3 stem, a 3x3 convolution, a residual block of two 3x3 convolutions, a strided
    1x1 convolution and 2x2 max pooling.

    Small enough to train on a microcontroller (3,426 parameters), and made of the operations the
    device runtime executes (poetsim.device): convolutions 3x3 and 1x1, stride 1 and 2, with
    padding and bias; ReLU; a residual add; max pooling; flatten; a dense layer.
    """
    x = net.input((batch, 1, side, side), labels=batch)
    x = net.relu(net.conv(x, 8, 3, stride=2, padding=1, bias=True, name="conv1"), name="relu1")
    x = net.relu(net.conv(x, 8, 3, padding=1, bias=True, name="conv2"), name="relu2")
    out = net.relu(net.conv(x, 8, 3, padding=1, bias=True, name="block.conv1"), name="block.relu1")
    out = net.conv(out, 8, 3, padding=1, bias=True, name="block.conv2")
    x = net.relu(net.add(out, x, name="block.add"), name="block.relu2")
    x = net.relu(net.conv(x, 16, 1, stride=2, bias=True, name="conv3"), name="relu3")
    x = net.maxpool(x, 2, name="pool")
    return net.linear(net.flatten(x), 10, name="fc")


def _mcu_dscnn(net: Network, batch: int, side: int) -> Tensor:
    """A depthwise separable CNN for grey side x side images, to 10 classes.

    DS-CNN (Zhang et al. 2017, "Hello Edge: Keyword Spotting on Microcontrollers",
    arXiv:1711.07128): a strided stem convolution, then blocks of a 3x3 depthwise and a 1x1
    pointwise convolution, every convolution followed by batch norm and ReLU, then global average
    pooling and a dense layer. Here with a square 3x3 stem and square inputs, and three blocks of
    8-16 (strided), 16-32 and 32-32 channels.

    Small enough to train on a microcontroller (2,858 parameters), and made of the operations the
    device runtime executes (poetsim.device).
    """
    x = net.input((batch, 1, side, side), labels=batch)
    x = net.relu(net.batchnorm(net.conv(x, 8, 3, stride=2, padding=1, name="conv1"), name="bn1"), name="relu1")
    for i, (width, stride) in enumerate(((16, 2), (32, 1), (32, 1)), start=1):
        x = net.depthwise_conv(x, 3, stride=stride, padding=1, name=f"block{i}.dw")
        x = net.relu(net.batchnorm(x, name=f"block{i}.bn1"), name=f"block{i}.relu1")
        x = net.conv(x, width, 1, name=f"block{i}.pw")
        x = net.relu(net.batchnorm(x, name=f"block{i}.bn2"), name=f"block{i}.relu2")
    return net.linear(net.global_avgpool(x, name="pool"), 10, name="fc")


def _basic_block(net: Network, x: Tensor, planes: int, stride: int, name: str) -> Tensor:
    """ResNet-18's block: two 3x3 conv-BN, the shortcut added, then ReLU."""
    out = net.relu(
        net.batchnorm(net.conv(x, planes, 3, stride=stride, padding=1, name=f"{name}.conv1"), name=f"{name}.bn1"),
        name=f"{name}.relu1",
    )
    out = net.batchnorm(net.conv(out, planes, 3, padding=1, name=f"{name}.conv2"), name=f"{name}.bn2")
    return net.relu(net.add(out, _shortcut(net, x, planes, stride, name), name=f"{name}.add"), name=f"{name}.relu2")


def _bottleneck(net: Network, x: Tensor, planes: int, stride: int, name: str) -> Tensor:
    """ResNet-50's block: 1x1, 3x3, 1x1 (x4 wide) conv-BN; v1.5 puts the stride on the 3x3."""
    out = x
    for i, (width, kernel, step) in enumerate(((planes, 1, 1), (planes, 3, stride)), start=1):
        out = net.conv(out, width, kernel, stride=step, padding=kernel // 2, name=f"{name}.conv{i}")
        out = net.relu(net.batchnorm(out, name=f"{name}.bn{i}"), name=f"{name}.relu{i}")
    out = net.batchnorm(net.conv(out, 4 * planes, 1, name=f"{name}.conv3"), name=f"{name}.bn3")
    return net.relu(net.add(out, _shortcut(net, x, 4 * planes, stride, name), name=f"{name}.add"), name=f"{name}.relu3")


def _shortcut(net: Network, x: Tensor, channels: int, stride: int, name: str) -> Tensor:
    """Identity, or a strided 1x1 convolution and BN when the shape changes."""
    if stride == 1 and x.shape[1] == channels:
        return x
    return net.batchnorm(net.conv(x, channels, 1, stride=stride, name=f"{name}.down.conv"), name=f"{name}.down.bn")


def _resnet(net: Network, batch: int, side: int, blocks: tuple[int, ...], bottleneck: bool, cifar: bool, classes: int) -> Tensor:
    """The ResNets of torchvision; `cifar` swaps in kuangliu/pytorch-cifar's 3x3 stem without max pooling."""
    x = net.input((batch, 3, side, side), labels=batch)
    kernel, stride = (3, 1) if cifar else (7, 2)
    x = net.conv(x, 64, kernel, stride=stride, padding=kernel // 2, name="conv1")
    x = net.relu(net.batchnorm(x, name="bn1"), name="relu")
    if not cifar:
        x = net.maxpool(x, 3, stride=2, padding=1, name="maxpool")
    block = _bottleneck if bottleneck else _basic_block
    for stage, count in enumerate(blocks):
        for i in range(count):
            stride = 2 if stage > 0 and i == 0 else 1
            x = block(net, x, 64 * 2**stage, stride, f"layer{stage + 1}.{i}")
    return net.linear(net.global_avgpool(x, name="avgpool"), classes, name="fc")


def _vgg16(net: Network, batch: int, side: int) -> Tensor:
    """The VGG-16 of torchvision (configuration D, biased convolutions, no BN), dropout left out."""
    x = net.input((batch, 3, side, side), labels=batch)
    for stage, (width, convs) in enumerate(((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)), start=1):
        for i in range(1, convs + 1):
            x = net.conv(x, width, 3, padding=1, bias=True, name=f"conv{stage}_{i}")
            x = net.relu(x, name=f"relu{stage}_{i}")
        x = net.maxpool(x, 2, name=f"pool{stage}")
    x = net.flatten(net.adaptive_avgpool(x, 7, name="avgpool"))
    for i in (1, 2):
        x = net.relu(net.linear(x, 4096, name=f"fc{i}"), name=f"relu_fc{i}")
    return net.linear(x, 1000, name="fc3")


def _mobilenet_v2(net: Network, batch: int, side: int) -> Tensor:
    """The MobileNetV2 of torchvision at width 1.0: inverted residuals with ReLU6, linear bottlenecks.

    ReLU6 keeps its input for the backward (`Network.relu6`, PyTorch's rule), so each
    conv-BN-ReLU6 holds three activations until the backward: the convolution's output (for
    BatchNorm), BatchNorm's output (for ReLU6) and ReLU6's output (for the next convolution).
    """

    def conv_bn(x, channels, kernel, stride, name, relu=True, depthwise=False):
        if depthwise:
            x = net.depthwise_conv(x, kernel, stride=stride, padding=kernel // 2, name=f"{name}.conv")
        else:
            x = net.conv(x, channels, kernel, stride=stride, padding=kernel // 2, name=f"{name}.conv")
        x = net.batchnorm(x, name=f"{name}.bn")
        return net.relu6(x, name=f"{name}.relu6") if relu else x

    x = conv_bn(net.input((batch, 3, side, side), labels=batch), 32, 3, 2, "stem")
    index = 0
    # (expansion t, output channels c, repeats n, first stride s), Sandler et al. 2018, Table 2.
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            index += 1
            name, stride, inp = f"block{index}", s if i == 0 else 1, x
            out = x if t == 1 else conv_bn(x, x.shape[1] * t, 1, 1, f"{name}.expand")
            out = conv_bn(out, None, 3, stride, f"{name}.dw", depthwise=True)
            out = conv_bn(out, c, 1, 1, f"{name}.project", relu=False)
            x = net.add(out, inp, name=f"{name}.add") if stride == 1 and inp.shape[1] == c else out
    x = conv_bn(x, 1280, 1, 1, "head")
    return net.linear(net.global_avgpool(x, name="avgpool"), 1000, name="classifier")


def _encoder_layer(net: Network, x: Tensor, heads: int, ffn: int, name: str, fused: bool) -> Tensor:
    """Post-norm block (BERT, the original Transformer): sublayer, add, then LayerNorm."""
    attention = net.attention(x, heads, name=f"{name}.attn", fused=fused)
    x = net.layernorm(net.add(x, attention, name=f"{name}.add1"), name=f"{name}.ln1")
    h = net.linear(net.gelu(net.linear(x, ffn, name=f"{name}.fc1"), name=f"{name}.gelu"), x.shape[-1], name=f"{name}.fc2")
    return net.layernorm(net.add(x, h, name=f"{name}.add2"), name=f"{name}.ln2")


def _decoder_layer(net: Network, x: Tensor, heads: int, ffn: int, name: str) -> Tensor:
    """Pre-norm block (GPT-2): LayerNorm, sublayer, add. The causal mask changes no cost."""
    x = net.add(x, net.attention(net.layernorm(x, name=f"{name}.ln1"), heads, name=f"{name}.attn"), name=f"{name}.add1")
    h = net.gelu(net.linear(net.layernorm(x, name=f"{name}.ln2"), ffn, name=f"{name}.fc1"), name=f"{name}.gelu")
    return net.add(x, net.linear(h, x.shape[-1], name=f"{name}.fc2"), name=f"{name}.add2")


def _encoder_classifier(
    net: Network,
    batch: int,
    seq: int,
    *,
    vocab: int,
    positions: int,
    types: int,
    dim: int,
    heads: int,
    ffn: int,
    layers: int,
    pooler: bool,
    fused: bool,
    classes: int = 2,
) -> Tensor:
    """BERT-style sequence classifier: embeddings, LayerNorm, post-norm layers, head on token 0.

    `fused` runs attention as one kernel that keeps no L x L probabilities (`Network.attention`).
    """
    ids = net.input((batch, seq), labels=batch, tokens=True)
    x = net.embedding(ids, vocab, dim, max_positions=positions, token_types=types, name="embeddings")
    x = net.layernorm(x, name="embeddings.ln")
    for i in range(layers):
        x = _encoder_layer(net, x, heads, ffn, f"layer{i}", fused)
    x = net.select_token(x, 0)
    if pooler:
        x = net.tanh(net.linear(x, dim, name="pooler"), name="pooler.tanh")
    return net.linear(x, classes, name="classifier")


def _gpt2(net: Network, batch: int, seq: int, *, vocab=50257, positions=1024, dim=768, heads=12, layers=12) -> Tensor:
    """GPT-2 small for language modelling: one label (the next token) per position."""
    ids = net.input((batch, seq), labels=batch * seq, tokens=True)
    x = net.embedding(ids, vocab, dim, max_positions=positions, name="wte_wpe")
    for i in range(layers):
        x = _decoder_layer(net, x, heads, 4 * dim, f"h{i}")
    return net.linear(net.layernorm(x, name="ln_f"), vocab, bias=False, tied=True, name="lm_head")


# -- published figures --------------------------------------------------------------------------


def _megatron_macs(seq: int, layers: int, dim: int, vocab_out: int = 0) -> float:
    """Forward MACs of a transformer with 4x-wide FFN, Narayanan et al. (SC'21), Appendix.

    Their forward count is 24 B s l h^2 (1 + s / 6h) + 2 B s h V FLOPs (B = 1): dense layers,
    both attention matmuls (full, not halved by a causal mask) and the output layer; halved here
    into MACs.
    """
    return (24 * seq * layers * dim**2 * (1 + seq / (6 * dim)) + 2 * seq * dim * vocab_out) / 2


_TORCHVISION = "torchvision.models docs, {0}_Weights.IMAGENET1K_V1 ('GFLOPS' there are conv+linear MACs)"

MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec(
            "mlp",
            "MLP 784-512-256-10, 28x28 images",
            1,
            28,
            None,
            # By hand: MACs 784*512 + 512*256 + 256*10 = 535,040;
            # params 784*512+512 + 512*256+256 + 256*10+10 = 535,818.
            PublishedFigures(535_040, 535_818, _CONV_OPS, "computed by hand (poetsim.graphs.zoo comment)"),
        ),
        ModelSpec(
            "mcu_cnn",
            "residual CNN for microcontrollers, 28x28 grey images",
            1,
            28,
            None,
            # By hand, at 28x28: conv1 8x14x14 outputs x 9 taps = 14,112 MACs; conv2 and the block's
            # two convolutions 8x14x14 x 72 = 112,896 each; conv3 16x7x7 x 8 = 6,272; fc 144 x 10 =
            # 1,440; total 360,512. Params: conv1 8*9+8 = 80; conv2 and the block's 8*72+8 = 584
            # each; conv3 16*8+16 = 144; fc 144*10+10 = 1,450; total 3,426.
            PublishedFigures(360_512, 3_426, _CONV_OPS, "computed by hand (poetsim.graphs.zoo comment)"),
        ),
        ModelSpec(
            "mcu_dscnn",
            "DS-CNN, a depthwise separable CNN for microcontrollers, 28x28 grey images",
            1,
            28,
            None,
            # By hand, at 28x28: conv1 8x14x14 outputs x 9 taps = 14,112 MACs; block1 depthwise
            # (stride 2) 8x7x7 x 9 = 3,528 and pointwise 16x7x7 x 8 = 6,272; block2 depthwise
            # 16x7x7 x 9 = 7,056 and pointwise 32x7x7 x 16 = 25,088; block3 depthwise 32x7x7 x 9 =
            # 14,112 and pointwise 32x7x7 x 32 = 50,176; fc 32 x 10 = 320; total 120,664. Params:
            # convolutions 72 + (72 + 128) + (144 + 512) + (288 + 1,024) = 2,240; batch norms 2 x
            # (8 + 8 + 16 + 16 + 32 + 32 + 32) = 288; fc 320+10 = 330; total 2,858.
            PublishedFigures(120_664, 2_858, _CONV_OPS, "computed by hand (poetsim.graphs.zoo comment)"),
        ),
        ModelSpec(
            "vgg16",
            "VGG-16 (torchvision), ImageNet 224",
            1,
            224,
            None,
            PublishedFigures(15.47e9, 138_357_544, _CONV_OPS, _TORCHVISION.format("VGG16")),
        ),
        ModelSpec(
            "resnet18",
            "ResNet-18 (torchvision), ImageNet 224",
            1,
            224,
            None,
            PublishedFigures(1.81e9, 11_689_512, _CONV_OPS, _TORCHVISION.format("ResNet18")),
        ),
        ModelSpec(
            "resnet18_cifar",
            "ResNet-18 for CIFAR-10 32x32 (POET's main model)",
            1,
            32,
            None,
            PublishedFigures(
                0.56e9,
                11_173_962,
                _CONV_OPS,
                "kuangliu/pytorch-cifar models/resnet.py ResNet18 (BasicBlock): 0.56 GMAC and "
                "11.17 M params as commonly reported for CIFAR ResNet-18; the parameter count is exact",
            ),
        ),
        ModelSpec(
            "resnet50",
            "ResNet-50 v1.5 (torchvision), ImageNet 224",
            1,
            224,
            None,
            PublishedFigures(4.09e9, 25_557_032, _CONV_OPS, _TORCHVISION.format("ResNet50")),
        ),
        ModelSpec(
            "mobilenet_v2",
            "MobileNetV2 1.0 (torchvision), ImageNet 224",
            1,
            224,
            None,
            PublishedFigures(
                300e6,
                3_504_872,
                _CONV_OPS,
                "Sandler et al. 2018 (CVPR), Table 4: 300 M multiply-adds; params: torchvision "
                "MobileNet_V2_Weights.IMAGENET1K_V1 (3,504,872; the paper rounds to 3.4 M)",
            ),
        ),
        ModelSpec(
            "bert_base",
            "BERT-base, 2-class head, seq 128",
            1,
            None,
            128,
            PublishedFigures(
                _megatron_macs(128, 12, 768),
                109_482_240,
                _TRANSFORMER_OPS,
                "params: bert-base-uncased BertModel incl. pooler, 109,482,240 (Devlin et al. 2019: "
                "110 M; the 2-class head adds 1,538); MACs: Narayanan et al. SC'21 formula at s=128",
            ),
        ),
        ModelSpec(
            "transformer",
            "small Transformer encoder (4 x 256, fused attention), seq 128",
            1,
            None,
            128,
            # By hand: embeddings (8192 + 512) * 256 = 2,228,224, LN 512; per layer q,k,v,out
            # 4 * (256*256 + 256) = 263,168, FFN 256*1024+1024 + 1024*256+256 = 525,568, two LN 1,024
            # -> 789,760, x4 = 3,159,040; classifier 514. Total 5,388,290. MACs: per layer
            # 128 * 786,432 dense + 2 * 128^2 * 256 attention = 109,051,904, x4 = 436,207,616 (the
            # Narayanan et al. formula gives the same), plus the classifier's 512.
            PublishedFigures(
                _megatron_macs(128, 4, 256) + 512,
                5_388_290,
                _TRANSFORMER_OPS,
                "computed by hand (poetsim.graphs.zoo comment) and with the Narayanan et al. SC'21 formula",
            ),
        ),
        ModelSpec(
            "gpt2_small",
            "GPT-2 small (124 M), language model, seq 1024",
            1,
            None,
            1024,
            PublishedFigures(
                _megatron_macs(1024, 12, 768, 50257),
                124_439_808,
                _TRANSFORMER_OPS,
                "params: OpenAI GPT-2 small / Hugging Face 'gpt2', 124,439,808 (124 M; the paper's "
                "117 M was a miscount); MACs: Narayanan et al. SC'21 formula incl. the output layer",
            ),
        ),
    )
}
"""Every zoo model by name. `batch_size` is what `build_model` uses when given none."""

_BUILDERS: dict[str, Callable[[Network, int, int], Tensor]] = {
    "mlp": _mlp,
    "mcu_cnn": _mcu_cnn,
    "mcu_dscnn": _mcu_dscnn,
    "vgg16": _vgg16,
    "resnet18": lambda net, b, s: _resnet(net, b, s, (2, 2, 2, 2), False, False, 1000),
    "resnet18_cifar": lambda net, b, s: _resnet(net, b, s, (2, 2, 2, 2), False, True, 10),
    "resnet50": lambda net, b, s: _resnet(net, b, s, (3, 4, 6, 3), True, False, 1000),
    "mobilenet_v2": _mobilenet_v2,
    "bert_base": lambda net, b, s: _encoder_classifier(
        net, b, s, vocab=30522, positions=512, types=2, dim=768, heads=12, ffn=3072, layers=12, pooler=True, fused=False
    ),
    "transformer": lambda net, b, s: _encoder_classifier(
        net, b, s, vocab=8192, positions=512, types=0, dim=256, heads=4, ffn=1024, layers=4, pooler=False, fused=True
    ),
    "gpt2_small": _gpt2,
}


def published_figures(name: str) -> PublishedFigures:
    """The published forward MACs and parameter count of a zoo model, with their source."""
    return _spec(name).figures


def build_model(name: str, batch_size: int = 1, input_size: int | None = None, seq_len: int | None = None) -> TrainingGraph:
    """The training graph of zoo model `name` for a batch and input size.

    Image models take `input_size` (the image side), sequence models `seq_len`; giving the
    other one, a non-positive size, or a size the network cannot take raises UserInputError
    naming the option.
    """
    _spec(name)
    return record_model(Network(name), batch_size, input_size, seq_len)


def record_model(net: Network, batch_size: int = 1, input_size: int | None = None, seq_len: int | None = None) -> TrainingGraph:
    """`build_model` of zoo model `net.name`, recorded into the empty `net`.

    A Network subclass may keep more of each layer than the graph does (poetsim.device keeps
    window sizes and strides).
    """
    name = net.name
    spec = _spec(name)
    _check_positive("batch_size", batch_size)
    if spec.input_size is not None:
        (option, size, default), (other, stray) = ("input_size", input_size, spec.input_size), ("seq_len", seq_len)
    else:
        assert spec.seq_len is not None, f"{name}: a model spec sets input_size or seq_len"
        (option, size, default), (other, stray) = ("seq_len", seq_len, spec.seq_len), ("input_size", input_size)
    if stray is not None:
        raise UserInputError(f"{other} does not apply to {name}; it takes {option}")
    size = default if size is None else size
    _check_positive(option, size)
    try:
        logits = _BUILDERS[name](net, batch_size, size)
    except ShapeError as err:
        raise UserInputError(f"{option} {size} does not fit {name}: {err}") from None
    return net.build(logits, meta={"model": name, "batch_size": str(batch_size), option: str(size)})


def _spec(name: str) -> ModelSpec:
    if name not in MODELS:
        raise UserInputError(f"unknown model '{name}' (known: {', '.join(sorted(MODELS))})")
    return MODELS[name]


def _check_positive(option: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserInputError(f"{option} must be a positive integer, got {value!r}")
