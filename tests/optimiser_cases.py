"""Small training graphs and cost tables for the optimiser's tests, and a hypothesis strategy.

`training_graph` mirrors what autodiff produces: a forward DAG (a chain with optional skip
connections), a loss, then one gradient node per forward node, in reverse, reading the
gradients of its forward readers, its forward inputs and its own output.
"""

import importlib.util
from functools import cache
from typing import TypeVar

import pytest
from hypothesis import strategies as st

from poetsim import strategies
from poetsim.graphs.graph import Node, TrainingGraph
from poetsim.schedule.costs import CostTable

#: What the gradient of a forward node reads besides the gradients of its readers.
INPUTS, OWN, BOTH = "inputs", "own", "both"


def training_graph(
    sizes: list[int], flops: list[float], skips: frozenset = frozenset(), name: str = "case", grad_reads: list[str] | None = None
) -> TrainingGraph:
    """Forward nodes 0..F-1 (k reads k-1 and the skips (a, k)), the loss, then gradients.

    With `grad_reads`, the gradient of k reads its forward inputs (INPUTS, as a BatchNorm's does),
    its own output (OWN, as a ReLU's does) or BOTH; by default BOTH.
    """
    F = len(sizes)
    forward_deps = {k: sorted({k - 1} | {a for a, b in skips if b == k}) if k else [] for k in range(F)}
    nodes = [Node(k, f"f{k}", "op", False, tuple(forward_deps[k]), sizes[k], flops=flops[k]) for k in range(F)]
    loss = F
    nodes.append(Node(loss, "loss", "loss", False, (F - 1,), 4, flops=1.0))
    grad_of: dict[int, int] = {}
    for k in reversed(range(F)):
        readers = [j for j in range(F) if k in forward_deps[j]]
        upstream = [grad_of[j] for j in readers] + ([loss] if k == F - 1 else [])
        node_id = len(nodes)
        reads = BOTH if grad_reads is None else grad_reads[k]
        own = (set(forward_deps[k]) if reads != OWN else set()) | ({k} if reads != INPUTS else set())
        deps = tuple(sorted(set(upstream) | own))
        nodes.append(Node(node_id, f"g{k}", "grad", True, deps, sizes[k], flops=2 * flops[k]))
        grad_of[k] = node_id
    return TrainingGraph.create(name, nodes)


def cost_table(graph: TrainingGraph, compute_s, compute_j, page_s, page_j, static_power_w=0.0, dma_channels=1) -> CostTable:
    """A cost table from per-node lists (page-in and page-out alike)."""
    return CostTable(
        output_bytes=graph.output_bytes,
        compute_s=tuple(compute_s),
        compute_j=tuple(compute_j),
        page_in_s=tuple(page_s),
        page_in_j=tuple(page_j),
        page_out_s=tuple(page_s),
        page_out_j=tuple(page_j),
        static_power_w=static_power_w,
        dma_channels=dma_channels,
    )


def _skips_past_a_peak(name: str, forward_bytes: list[int]) -> TrainingGraph:
    """Input s, outputs a and b of 100 B, a chain f3, f4, ... of `forward_bytes`; g1 reads b and the last f, g2 a and g1."""
    nodes = [Node(0, "s", "input", False, (), 1), Node(1, "a", "op", False, (0,), 100), Node(2, "b", "op", False, (1,), 100)]
    for k, size in enumerate(forward_bytes, start=3):
        nodes.append(Node(k, f"f{k}", "op", False, (k - 1,), size))
    last = len(nodes) - 1
    nodes.append(Node(last + 1, "g1", "grad", True, (2, last), 1))
    nodes.append(Node(last + 2, "g2", "grad", True, (1, last + 1), 1))
    return TrainingGraph.create(name, nodes)


def two_skips() -> tuple[TrainingGraph, CostTable]:
    """A chain whose outputs a and b are read again by the backward pass, past the peak f4.

        0 s   (1 B)    input               4 f4  (300 B)  the peak
        1 a   (100 B)  5 J to rebuild      5 f5  (10 B)
        2 b   (100 B)  0.1 J, reads a      6 g1  (1 B)    reads b and f5
        3 f3  (10 B)                       7 g2  (1 B)    reads a and g1
    Beside f4 there is room for one of a and b.
    """
    graph = _skips_past_a_peak("two_skips", [10, 300, 10])
    joules = [0.01, 5.0, 0.1, 0.01, 0.01, 0.01, 0.01, 0.01]
    return graph, cost_table(graph, [0.01] * 8, joules, [1.0] * 8, [10.0] * 8)


def far_reader() -> tuple[TrainingGraph, CostTable]:
    """A chain whose outputs a and b are read again by the backward pass, well past the peak f5.

        0 s   (1 B)    input               5 f5  (300 B)  the peak
        1 a   (100 B)  5 J to rebuild,     6 f6, 7 f7 (10 B)
                       10 J to page        8 g1  (1 B)    reads b and f7
        2 b   (100 B)  1 J, 0.01 J to page 9 g2  (1 B)    reads a and g1
        3 f3, 4 f4 (10 B)
    Beside f5 there is room for one of a and b.
    """
    graph = _skips_past_a_peak("far_reader", [10, 10, 300, 10, 10])
    joules = [0.01, 5.0, 1.0] + [0.01] * 7
    return graph, cost_table(graph, [0.01] * 10, joules, [0.005] * 10, [0.01, 10.0] + [0.01] * 8)


@st.composite
def cases(draw, min_forward: int = 2, max_forward: int = 4, slow_paging: bool = False):
    """A random training graph of 5-9 nodes and its random costs, as (graph, costs).

    With `slow_paging`, transfers take 0.5-3 s against 0.01-0.5 s of compute and static power is
    always on: page-outs that stall.
    """
    F = draw(st.integers(min_forward, max_forward))
    sizes = draw(st.lists(st.integers(1, 100), min_size=F, max_size=F))
    flops = draw(st.lists(st.floats(1.0, 100.0), min_size=F, max_size=F))
    pairs = [(a, b) for b in range(F) for a in range(b - 1)]
    skips = frozenset(draw(st.lists(st.sampled_from(pairs), unique=True, max_size=2)) if pairs else [])
    graph = training_graph(sizes, flops, skips)
    T = len(graph)
    unit = st.floats(0.01, 2.0)
    compute_s = draw(st.lists(st.floats(0.01, 0.5) if slow_paging else unit, min_size=T, max_size=T))
    compute_j = draw(st.lists(unit, min_size=T, max_size=T))
    page_s = draw(st.lists(st.floats(0.5, 3.0) if slow_paging else unit, min_size=T, max_size=T))
    page_j = draw(st.lists(unit, min_size=T, max_size=T))
    static = draw(st.sampled_from([0.3, 1.0] if slow_paging else [0.0, 0.3]))
    channels = draw(st.sampled_from([1, 2]))
    return graph, cost_table(graph, compute_s, compute_j, page_s, page_j, static, channels)


def relu_or_conv(node_j: float, page_j: float) -> tuple[TrainingGraph, CostTable]:
    """The hand-checked graph of test_optimiser (see there): r is idle while `big` peaks.

        0 s    (1 B)    a small input
        1 r    (100 B)  r = op(s): the output to keep, recompute or page; costs `node_j`
        2 big  (100 B)  big = op(r)
        3 out  (50 B)   out = op(big)
        4 gr   (1 B)    gr = op(out, r)
    Every node other than r costs 1 J and 1 s to compute; paging r costs `page_j` each way.
    """
    nodes = [
        Node(0, "s", "input", False, (), 1),
        Node(1, "r", "op", False, (0,), 100),
        Node(2, "big", "op", False, (1,), 100),
        Node(3, "out", "op", False, (2,), 50),
        Node(4, "gr", "grad", True, (1, 3), 1),
    ]
    graph = TrainingGraph.create("relu_or_conv", nodes)
    compute_j = [1.0, node_j, 1.0, 1.0, 1.0]
    page_j_all = [page_j] * 5
    return graph, cost_table(graph, [1.0] * 5, compute_j, [0.1] * 5, page_j_all)


#: The three restrictions of the MILP, as the registry declares them.
HYBRID, RECOMPUTE_ONLY, PAGING_ONLY = (strategies.get(name).moves for name in ("hybrid", "recompute-only", "paging-only"))
MOVES = (HYBRID, RECOMPUTE_ONLY, PAGING_ONLY)


@st.composite
def cascading_cases(draw, min_forward: int = 4, max_forward: int = 7):
    """A random training graph with cascades and stalling page-ins, as (graph, costs).

    Its gradients read their inputs, their own output or both, so that some outputs die early and
    recomputing their readers needs them back (cascades); stages are long and short (0.01-1 s),
    transfers take 0.05-1.5 s and static power is always on: page-ins that stall when they must come
    just before a recomputation.
    """
    F = draw(st.integers(min_forward, max_forward))
    sizes = draw(st.lists(st.integers(1, 100), min_size=F, max_size=F))
    flops = draw(st.lists(st.floats(1.0, 100.0), min_size=F, max_size=F))
    reads = draw(st.lists(st.sampled_from([INPUTS, OWN, BOTH]), min_size=F, max_size=F))
    pairs = [(a, b) for b in range(F) for a in range(b - 1)]
    skips = frozenset(draw(st.lists(st.sampled_from(pairs), unique=True, max_size=2)))
    graph = training_graph(sizes, flops, skips, grad_reads=reads)
    T = len(graph)
    compute_s = draw(st.lists(st.sampled_from([0.01, 0.02, 0.05, 0.5, 1.0]), min_size=T, max_size=T))
    compute_j = draw(st.lists(st.floats(0.01, 2.0), min_size=T, max_size=T))
    page_s = draw(st.lists(st.floats(0.05, 1.5), min_size=T, max_size=T))
    page_j = draw(st.lists(st.floats(0.01, 1.0), min_size=T, max_size=T))
    static = draw(st.sampled_from([0.3, 1.0, 3.0]))
    channels = draw(st.sampled_from([1, 2]))
    return graph, cost_table(graph, compute_s, compute_j, page_s, page_j, static, channels)


@cache
def gurobi_license() -> str | None:
    """The gurobipy license here: "full", "size-limited", or None without gurobipy or a license.

    gurobipy from PyPI brings a size-limited license. The limit shows as the refusal of a
    2,001-column LP.
    """
    if importlib.util.find_spec("gurobipy") is None:
        return None
    import gurobipy as gp

    env = gp.Env(empty=True)
    env.setParam("OutputFlag", 0)
    try:
        env.start()
    except gp.GurobiError:
        return None
    model = gp.Model(env=env)
    model.addVars(2001)
    try:
        model.optimize()
    except gp.GurobiError as exc:
        if exc.errno == gp.GRB.Error.SIZE_LIMIT_EXCEEDED:
            return "size-limited"
        raise
    finally:
        model.dispose()
        env.dispose()
    return "full"


T = TypeVar("T")


def present(value: T | None, what: str) -> T:
    """`value`, or the test fails saying that `what` is missing.

    For what an optimiser call or a plan builder returns only when there is one (a schedule, its
    figures, a bound, a plan that fits): a test reads it after asserting that it should be there,
    and a None then fails with a message rather than with an AttributeError or a TypeError.
    """
    if value is None:
        pytest.fail(f"{what} is missing")
    return value


@st.composite
def crowding_cases(draw):
    """A chain whose gradient reads two early outputs across a large stage, as (graph, costs).

    s -> a -> b -> c (1 B) -> d (150-250 B) -> e -> f -> g (1 B each), then gr reads a, b and g
    (a and b 60-100 B): at d's stage one or both of a and b must be out of RAM, and paging both
    makes their page-outs share the stages between b and d. Compute 0.05-1 s per stage,
    transfers 0.2-1.2 s, static power always on.
    """
    a, b = draw(st.integers(60, 100)), draw(st.integers(60, 100))
    sizes = [1, a, b, 1, draw(st.integers(150, 250)), 1, 1, 1]
    nodes = [Node(k, f"f{k}", "op", False, (k - 1,) if k else (), m) for k, m in enumerate(sizes)]
    nodes.append(Node(8, "gr", "grad", True, (1, 2, 7), 1))
    graph = TrainingGraph.create("crowding", nodes)
    T = len(graph)
    compute_s = draw(st.lists(st.floats(0.05, 1.0), min_size=T, max_size=T))
    compute_j = draw(st.lists(st.floats(0.5, 5.0), min_size=T, max_size=T))
    page_s = draw(st.lists(st.floats(0.2, 1.2), min_size=T, max_size=T))
    page_j = draw(st.lists(st.floats(0.01, 0.5), min_size=T, max_size=T))
    static = draw(st.sampled_from([0.3, 1.0, 3.0]))
    channels = draw(st.sampled_from([1, 2]))
    return graph, cost_table(graph, compute_s, compute_j, page_s, page_j, static, channels)
