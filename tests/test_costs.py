"""The cost model: per-node costs from FLOPs, bytes and a profile; measured costs; the input read."""

import pytest

from poetsim.graphs.graph import MeasuredCosts, Node, TrainingGraph
from poetsim.graphs.zoo import build_model
from poetsim.inputs.profiles import Platform, load_platform
from poetsim.schedule.costs import moved_bytes, node_costs

# The MKR1000 figures of the POET authors, written out by hand (arXiv 2207.07697).
MKR_S_PER_2000_FLOP = 0.012
MKR_COMPUTE_W = 20e-3 * 3.3
SD_W = 100e-3 * 3.3
SD_IN = (0.109e-3, 4616.51e3)  # latency s, bytes/s
SD_OUT = (0.113e-3, 4440e3)


def _graph(*, input_flops=0.0, fc_measured=None, input_measured=None) -> TrainingGraph:
    """A four-node graph: input (400 B) -> fc (2000 FLOP, 200 B) -> loss (10 FLOP) -> fc_grad (4000 FLOP)."""
    return TrainingGraph.create(
        "tiny",
        [
            Node(0, "x", "input", False, (), 400, flops=input_flops, measured=input_measured),
            Node(1, "fc", "linear", False, (0,), 200, param_bytes=80, flops=2000.0, measured=fc_measured),
            Node(2, "loss", "loss", False, (1,), 4, flops=10.0),
            Node(3, "fc_grad", "linear_grad", True, (2, 0), 0, flops=4000.0),
        ],
    )


@pytest.fixture
def tiny() -> TrainingGraph:
    return _graph()


@pytest.fixture
def mkr1000() -> Platform:
    return load_platform("mkr1000")


def test_compute_cost_is_flops_over_rate_times_power(tiny, mkr1000):
    """On the MKR1000, 2000 FLOP take 12 ms and 12 ms x 66 mW, as the authors measured."""
    costs = node_costs(tiny, mkr1000)
    assert costs.compute_s[1] == pytest.approx(MKR_S_PER_2000_FLOP, rel=1e-12)
    assert costs.compute_j[1] == pytest.approx(MKR_S_PER_2000_FLOP * MKR_COMPUTE_W, rel=1e-12)
    assert costs.compute_s[3] == pytest.approx(2 * MKR_S_PER_2000_FLOP, rel=1e-12)
    assert costs.compute_j[2] == pytest.approx(10 / 2000 * MKR_S_PER_2000_FLOP * MKR_COMPUTE_W, rel=1e-12)


def test_page_costs_are_latency_plus_bytes_over_bandwidth(tiny, mkr1000):
    """Page-in/out time = latency + bytes / bandwidth; energy = that time x SD power."""
    costs = node_costs(tiny, mkr1000)
    for node, size in ((1, 200), (2, 4), (3, 0)):
        page_in_s = SD_IN[0] + size / SD_IN[1]
        page_out_s = SD_OUT[0] + size / SD_OUT[1]
        assert costs.page_in_s[node] == pytest.approx(page_in_s, rel=1e-12)
        assert costs.page_in_j[node] == pytest.approx(page_in_s * SD_W, rel=1e-12)
        assert costs.page_out_s[node] == pytest.approx(page_out_s, rel=1e-12)
        assert costs.page_out_j[node] == pytest.approx(page_out_s * SD_W, rel=1e-12)


def test_table_carries_sizes_static_power_and_channels(tiny, mkr1000):
    """The table has one entry per node and the platform-wide figures the timing models need."""
    costs = node_costs(tiny, mkr1000)
    assert len(costs) == 4
    assert costs.output_bytes == (400, 200, 4, 0)
    assert costs.static_power_w == mkr1000.static_power_w
    assert costs.dma_channels == mkr1000.dma_channels


def test_input_node_costs_a_page_in_of_its_bytes(tiny, mkr1000):
    """The data batch is read, not computed: its compute time and energy equal its page-in."""
    costs = node_costs(tiny, mkr1000)
    read_s = SD_IN[0] + 400 / SD_IN[1]
    assert costs.compute_s[0] == pytest.approx(read_s, rel=1e-12)
    assert costs.compute_j[0] == pytest.approx(read_s * SD_W, rel=1e-12)
    assert (costs.compute_s[0], costs.compute_j[0]) == (costs.page_in_s[0], costs.page_in_j[0])


def test_input_node_flops_are_ignored(mkr1000):
    """FLOPs given on the input node do not turn its read into a computation."""
    plain = node_costs(_graph(), mkr1000)
    with_flops = node_costs(_graph(input_flops=1e9), mkr1000)
    assert with_flops.compute_s[0] == plain.compute_s[0]
    assert with_flops.compute_j[0] == plain.compute_j[0]


def test_plain_runtime_includes_the_input_read(tiny, mkr1000):
    """The '1x' runtime is every node once: the batch read plus 6010 FLOP of compute."""
    costs = node_costs(tiny, mkr1000)
    read_s = SD_IN[0] + 400 / SD_IN[1]
    assert costs.plain_runtime_s == pytest.approx(read_s + 6010 / 2000 * MKR_S_PER_2000_FLOP, rel=1e-12)
    assert costs.plain_compute_j == pytest.approx(sum(costs.compute_j), rel=1e-15)


def test_measured_costs_override_field_by_field(mkr1000):
    """A measured figure replaces only the derived figure of the same name."""
    derived = node_costs(_graph(), mkr1000)
    measured = node_costs(_graph(fc_measured=MeasuredCosts(compute_j=0.5, page_out_s=0.25)), mkr1000)
    assert measured.compute_j[1] == 0.5
    assert measured.page_out_s[1] == 0.25
    assert measured.compute_s[1] == derived.compute_s[1]
    assert measured.page_in_s[1] == derived.page_in_s[1]
    assert measured.page_in_j[1] == derived.page_in_j[1]
    assert measured.page_out_j[1] == derived.page_out_j[1]  # not rescaled from the measured time
    for field in ("compute_s", "compute_j", "page_in_s", "page_in_j", "page_out_s", "page_out_j"):
        assert getattr(measured, field)[2:] == getattr(derived, field)[2:]


def test_measured_costs_override_the_input_read(mkr1000):
    """A measured read time of the batch wins over the page-in rule; its energy stays derived."""
    derived = node_costs(_graph(), mkr1000)
    measured = node_costs(_graph(input_measured=MeasuredCosts(compute_s=0.75)), mkr1000)
    assert measured.compute_s[0] == 0.75
    assert measured.compute_j[0] == derived.compute_j[0]


def test_rpi4_energy_per_flop_is_the_papers(tmp_path):
    """On the Pi 4, energy per FLOP is 3 W x 13.53 s / 1.6283e9 FLOP; time uses 2 GFLOP/s."""
    flops = 1.6283e9
    graph = TrainingGraph.create("one", [Node(0, "big", "conv", False, (), 4, flops=flops)])
    for name in ("rpi4", "rpi4-nocache"):
        costs = node_costs(graph, load_platform(name))
        assert costs.compute_j[0] == pytest.approx(3.0 * 13.53, rel=1e-9)
        assert costs.compute_s[0] == pytest.approx(flops / 2e9, rel=1e-12)
        assert costs.compute_j[0] / flops == pytest.approx(3.0 * 13.53 / 1.6283e9, rel=1e-9)


def test_energy_rate_defaults_to_the_time_rate(tiny, mkr1000):
    """Without energy_flops_per_s, energy per FLOP is power / flops_per_s."""
    assert mkr1000.compute.energy_flops_per_s is None
    assert mkr1000.compute.joules_per_flop == pytest.approx(MKR_COMPUTE_W * MKR_S_PER_2000_FLOP / 2000, rel=1e-12)


def test_compute_time_is_the_roofline_of_flops_and_bytes_moved(mkr1000):
    """A node moving its inputs and output faster than the bus allows is bus-bound.

    On the MKR1000 (166.7 kFLOP/s, 192 MB/s bus) a 2,000-FLOP node reading 400 B and writing 200 B
    needs 12 ms of arithmetic and 3.1 us of bus: compute-bound. Given 19.2 MB of input to read, the
    bus needs 100 ms, so that is its time; its energy stays the arithmetic's.
    """
    compute_bound = node_costs(_graph(), mkr1000)
    assert compute_bound.compute_s[1] == pytest.approx(MKR_S_PER_2000_FLOP, rel=1e-12)
    heavy = TrainingGraph.create(
        "heavy",
        [
            Node(0, "x", "input", False, (), 19_200_000 - 200),
            Node(1, "relu", "relu", False, (0,), 200, flops=2000.0),
        ],
    )
    costs = node_costs(heavy, mkr1000)
    assert costs.compute_s[1] == pytest.approx(19_200_000 / 192e6, rel=1e-12)
    assert costs.compute_j[1] == pytest.approx(compute_bound.compute_j[1], rel=1e-12)
    assert moved_bytes(heavy) == (19_199_800, 19_200_000)


def test_the_input_read_is_not_a_roofline(mkr1000):
    """The batch read stays a page-in, whatever its bytes over the memory bus."""
    graph = TrainingGraph.create("read", [Node(0, "x", "input", False, (), 10**9)])
    costs = node_costs(graph, mkr1000)
    assert costs.compute_s[0] == pytest.approx(SD_IN[0] + 1e9 / SD_IN[1], rel=1e-12)


def test_a_measured_compute_time_wins_over_the_roofline(mkr1000):
    """Measured per-node time replaces the roofline's, even below bytes / bus bandwidth."""
    graph = TrainingGraph.create(
        "fast",
        [
            Node(0, "x", "input", False, (), 19_200_000),
            Node(1, "relu", "relu", False, (0,), 200, flops=2000.0, measured=MeasuredCosts(compute_s=0.001)),
        ],
    )
    assert node_costs(graph, mkr1000).compute_s[1] == 0.001


def test_the_jetson_tx2_bus_bounds_most_of_resnet18():
    """ResNet-18 (CIFAR, batch 8) on the TX2: 94 of 137 nodes are bus-bound, +2.6 % on the plain pass."""
    graph, tx2 = build_model("resnet18_cifar", batch_size=8), load_platform("jetson-tx2")
    costs = node_costs(graph, tx2)
    flops_s = [n.flops / tx2.compute.flops_per_s for n in graph.nodes]
    bus_s = [b / tx2.memory_bus_bytes_per_s for b in moved_bytes(graph)]
    bound = [n.id for n in graph.nodes if n.op != "input" and bus_s[n.id] > flops_s[n.id]]
    assert len(bound) == 94
    arithmetic_s = sum(costs.compute_s[i] if graph.nodes[i].op == "input" else flops_s[i] for i in range(len(graph)))
    assert costs.plain_runtime_s / arithmetic_s == pytest.approx(1.0261, abs=5e-4)
