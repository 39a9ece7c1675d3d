"""Graph files: poetsim's own JSON format, and import of the literature's node-link graphs.

`load_graph` accepts a zoo model name or a path anywhere a model is asked for.

poetsim-graph v1 (docs/graphs.md documents it for users):
    {"format": "poetsim-graph", "version": 1, "name": "...",
     "nodes": [{"id": 0, "name": "input", "op": "input", "backward": false, "deps": [],
                "output_bytes": 12288, "param_bytes": 0, "flops": 0,
                "compute_s": ..., "compute_j": ..., "page_in_s": ..., ...}]}
`op`, `param_bytes`, `flops` and the six measured costs are optional. A measured cost replaces
what the hardware profile would derive for that node.

Node-link import (networkx `node_link_data`, as the Checkmate and Moccasin graphs are
published): `nodes[*]` carry `id`, `name`, `backward`, `cost_cpu` (profiled runtime in
arbitrary units) and `cost_ram` (output bytes); `links[*]` carry `source` and `target`. They
have no FLOPs, so poetsim sets flops = cost_cpu x flops_per_cost_unit and lets the platform turn
FLOPs into time and energy like any other node (docs/cost-model.md).
"""

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from poetsim.errors import UserInputError
from poetsim.graphs.graph import (
    MAX_MEASURED_J,
    MAX_MEASURED_S,
    MAX_NODE_FLOPS,
    MAX_NODES,
    MeasuredCosts,
    Node,
    TrainingGraph,
)
from poetsim.inputs.files import MAX_GRAPH_BYTES, load_json
from poetsim.inputs.profiles import format_validation_error
from poetsim.units import MAX_BYTES

FORMAT = "poetsim-graph"
VERSION = 1
DEFAULT_FLOPS_PER_COST_UNIT = 1e6
_MEASURED = ("compute_s", "compute_j", "page_in_s", "page_in_j", "page_out_s", "page_out_j")


#: Every number in a graph file must be finite (no NaN or infinity, however written).
_STRICT = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
_LOOSE = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)


class _FileNode(BaseModel):
    model_config = _STRICT

    id: int = Field(ge=0, lt=MAX_NODES)
    name: str
    op: str = "op"
    backward: bool
    deps: list[int]
    output_bytes: int = Field(ge=0, le=MAX_BYTES)
    param_bytes: int = Field(default=0, ge=0, le=MAX_BYTES)
    flops: float = Field(default=0.0, ge=0, le=MAX_NODE_FLOPS)
    compute_s: float | None = Field(default=None, ge=0, le=MAX_MEASURED_S)
    compute_j: float | None = Field(default=None, ge=0, le=MAX_MEASURED_J)
    page_in_s: float | None = Field(default=None, ge=0, le=MAX_MEASURED_S)
    page_in_j: float | None = Field(default=None, ge=0, le=MAX_MEASURED_J)
    page_out_s: float | None = Field(default=None, ge=0, le=MAX_MEASURED_S)
    page_out_j: float | None = Field(default=None, ge=0, le=MAX_MEASURED_J)


class _GraphFile(BaseModel):
    model_config = _STRICT

    format: str
    version: int
    name: str
    nodes: list[_FileNode]
    meta: dict[str, str] = {}


class _LinkNode(BaseModel):
    model_config = _LOOSE

    id: int
    name: str = ""
    backward: bool
    cost_cpu: float = Field(ge=0, le=MAX_NODE_FLOPS)
    cost_ram: int = Field(ge=0, le=MAX_BYTES)


class _Link(BaseModel):
    model_config = _LOOSE

    source: int
    target: int


class _NodeLinkFile(BaseModel):
    model_config = _LOOSE

    nodes: list[_LinkNode]
    links: list[_Link]
    graph: dict[str, Any] = {}


def graph_to_json(graph: TrainingGraph) -> dict:
    """The poetsim-graph v1 document of a graph (measured costs only where present)."""
    nodes = []
    for node in graph.nodes:
        record = {
            "id": node.id,
            "name": node.name,
            "op": node.op,
            "backward": node.backward,
            "deps": list(node.deps),
            "output_bytes": node.output_bytes,
            "param_bytes": node.param_bytes,
            "flops": node.flops,
        }
        if node.measured is not None:
            record.update(node.measured.given())
        nodes.append(record)
    return {"format": FORMAT, "version": VERSION, "name": graph.name, "nodes": nodes, "meta": dict(graph.meta)}


def save_graph(graph: TrainingGraph, path: Path) -> None:
    """Write a graph as poetsim-graph JSON (its folder made if missing)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(graph_to_json(graph), indent=1) + "\n")


def read_graph_file(path: str | Path, flops_per_cost_unit: float = DEFAULT_FLOPS_PER_COST_UNIT) -> TrainingGraph:
    """Read a poetsim-graph or node-link JSON file; UserInputError names the file and problem."""
    path = Path(path)
    data = load_json(path, "graph file", MAX_GRAPH_BYTES)
    if not isinstance(data, dict):
        raise UserInputError(f"{path}: a graph file must hold a JSON object")
    try:
        if "format" in data:
            return _from_poetsim(data, path)
        if "links" in data and "nodes" in data:
            return _from_node_link(data, path, flops_per_cost_unit)
    except ValidationError as exc:
        raise UserInputError(f"{path}: {format_validation_error(exc)}") from None
    except ValueError as exc:
        raise UserInputError(f"{path}: {exc}") from None
    raise UserInputError(f'{path}: unknown graph format (expected "format": "{FORMAT}" or node-link JSON with nodes and links)')


def _from_poetsim(data: dict, path: Path) -> TrainingGraph:
    if data.get("format") != FORMAT:
        raise ValueError(f"format: unknown format '{data.get('format')}' (expected '{FORMAT}')")
    if data.get("version") != VERSION:
        raise ValueError(f"version: unsupported version {data.get('version')!r} (this poetsim reads version {VERSION})")
    doc = _GraphFile.model_validate(data)
    nodes = []
    for entry in doc.nodes:
        measured = {k: getattr(entry, k) for k in _MEASURED if getattr(entry, k) is not None}
        nodes.append(
            Node(
                id=entry.id,
                name=entry.name,
                op=entry.op,
                backward=entry.backward,
                deps=tuple(entry.deps),
                output_bytes=entry.output_bytes,
                param_bytes=entry.param_bytes,
                flops=entry.flops,
                measured=MeasuredCosts(**measured) if measured else None,
            )
        )
    return TrainingGraph.create(doc.name, nodes, meta=dict(doc.meta, source=str(path)))


def _from_node_link(data: dict, path: Path, flops_per_cost_unit: float) -> TrainingGraph:
    doc = _NodeLinkFile.model_validate(data)
    by_id = {node.id: node for node in doc.nodes}
    if len(by_id) != len(doc.nodes):
        raise ValueError("nodes: duplicate node id")
    deps: dict[int, list[int]] = {node_id: [] for node_id in by_id}
    for link in doc.links:
        for end in (link.source, link.target):
            if end not in by_id:
                raise ValueError(f"links: edge {link.source}->{link.target} names missing node {end}")
        deps[link.target].append(link.source)
    order = _topological_order(by_id, deps)
    position = {node_id: pos for pos, node_id in enumerate(order)}
    nodes = [
        Node(
            id=position[node_id],
            name=by_id[node_id].name or f"node{node_id}",
            op="grad" if by_id[node_id].backward else "fwd",
            backward=by_id[node_id].backward,
            deps=tuple(sorted(position[d] for d in deps[node_id])),
            output_bytes=by_id[node_id].cost_ram,
            flops=by_id[node_id].cost_cpu * flops_per_cost_unit,
        )
        for node_id in order
    ]
    name = str(doc.graph.get("name") or path.stem)
    meta = {"source": str(path), "imported_from": "node-link", "flops_per_cost_unit": f"{flops_per_cost_unit:g}"}
    return TrainingGraph.create(name, nodes, meta=meta)


def _topological_order(by_id: dict, deps: dict[int, list[int]]) -> list[int]:
    """Kahn's algorithm, smallest id first, so already-ordered files keep their order."""
    import heapq

    waiting = {node_id: len(set(d)) for node_id, d in deps.items()}
    readers: dict[int, list[int]] = {node_id: [] for node_id in by_id}
    for node_id, d in deps.items():
        for dep in set(d):
            readers[dep].append(node_id)
    ready = [node_id for node_id, count in waiting.items() if count == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        node_id = heapq.heappop(ready)
        order.append(node_id)
        for reader in readers[node_id]:
            waiting[reader] -= 1
            if waiting[reader] == 0:
                heapq.heappush(ready, reader)
    if len(order) != len(by_id):
        raise ValueError("links: the graph has a cycle")
    return order


def load_graph(
    spec: str | Path,
    batch_size: int | None = None,
    input_size: int | None = None,
    seq_len: int | None = None,
    flops_per_cost_unit: float = DEFAULT_FLOPS_PER_COST_UNIT,
) -> TrainingGraph:
    """A graph file by path (anything ending in .json, or any existing path that is not a zoo name), else a zoo model.

    A zoo name wins over a file or folder of the same name in the working directory.
    """
    from poetsim.graphs import zoo

    path = Path(spec)
    if path.suffix == ".json" or (str(spec) not in zoo.MODELS and path.exists()):
        return read_graph_file(path, flops_per_cost_unit)
    if str(spec) not in zoo.MODELS:
        raise UserInputError(f"unknown model '{spec}' (known: {', '.join(sorted(zoo.MODELS))}; or give a graph JSON path)")
    options = {k: v for k, v in (("batch_size", batch_size), ("input_size", input_size), ("seq_len", seq_len)) if v is not None}
    try:
        return zoo.build_model(str(spec), **options)
    except ValueError as exc:  # a size the graph's bounds refuse (poetsim.graphs.graph.MAX_NODES and the like)
        raise UserInputError(f"model {spec}: {exc}") from None
