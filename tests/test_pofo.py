"""POFO: the chain of blocks, the dynamic program against brute force, and its schedules."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from poetsim.errors import UserInputError
from poetsim.graphs.io import load_graph
from poetsim.graphs.layers import Network
from poetsim.graphs.zoo import build_model
from poetsim.inputs.profiles import load_platform
from poetsim.optimiser.baselines.chain import chain_of_blocks
from poetsim.optimiser.baselines.pofo import RecAll, RecCk, TopAll, TopCk, Turn, plan_figures, pofo_schedule
from poetsim.optimiser.baselines.pofo_tables import Tables
from poetsim.pipeline import run_strategy
from poetsim.schedule.checker import check_schedule
from poetsim.schedule.costs import node_costs
from poetsim.schedule.model import Timing
from poetsim.schedule.problem import build_problem, make_problem
from poetsim.status import Status
from poetsim.units import parse_ram

from optimiser_cases import cost_table, training_graph


def tiny_resnet():
    """A tiny ResNet: input -> conv-bn-relu -> one residual block (conv-bn, add, relu) -> pool -> linear -> loss."""
    net = Network("tiny_resnet")
    x = net.input((1, 1, 4, 4), labels=1)
    x = net.relu(net.batchnorm(net.conv(x, 2, 3, padding=1, name="c1"), name="b1"), name="r1")
    y = net.batchnorm(net.conv(x, 2, 3, padding=1, name="c2"), name="b2")
    x = net.relu(net.add(y, x, name="add"), name="r2")
    return net.build(net.linear(net.global_avgpool(x, name="pool"), 3, name="fc"))


# -- the space, enumerated independently of the program --------------------------------------------


def backward_trees(s, e):
    """Every rotor recursion for blocks s..e."""
    if s == e:
        yield RecAll(s, e, None)
        return
    for rest in backward_trees(s + 1, e):
        yield RecAll(s, e, rest)
    for k in range(s + 1, e + 1):
        for right in backward_trees(k, e):
            for left in backward_trees(s, k - 1):
                yield RecCk(s, k, e, right, left)


def trees(chain, s=0, bar=False):
    """Every schedule of POFO's space from step s on (an input is offloaded only if needed later)."""
    n = len(chain.blocks)
    if s == n:
        yield Turn()
        return
    for offload in (False, True):
        if offload and not chain.retained(s, bar, checkpoint=False):
            continue
        for rest in trees(chain, s + 1, True):
            yield TopAll(s, offload, rest)
    for j in range(s, n):
        for offload in (False, True):
            if offload and not chain.retained(s, bar, checkpoint=True):
                continue
            for rest in trees(chain, j + 1, False):
                for back in backward_trees(s, j):
                    yield TopCk(s, j, offload, rest, back)


def brute_force(graph, costs, timing, ram_bytes):
    """The least checked runtime over every schedule of the space within the RAM limit."""
    chain = chain_of_blocks(graph)
    best = math.inf
    for tree in trees(chain):
        fig = plan_figures(chain, graph, costs, timing, tree)
        if fig.peak_ram_bytes <= ram_bytes:
            best = min(best, fig.runtime_s)
    return best


def program(graph, costs, timing, ram_bytes):
    """The dynamic program's best tree and makespan, counting memory in bytes."""
    return Tables(graph, costs, chain_of_blocks(graph), timing, ram_bytes, None).solve()


@st.composite
def chains(draw):
    """(graph, costs): a training chain of 2-4 layers (a short skip sometimes) with random costs."""
    layers = draw(st.integers(2, 4))
    sizes = draw(st.lists(st.integers(1, 40), min_size=layers, max_size=layers))
    flops = draw(st.lists(st.floats(1.0, 10.0), min_size=layers, max_size=layers))
    skips = frozenset({(0, 2)}) if layers == 4 and draw(st.booleans()) else frozenset()
    graph = training_graph(sizes, flops, skips)
    T = len(graph)
    unit = st.floats(0.05, 3.0)
    compute = draw(st.lists(unit, min_size=T, max_size=T))
    page = draw(st.lists(unit, min_size=T, max_size=T))
    return graph, cost_table(graph, compute, compute, page, page, 0.0, draw(st.sampled_from([1, 2])))


# -- the chain of blocks ---------------------------------------------------------------------------


def test_a_plain_chain_is_one_block_per_layer_once_gradients_are_dealt_to_the_latest_block():
    """Layers 0, 1, 2, loss 3, gradients g2 = 4, g1 = 5, g0 = 6; g_k reads layers k and k-1.

    g0 reads only layer 0, which is block 1's input, so it goes to block 1's group; block 0's
    group is then empty, and the first block merges into the next.
    """
    graph = training_graph([10, 20, 30], [1.0, 2.0, 3.0])
    chain = chain_of_blocks(graph)
    assert [b.nodes for b in chain.blocks] == [(0, 1), (2,)]
    assert [b.grads for b in chain.blocks] == [(5, 6), (4,)]
    assert [b.saved for b in chain.blocks] == [{0, 1}, {2}]
    assert all(b.keeps_output for b in chain.blocks)
    assert [b.reads_input for b in chain.blocks] == [False, True]
    assert chain.turn == 3 and chain.turn_is_gradient


def test_a_residual_block_is_one_block_ending_at_its_relu():
    """A residual block is one POFO block, ending at its final ReLU.

    The final ReLU is a cut of its own, but its gradient belongs to the next block's group, so
    it merges back into its residual block; the next block's convolutions read it as their
    input.
    """
    graph = build_model("resnet18_cifar", batch_size=1)
    chain = chain_of_blocks(graph)
    names = [[graph.nodes[v].name for v in b.nodes] for b in chain.blocks]
    assert names[0] == ["conv1", "bn1", "relu"]
    assert names[1] == [
        "layer1.0.conv1",
        "layer1.0.bn1",
        "layer1.0.relu1",
        "layer1.0.conv2",
        "layer1.0.bn2",
        "layer1.0.add",
        "layer1.0.relu2",
    ]
    assert names[-2:] == [["avgpool"], ["fc"]] and len(chain.blocks) == 11
    assert all(b.reads_input for b in chain.blocks[1:]) and not chain.blocks[1].keeps_output


def test_a_u_net_is_refused_with_one_line_saying_it_is_no_chain(checkmate_graphs):
    graph = load_graph(str(checkmate_graphs / "vgg_unet_32_416x608x3_train.json"))
    with pytest.raises(UserInputError, match="is not a chain of blocks") as caught:
        chain_of_blocks(graph)
    assert "\n" not in str(caught.value) and "skip connection" in str(caught.value)


def test_a_long_skip_in_a_small_graph_is_refused():
    graph = training_graph([10] * 8, [1.0] * 8, frozenset({(0, 6)}))
    with pytest.raises(UserInputError, match="jumps over 5 of its 8 layers"):
        chain_of_blocks(graph)


# -- the dynamic program against brute force ---------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(case=chains(), share=st.floats(0.0, 1.0), timing=st.sampled_from(list(Timing)))
def test_the_program_equals_brute_force_on_small_chains(case, share, timing):
    graph, costs = case
    low, high = graph.min_feasible_ram_bytes, graph.keep_all_peak_bytes
    ram = int(low + share * (high - low))
    tree, makespan_s = program(graph, costs, timing, ram)
    best = brute_force(graph, costs, timing, ram)
    if math.isinf(best):
        assert tree is None
    else:
        assert makespan_s == pytest.approx(best, rel=1e-9)


@pytest.mark.parametrize("timing", list(Timing))
@pytest.mark.parametrize("platform", ["rpi4", "jetson-tx2"])
def test_the_program_equals_brute_force_on_a_small_residual_network(timing, platform):
    graph = tiny_resnet()
    costs = node_costs(graph, load_platform(platform))
    low, high = graph.min_feasible_ram_bytes, graph.keep_all_peak_bytes
    for ram in (low, (low + 2 * high) // 3, high):
        tree, makespan_s = program(graph, costs, timing, ram)
        best = brute_force(graph, costs, timing, ram)
        assert (tree is None) == math.isinf(best)
        if tree is not None:
            assert makespan_s == pytest.approx(best, rel=1e-9)


def test_offloading_is_chosen_when_it_is_free_and_memory_is_short():
    """POFO offloads when a page is free and memory is short.

    Compute-only timing: a page costs no time. Layers of 40 bytes peak at 204 bytes (four layers
    and the 4-byte loss); at 200 the program offloads block 1's input instead of recomputing
    anything, so its makespan stays one plain pass.
    """
    graph = training_graph([40, 40, 40, 40], [1.0] * 4)
    T = len(graph)
    costs = cost_table(graph, [1.0] * T, [1.0] * T, [0.5] * T, [0.5] * T)
    assert graph.keep_all_peak_bytes == 204
    ram = 200
    tree, makespan_s = program(graph, costs, Timing.COMPUTE_ONLY, ram)
    assert tree == TopAll(0, False, TopAll(1, True, TopAll(2, False, Turn())))
    assert makespan_s == pytest.approx(costs.plain_runtime_s)
    assert brute_force(graph, costs, Timing.COMPUTE_ONLY, ram) == pytest.approx(makespan_s)


# -- schedules of real graphs ------------------------------------------------------------------------


@pytest.mark.parametrize("platform", ["rpi4", "jetson-tx2"])
def test_resnet18_schedule_passes_the_checker_fits_and_its_makespan_is_the_programs(platform):
    problem = build_problem("resnet18_cifar", platform, parse_ram("50%"), 1.2, batch_size=2)
    solution = pofo_schedule(problem.graph, problem.costs, problem.budgets.ram_bytes, problem.timing)
    checked = check_schedule(solution.schedule, problem.graph, problem.costs, problem.timing)
    assert solution.fits and checked.peak_ram_bytes <= problem.budgets.ram_bytes
    assert checked.runtime_s == pytest.approx(solution.makespan_s, rel=1e-9)
    assert checked.recomputations > 0


def test_a_budget_no_schedule_meets_is_reported_over_budget():
    """A budget no POFO schedule meets is reported as over budget, by how much.

    Below the smallest peak of the space the smallest limit that works is used; the pipeline
    then reports the baseline over budget, saying by how much.
    """
    problem = build_problem("resnet18_cifar", "jetson-tx2", parse_ram("20%"), 1.2, batch_size=2)
    solution = pofo_schedule(problem.graph, problem.costs, problem.budgets.ram_bytes, problem.timing)
    assert not solution.fits and solution.limit_bytes > problem.budgets.ram_bytes
    run = run_strategy(problem, "pofo", simulate=False)
    assert run.status is Status.OVER_BUDGET and "over the budget" in run.message


def test_the_pipeline_refuses_a_graph_that_is_no_chain(checkmate_graphs):
    graph = load_graph(str(checkmate_graphs / "vgg_unet_32_416x608x3_train.json"))
    problem = make_problem(graph, load_platform("rpi4"), parse_ram("50%"), 1.2)
    with pytest.raises(UserInputError, match="not a chain"):
        run_strategy(problem, "pofo", simulate=False)
