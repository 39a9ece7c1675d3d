"""Nine architectures from their papers, beyond poetsim's zoo, sized for CIFAR-size inputs.

An outside set to import, schedule and execute: depthwise separable convolutions (MobileNetV1),
inverted residuals with squeeze-and-excitation and hard-swish (MobileNetV3-Small), channel split
and shuffle (ShuffleNetV2), inverted residuals with stochastic depth (EfficientNet-B0), dense
connections (DenseNet-BC), grouped convolutions (ResNeXt), fire modules (SqueezeNet 1.1), and
transformer encoders with dropout (a ViT and a text classifier on `nn.TransformerEncoder`).
Written in plain `torch.nn` from the papers' tables, with torchvision's module names where
torchvision has the model, because torchvision's wheel does not load beside this project's
CPU torch. Dropout, attention dropout and stochastic depth keep the papers' probabilities.

For 32x32 images the first stride-2 stage is dropped (stem stride 1, no stem pooling), as in
the CIFAR versions of ResNet; the rest is the paper's. Every factory takes no argument and
builds random weights, so `poetsim import-torch poetsim.pytorch.architectures:efficientnet_b0
--input-shape 8,3,32,32` names it; the text classifier takes int64 token ids below
`TEXT_VOCAB` (`--input-shape 8,64 --input-dtype int64 --input-high 4096`).
"""

import torch
from torch import nn

#: The text classifier's vocabulary and sequence length (token ids are drawn below the vocabulary).
TEXT_VOCAB = 4096
TEXT_LENGTH = 64


def _divisible(value: float, divisor: int = 8) -> int:
    """Channels rounded to a multiple of 8, never 10 % below `value` (the MobileNets' rule)."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def _conv_bn(inp: int, out: int, kernel: int, stride: int = 1, groups: int = 1, act: type[nn.Module] | None = nn.ReLU):
    """Convolution, batch norm and an activation (torchvision's Conv2dNormActivation)."""
    layers: list[nn.Module] = [nn.Conv2d(inp, out, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(out)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class StochasticDepth(nn.Module):
    """Drop the whole residual branch of a row with probability `p` (Huang et al. 2016), as torchvision's.

    Scaled by 1 / (1 - p) in training, the identity in evaluation.
    """

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """`x` with each row's branch kept or dropped in training; `x` itself in evaluation."""
        if not self.training or self.p == 0.0:
            return x
        survival = 1.0 - self.p
        noise = torch.empty([x.shape[0]] + [1] * (x.dim() - 1), dtype=x.dtype, device=x.device).bernoulli_(survival)
        return x * noise.div_(survival)


class SqueezeExcitation(nn.Module):
    """Hu et al. 2018: pool, squeeze (1x1), activate, excite (1x1), gate, rescale the channels."""

    def __init__(self, channels: int, squeeze: int, act: type[nn.Module] = nn.ReLU, gate: type[nn.Module] = nn.Sigmoid):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.activation = act()
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.scale_activation = gate()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """`x` with each channel rescaled by its gate."""
        scale = self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
        return x * scale


# -- MobileNetV1: Howard et al. 2017, "MobileNets", arXiv:1704.04861, Table 1 ----------------------


class MobileNetV1(nn.Module):
    """Depthwise separable convolutions: a 3x3 depthwise then a 1x1 pointwise, each with BN and ReLU."""

    # (output channels, stride) of the 13 depthwise separable layers, Table 1.
    LAYERS = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)) + ((512, 1),) * 5 + ((1024, 2), (1024, 1))

    def __init__(self, width: float = 0.5, num_classes: int = 10):
        super().__init__()
        inp = int(32 * width)
        layers: list[nn.Module] = [_conv_bn(3, inp, 3, 1)]
        for out, stride in self.LAYERS:
            out = int(out * width)
            layers.append(nn.Sequential(_conv_bn(inp, inp, 3, stride, groups=inp), _conv_bn(inp, out, 1)))
            inp = out
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inp, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The logits of a batch of images."""
        return self.fc(torch.flatten(self.avgpool(self.features(x)), 1))


def mobilenet_v1() -> nn.Module:
    """MobileNetV1 at width 0.5 for CIFAR-10 (stride-1 stem)."""
    return MobileNetV1()


# -- MobileNetV3-Small: Howard et al. 2019, "Searching for MobileNetV3", arXiv:1905.02244, Table 2 -


class InvertedResidualSE(nn.Module):
    """MobileNetV3's bneck: 1x1 expansion, depthwise k x k, squeeze-excite, 1x1 linear projection."""

    def __init__(self, inp: int, kernel: int, expanded: int, out: int, se: bool, hard: bool, stride: int):
        super().__init__()
        act = nn.Hardswish if hard else nn.ReLU
        self.use_res_connect = stride == 1 and inp == out
        layers: list[nn.Module] = [] if expanded == inp else [_conv_bn(inp, expanded, 1, act=act)]
        layers.append(_conv_bn(expanded, expanded, kernel, stride, groups=expanded, act=act))
        if se:
            layers.append(SqueezeExcitation(expanded, _divisible(expanded // 4), gate=nn.Hardsigmoid))
        layers.append(_conv_bn(expanded, out, 1, act=None))
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The block's output, plus `x` where the shape allows a shortcut."""
        return x + self.block(x) if self.use_res_connect else self.block(x)


class MobileNetV3(nn.Module):
    """MobileNetV3-Small: 11 bnecks, hard-swish, a 1024-wide head with dropout 0.2."""

    # (kernel, expanded, output, squeeze-excite, hard-swish, stride), Table 2.
    BNECKS = (
        (3, 16, 16, True, False, 2),
        (3, 72, 24, False, False, 2),
        (3, 88, 24, False, False, 1),
        (5, 96, 40, True, True, 2),
        (5, 240, 40, True, True, 1),
        (5, 240, 40, True, True, 1),
        (5, 120, 48, True, True, 1),
        (5, 144, 48, True, True, 1),
        (5, 288, 96, True, True, 2),
        (5, 576, 96, True, True, 1),
        (5, 576, 96, True, True, 1),
    )

    def __init__(self, num_classes: int = 10, dropout: float = 0.2):
        super().__init__()
        layers: list[nn.Module] = [_conv_bn(3, 16, 3, 1, act=nn.Hardswish)]
        inp = 16
        for kernel, expanded, out, se, hard, stride in self.BNECKS:
            layers.append(InvertedResidualSE(inp, kernel, expanded, out, se, hard, stride))
            inp = out
        layers.append(_conv_bn(inp, 576, 1, act=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(576, 1024), nn.Hardswish(), nn.Dropout(dropout), nn.Linear(1024, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The logits of a batch of images."""
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def mobilenet_v3_small() -> nn.Module:
    """MobileNetV3-Small for CIFAR-10 (stride-1 stem), dropout 0.2 before the classifier."""
    return MobileNetV3()


# -- ShuffleNetV2: Ma et al. 2018, "ShuffleNet V2", arXiv:1807.11164, Table 5 ------------------------


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    """Interleave the channels of `groups` groups (ShuffleNet's channel shuffle)."""
    batch, channels, height, width = x.shape
    x = x.view(batch, groups, channels // groups, height, width).transpose(1, 2).contiguous()
    return x.view(batch, channels, height, width)


class ShuffleUnit(nn.Module):
    """ShuffleNetV2's unit: split or copy the input into two branches, convolve, concatenate, shuffle.

    Stride 1 splits the channels; stride 2 copies the input into both branches.
    """

    def __init__(self, inp: int, out: int, stride: int):
        super().__init__()
        self.stride = stride
        half = out // 2
        if stride > 1:
            self.branch1 = nn.Sequential(_conv_bn(inp, inp, 3, stride, groups=inp, act=None), _conv_bn(inp, half, 1))
        source = inp if stride > 1 else half
        self.branch2 = nn.Sequential(
            _conv_bn(source, half, 1), _conv_bn(half, half, 3, stride, groups=half, act=None), _conv_bn(half, half, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The two branches concatenated, their channels shuffled."""
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    """ShuffleNetV2 0.5x: stages of 4, 8 and 4 units (48, 96, 192 channels), a 1024-channel conv5."""

    # The three stages, set by name in __init__ (torchvision's names).
    stage2: nn.Sequential
    stage3: nn.Sequential
    stage4: nn.Sequential

    def __init__(self, num_classes: int = 10, stages=(4, 8, 4), channels=(24, 48, 96, 192, 1024)):
        super().__init__()
        self.conv1 = _conv_bn(3, channels[0], 3, 1)
        inp = channels[0]
        for index, (repeats, out) in enumerate(zip(stages, channels[1:4]), start=2):
            units = [ShuffleUnit(inp, out, 2)] + [ShuffleUnit(out, out, 1) for _ in range(repeats - 1)]
            setattr(self, f"stage{index}", nn.Sequential(*units))
            inp = out
        self.conv5 = _conv_bn(inp, channels[4], 1)
        self.fc = nn.Linear(channels[4], num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The logits of a batch of images."""
        x = self.conv5(self.stage4(self.stage3(self.stage2(self.conv1(x)))))
        return self.fc(x.mean([2, 3]))


def shufflenet_v2() -> nn.Module:
    """ShuffleNetV2 0.5x for CIFAR-10 (stride-1 stem, no stem pooling)."""
    return ShuffleNetV2()


# -- EfficientNet-B0: Tan & Le 2019, "EfficientNet", arXiv:1905.11946, Table 1 ----------------------


class MBConv(nn.Module):
    """EfficientNet's inverted residual: expand, depthwise, squeeze-excite (SiLU), project, stochastic depth."""

    def __init__(self, inp: int, out: int, kernel: int, stride: int, expand: int, drop: float):
        super().__init__()
        self.use_res_connect = stride == 1 and inp == out
        hidden = inp * expand
        layers: list[nn.Module] = [] if expand == 1 else [_conv_bn(inp, hidden, 1, act=nn.SiLU)]
        layers += [
            _conv_bn(hidden, hidden, kernel, stride, groups=hidden, act=nn.SiLU),
            SqueezeExcitation(hidden, max(1, inp // 4), act=nn.SiLU),
            _conv_bn(hidden, out, 1, act=None),
        ]
        self.block = nn.Sequential(*layers)
        self.stochastic_depth = StochasticDepth(drop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The block's output, plus `x` through stochastic depth where the shape allows a shortcut."""
        out = self.block(x)
        return x + self.stochastic_depth(out) if self.use_res_connect else out


class EfficientNet(nn.Module):
    """EfficientNet-B0: seven MBConv stages, stochastic depth rising to 0.2, dropout 0.2 before the classifier."""

    # (expansion, kernel, stride, output channels, repeats), Table 1.
    STAGES = (
        (1, 3, 1, 16, 1),
        (6, 3, 2, 24, 2),
        (6, 5, 2, 40, 2),
        (6, 3, 2, 80, 3),
        (6, 5, 1, 112, 3),
        (6, 5, 2, 192, 4),
        (6, 3, 1, 320, 1),
    )

    def __init__(self, num_classes: int = 10, stochastic_depth: float = 0.2, dropout: float = 0.2):
        super().__init__()
        layers: list[nn.Module] = [_conv_bn(3, 32, 3, 1, act=nn.SiLU)]
        total = sum(stage[4] for stage in self.STAGES)
        inp, index = 32, 0
        for expand, kernel, stride, out, repeats in self.STAGES:
            blocks = []
            for i in range(repeats):
                # The drop probability rises linearly with the block's index (torchvision's rule).
                blocks.append(MBConv(inp, out, kernel, stride if i == 0 else 1, expand, stochastic_depth * index / total))
                inp, index = out, index + 1
            layers.append(nn.Sequential(*blocks))
        layers.append(_conv_bn(inp, 1280, 1, act=nn.SiLU))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(dropout), nn.Linear(1280, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The logits of a batch of images."""
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


def efficientnet_b0() -> nn.Module:
    """EfficientNet-B0 for CIFAR-10 (stride-1 stem): stochastic depth 0.2, dropout 0.2."""
    return EfficientNet()


# -- DenseNet-BC: Huang et al. 2017, "Densely Connected Convolutional Networks", arXiv:1608.06993 --


class DenseLayer(nn.Module):
    """BN-ReLU-1x1 conv (4k channels), BN-ReLU-3x3 conv (k channels), dropout, on all earlier outputs."""

    def __init__(self, inp: int, growth: int, drop: float):
        super().__init__()
        self.norm1 = nn.BatchNorm2d(inp)
        self.relu1 = nn.ReLU()
        self.conv1 = nn.Conv2d(inp, 4 * growth, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(4 * growth)
        self.relu2 = nn.ReLU()
        self.conv2 = nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)
        self.dropout = nn.Dropout(drop)

    def forward(self, features: list[torch.Tensor]) -> torch.Tensor:
        """The layer's k new channels, from the concatenation of `features`."""
        x = torch.cat(features, 1)
        x = self.conv1(self.relu1(self.norm1(x)))
        return self.dropout(self.conv2(self.relu2(self.norm2(x))))


class DenseBlock(nn.Module):
    """Each layer reads the concatenation of the block's input and every earlier layer's output."""

    def __init__(self, layers: int, inp: int, growth: int, drop: float):
        super().__init__()
        self.layers = nn.ModuleList(DenseLayer(inp + i * growth, growth, drop) for i in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The block's input and every layer's output, concatenated."""
        features = [x]
        for layer in self.layers:
            features.append(layer(features))
        return torch.cat(features, 1)


class DenseNet(nn.Module):
    """DenseNet-BC for CIFAR: three dense blocks joined by BN-ReLU-1x1 conv-average-pool transitions (compression 0.5)."""

    def __init__(self, depth: int = 40, growth: int = 12, num_classes: int = 10, drop: float = 0.2):
        super().__init__()
        per_block = (depth - 4) // 6  # bottleneck layers count two convolutions each
        channels = 2 * growth
        self.conv0 = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        stages: list[nn.Module] = []
        for block in range(3):
            stages.append(DenseBlock(per_block, channels, growth, drop))
            channels += per_block * growth
            if block < 2:
                out = channels // 2
                stages.append(
                    nn.Sequential(nn.BatchNorm2d(channels), nn.ReLU(), nn.Conv2d(channels, out, 1, bias=False), nn.AvgPool2d(2))
                )
                channels = out
        self.features = nn.Sequential(*stages)
        self.norm = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The logits of a batch of images."""
        x = self.relu(self.norm(self.features(self.conv0(x))))
        return self.classifier(torch.flatten(self.avgpool(x), 1))


def densenet_bc() -> nn.Module:
    """DenseNet-BC-40 (k = 12) for CIFAR-10, with the paper's dropout 0.2 after each 3x3 convolution."""
    return DenseNet()


# -- ResNeXt: Xie et al. 2017, "Aggregated Residual Transformations", arXiv:1611.05431 ------------


class ResNeXtBlock(nn.Module):
    """A bottleneck whose 3x3 convolution has `cardinality` groups (the paper's form (c), Fig. 3)."""

    def __init__(self, inp: int, out: int, stride: int, cardinality: int, group_width: int):
        super().__init__()
        width = cardinality * group_width
        self.conv1 = nn.Conv2d(inp, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, groups=cardinality, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or inp != out:
            self.downsample = nn.Sequential(nn.Conv2d(inp, out, 1, stride, bias=False), nn.BatchNorm2d(out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The bottleneck's output plus the shortcut, through ReLU."""
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class ResNeXt(nn.Module):
    """ResNeXt-29 for CIFAR (Section 5.2's shape): three stages of three blocks, the width doubling per stage."""

    # The three stages, set by name in __init__.
    layer1: nn.Sequential
    layer2: nn.Sequential
    layer3: nn.Sequential

    def __init__(self, cardinality: int = 8, group_width: int = 4, num_classes: int = 10, blocks: int = 3):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        inp = 64
        for stage in range(3):
            out = 256 * 2**stage // 4
            units = [
                ResNeXtBlock(inp if i == 0 else out, out, 2 if stage and i == 0 else 1, cardinality, group_width * 2**stage)
                for i in range(blocks)
            ]
            setattr(self, f"layer{stage + 1}", nn.Sequential(*units))
            inp = out
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inp, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The logits of a batch of images."""
        x = self.layer3(self.layer2(self.layer1(self.relu(self.bn1(self.conv1(x))))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnext29() -> nn.Module:
    """ResNeXt-29 (8 x 4d, a quarter of the paper's widths) for CIFAR-10: grouped 3x3 convolutions."""
    return ResNeXt()


# -- SqueezeNet 1.1: Iandola et al. 2016, "SqueezeNet", arXiv:1602.07360 ------------------------------


class Fire(nn.Module):
    """Squeeze (1x1) then expand into 1x1 and 3x3 convolutions whose outputs are concatenated."""

    def __init__(self, inp: int, squeeze: int, expand1x1: int, expand3x3: int):
        super().__init__()
        self.squeeze = nn.Conv2d(inp, squeeze, 1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze, expand1x1, 1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze, expand3x3, 3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The two expansions of the squeezed input, concatenated."""
        x = self.squeeze_activation(self.squeeze(x))
        return torch.cat((self.expand1x1_activation(self.expand1x1(x)), self.expand3x3_activation(self.expand3x3(x))), 1)


class SqueezeNet(nn.Module):
    """SqueezeNet 1.1: eight fire modules between three max poolings; dropout 0.5, a 1x1 conv classifier."""

    def __init__(self, num_classes: int = 10, dropout: float = 0.5):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, 1, 1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(64, 16, 64, 64),
            Fire(128, 16, 64, 64),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(128, 32, 128, 128),
            Fire(256, 32, 128, 128),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(256, 48, 192, 192),
            Fire(384, 48, 192, 192),
            Fire(384, 64, 256, 256),
            Fire(512, 64, 256, 256),
        )
        self.classifier = nn.Sequential(
            nn.Dropout(dropout), nn.Conv2d(512, num_classes, 1), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The logits of a batch of images."""
        return torch.flatten(self.classifier(self.features(x)), 1)


def squeezenet1_1() -> nn.Module:
    """SqueezeNet 1.1 for CIFAR-10 (stride-1 stem), dropout 0.5."""
    return SqueezeNet()


# -- Transformer encoders: Vaswani et al. 2017 (arXiv:1706.03762), Dosovitskiy et al. 2021 (ViT, -----
# -- arXiv:2010.11929) -----------------------------------------------------------------------------


class VisionTransformer(nn.Module):
    """ViT: 4x4 patches, a class token, learned positions, pre-norm encoder layers and a linear head.

    The patches are embedded by a strided convolution; the positions carry dropout; the encoder
    layers use GELU, with dropout on attention weights and after each sublayer; a LayerNorm
    comes before the head, which reads the class token.
    """

    def __init__(
        self,
        image: int = 32,
        patch: int = 4,
        dim: int = 128,
        depth: int = 4,
        heads: int = 4,
        mlp: int = 256,
        dropout: float = 0.1,
        num_classes: int = 10,
    ):
        super().__init__()
        self.conv_proj = nn.Conv2d(3, dim, patch, patch)
        self.class_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embedding = nn.Parameter(torch.empty(1, (image // patch) ** 2 + 1, dim).normal_(std=0.02))
        self.dropout = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(dim, heads, mlp, dropout, activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The logits of a batch of images, read from the class token."""
        x = self.conv_proj(x).flatten(2).transpose(1, 2)
        x = torch.cat((self.class_token.expand(x.shape[0], -1, -1), x), dim=1)
        x = self.encoder(self.dropout(x + self.pos_embedding))
        return self.head(self.ln(x[:, 0]))


def vit_tiny() -> nn.Module:
    """A ViT for 32x32 images: 4x4 patches, width 128, 4 layers of 4 heads, dropout 0.1."""
    return VisionTransformer()


class TextClassifier(nn.Module):
    """A text classifier: embeddings, `nn.TransformerEncoder`, mean pooling, a linear head.

    Token and learned position embeddings with dropout; the encoder is post-norm, as in Vaswani
    et al., with dropout 0.1 on attention weights and after each sublayer.
    """

    def __init__(
        self,
        vocab: int = TEXT_VOCAB,
        length: int = TEXT_LENGTH,
        dim: int = 128,
        heads: int = 4,
        ffn: int = 512,
        layers: int = 2,
        dropout: float = 0.1,
        num_classes: int = 4,
    ):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(length, dim)
        self.dropout = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(dim, heads, ffn, dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.classifier = nn.Linear(dim, num_classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """The logits of a batch of token ids."""
        where = torch.arange(ids.shape[1], device=ids.device)
        x = self.dropout(self.tokens(ids) + self.positions(where))
        return self.classifier(self.encoder(x).mean(1))


def text_transformer() -> nn.Module:
    """A text classifier on `nn.TransformerEncoder`: 2 layers of width 128, 4 classes, dropout 0.1."""
    return TextClassifier()
