"""Small torch models with random weights: the targets of `poetsim import-torch` and its tests.

torchvision's own wheel on this project's package index is a CUDA build that cannot load
beside the CPU build of torch, so the two torchvision architectures poetsim measures itself
against are written here in plain `torch.nn`, layer for layer and with torchvision's module
names (`layer1.0.conv1`, `features.3.conv.1.0`), so that imported node names read as they
would with torchvision. Dropout is left out (probability 0), as in poetsim's zoo, so that each
imported graph is the zoo's network (`poetsim.pytorch.architectures` has models with their
dropout). Nothing is downloaded: every factory builds its model with random weights from
torch's default initialisation.

Each factory takes no argument, so `poetsim import-torch poetsim.pytorch.models:resnet18_cifar`
can name it.
"""

import torch
from torch import nn


class BasicBlock(nn.Module):
    """ResNet-18's block, as torchvision writes it: one ReLU module called twice."""

    def __init__(self, inplanes: int, planes: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = None
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False), nn.BatchNorm2d(planes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The two convolutions plus the shortcut, through ReLU."""
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    """torchvision's ResNet with basic blocks; `cifar` puts a 3x3 stem and no max pooling first."""

    # The four stages, set by name in __init__.
    layer1: nn.Sequential
    layer2: nn.Sequential
    layer3: nn.Sequential
    layer4: nn.Sequential

    def __init__(self, blocks=(2, 2, 2, 2), num_classes: int = 1000, cifar: bool = False):
        super().__init__()
        if cifar:
            self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        else:
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.Identity() if cifar else nn.MaxPool2d(3, 2, 1)
        inplanes = 64
        for stage, count in enumerate(blocks):
            planes = 64 * 2**stage
            layers = []
            for i in range(count):
                layers.append(BasicBlock(inplanes, planes, 2 if stage > 0 and i == 0 else 1))
                inplanes = planes
            setattr(self, f"layer{stage + 1}", nn.Sequential(*layers))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inplanes, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The logits of a batch of images."""
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet18() -> nn.Module:
    """The resnet18 of torchvision (ImageNet, 1000 classes, 11,689,512 parameters)."""
    return ResNet()


def resnet18_cifar() -> nn.Module:
    """ResNet-18 for CIFAR-10 (POET's main model): 3x3 stem, no max pooling, 10 classes.

    The same network as kuangliu/pytorch-cifar's ResNet18 and poetsim's zoo `resnet18_cifar`
    (11,173,962 parameters), with torchvision's module names.
    """
    return ResNet(num_classes=10, cifar=True)


def _conv_bn(inp: int, out: int, kernel: int, stride: int, groups: int = 1, relu: bool = True) -> nn.Sequential:
    """Convolution, BatchNorm and (optionally) ReLU6: torchvision's Conv2dNormActivation."""
    layers = [nn.Conv2d(inp, out, kernel, stride, kernel // 2, groups=groups, bias=False), nn.BatchNorm2d(out)]
    if relu:
        layers.append(nn.ReLU6(inplace=True))
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    """MobileNetV2's block: expand (1x1), depthwise (3x3), project (1x1, linear), maybe a shortcut."""

    def __init__(self, inp: int, out: int, stride: int, expand_ratio: int):
        super().__init__()
        hidden = inp * expand_ratio
        self.use_res_connect = stride == 1 and inp == out
        layers: list[nn.Module] = [] if expand_ratio == 1 else [_conv_bn(inp, hidden, 1, 1)]
        layers += [
            _conv_bn(hidden, hidden, 3, stride, groups=hidden),
            nn.Conv2d(hidden, out, 1, 1, 0, bias=False),
            nn.BatchNorm2d(out),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The block's output, plus `x` where the shape allows a shortcut."""
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    """torchvision's mobilenet_v2 at width 1.0 (3,504,872 parameters), dropout left out."""

    def __init__(self, num_classes: int = 1000):
        super().__init__()
        features: list[nn.Module] = [_conv_bn(3, 32, 3, 2)]
        inp = 32
        # (expansion t, output channels c, repeats n, first stride s), Sandler et al. 2018, Table 2.
        blocks = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))
        for t, c, n, s in blocks:
            for i in range(n):
                features.append(InvertedResidual(inp, c, s if i == 0 else 1, t))
                inp = c
        features.append(_conv_bn(inp, 1280, 1, 1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Linear(1280, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The logits of a batch of images."""
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(torch.flatten(x, 1))


def mobilenet_v2() -> nn.Module:
    """The mobilenet_v2 of torchvision (ImageNet, 1000 classes)."""
    return MobileNetV2()


class TransformerClassifier(nn.Module):
    """Token and learned position embeddings, LayerNorm, `nn.TransformerEncoder`, a head on token 0.

    With the defaults it is poetsim's zoo `transformer`: 4 post-norm layers of width 256, 4
    heads, FFN 1024, GELU, vocabulary 8192, 512 positions, 2 classes (5,388,290 parameters).
    """

    def __init__(
        self,
        vocab: int = 8192,
        positions: int = 512,
        dim: int = 256,
        heads: int = 4,
        ffn: int = 1024,
        layers: int = 4,
        classes: int = 2,
    ):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(positions, dim)
        self.ln = nn.LayerNorm(dim)
        layer = nn.TransformerEncoderLayer(dim, heads, ffn, dropout=0.0, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.classifier = nn.Linear(dim, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """The logits of a batch of token ids, read from token 0."""
        where = torch.arange(ids.shape[1], device=ids.device)
        x = self.ln(self.tokens(ids) + self.positions(where))
        return self.classifier(self.encoder(x)[:, 0])


def transformer() -> nn.Module:
    """The zoo's small Transformer encoder classifier (takes int64 token ids, seq 128 in the zoo)."""
    return TransformerClassifier()


def mlp() -> nn.Module:
    """The zoo's MLP: flattened 28x28 images through 512 and 256 ReLU units to 10 classes."""
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 10))


def tiny_cnn() -> nn.Module:
    """A residual CNN small enough for tests: conv-BN-ReLU, one basic block, pooling, a classifier."""
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU(inplace=True),
        BasicBlock(8, 8),
        nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 10),
    )
