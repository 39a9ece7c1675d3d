"""A model written outside poetsim, for `poetsim train`: residual blocks with GELU and batch norm."""

import torch
from torch import nn


class Residual(nn.Module):
    """Two 3x3 convolutions with batch norm and GELU, and the identity added before the last GELU."""

    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.norm1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.norm2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """`x` plus the branch, through GELU."""
        y = nn.functional.gelu(self.norm1(self.conv1(x)))
        return nn.functional.gelu(x + self.norm2(self.conv2(y)))


class SmallResNet(nn.Module):
    """A stem, two residual blocks of `width` channels, global average pooling and a linear head."""

    def __init__(self, width: int = 8, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, padding=1, bias=False), nn.BatchNorm2d(width), nn.GELU())
        self.blocks = nn.Sequential(Residual(width), Residual(width))
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The logits of a batch of images."""
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


def small_resnet() -> nn.Module:
    return SmallResNet()


class MaskedEncoder(nn.Module):
    """Token ids and a bool padding mask in: an encoder layer that ignores the padded tokens."""

    def __init__(self, vocabulary: int = 50, width: int = 16):
        super().__init__()
        self.embed = nn.Embedding(vocabulary, width)
        self.encoder = nn.TransformerEncoderLayer(width, 2, 2 * width, batch_first=True)
        self.fc = nn.Linear(width, 3)

    def forward(self, tokens, padding):
        """The logits of each sequence, its padded tokens left out."""
        h = self.encoder(self.embed(tokens), src_key_padding_mask=padding)
        return self.fc(h.masked_fill(padding.unsqueeze(-1), 0).sum(1))


def masked_encoder() -> nn.Module:
    """The factory `poetsim import-torch outside_model:masked_encoder` calls."""
    return MaskedEncoder()


def frozen_mlp() -> nn.Module:
    """An MLP whose every parameter is frozen: nothing of it trains."""
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    model.requires_grad_(False)
    return model


def parameter_free() -> nn.Module:
    """A model with no parameters at all."""
    return nn.Sequential(nn.ReLU(), nn.Softmax(-1))
