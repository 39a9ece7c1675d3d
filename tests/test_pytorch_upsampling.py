"""`F.interpolate` and `nn.MultiLabelMarginLoss` traced as eager runs them: scheduled steps give the plain step's gradients.

torch's Python decompositions of the linear, bilinear, bicubic and trilinear modes round
differently from the C++ kernels that eager runs; the capture keeps the C++ kernels.
"""

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from pytorch_cases import recompute_and_page, run_recomputed_and_paged  # noqa: E402
from torch import nn  # noqa: E402

from poetsim.inputs.profiles import load_platform  # noqa: E402
from poetsim.pytorch.capturing import capture  # noqa: E402
from poetsim.pytorch.executor import execute  # noqa: E402
from poetsim.schedule.checker import check_schedule  # noqa: E402
from poetsim.schedule.costs import node_costs  # noqa: E402
from poetsim.schedule.model import Timing  # noqa: E402


class Upsampled(nn.Module):
    """Convolution, `F.interpolate` with `mode` and `scale`, convolution, classifier, in `dims` spatial dimensions."""

    def __init__(self, dims: int, mode: str, scale: float):
        super().__init__()
        conv = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}[dims]
        self.first, self.second = conv(3, 4, 3, padding=1), conv(4, 4, 3, padding=1)
        self.fc = nn.Linear(4, 5)
        self.mode, self.scale = mode, scale

    def forward(self, x):
        """The logits of a batch."""
        options = {} if self.mode.startswith("nearest") else {"align_corners": False}
        h = F.interpolate(self.first(x), scale_factor=self.scale, mode=self.mode, **options)
        return self.fc(self.second(h).flatten(2).mean(-1))


@pytest.mark.parametrize(
    ("dims", "mode", "scale"),
    [(1, "linear", 2.0), (2, "bilinear", 2.0), (2, "bicubic", 1.5), (2, "nearest", 2.0), (3, "trilinear", 2.0)],
)
def test_an_interpolation_recomputed_and_paged_gives_bitwise_gradients(tmp_path, dims, mode, scale):
    """Every mode's node recomputed or paged: the plain step's bits (linear ones differed when decomposed)."""
    torch.manual_seed(0)
    shape = (2, 3) + (6,) * dims
    captured = capture(Upsampled(dims, mode, scale), (torch.randn(shape),), name=mode)
    costs = node_costs(captured.graph, load_platform("rpi4"))
    schedule = recompute_and_page(captured.graph, costs)
    check_schedule(schedule, captured.graph, costs, Timing.OVERLAP)
    result = execute(captured, schedule, tmp_path)
    assert result.gradients_equal, result.differing_gradients
    assert any(r.kind in ("recompute", "page_out") for r in result.records)


def test_multilabel_margin_loss_runs_its_eager_kernels_and_steps_bitwise(tmp_path):
    """The decomposition of the loss in torch reads past a row's -1 end marker; the C++ kernels do not."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 4))
    labels = torch.tensor([[0, 3, -1, 0], [1, -1, 0, 0]])
    captured = capture(net, (torch.randn(2, 6),), loss=nn.MultiLabelMarginLoss(), labels=labels, name="multilabel")
    result, predicted = run_recomputed_and_paged(captured, tmp_path, ("0",))
    assert result.gradients_equal, result.differing_gradients
    assert result.peak_activation_bytes == predicted.peak_ram_bytes
