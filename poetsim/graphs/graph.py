"""The training graph: forward nodes, the loss, then backward nodes, in topological order.

A node's output is the tensor that recomputation or paging acts on. Node ids are 0..T-1 and
equal the node's position, so that "stage t" of the optimiser is "the step that first computes
node t". Everything here is plain data: no costs (see `costs`), no solver.
"""

import math
from dataclasses import dataclass, field
from functools import cached_property

from poetsim.inputs.files import check_text
from poetsim.units import MAX_BYTES

#: Bounds of what a graph may hold, so that every figure derived from it stays finite: more
#: nodes than any graph poetsim can schedule, FLOPs of a node far above any layer's (the
#: largest seen, in an imported Checkmate graph, is 1.6e18), and measured costs of a node up
#: to a day and a gigajoule.
MAX_NODES = 100_000
MAX_NODE_FLOPS = 1e21
MAX_MEASURED_S = 86_400.0
MAX_MEASURED_J = 1e9
#: Longest graph or node name, in characters.
MAX_NAME_CHARS = 200


@dataclass(frozen=True)
class MeasuredCosts:
    """Per-node costs measured on a device; each one given overrides the profile's estimate."""

    compute_s: float | None = None
    compute_j: float | None = None
    page_in_s: float | None = None
    page_in_j: float | None = None
    page_out_s: float | None = None
    page_out_j: float | None = None

    def given(self) -> dict[str, float]:
        """The fields that were measured, by name."""
        return {name: value for name, value in self.__dict__.items() if value is not None}


@dataclass(frozen=True)
class Node:
    """One operator of the training graph and the tensor it produces.

    `deps` are the ids of the nodes whose outputs this node reads; they are all smaller than
    `id`. `flops` counts floating-point operations (a multiply-add is two). `param_bytes` is
    the size of the layer's parameters (forward nodes) and is not part of activation memory.
    """

    id: int
    name: str
    op: str
    backward: bool
    deps: tuple[int, ...]
    output_bytes: int
    param_bytes: int = 0
    flops: float = 0.0
    measured: MeasuredCosts | None = None


@dataclass(frozen=True)
class TrainingGraph:
    """A validated training DAG. Build it with `TrainingGraph.create`, which checks it."""

    name: str
    nodes: tuple[Node, ...]
    meta: tuple[tuple[str, str], ...] = field(default=())

    @classmethod
    def create(cls, name: str, nodes, meta: dict | None = None) -> "TrainingGraph":
        """Check ids, dependencies and sizes, then build the graph; ValueError names the node."""
        nodes = tuple(nodes)
        check_text(name, "name", MAX_NAME_CHARS)
        if not nodes:
            raise ValueError("the graph has no nodes")
        if len(nodes) > MAX_NODES:
            raise ValueError(f"{len(nodes):,} nodes is more than poetsim takes ({MAX_NODES:,})")
        for position, node in enumerate(nodes):
            where = f"node {node.id} ({node.name})"
            check_text(node.name, f"node {node.id}: name", MAX_NAME_CHARS)
            check_text(node.op, f"node {node.id}: op", MAX_NAME_CHARS)
            if node.id != position:
                raise ValueError(f"{where}: ids must be 0..T-1 in order, found id {node.id} at position {position}")
            for dep in node.deps:
                if dep == node.id:
                    raise ValueError(f"{where}: depends on itself (a cycle)")
                if dep < 0 or dep >= len(nodes):
                    raise ValueError(f"{where}: depends on missing node {dep}")
                if dep > node.id:
                    raise ValueError(f"{where}: depends on later node {dep} (not in topological order or a cycle)")
            if len(set(node.deps)) != len(node.deps):
                raise ValueError(f"{where}: lists a dependency twice")
            _check_figures(node, where)
        return cls(name=name, nodes=nodes, meta=tuple(sorted((meta or {}).items())))

    def __len__(self) -> int:
        """How many nodes the graph has (T)."""
        return len(self.nodes)

    @cached_property
    def edges(self) -> tuple[tuple[int, int], ...]:
        """(producer, consumer) pairs, sorted by consumer then producer."""
        return tuple((dep, node.id) for node in self.nodes for dep in sorted(node.deps))

    @cached_property
    def consumers(self) -> tuple[tuple[int, ...], ...]:
        """For each node, the ids of the nodes that read its output, ascending."""
        readers: list[list[int]] = [[] for _ in self.nodes]
        for producer, consumer in self.edges:
            readers[producer].append(consumer)
        return tuple(tuple(sorted(r)) for r in readers)

    @cached_property
    def last_use(self) -> tuple[int, ...]:
        """For each node, the last node that reads it (itself when nothing does)."""
        return tuple(max(readers, default=node.id) for node, readers in zip(self.nodes, self.consumers))

    @cached_property
    def output_bytes(self) -> tuple[int, ...]:
        """Each node's output size, by id (kept: the checker and the simulator read it on every run)."""
        return tuple(node.output_bytes for node in self.nodes)

    @cached_property
    def deps(self) -> tuple[tuple[int, ...], ...]:
        """Each node's inputs, by id (kept: the checker and the simulator read them on every run)."""
        return tuple(node.deps for node in self.nodes)

    @property
    def forward_flops(self) -> float:
        """FLOPs of the forward nodes."""
        return sum(n.flops for n in self.nodes if not n.backward)

    @property
    def backward_flops(self) -> float:
        """FLOPs of the backward nodes."""
        return sum(n.flops for n in self.nodes if n.backward)

    @property
    def param_bytes(self) -> int:
        """Bytes of every node's parameters, held whatever the schedule (not activation memory)."""
        return sum(n.param_bytes for n in self.nodes)

    @cached_property
    def keep_all_peak_bytes(self) -> int:
        """Peak activation RAM when every node is computed once and nothing is dropped early.

        Each output stays in RAM from its computation until its last reader has run (then it
        is freed); an output nobody reads is dropped at the end of its own step. This is the
        stage accounting of the optimiser with every node computed once and nothing paged,
        and the reference that RAM budgets such as "50%" refer to.
        """
        # Output n is resident over steps n..last_use[n]: add it at n, remove it after its last use.
        change = [0] * (len(self.nodes) + 1)
        for node, last in zip(self.nodes, self.last_use):
            change[node.id] += node.output_bytes
            change[last + 1] -= node.output_bytes
        peak = resident = 0
        for step in range(len(self.nodes)):
            resident += change[step]
            peak = max(peak, resident)
        return peak

    def working_set_bytes(self, t: int) -> int:
        """RAM in use right after node t is computed in the keep-all schedule (O(T); the peak is O(T) in all)."""
        return sum(n.output_bytes for n in self.nodes[:t] if self.last_use[n.id] >= t) + self.nodes[t].output_bytes

    @cached_property
    def min_feasible_ram_bytes(self) -> int:
        """A lower bound on any schedule's RAM: the largest node plus all of its inputs."""
        return max(node.output_bytes + sum(self.nodes[d].output_bytes for d in node.deps) for node in self.nodes)

    def summary(self) -> dict:
        """Numbers that describe the graph, for `poetsim graph` and reports."""
        return {
            "name": self.name,
            "nodes": len(self.nodes),
            "edges": len(self.edges),
            "forward_nodes": sum(not n.backward for n in self.nodes),
            "backward_nodes": sum(n.backward for n in self.nodes),
            "forward_flops": self.forward_flops,
            "backward_flops": self.backward_flops,
            "param_bytes": self.param_bytes,
            "activation_bytes": sum(self.output_bytes),
            "keep_all_peak_bytes": self.keep_all_peak_bytes,
            "min_feasible_ram_bytes": self.min_feasible_ram_bytes,
        }


def _check_figures(node: Node, where: str) -> None:
    """ValueError unless the node's sizes, FLOPs and measured costs are finite and in range."""
    for name, value, top in (
        ("output_bytes", node.output_bytes, MAX_BYTES),
        ("param_bytes", node.param_bytes, MAX_BYTES),
        ("flops", node.flops, MAX_NODE_FLOPS),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{where}: {name} must be a finite number, got {value!r}")
        if value < 0:
            raise ValueError(f"{where}: sizes and FLOPs must not be negative ({name} is {value!r})")
        if value > top:
            raise ValueError(f"{where}: {name} {value:.6g} is above the {top:.6g} poetsim takes")
    if node.measured is None:
        return
    for name, value in node.measured.given().items():
        top = MAX_MEASURED_S if name.endswith("_s") else MAX_MEASURED_J
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{where}: measured {name} must be a finite number at least 0, got {value!r}")
        if value > top:
            raise ValueError(f"{where}: measured {name} {value:.6g} is above the {top:.6g} poetsim takes")
