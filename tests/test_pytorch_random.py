"""Random ops as they are: dropout, attention dropout, 2-d dropout and stochastic depth.

They are captured with the models' own probabilities and redrawn exactly when a schedule
recomputes them.
"""

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from pytorch_cases import recompute_and_page  # noqa: E402
from torch import nn  # noqa: E402

from poetsim.errors import UserInputError  # noqa: E402
from poetsim.inputs.profiles import load_platform  # noqa: E402
from poetsim.pytorch.architectures import StochasticDepth  # noqa: E402
from poetsim.pytorch.capturing import capture, from_torch  # noqa: E402
from poetsim.pytorch.executor import execute  # noqa: E402
from poetsim.pytorch.randomness import out_of_order, state_bytes  # noqa: E402
from poetsim.schedule.checker import check_schedule  # noqa: E402
from poetsim.schedule.costs import node_costs  # noqa: E402
from poetsim.schedule.model import Timing  # noqa: E402


class Noisy(nn.Module):
    """Every kind of random op in one small model.

    2-d dropout, stochastic depth, an encoder layer (attention dropout and three dropouts), and
    dropout before the classifier, each with probability `p`.
    """

    def __init__(self, p: float):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.drop2d = nn.Dropout2d(p)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.depth = StochasticDepth(p)
        self.encoder = nn.TransformerEncoderLayer(8, 2, 16, dropout=p, batch_first=True)
        self.dropout = nn.Dropout(p)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        """The logits of a batch of images, through every random op."""
        x = self.drop2d(self.relu(self.bn(self.conv(x))))
        x = x + self.depth(self.conv2(x))
        x = self.encoder(x.flatten(2).transpose(1, 2))
        return self.fc(self.dropout(x.mean(1)))


def noisy(p: float):
    torch.manual_seed(0)
    return capture(Noisy(p), (torch.randn(4, 3, 8, 8),), name="noisy")


def test_random_ops_are_captured_with_their_probabilities_without_drawing():
    """Seven random nodes (the attention's dropout inside its node); tracing draws no random number."""
    torch.manual_seed(0)
    model, batch = Noisy(0.3), torch.randn(4, 3, 8, 8)
    before = torch.get_rng_state()
    graph = from_torch(model, batch, name="noisy")
    assert torch.equal(before, torch.get_rng_state())
    meta = dict(graph.meta)
    assert meta["random_nodes"] == "7" and int(meta["random_state_bytes"]) == 7 * state_bytes()
    kinds = {node.name: node.op for node in graph.nodes}
    assert [kinds[n] for n in ("drop2d", "depth", "encoder.dropout1", "dropout")] == [
        "dropout",
        "stochastic_depth",
        "dropout",
        "dropout",
    ]
    assert kinds["encoder.self_attn"] == "attention"


@pytest.mark.parametrize("p", [0.15, 0.45, 0.5])
def test_recomputed_and_paged_random_nodes_give_bitwise_gradients(tmp_path, p):
    """Recomputed and paged random nodes give bitwise the plain step's gradients.

    At 0.15 and 0.45 torch's traced native_dropout rounds x * mask * scale differently from
    eager dropout's x * (mask / (1 - p)): the capture follows the eager kernel, and every random
    node that the schedule recomputes draws the mask it drew first.
    """
    captured = noisy(p)
    graph = captured.graph
    costs = node_costs(graph, load_platform("rpi4"))
    random = {k for k, program in enumerate(captured.programs) if program.random}
    schedule = recompute_and_page(graph, costs, prefer=random)
    predicted = check_schedule(schedule, graph, costs, Timing.OVERLAP)
    result = execute(captured, schedule, tmp_path)
    assert result.gradients_equal and result.buffers_equal, result.differing_gradients
    assert result.peak_activation_bytes == predicted.peak_ram_bytes
    recomputed = {r.node for r in result.records if r.kind == "recompute"}
    paged = {r.node for r in result.records if r.kind == "page_out"}
    assert recomputed & random and paged & random
    assert result.random_state_bytes == len(random) * state_bytes()


def test_a_scheduled_step_leaves_the_generator_where_plain_pytorch_does(tmp_path):
    """The next step draws on from the same state, as in plain training."""
    captured = noisy(0.3)
    costs = node_costs(captured.graph, load_platform("rpi4"))
    schedule = recompute_and_page(captured.graph, costs)
    torch.manual_seed(7)
    plain = captured.step(*captured.inputs)
    plain.backward()
    after_plain = torch.get_rng_state()
    torch.manual_seed(7)
    execute(captured, schedule, tmp_path, check_gradients=False)
    assert torch.equal(torch.get_rng_state(), after_plain)


def test_dropout_of_probability_zero_is_a_copy_and_draws_nothing():
    graph = from_torch(nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.0), nn.Linear(4, 2)), torch.randn(3, 4))
    assert {node.name: node.op for node in graph.nodes}["1"] == "clone"
    assert dict(graph.meta)["random_nodes"] == "0"


class _OwnGenerator(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.generator = torch.Generator().manual_seed(3)

    def forward(self, x):
        y = self.fc(x)
        return y * torch.empty_like(y).bernoulli_(0.5, generator=self.generator)


def test_a_random_op_with_a_generator_of_its_own_is_refused_in_one_line():
    """Its draws could not be replayed from the default generator's saved state."""
    with pytest.raises(UserInputError, match=r"random op aten.bernoulli draws from a torch.Generator of its own") as error:
        from_torch(_OwnGenerator(), torch.randn(3, 4))
    assert "\n" not in str(error.value)


def test_draws_out_of_the_nodes_order_are_found():
    """The importer refuses a graph whose random ops' nodes, in eager order, go back to an earlier node."""
    assert out_of_order([1, 1, 4, 9]) is None
    assert out_of_order([1, 4, 3, 9]) == 2


def test_the_held_input_schedule_of_densenet_bc_gives_bitwise_gradients(tmp_path):
    """Its layer outputs held past their last reader, its concatenations, normalisations and dropout masks recomputed."""
    from poetsim import api
    from poetsim.optimiser.baselines.simple import held_input_plan
    from poetsim.optimiser.plans.plan import to_schedule
    from poetsim.pytorch.source import capture_graph_file

    graph_file = Path("scenarios/graphs/outside/densenet_bc.json")
    point = api.choose("scenarios/outside.yaml", model=str(graph_file), platform="jetson-tx2", ram="35%", runtime="1.2x")
    problem = point.problem
    plan = held_input_plan(problem.graph, problem.costs, problem.budgets, problem.timing)
    assert plan is not None
    schedule = to_schedule(plan, problem.graph, problem.costs, problem.timing)
    predicted = check_schedule(schedule, problem.graph, problem.costs, problem.timing, problem.budgets)
    result = execute(capture_graph_file(graph_file), schedule, tmp_path)
    assert result.gradients_equal and result.buffers_equal, result.differing_gradients
    assert result.peak_activation_bytes == predicted.peak_ram_bytes <= problem.budgets.ram_bytes
    recomputed = {problem.graph.nodes[r.node].op for r in result.records if r.kind == "recompute"}
    assert {"cat", "dropout"} <= recomputed and "conv" not in recomputed
