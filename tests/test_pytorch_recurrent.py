"""Recurrent layers as eager PyTorch runs them: LSTM on oneDNN, GRU and plain RNN, dropout between layers.

Scheduled steps of models with recurrent layers, recomputed and paged, give bitwise the plain
step's gradients; the oneDNN workspace an LSTM layer keeps for its backward is counted.
"""

import copy

import pytest

torch = pytest.importorskip("torch")
from pytorch_cases import recompute_and_page  # noqa: E402
from torch import nn  # noqa: E402

from poetsim.inputs.profiles import load_platform  # noqa: E402
from poetsim.pytorch.capturing import capture  # noqa: E402
from poetsim.pytorch.executor import Machine, execute  # noqa: E402
from poetsim.pytorch.reference import same_bits  # noqa: E402
from poetsim.pytorch.training import fit, scheduled  # noqa: E402
from poetsim.pytorch.trial import make_optimizer  # noqa: E402
from poetsim.schedule.checker import check_schedule  # noqa: E402
from poetsim.schedule.costs import node_costs  # noqa: E402
from poetsim.schedule.model import Timing  # noqa: E402

# torch says so of every LSTM with projections, which runs the per-step path as intended here
pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")


class Speech(nn.Module):
    """A small speech model: every recurrent layer kind, each a module of its own.

    Hidden sizes of 20 and 12 are not whole numbers of vector lengths: eager's CPU kernels then
    round gate functions on strided chunks differently from contiguous ones.
    """

    def __init__(self, features: int = 10):
        super().__init__()
        self.inp = nn.Linear(features, 16)
        self.lstm = nn.LSTM(16, 20, num_layers=2, dropout=0.3, batch_first=True)  # oneDNN, dropout between layers
        self.gru = nn.GRU(20, 20, batch_first=True, bidirectional=True)
        self.rnn = nn.RNN(40, 12, num_layers=2, dropout=0.2, batch_first=True)
        self.projected = nn.LSTM(12, 12, proj_size=6, batch_first=True)  # no oneDNN: the per-step path
        self.fc = nn.Linear(6, 5)

    def forward(self, x):
        """The logits of a batch of feature sequences."""
        h, _ = self.lstm(self.inp(x))
        h, _ = self.gru(h)
        h, _ = self.rnn(h)
        h, _ = self.projected(h)
        return self.fc(h[:, -1])


SHAPE = (4, 9, 10)  # batch, time steps, features


def speech():
    torch.manual_seed(0)
    return capture(Speech(), (torch.randn(SHAPE),), name="speech")


def node_of(captured, module: str) -> int:
    return next(n.id for n in captured.graph.nodes if n.name == module)


def test_recomputed_and_paged_recurrent_layers_give_bitwise_gradients(tmp_path):
    """Every recurrent layer recomputed or paged: the plain step's bits, and the peak as predicted."""
    captured = speech()
    graph = captured.graph
    costs = node_costs(graph, load_platform("rpi4"))
    recurrent = {node_of(captured, name) for name in ("lstm", "gru", "rnn", "projected")}
    schedule = recompute_and_page(graph, costs, prefer=recurrent)
    predicted = check_schedule(schedule, graph, costs, Timing.OVERLAP)
    result = execute(captured, schedule, tmp_path)
    assert result.gradients_equal and result.buffers_equal, result.differing_gradients
    assert result.peak_activation_bytes == predicted.peak_ram_bytes
    moved = {r.node for r in result.records if r.kind in ("recompute", "page_out")}
    assert moved & recurrent


def test_dropout_between_layers_is_drawn_as_in_eager(tmp_path):
    """The two-layer LSTM and RNN draw their dropout between layers: random nodes whose recomputation redraws it."""
    captured = speech()
    random = {k for k, program in enumerate(captured.programs) if program.random}
    assert {node_of(captured, "lstm"), node_of(captured, "rnn")} <= random
    assert node_of(captured, "gru") not in random


def test_an_lstm_layer_keeps_its_onednn_workspace_and_counts_its_products():
    """The LSTM node's output bytes include the workspace oneDNN keeps for the backward; FLOPs its products."""
    captured = speech()
    lstm = captured.graph.nodes[node_of(captured, "lstm")]
    outputs = 4 * 9 * 20 * 4  # the output sequence alone: batch x steps x hidden, float32
    assert lstm.output_bytes > 2 * outputs
    products = 2 * 4 * 9 * (4 * 20 * (16 + 20) + 4 * 20 * (20 + 20))  # two layers
    assert products <= lstm.flops < 1.2 * products
    assert lstm.op == "lstm"


def test_parameters_that_share_one_gradient_value_each_get_their_own_tensor(tmp_path):
    """Both biases of a layer get one value from oneDNN's LSTM backward, yet a tensor each."""
    captured = speech()
    costs = node_costs(captured.graph, load_platform("rpi4"))
    schedule = recompute_and_page(captured.graph, costs)
    machine = Machine(captured, Timing.OVERLAP, tmp_path, False, None)
    machine.run(schedule)
    ih, hh = machine.grads["model.lstm.bias_ih_l0"], machine.grads["model.lstm.bias_hh_l0"]
    assert torch.equal(ih, hh)
    assert ih.untyped_storage().data_ptr() != hh.untyped_storage().data_ptr()


def test_training_with_recurrent_layers_recomputed_and_paged_is_plain_trainings(tmp_path):
    """Five Adam steps with the recurrent layers recomputed and paged leave plain training's bits.

    A scheduled step runs inside an autograd function, where grad mode is off; oneDNN's LSTM
    keeps its workspace only in grad mode, so the steps run their ops in grad mode.
    """
    captured = speech()
    costs = node_costs(captured.graph, load_platform("rpi4"))
    recurrent = {node_of(captured, name) for name in ("lstm", "gru", "rnn", "projected")}
    schedule = recompute_and_page(captured.graph, costs, prefer=recurrent)
    peak = check_schedule(schedule, captured.graph, costs, Timing.OVERLAP).peak_ram_bytes
    torch.manual_seed(0)
    model = scheduled(Speech(), (torch.randn(SHAPE),), schedule=schedule, ram=str(int(peak)), runtime="10x", swap_dir=tmp_path)
    plain = copy.deepcopy(model.model)
    generator = torch.Generator().manual_seed(1)
    data = [(torch.randn(SHAPE, generator=generator), torch.randint(0, 5, SHAPE[:1], generator=generator)) for _ in range(5)]
    loss_of, opt = nn.CrossEntropyLoss(), make_optimizer("adam", plain.parameters())
    torch.manual_seed(5)
    for x, y in data:
        opt.zero_grad(set_to_none=True)
        loss_of(plain(x), y).backward()
        opt.step()
    torch.manual_seed(5)
    records = fit(model, data, make_optimizer("adam", model.parameters()))
    assert all(r.recomputations > 0 and r.peak_activation_bytes == peak for r in records)
    ours = model.model.state_dict()
    assert not [name for name, value in plain.state_dict().items() if not same_bits(value, ours[name])]


class Stepped(nn.Module):
    """Recurrent cells unrolled by hand, their states made in the forward (`torch.zeros`, no device)."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(10, 16)
        self.lstm = nn.LSTMCell(16, 20)
        self.gru = nn.GRUCell(20, 20)  # width 20: eager's sigmoids round row by row
        self.rnn = nn.RNNCell(20, 12)
        self.fc = nn.Linear(12, 5)

    def forward(self, x):
        """The logits of a batch of feature sequences."""
        x = self.inp(x)
        h, c = torch.zeros(x.shape[0], 20), torch.zeros(x.shape[0], 20)
        g, r = torch.zeros(x.shape[0], 20), torch.zeros(x.shape[0], 12)
        for step in range(x.shape[1]):
            h, c = self.lstm(x[:, step], (h, c))
            g = self.gru(h, g)
            r = self.rnn(g, r)
        return self.fc(r)


def test_cells_unrolled_by_hand_recomputed_and_paged_give_bitwise_gradients(tmp_path):
    """LSTMCell, GRUCell and RNNCell steps, states made in the forward: the plain step's bits."""
    torch.manual_seed(0)
    captured = capture(Stepped(), (torch.randn(SHAPE),), name="stepped")
    costs = node_costs(captured.graph, load_platform("rpi4"))
    schedule = recompute_and_page(captured.graph, costs)
    check_schedule(schedule, captured.graph, costs, Timing.OVERLAP)
    result = execute(captured, schedule, tmp_path)
    assert result.gradients_equal, result.differing_gradients
    assert any(r.kind == "recompute" for r in result.records)
