"""Train with a schedule: the scheduled module trains bitwise as plain PyTorch does, in an ordinary loop."""

import copy
import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
from pytorch_cases import recompute_and_page  # noqa: E402
from torch import Tensor, nn  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from poetsim.cli import app  # noqa: E402
from poetsim.errors import UserInputError  # noqa: E402
from poetsim.inputs.profiles import load_platform  # noqa: E402
from poetsim.pytorch import models  # noqa: E402
from poetsim.pytorch.capturing import capture  # noqa: E402
from poetsim.pytorch.reference import same_bits  # noqa: E402
from poetsim.pytorch.source import ModelSource  # noqa: E402
from poetsim.pytorch.training import fit, scheduled  # noqa: E402
from poetsim.pytorch.trial import make_optimizer, run_trial  # noqa: E402
from poetsim.schedule.checker import check_schedule  # noqa: E402
from poetsim.schedule.costs import node_costs  # noqa: E402
from poetsim.schedule.model import Compute, Timing  # noqa: E402

SHAPE = (4, 3, 8, 8)


class Net(nn.Module):
    """Batch norm, 2-d dropout, a residual block, dropout: what a recomputed forward could get wrong."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.Dropout2d(0.15),
            models.BasicBlock(8, 8),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Dropout(0.45),
        )
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        """The logits of a batch of images."""
        return self.fc(self.features(x))


def batches(count: int, shape=SHAPE, seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    return [(torch.randn(shape, generator=generator), torch.randint(0, 10, shape[:1], generator=generator)) for _ in range(count)]


@pytest.fixture(scope="module")
def saved():
    """A checked schedule of Net at batch 4 that recomputes and pages; the budget is its peak.

    Dropout is among what it recomputes; the budget is its peak to the byte.
    """
    torch.manual_seed(0)
    captured = capture(Net(), (torch.randn(SHAPE),), labels=torch.zeros(4, dtype=torch.int64), name="Net")
    costs = node_costs(captured.graph, load_platform("rpi4"))
    random = {k for k, program in enumerate(captured.programs) if program.random}
    schedule = recompute_and_page(captured.graph, costs, prefer=random)
    figures = check_schedule(schedule, captured.graph, costs, Timing.OVERLAP)
    recomputed = {ins.node for t, ins in schedule.instructions() if isinstance(ins, Compute) and ins.node < t}
    assert recomputed & random and figures.page_outs > 0
    return schedule, int(figures.peak_ram_bytes)


def wrapped(saved, tmp_path, model=None, **options):
    schedule, peak = saved
    torch.manual_seed(0)
    model = model or Net()
    example = (torch.randn(SHAPE),)
    options = {"ram": str(peak), "runtime": "10x", "swap_dir": tmp_path, "threads": 1, **options}
    return scheduled(model, example, labels=torch.zeros(4, dtype=torch.int64), schedule=schedule, **options)


def train_plain(model, data, optimizer, micro: int = 1):
    loss_of = nn.CrossEntropyLoss()
    opt = make_optimizer(optimizer, model.parameters())
    torch.manual_seed(5)
    for start in range(0, len(data), micro):
        opt.zero_grad(set_to_none=True)
        for x, y in data[start : start + micro]:
            (loss_of(model(x), y) / micro).backward()
        opt.step()


@pytest.fixture
def deterministic():
    before = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    yield
    torch.set_num_threads(before[0])
    torch.use_deterministic_algorithms(before[1])


def assert_same_state(plain: nn.Module, trained: nn.Module) -> None:
    ours = trained.state_dict()
    differing = [name for name, value in plain.state_dict().items() if not same_bits(value, ours[name])]
    assert not differing, differing


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_twenty_scheduled_steps_train_bitwise_as_plain_pytorch(saved, tmp_path, deterministic, optimizer):
    """Twenty scheduled steps train bitwise as plain PyTorch does, at the predicted peak.

    SGD with momentum and Adam: parameters, BatchNorm running statistics and num_batches_tracked
    bitwise equal after 20 steps with dropout recomputed and tensors paged; every step's
    measured activation peak equals the prediction, which is the budget.
    """
    model = wrapped(saved, tmp_path)
    plain = copy.deepcopy(model.model)
    data = batches(20)
    train_plain(plain, data, optimizer)
    torch.manual_seed(5)
    records = fit(model, data, make_optimizer(optimizer, model.parameters()))
    assert len(records) == 20
    assert_same_state(plain, model.model)
    assert {r.peak_activation_bytes for r in records} == {model.plan.predicted.peak_ram_bytes} == {model.plan.budget_bytes}
    assert all(r.recomputations > 0 and r.bytes_written > 0 for r in records)
    assert not list(tmp_path.glob("*.bin")), "no page file is left behind"


def test_gradient_accumulation_over_micro_batches_matches_plain(saved, tmp_path, deterministic):
    """Gradient accumulation over micro-batches matches plain PyTorch.

    loss / 2 over two micro-batches per optimiser step: the scheduled backward starts from the
    loss's own gradient (0.5), and autograd accumulates into .grad as for the original.
    """
    model = wrapped(saved, tmp_path)
    plain = copy.deepcopy(model.model)
    data = batches(6)
    train_plain(plain, data, "sgd", micro=2)
    opt = make_optimizer("sgd", model.parameters())
    torch.manual_seed(5)
    for start in range(0, 6, 2):
        opt.zero_grad(set_to_none=True)
        for x, y in data[start : start + 2]:
            (model(x, y) / 2).backward()
        opt.step()
    assert_same_state(plain, model.model)


class _PerSampleMean(nn.Module):
    def forward(self, out, y):
        return nn.functional.cross_entropy(out[:, :10], y, reduction="none").mean()


class _MainAndAux(nn.Module):
    def forward(self, out, y):
        return nn.functional.cross_entropy(out[:, :10], y) + 0.4 * nn.functional.cross_entropy(out[:, 10:], y)


@pytest.mark.parametrize(
    "loss", [nn.CrossEntropyLoss(label_smoothing=0.1), _PerSampleMean(), _MainAndAux()], ids=["smoothed", "mean", "aux"]
)
def test_a_scaled_loss_whose_gradient_ops_read_no_activation_trains_with_its_scale(tmp_path, deterministic, loss):
    """The backward of these losses starts with ops of the loss's gradient alone (the mean's divide, the weights).

    `(loss / 2).backward()` and `backward(gradient)` give plain PyTorch's gradients, bit for bit:
    those ops run from the loss's own gradient, not from the 1 of the capture.
    """
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 20))
    plain = copy.deepcopy(net)
    x, y = torch.randn(8, 16), torch.randint(0, 10, (8,))
    model = scheduled(net, x, labels=y, loss=loss, strategy="keep-all", ram="100%", swap_dir=tmp_path, threads=1)
    (loss(plain(x), y) / 2).backward()
    (model(x, y) / 2).backward()
    loss(plain(x), y).backward(torch.tensor(0.3))
    model(x, y).backward(torch.tensor(0.3))
    grads = [(a.grad, b.grad) for a, b in zip(plain.parameters(), net.parameters())]
    assert all(a is not None and b is not None and same_bits(a, b) for a, b in grads)


def test_the_gradient_of_a_mean_over_the_output_is_made_in_the_backward_not_held_beside_the_parameters():
    """`((out - x) ** 2).mean()`: the mean's backward divides an output-sized tensor each step.

    The capture makes it in the loss's backward node (counted, freed after); only the expand,
    a view of the loss's gradient with no bytes of its own, stays static.
    """
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1))

    class Squared(nn.Module):
        def forward(self, out, y):
            return ((out - y) ** 2).mean()

    x = torch.randn(4, 3, 16, 16)
    captured = capture(net, (x,), loss=Squared(), labels=x.clone(), name="ae")
    big = [n for n in captured.static_ops if n.meta["val"].numel() >= x.numel()]
    ops = [n.target for n in big]
    assert ops and all(isinstance(op, torch._ops.OpOverload) and op._schema.returns[0].alias_info is not None for op in ops)


def test_outside_training_the_wrapper_is_the_plain_model(saved, tmp_path):
    """Evaluation mode and no_grad run the original forward: its output, or its loss with labels."""
    model = wrapped(saved, tmp_path)
    x, y = batches(1)[0]
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(x), model.model(x))
        assert torch.equal(model(x, y), nn.functional.cross_entropy(model.model(x), y))
    model.train()
    with pytest.raises(UserInputError, match=r"called with the inputs and the labels"):
        model(x)


def test_a_batch_of_another_shape_is_one_line_naming_both(saved, tmp_path):
    model = wrapped(saved, tmp_path)
    x, y = batches(1, shape=(2, 3, 8, 8))[0]
    with pytest.raises(
        UserInputError, match=r"the batch is float32\[2,3,8,8\], int64\[2\], .* float32\[4,3,8,8\], int64\[4\]"
    ) as error:
        model(x, y)
    assert "\n" not in str(error.value) and "on_new_shape='solve'" in str(error.value)


def test_a_new_shape_is_solved_for_when_asked(tmp_path, deterministic):
    """on_new_shape='solve': the last, smaller batch of an epoch gets its own checked schedule."""
    torch.manual_seed(0)
    net = Net()
    plain = copy.deepcopy(net)
    model = scheduled(
        net,
        (torch.randn(SHAPE),),
        ram="100%",
        runtime="10x",
        strategy="checkpoint-sqrt",
        swap_dir=tmp_path,
        threads=1,
        on_new_shape="solve",
    )
    data = batches(2) + batches(1, shape=(2, 3, 8, 8), seed=2)
    train_plain(plain, data, "sgd")
    torch.manual_seed(5)
    records = fit(model, data, make_optimizer("sgd", model.parameters()))
    assert_same_state(plain, model.model)
    assert records[-1].peak_activation_bytes < records[0].peak_activation_bytes


def test_state_dict_saves_and_restores_as_the_original(saved, tmp_path):
    model = wrapped(saved, tmp_path)
    original = model.model
    assert list(model.state_dict()) == list(original.state_dict())
    torch.save(model.state_dict(), tmp_path / "state.pt")
    fit(model, batches(2), make_optimizer("sgd", model.parameters()))
    trained = copy.deepcopy(original.state_dict())
    model.load_state_dict(torch.load(tmp_path / "state.pt"))
    restored = Net()
    restored.load_state_dict(torch.load(tmp_path / "state.pt"))
    assert_same_state(restored, original)
    assert not all(same_bits(trained[name], value) for name, value in original.state_dict().items())


class _Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        y = self.fc(x)
        return y * 2 if y.sum() > 0 else y


def test_a_model_the_capture_cannot_follow_is_refused_in_one_line(tmp_path):
    with pytest.raises(UserInputError, match=r"_Branchy: the model: data-dependent control flow") as error:
        scheduled(_Branchy(), torch.randn(3, 4), swap_dir=tmp_path)
    assert "\n" not in str(error.value)


def test_a_step_whose_backward_was_overtaken_says_so(saved, tmp_path):
    """Each scheduled step's backward runs before the model's next training call."""
    model = wrapped(saved, tmp_path)
    (x, y), (x2, y2) = batches(2)
    first = model(x, y)
    model(x2, y2)
    with pytest.raises(RuntimeError, match=r"step 1 cannot run: a later call of the model discarded it; .* schedule one module"):
        first.backward()


def test_poetsim_train_on_an_outside_model_equals_plain_training(tmp_path):
    """`poetsim train` on an outside model equals plain training, every peak within the budget.

    The command runs on a model written outside poetsim (residual blocks, GELU, batch norm),
    with POET's hybrid schedule at 50 %.
    """
    result = CliRunner().invoke(
        app,
        [
            "train",
            "outside_model:small_resnet",
            "--input-shape",
            "4,3,8,8",
            "--ram",
            "50%",
            "--strategy",
            "hybrid",
            "--runtime",
            "2x",
            "--steps",
            "20",
            "--time-limit",
            "20",
            "--threads",
            "1",
            "--swap-dir",
            str(tmp_path),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["parameters_equal"] and report["buffers_equal"] and report["strategy"] == "hybrid"
    assert len(report["records"]) == 20 and report["peaks_as_predicted"]
    assert report["max_peak_bytes"] <= report["budget_bytes"] and report["within_budget"]
    assert report["keep_all_peak_bytes"] > report["budget_bytes"]  # plain training's peak, shown beside the schedule's


def test_poetsim_train_refuses_an_unknown_optimiser_before_any_work(tmp_path):
    result = CliRunner().invoke(
        app, ["train", "poetsim.pytorch.models:tiny_cnn", "--input-shape", "2,3,8,8", "--optimizer", "rmsprop"]
    )
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert "--optimizer: use sgd or adam, not 'rmsprop'" in result.output


@pytest.mark.parametrize("factory", ["outside_model:frozen_mlp", "outside_model:parameter_free"])
def test_poetsim_train_refuses_a_model_with_nothing_to_train_in_one_line(tmp_path, factory):
    result = CliRunner().invoke(app, ["train", factory, "--input-shape", "8,4", "--ram", "100%", "--swap-dir", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and f"{factory}: no parameter of the model requires a gradient" in result.output


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_resnet18_trains_twenty_steps_at_half_the_peak_as_plain_pytorch(tmp_path, optimizer):
    """ResNet-18 for CIFAR, batch 8, hybrid at 50 % of keep-all: 20 steps bitwise as plain training."""
    source = ModelSource("poetsim.pytorch.models:resnet18_cifar", ((8, 3, 32, 32),), ("float32",))
    trial = run_trial(
        source, steps=20, optimizer=optimizer, ram="50%", runtime="1.2x", strategy="hybrid", swap_dir=tmp_path, time_limit_s=60
    )
    summary = trial.summary()
    assert trial.parameters_equal and trial.buffers_equal, trial.differing
    assert summary["peaks_as_predicted"] and summary["within_budget"]
    assert any(r.bytes_written for r in trial.records)


@pytest.mark.slow
def test_the_transformer_trains_twenty_steps_at_half_the_peak_recomputing_only(tmp_path):
    """The zoo's transformer (sequence 128, batch 4), recompute-only at 50 %: 20 Adam steps bitwise as plain training."""
    source = ModelSource("poetsim.pytorch.models:transformer", ((4, 128),), ("int64",), 0, 8192)
    trial = run_trial(
        source,
        steps=20,
        optimizer="adam",
        ram="50%",
        runtime="1.5x",
        strategy="recompute-only",
        swap_dir=tmp_path,
        time_limit_s=60,
    )
    summary = trial.summary()
    assert trial.parameters_equal and trial.buffers_equal, trial.differing
    assert summary["peaks_as_predicted"] and summary["within_budget"]
    assert all(r.recomputations > 0 and r.bytes_written == 0 for r in trial.records)


class TiedLM(nn.Module):
    """A language model whose output layer is its embedding (`emb.weight = head.weight`, as GPT-2 ties them)."""

    def __init__(self, vocab: int = 12, width: int = 8):
        super().__init__()
        self.head = nn.Linear(width, vocab, bias=False)
        self.emb = nn.Embedding(vocab, width)
        self.emb.weight = self.head.weight
        self.mix = nn.Linear(width, width)

    def forward(self, ids):
        """Per-token logits."""
        return self.head(torch.tanh(self.mix(self.emb(ids))))


def test_tied_weights_count_once_and_train_bitwise_as_plain_pytorch(tmp_path, deterministic):
    """A parameter under two names: its bytes count once, its gradient is the sum of both uses.

    The trace has an input per name; the executor's gradient of the parameter, recomputed and
    paged, has the plain step's bits, and five Adam steps of scheduled training leave every
    parameter as plain training does.
    """
    from poetsim.pytorch.executor import execute

    torch.manual_seed(0)
    ids = torch.randint(0, 12, (2, 6))
    labels = torch.randint(0, 12, (2, 6))
    captured = capture(TiedLM(), (ids,), labels=labels, name="tied")
    assert sum(node.param_bytes for node in captured.graph.nodes) == (12 * 8 + 8 * 8 + 8) * 4
    costs = node_costs(captured.graph, load_platform("rpi4"))
    schedule = recompute_and_page(captured.graph, costs)
    result = execute(captured, schedule, tmp_path)
    assert result.gradients_equal, result.differing_gradients
    torch.manual_seed(0)
    model = TiedLM()
    plain = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(1)
    data = [tuple(torch.randint(0, 12, (2, 6), generator=generator) for _ in range(2)) for _ in range(5)]
    opt = make_optimizer("adam", plain.parameters())
    for x, y in data:
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(plain(x).flatten(0, 1), y.flatten()).backward()
        opt.step()
    trained = scheduled(model, (ids,), labels=labels, schedule=schedule, ram="100%", runtime="10x", swap_dir=tmp_path, threads=1)
    fit(trained, data, make_optimizer("adam", trained.parameters()))
    assert_same_state(plain, trained.model)


class Tunable(nn.Module):
    """A backbone and a head, with BatchNorm and dropout: what fine-tuning loops freeze, switch and retune."""

    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU())
        self.drop = nn.Dropout(0.1)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        """The logits of a batch of feature vectors."""
        return self.head(self.drop(self.backbone(x)))


def _tune(model, step: int) -> None:
    """What a fine-tuning loop changes between steps: freeze, BatchNorm to eval, dropout's p, unfreeze."""
    target = model.model if hasattr(model, "model") else model
    if step == 1:
        target.backbone[0].requires_grad_(False)
    if step == 2:
        target.backbone[1].eval()
        target.drop.p = 0.5
    if step == 3:
        target.backbone[0].requires_grad_(True)


def test_a_model_changed_after_scheduling_is_solved_again_or_refused_naming_the_change(tmp_path, deterministic):
    """Frozen or unfrozen parameters, a submodule's mode and a dropout's p are captured with the step.

    With on_new_shape='solve' each new state is captured and solved again, and training stays
    bitwise plain PyTorch's; by default the first changed step stops with one line naming the change.
    """
    generator = torch.Generator().manual_seed(1)
    data = [(torch.randn(4, 8, generator=generator), torch.randint(0, 4, (4,), generator=generator)) for _ in range(5)]
    torch.manual_seed(0)
    plain = Tunable()
    model = scheduled(copy.deepcopy(plain), data[0][0], ram="100%", swap_dir=tmp_path, threads=1, on_new_shape="solve")
    opt_plain = make_optimizer("adam", plain.parameters())
    opt = make_optimizer("adam", model.parameters())
    for step, (x, y) in enumerate(data):
        _tune(plain, step)
        _tune(model, step)
        for net, opt_of in ((plain, opt_plain), (model, opt)):
            torch.manual_seed(10 + step)
            opt_of.zero_grad(set_to_none=True)
            loss = model(x, y) if net is model else nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt_of.step()
        record = model.last_step
        assert record is not None
        assert record.peak_activation_bytes == model.plan.predicted.peak_ram_bytes
    assert_same_state(plain, model.model)
    assert sum(map(len, model._plans.values())) == 4  # as scheduled, frozen, BatchNorm in eval with p 0.5, unfrozen
    tunable = Tunable()
    strict = scheduled(tunable, data[0][0], ram="100%", swap_dir=tmp_path, threads=1)
    tunable.drop.p = 0.3
    changed = r"the model changed since its schedule was solved \(drop\.p now 0\.3, captured 0\.1\)"
    with pytest.raises(UserInputError, match=changed):
        strict(*data[0])


def test_a_saved_schedule_of_another_model_is_refused_in_one_line(saved, tmp_path):
    """A schedule solved for Net, handed to a smaller model: one line naming both node counts."""
    other = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 10))
    refused = r"^the saved schedule does not fit this model: the schedule is for 30 nodes but graph 'Sequential' has 5; solve"
    with pytest.raises(UserInputError, match=refused):
        wrapped(saved, tmp_path, model=other)


def test_a_layer_replaced_by_one_of_another_size_is_named_or_solved_for(tmp_path, deterministic):
    """A new head of 5 classes after scheduling a 10-class model: one line naming the changed tensors.

    With on_new_shape='solve' the model is captured and solved again, and trains bitwise as plain.
    """
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10))
    x, y = torch.randn(8, 16), torch.randint(0, 5, (8,))
    options = {"strategy": "keep-all", "ram": "100%", "swap_dir": tmp_path, "threads": 1}
    model = scheduled(net, x, labels=y, **options)
    net[2] = nn.Linear(32, 5)
    with pytest.raises(UserInputError, match=r"2.weight now 5x32 float32, captured 10x32 float32"):
        model(x, y)
    model = scheduled(net, x, labels=y, on_new_shape="solve", **options)
    net[2] = nn.Linear(32, 7)
    plain = copy.deepcopy(net)
    model(x, y).backward()
    nn.CrossEntropyLoss()(plain(x), y).backward()
    grads = [(a.grad, b.grad) for a, b in zip(plain.parameters(), net.parameters())]
    assert all(a is not None and b is not None and same_bits(a, b) for a, b in grads)


class _RunningMean(nn.Module):
    """Keeps a running mean of its features in a buffer it gives a new tensor in each training forward."""

    running: Tensor

    def __init__(self, shape_change: bool = False):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 10)
        self.register_buffer("running", torch.zeros(32))
        self.shape_change = shape_change

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        if self.training:
            new = 0.9 * self.running + 0.1 * h.detach().mean(0)
            self.running = new.unsqueeze(0) if self.shape_change else new
        return self.fc3(torch.relu(self.fc2(h - self.running)))


def test_a_buffer_given_a_new_tensor_in_the_forward_is_updated_as_plain_pytorch_does(tmp_path, deterministic):
    """`self.running = 0.9 * self.running + ...` in the forward: each scheduled step updates the buffer.

    Three recomputing steps leave the buffer, parameters and gradients bitwise as plain PyTorch's;
    a new tensor of another shape is refused in one line naming the buffer.
    """
    torch.manual_seed(0)
    net = _RunningMean()
    plain = copy.deepcopy(net)
    x, y = torch.randn(8, 16), torch.randint(0, 10, (8,))
    model = scheduled(net, x, labels=y, strategy="recompute-only", ram="70%", swap_dir=tmp_path, threads=1)
    for _ in range(3):
        nn.CrossEntropyLoss()(plain(x), y).backward()
        model(x, y).backward()
    assert plain.running.abs().sum() > 0
    assert_same_state(plain, net)
    grads = [(a.grad, b.grad) for a, b in zip(plain.parameters(), net.parameters())]
    assert all(a is not None and b is not None and same_bits(a, b) for a, b in grads)
    with pytest.raises(UserInputError, match=r"gives its buffer 'running' a new tensor of \(1, 32\) torch.float32"):
        scheduled(_RunningMean(shape_change=True), x, labels=y, strategy="keep-all", ram="100%", swap_dir=tmp_path)


def test_a_compiled_model_is_refused_naming_the_module_to_pass(tmp_path):
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10))
    with pytest.raises(UserInputError, match=r"the model is Sequential compiled by torch.compile: pass the module itself"):
        scheduled(torch.compile(net), torch.randn(8, 16), strategy="keep-all", ram="100%", swap_dir=tmp_path)


class _Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(16, 32), nn.Linear(32, 10)

    def forward(self, x, mask=None):
        h = torch.relu(self.a(x))
        if mask is not None:
            h = h.masked_fill(~mask.unsqueeze(-1), 0)
        return self.b(h.mean(1))


def test_keywords_reach_the_plain_model_and_a_differentiated_backward_is_refused(tmp_path):
    """Outside training `model(x, mask=m)` is the plain model's call; in training a keyword is refused in one line.

    A step's gradients cannot be differentiated again (create_graph=True): refused, not returned without a graph.
    """
    torch.manual_seed(0)
    net = _Masked()
    x, m, y = torch.randn(8, 6, 16), torch.rand(8, 6) > 0.3, torch.randint(0, 10, (8,))
    model = scheduled(net, (x, m), labels=y, strategy="keep-all", ram="100%", swap_dir=tmp_path, threads=1)
    model.eval()
    assert torch.equal(model(x, mask=m), net(x, mask=m))
    model.train()
    with pytest.raises(UserInputError, match="takes its inputs positionally, as the example gave them, then the labels"):
        model(x, y, mask=m)
    loss = model(x, m, y)
    with pytest.raises(RuntimeError, match="gradients cannot be differentiated again"):
        torch.autograd.grad(loss, list(net.parameters()), create_graph=True)


class Counted(nn.Module):
    """A classifier that keeps a step counter its training loop sets and a scale its forward reads."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        self.num_updates = 0
        self.scale = 1.0

    def forward(self, x):
        """The logits of a batch of feature vectors, scaled."""
        return self.body(x) * self.scale


def test_an_attribute_the_forward_never_reads_may_change_between_steps(tmp_path, deterministic):
    """A step counter kept on the model trains on the same schedule; a changed attribute the forward reads stops."""
    generator = torch.Generator().manual_seed(2)
    data = [(torch.randn(4, 8, generator=generator), torch.randint(0, 4, (4,), generator=generator)) for _ in range(3)]
    torch.manual_seed(0)
    plain, net = Counted(), Counted()
    net.load_state_dict(plain.state_dict())
    model = scheduled(net, data[0][0], ram="100%", swap_dir=tmp_path, threads=1)
    opt_plain, opt = (torch.optim.SGD(each.parameters(), lr=0.1) for each in (plain, model))
    for step, (x, y) in enumerate(data):
        for counted, opt_of in ((plain, opt_plain), (net, opt)):
            counted.num_updates = step + 1
            opt_of.zero_grad()
        nn.functional.cross_entropy(plain(x), y).backward()
        model(x, y).backward()
        opt_plain.step()
        opt.step()
    assert_same_state(plain, model.model)
    assert sum(map(len, model._plans.values())) == 1
    assert ("", "scale") in (model.plan.reads or ()) and ("", "num_updates") not in (model.plan.reads or ())
    net.scale = 2.0
    with pytest.raises(UserInputError, match=r"changed since its schedule was solved \(scale now 2\.0, captured 1\.0\)"):
        model(*data[0])


def test_autocast_is_part_of_what_a_schedule_was_solved_for(tmp_path, deterministic):
    """A step under autocast that the schedule was solved without is refused in one line; solved for, it is plain PyTorch's."""
    torch.manual_seed(0)
    plain = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x, y = torch.randn(2, 8), torch.tensor([0, 1])
    model = scheduled(copy.deepcopy(plain), x, ram="100%", swap_dir=tmp_path, threads=1)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        with pytest.raises(UserInputError, match=r"autocast on \(torch.bfloat16\), captured off"):
            model(x, y)
        solved = scheduled(copy.deepcopy(plain), x, ram="100%", swap_dir=tmp_path, threads=1)
        solved(x, y).backward()
        nn.functional.cross_entropy(plain(x), y).backward()
    for (name, mine), theirs in zip(solved.model.named_parameters(), plain.parameters()):
        assert mine.grad is not None and theirs.grad is not None and same_bits(mine.grad, theirs.grad), name


def test_an_example_batch_that_is_a_view_is_counted_at_its_own_size(tmp_path):
    """`X[:2]` of a whole data set, or an expanded tensor: the input node holds the batch's bytes, not its base's."""
    data = torch.randn(1000, 8)
    for example in (data[:2], torch.randn(1, 8).expand(2, 8), data[:2].clone()):
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        model = scheduled(net, example, ram="100%", swap_dir=tmp_path, threads=1)
        model(example, torch.tensor([0, 1])).backward()
        record = model.last_step
        assert record is not None
        assert record.peak_activation_bytes == model.plan.predicted.peak_ram_bytes == model.plan.budget_bytes == 464


def test_one_tensor_given_as_two_inputs_or_as_input_and_labels_counts_twice_as_each_step_holds_it(tmp_path):
    """An autoencoder's input is its labels: a step reads each into a buffer of its own, so each counts."""
    torch.manual_seed(0)
    ae = nn.Sequential(nn.Linear(16, 4), nn.ReLU(), nn.Linear(4, 16))
    x = torch.randn(8, 16)
    model = scheduled(ae, x, labels=x, loss=nn.MSELoss(), ram="100%", swap_dir=tmp_path, threads=1)
    batch = torch.randn(8, 16)
    model(batch, batch).backward()
    assert model.last_step is not None
    assert model.last_step.peak_activation_bytes == model.plan.predicted.peak_ram_bytes == model.plan.budget_bytes


class _TimeMajor(nn.Module):
    """An LSTM over time-major input, as `batch.transpose(0, 1)` of a batch-first loader gives it."""

    def __init__(self):
        super().__init__()
        self.rnn, self.fc = nn.LSTM(6, 8), nn.Linear(8, 3)

    def forward(self, x):
        """Logits from the last time step."""
        return self.fc(self.rnn(x)[0][-1])


def test_a_strided_batch_steps_bitwise_as_plain_pytorch(tmp_path, deterministic):
    """The step lays a transposed batch out as the capture did; oneDNN's LSTM reads its input's memory as laid out."""
    torch.manual_seed(0)
    plain = _TimeMajor()
    net = copy.deepcopy(plain)
    batch_first, labels = torch.randn(4, 5, 6), torch.tensor([0, 1, 2, 0])
    model = scheduled(net, batch_first.transpose(0, 1), ram="100%", swap_dir=tmp_path, threads=1)
    model(batch_first.transpose(0, 1), labels).backward()
    nn.CrossEntropyLoss()(plain(batch_first.transpose(0, 1)), labels).backward()
    pairs = [(n, a.grad, b.grad) for (n, a), b in zip(plain.named_parameters(), net.parameters())]
    differing = [n for n, a, b in pairs if a is None or b is None or not same_bits(a, b)]
    assert not differing, differing


def test_a_hook_or_a_loss_changed_after_scheduling_is_solved_again_or_refused_naming_it(tmp_path, deterministic):
    """A forward hook added to a layer, and a loss's label smoothing annealed: both are captured with the step.

    With on_new_shape='solve' the steps stay bitwise plain PyTorch's, the hook's effect included.
    """
    x, y = torch.randn(4, 8), torch.tensor([0, 1, 2, 3])
    torch.manual_seed(0)
    plain = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    loss_plain = nn.CrossEntropyLoss(label_smoothing=0.2)
    net, loss = copy.deepcopy(plain), copy.deepcopy(loss_plain)
    model = scheduled(net, x, loss=loss, labels=y, ram="100%", swap_dir=tmp_path, threads=1, on_new_shape="solve")
    for step in range(3):
        if step == 1:
            for layer in (plain[1], net[1]):
                layer.register_forward_hook(lambda module, args, out: out * 0.5)
        if step == 2:
            loss_plain.label_smoothing = loss.label_smoothing = 0.0
        plain.zero_grad()
        net.zero_grad()
        loss_plain(plain(x), y).backward()
        model(x, y).backward()
        pairs = [(a.grad, b.grad) for a, b in zip(plain.parameters(), net.parameters())]
        assert all(a is not None and b is not None and same_bits(a, b) for a, b in pairs), step
    assert sum(map(len, model._plans.values())) == 3
    other, criterion = copy.deepcopy(plain), nn.CrossEntropyLoss()
    strict = scheduled(other, x, loss=criterion, labels=y, ram="100%", swap_dir=tmp_path, threads=1)
    handle = other[2].register_forward_pre_hook(lambda module, args: None)
    with pytest.raises(UserInputError, match=r"changed since .*\(the forward pre hooks of '2' now 1, captured with 0\)"):
        strict(x, y)
    handle.remove()
    criterion.label_smoothing = 0.1
    with pytest.raises(UserInputError, match=r"changed since .*\(loss\.label_smoothing now 0\.1, captured 0\.0\)"):
        strict(x, y)


def test_the_model_own_mode_decides_a_scheduled_step_and_an_input_that_wants_its_gradient_is_refused(tmp_path):
    """`net.train()` after the wrapper's `eval()` trains scheduled steps again; an input with requires_grad stops in one line."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x, y = torch.randn(4, 8), torch.tensor([0, 1, 2, 3])
    model = scheduled(net, x, ram="100%", swap_dir=tmp_path, threads=1)
    model.eval()
    model(x, y)
    assert model.last_step is None and model.loss_function.training  # the loss keeps its own mode
    net.train()
    model(x, y).backward()
    assert model.last_step is not None and model.last_step.step == 1
    with pytest.raises(UserInputError, match=r"input 0 requires its gradient .* through the plain model"):
        model(x.clone().requires_grad_(), y)


_COPIED = """
import copy, pickle, sys, torch
from torch import nn
from poetsim.pytorch import scheduled
from poetsim.pytorch.reference import same_bits
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
plain = copy.deepcopy(net)
model = scheduled(net, torch.randn(4, 8), ram="100%", swap_dir=sys.argv[1], threads=1)
twin = copy.deepcopy(model)
x, y = torch.randn(4, 8), torch.tensor([0, 1, 2, 3])
twin(x, y).backward()
nn.functional.cross_entropy(plain(x), y).backward()
grads = [(a.grad, b.grad) for a, b in zip(plain.parameters(), twin.model.parameters())]
print("copy bitwise", all(a is not None and b is not None and same_bits(a, b) for a, b in grads))
print("original untouched", all(p.grad is None for p in net.parameters()))
try:
    pickle.dumps(model)
except TypeError as error:
    print("pickle:", error)
"""


def test_a_deep_copy_of_a_scheduled_model_trains_its_own_parameters_and_pickling_says_what_to_save(tmp_path):
    """An EMA's or AveragedModel's copy: it trains bitwise on the copied parameters, and the process ends cleanly."""
    done = subprocess.run([sys.executable, "-c", _COPIED, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "copy bitwise True" in done.stdout and "original untouched True" in done.stdout
    assert "pickle: a scheduled model does not pickle whole: save its state_dict()" in done.stdout


class _WeightNormed(nn.Module):
    """A grouped convolution whose weight is made from its parameters before each forward (wav2vec2's positional conv)."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 16)
        with pytest.warns(FutureWarning):
            self.wn = nn.utils.weight_norm(nn.Conv1d(16, 16, 3, padding=1, groups=4), name="weight", dim=2)
        self.b = nn.Linear(16, 4)

    def forward(self, x):
        """Logits through the normalised convolution."""
        return self.b(torch.relu(self.wn(torch.relu(self.a(x)).unsqueeze(-1).expand(-1, -1, 5))).mean(-1))


def test_a_step_makes_its_static_tensors_at_its_own_thread_count(tmp_path):
    """The weight made from g and v is computed as the step starts, with the step's threads, whatever the caller's."""
    x, y = torch.randn(4, 8, generator=torch.Generator().manual_seed(100)), torch.tensor([0, 1, 2, 3])
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        torch.manual_seed(0)
        plain = _WeightNormed()
        torch.manual_seed(0)
        net = _WeightNormed()
        nn.CrossEntropyLoss()(plain(x), y).backward()
        model = scheduled(net, x, labels=y, ram="100%", swap_dir=tmp_path, threads=1)
        torch.set_num_threads(2)
        model(x, y).backward()
    finally:
        torch.set_num_threads(before)
    pairs = [(n, a.grad, b.grad) for (n, a), b in zip(plain.named_parameters(), net.parameters())]
    differing = [n for n, a, b in pairs if a is None or b is None or not same_bits(a, b)]
    assert not differing, differing


class _Tagger(nn.Module):
    """Token ids and a padding mask in, a class per sequence out."""

    def __init__(self):
        super().__init__()
        self.emb, self.fc = nn.Embedding(50, 4), nn.Linear(4, 5)

    def forward(self, ids, mask):
        """Logits of the unmasked tokens' mean embedding."""
        return self.fc((self.emb(ids) * (~mask).unsqueeze(-1)).mean(1))


def test_synthetic_batches_draw_each_dtype_as_the_import_does():
    """Token ids below --input-high and a bool padding mask a quarter True, as `import-torch` draws its example."""
    from poetsim.pytorch.trial import synthetic_batches

    source = ModelSource("poetsim.pytorch.models:mlp", ((64, 16), (64, 16)), ("int64", "bool"), seed=3, input_high=50)
    _, example = source.build()
    module = _Tagger()
    batches = synthetic_batches(source, module, 2)
    ids, mask, labels = batches[0]
    assert torch.equal(ids, example[0]) and torch.equal(mask, example[1])
    assert mask.dtype == torch.bool and 0.15 < mask.float().mean().item() < 0.35
    assert int(ids.max()) < 50 and labels.shape == (64,)
    lm = nn.Sequential(nn.Embedding(50, 8), nn.Linear(8, 50))  # per-token logits over the vocabulary
    token_source = ModelSource("poetsim.pytorch.models:mlp", ((4, 16),), ("int64",), seed=3, input_high=50)
    tokens, token_labels = synthetic_batches(token_source, lm, 1)[0]
    assert token_labels.shape == (4, 16) and not torch.equal(tokens, token_labels)


def test_fit_keeps_a_frozen_submodule_in_eval_refuses_dict_batches_and_plan_follows_the_last_step(tmp_path):
    """A BatchNorm the user froze stays in eval through fit; a dict batch is one line; `plan` is the last step's."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 4))
    net[1].eval()
    model = scheduled(net, torch.randn(4, 8), ram="100%", swap_dir=tmp_path, threads=1, on_new_shape="solve")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    data = [(torch.randn(n, 8), torch.randint(0, 4, (n,))) for n in (4, 6)]
    records = fit(model, data, optimizer)
    assert not net[1].training and len(records) == 2
    assert model.plan.signature == ("float32[6,8]", "int64[6]")
    assert records[-1].peak_activation_bytes == model.plan.predicted.peak_ram_bytes
    with pytest.raises(UserInputError, match=r"batch 1 is a dict \(x, y\): make the collate_fn return a tuple"):
        fit(model, [{"x": data[0][0], "y": data[0][1]}], optimizer)


class _DroppedAttention(nn.Module):
    """Causal attention with `dropout_p`, as nanoGPT writes it."""

    def __init__(self):
        super().__init__()
        self.qkv, self.out = nn.Linear(16, 48), nn.Linear(16, 5)

    def forward(self, x):
        """Logits per token."""
        batch, tokens, width = x.shape
        q, k, v = self.qkv(x).view(batch, tokens, 3, 2, 8).permute(2, 0, 3, 1, 4)
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=0.1)
        return self.out(y.transpose(1, 2).reshape(batch, tokens, width))


def test_attention_dropout_under_autocast_is_refused_in_one_line_and_trains_bitwise_without_it(tmp_path, deterministic):
    """Under autocast eager runs another attention kernel than the trace: refused, where it would train other bits."""
    x, y = torch.randn(2, 8, 16), torch.randint(0, 5, (2, 8))
    torch.manual_seed(0)
    plain = _DroppedAttention()
    net = copy.deepcopy(plain)
    refused = r"scaled_dot_product_attention with dropout_p under torch.autocast"
    with torch.autocast("cpu", dtype=torch.bfloat16), pytest.raises(UserInputError, match=refused):
        scheduled(net, x, ram="100%", swap_dir=tmp_path, threads=1)
    model = scheduled(net, x, ram="100%", swap_dir=tmp_path, threads=1)
    torch.manual_seed(1)
    nn.functional.cross_entropy(plain(x).flatten(0, 1), y.flatten()).backward()
    torch.manual_seed(1)
    model(x, y).backward()
    pairs = [(a.grad, b.grad) for a, b in zip(plain.parameters(), net.parameters())]
    assert all(a is not None and b is not None and same_bits(a, b) for a, b in pairs)
