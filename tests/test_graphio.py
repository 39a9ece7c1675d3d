"""Graph files: the poetsim-graph format, node-link import, and rejection of bad files."""

import json

import pytest

from poetsim.errors import UserInputError
from poetsim.graphs.graph import MeasuredCosts, Node, TrainingGraph
from poetsim.graphs.io import graph_to_json, load_graph, read_graph_file, save_graph

CHECKMATE_NODES = {
    "vgg16_256_224x224x3_train.json": 45,
    "vgg19_256_224x224x3_train.json": 51,
    "vgg_unet_32_416x608x3_train.json": 71,
    "fcn_8_vgg_32_416x608x3_train.json": 73,
    "segnet_32_416x608x3_train.json": 77,
    "mobilenet_512_224x224x3_train.json": 185,
    "resnet50_256_224x224x3_train.json": 353,
}
#: The graphs, smallest first.
BY_SIZE: list[tuple[str, int]] = sorted(CHECKMATE_NODES.items(), key=lambda kv: kv[1])


def _tiny() -> TrainingGraph:
    nodes = [
        Node(0, "x", "input", False, (), 400),
        Node(1, "fc", "linear", False, (0,), 200, param_bytes=80, flops=1000.0),
        Node(2, "loss", "loss", False, (1,), 4, flops=10.0),
        Node(3, "fc_grad", "linear_grad", True, (2, 0), 0, flops=2000.0, measured=MeasuredCosts(compute_s=0.5, page_in_j=1e-3)),
    ]
    return TrainingGraph.create("tiny", nodes, meta={"note": "hand-built"})


def _write(tmp_path, data, name="g.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_round_trip_keeps_every_field(tmp_path):
    """save_graph then read_graph_file gives back the same nodes, measured costs included."""
    graph = _tiny()
    path = tmp_path / "tiny.json"
    save_graph(graph, path)
    back = read_graph_file(path)
    assert back.nodes == graph.nodes
    assert back.name == "tiny"
    assert json.loads(path.read_text())["format"] == "poetsim-graph"


def test_load_graph_accepts_a_path(tmp_path):
    path = tmp_path / "tiny.json"
    save_graph(_tiny(), path)
    assert len(load_graph(str(path))) == 4


@pytest.mark.parametrize("name,count", BY_SIZE)
def test_imports_every_checkmate_graph(checkmate_graphs, name, count):
    """Each of the seven literature graphs imports with its published node count."""
    graph = read_graph_file(checkmate_graphs / name)
    raw = json.loads((checkmate_graphs / name).read_text())
    assert len(graph) == count
    assert len(graph.edges) == len(raw["links"])
    assert graph.output_bytes == tuple(n["cost_ram"] for n in raw["nodes"])
    assert [n.backward for n in graph.nodes] == [n["backward"] for n in raw["nodes"]]


def test_node_link_cost_units_become_flops(checkmate_graphs):
    graph = read_graph_file(checkmate_graphs / "vgg16_256_224x224x3_train.json", flops_per_cost_unit=2.0)
    raw = json.loads((checkmate_graphs / "vgg16_256_224x224x3_train.json").read_text())
    assert [n.flops for n in graph.nodes] == [2.0 * n["cost_cpu"] for n in raw["nodes"]]


def test_node_link_out_of_order_ids_are_sorted_topologically(tmp_path):
    data = {
        "nodes": [
            {"id": 0, "backward": True, "cost_cpu": 1, "cost_ram": 1},
            {"id": 1, "backward": False, "cost_cpu": 1, "cost_ram": 2},
        ],
        "links": [{"source": 1, "target": 0}],
    }
    graph = read_graph_file(_write(tmp_path, data))
    assert [n.output_bytes for n in graph.nodes] == [2, 1]
    assert graph.nodes[1].deps == (0,)


def _doc(**node_changes):
    doc = graph_to_json(_tiny())
    doc["nodes"][1].update(node_changes)
    return doc


@pytest.mark.parametrize(
    "data,fragment",
    [
        ("{not json", "not a JSON file"),
        ("[1, 2]", "must hold a JSON object"),
        ({"format": "other", "version": 1, "name": "x", "nodes": []}, "unknown format 'other'"),
        ({"format": "poetsim-graph", "version": 9, "name": "x", "nodes": []}, "unsupported version 9"),
        ({"hello": 1}, "unknown graph format"),
        (_doc(deps=[5]), "depends on missing node 5"),
        (_doc(deps=[2]), "depends on later node 2"),
        (_doc(deps=[1]), "depends on itself"),
        (_doc(output_bytes=-1), "nodes.1.output_bytes"),
        (_doc(compute_s=-1.0), "nodes.1.compute_s"),
        (_doc(colour="red"), "nodes.1.colour: unknown field"),
        (
            {
                "nodes": [
                    {"id": 0, "backward": False, "cost_cpu": 1, "cost_ram": 1},
                    {"id": 1, "backward": False, "cost_cpu": 1, "cost_ram": 1},
                ],
                "links": [{"source": 0, "target": 1}, {"source": 1, "target": 0}],
            },
            "cycle",
        ),
        ({"nodes": [{"id": 0, "backward": False, "cost_cpu": 1, "cost_ram": -5}], "links": []}, "nodes.0.cost_ram"),
    ],
)
def test_bad_graph_files_are_rejected_in_one_line(tmp_path, data, fragment):
    path = _write(tmp_path, data)
    with pytest.raises(UserInputError) as caught:
        read_graph_file(path)
    message = str(caught.value)
    assert fragment in message
    assert str(path) in message
    assert "\n" not in message


def test_missing_file_and_unknown_model():
    with pytest.raises(UserInputError, match="no such graph file"):
        read_graph_file("/nonexistent/graph.json")
    with pytest.raises(UserInputError, match="unknown model 'nosuchnet'"):
        load_graph("nosuchnet")
