"""ResNet-18 for CIFAR at batch 8, every strategy at 100, 70, 50 and 35 % of keep-all, run for real.

Slow (several minutes: solves of 10 s and about twenty real training steps), run by `make test-slow`.
Times are not asserted (the benchmark measures them); the invariants are.
"""

import pytest

torch = pytest.importorskip("torch")

from poetsim.inputs.profiles import load_platform  # noqa: E402
from poetsim.pytorch import models  # noqa: E402
from poetsim.pytorch.capturing import capture  # noqa: E402
from poetsim.pytorch.validate import validate_run  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def validation(tmp_path_factory):
    torch.manual_seed(0)
    resnet = capture(models.resnet18_cifar(), (torch.randn(8, 3, 32, 32),), name="resnet18_cifar")
    return validate_run(
        resnet, load_platform("rpi4"), time_limit_s=10, swap_dir=tmp_path_factory.mktemp("swap"), threads=1, repeats=1
    )


def test_every_run_has_bitwise_gradients_and_the_predicted_peak_within_its_budget(validation):
    executed = [row for row in validation.rows if row.measured_runtime_s is not None]
    assert len(executed) >= 12  # 5 strategies x 4 budgets, less keep-all below 100 % and what finds no schedule
    for row in executed:
        assert row.gradients_equal and row.buffers_equal, row
        assert row.peak_equal and row.within_budget, row
        assert (row.measured_bytes_written, row.measured_bytes_read) == (row.predicted_bytes_written, row.predicted_bytes_read)


def test_the_budgets_are_met_with_paging_and_recomputation(validation):
    """Below keep-all the schedules really page and recompute: the executor moved bytes and recomputed."""
    executed = [row for row in validation.rows if row.measured_runtime_s is not None and row.ram != "100%"]
    assert any(row.page_outs for row in executed) and any(row.recomputations for row in executed)


@pytest.mark.parametrize(
    "factory, batch",
    [
        (models.mobilenet_v2, lambda: torch.randn(1, 3, 224, 224)),
        (models.transformer, lambda: torch.randint(0, 8192, (1, 128))),
    ],
)
def test_mobilenet_and_transformer_run_as_scheduled_with_bitwise_gradients(tmp_path, factory, batch):
    """MobileNetV2 and the transformer run as scheduled, with bitwise gradients and the predicted peak.

    Their nodes hold what autograd saves (ReLU6's copy of its input, the attention kernel's
    inputs and output, the output projection apart): recomputed, paged or kept, the step gives
    the plain step's gradients and exactly the predicted peak.
    """
    torch.manual_seed(0)
    captured = capture(factory(), (batch(),), name=factory.__name__)
    result = validate_run(
        captured,
        load_platform("rpi4"),
        rams=("100%", "50%"),
        time_limit_s=5,
        swap_dir=tmp_path,
        strategies=["keep-all", "checkpoint-sqrt", "paging-only", "hybrid"],
        threads=1,
        repeats=1,
        durable=False,
    )
    executed = [row for row in result.rows if row.measured_runtime_s is not None]
    assert any(row.recomputations for row in executed)
    for row in executed:
        assert row.gradients_equal and row.buffers_equal and row.peak_equal and row.within_budget, row
