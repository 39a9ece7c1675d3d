"""The TrainingGraph record: validation, derived structure and the keep-all peak."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from poetsim.graphs.graph import MAX_NODE_FLOPS, MAX_NODES, Node, TrainingGraph


def _chain(sizes):
    """A chain a -> b -> c ... with the given output sizes."""
    return TrainingGraph.create(
        "chain", [Node(i, f"n{i}", "op", False, (i - 1,) if i else (), size) for i, size in enumerate(sizes)]
    )


def test_consumers_and_last_use():
    graph = TrainingGraph.create(
        "g",
        [
            Node(0, "a", "op", False, (), 1),
            Node(1, "b", "op", False, (0,), 1),
            Node(2, "c", "op", True, (0, 1), 1),
        ],
    )
    assert graph.edges == ((0, 1), (0, 2), (1, 2))
    assert graph.consumers == ((1, 2), (2,), ())
    assert graph.last_use == (2, 2, 2)


def test_keep_all_peak_of_a_chain_is_the_largest_adjacent_pair():
    """In a chain each output is freed after its only reader: peak = max(m[i-1] + m[i])."""
    graph = _chain([10, 100, 1, 50, 7])
    assert graph.keep_all_peak_bytes == 110
    assert graph.min_feasible_ram_bytes == 110


def test_keep_all_peak_counts_long_lived_outputs():
    """An output read at the end (like a forward activation read by backward) stays resident."""
    graph = TrainingGraph.create(
        "skip",
        [
            Node(0, "a", "op", False, (), 30),
            Node(1, "b", "op", False, (0,), 5),
            Node(2, "c", "op", False, (1,), 5),
            Node(3, "d", "op", True, (2, 0), 5),
        ],
    )
    # After computing c: a (30, read by d) + b (5, read by c) + c (5) = 40; after d: a + c + d = 40.
    assert graph.keep_all_peak_bytes == 40
    assert [graph.working_set_bytes(t) for t in range(4)] == [30, 35, 40, 40]


@pytest.mark.parametrize(
    "node,message",
    [
        (Node(1, "b", "op", False, (1,), 1), "depends on itself"),
        (Node(1, "b", "op", False, (4,), 1), "missing node 4"),
        (Node(1, "b", "op", False, (0, 0), 1), "twice"),
        (Node(1, "b", "op", False, (0,), -1), "negative"),
        (Node(1, "b", "op", False, (0,), 1, flops=math.inf), "flops must be a finite number"),
        (Node(1, "b", "op", False, (0,), 1, flops=math.nan), "flops must be a finite number"),
        (Node(1, "b", "op", False, (0,), 1, flops=2 * MAX_NODE_FLOPS), "flops 2e\\+21 is above"),
        (Node(1, "b", "op", False, (0,), 2**51), "output_bytes 2.2518e\\+15 is above"),
        (Node(1, "b\nc", "op", False, (0,), 1), "control character U\\+000A"),
        (Node(2, "b", "op", False, (0,), 1), "ids must be 0..T-1"),
    ],
)
def test_create_rejects_bad_nodes(node, message):
    with pytest.raises(ValueError, match=message):
        TrainingGraph.create("bad", [Node(0, "a", "op", False, (), 1), node])


def test_create_rejects_a_forward_reference():
    with pytest.raises(ValueError, match="later node 2"):
        TrainingGraph.create(
            "bad", [Node(0, "a", "op", False, (), 1), Node(1, "b", "op", False, (2,), 1), Node(2, "c", "op", False, (), 1)]
        )


def test_create_rejects_more_nodes_than_poetsim_takes():
    nodes = [Node(i, "n", "op", False, (), 1) for i in range(MAX_NODES + 1)]
    with pytest.raises(ValueError, match="100,001 nodes is more than poetsim takes"):
        TrainingGraph.create("huge", nodes)


@st.composite
def dags(draw):
    """Random training-graph-shaped DAGs: each node reads a few earlier ones."""
    count = draw(st.integers(1, 25))
    nodes = []
    for i in range(count):
        deps = sorted(draw(st.sets(st.integers(0, i - 1), max_size=3))) if i else []
        nodes.append(Node(i, f"n{i}", "op", i > count // 2, tuple(deps), draw(st.integers(0, 1000))))
    return TrainingGraph.create("random", nodes)


@given(dags())
def test_the_keep_all_peak_is_the_largest_working_set(graph):
    """The O(T) sweep gives what the definition says: the largest RAM in use right after a node runs."""
    assert graph.keep_all_peak_bytes == max(graph.working_set_bytes(t) for t in range(len(graph)))
