"""The weights and the batch of a device step: float32, seeded, the same on host and device.

Weights follow PyTorch's default initialisation of dense and convolution layers, uniform in
+-1/sqrt(fan-in) for weights and biases alike. Batch norm's scale and shift, which PyTorch starts
at 1 and 0, are drawn around those (uniform in [0.5, 1.5] and +-0.5), so that a step's gradients
depend on both. The batch is standard-normal data and uniform class labels. All come from one
seed, so that a step can be run again bit for bit.
"""

from dataclasses import dataclass
from math import prod, sqrt

import numpy as np

from poetsim.device.program import DeviceProgram


@dataclass(frozen=True)
class StepTensors:
    """What a step reads besides activations: the flat weights, the data and the labels."""

    weights: np.ndarray  # float32, every layer's weights then bias, in program order
    data: np.ndarray  # float32, the input shape
    labels: np.ndarray  # int32, one per loss row

    def weight_bytes(self) -> bytes:
        """The weights region: every layer's weights, then its bias, as little-endian float32."""
        return self.weights.astype("<f4").tobytes()

    def batch_bytes(self) -> bytes:
        """The input node's output: the data, then the labels (as the graph sizes it)."""
        return self.data.astype("<f4").tobytes() + self.labels.astype("<i4").tobytes()


def make_tensors(program: DeviceProgram, seed: int = 0) -> StepTensors:
    """Seeded weights and batch for `program`."""
    rng = np.random.default_rng(seed)
    weights = np.empty(program.weight_floats, dtype=np.float32)
    for block in program.params:
        span = slice(block.offset, block.offset + block.floats)
        if block.scale_shift:
            weights[span] = np.concatenate([rng.uniform(0.5, 1.5, block.bias), rng.uniform(-0.5, 0.5, block.bias)])
            continue
        bound = 1.0 / sqrt(prod(block.weight_shape[1:]))
        weights[span] = rng.uniform(-bound, bound, block.floats)
    data = rng.standard_normal(program.input_shape).astype(np.float32)
    labels = rng.integers(0, program.classes, program.labels).astype(np.int32)
    return StepTensors(weights, data, labels)
