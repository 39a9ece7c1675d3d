"""The training graph: forward nodes, the loss, then backward nodes, in topological order.

A node's output is the tensor that recomputation or paging acts on. Node ids are 0..T-1 and
equal the node's position, so that "stage t" of the optimiser is "the step that first computes
node t". Everything here is plain data: no costs (see `costs`), no solver.
"""

from dataclasses import dataclass, field
from functools import cached_property


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
        if not nodes:
            raise ValueError("the graph has no nodes")
        for position, node in enumerate(nodes):
            where = f"node {node.id} ({node.name})"
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
            if node.output_bytes < 0 or node.param_bytes < 0 or node.flops < 0:
                raise ValueError(f"{where}: sizes and FLOPs must not be negative")
            if node.measured is not None and any(v < 0 for v in node.measured.given().values()):
                raise ValueError(f"{where}: measured costs must not be negative")
        return cls(name=name, nodes=nodes, meta=tuple(sorted((meta or {}).items())))

    def __len__(self) -> int:
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

    @property
    def output_bytes(self) -> tuple[int, ...]:
        return tuple(node.output_bytes for node in self.nodes)

    @property
    def forward_flops(self) -> float:
        return sum(n.flops for n in self.nodes if not n.backward)

    @property
    def backward_flops(self) -> float:
        return sum(n.flops for n in self.nodes if n.backward)

    @property
    def param_bytes(self) -> int:
        return sum(n.param_bytes for n in self.nodes)

    @cached_property
    def keep_all_peak_bytes(self) -> int:
        """Peak activation RAM when every node is computed once and nothing is dropped early.

        Each output stays in RAM from its computation until its last reader has run (then it
        is freed); an output nobody reads is dropped at the end of its own step. This is the
        stage accounting of the optimiser with every node computed once and nothing paged,
        and the reference that RAM budgets such as "50%" refer to.
        """
        return max(self.working_set_bytes(t) for t in range(len(self.nodes)))

    def working_set_bytes(self, t: int) -> int:
        """RAM in use right after node t is computed in the keep-all schedule."""
        return sum(
            n.output_bytes for n in self.nodes[:t] if self.last_use[n.id] >= t
        ) + self.nodes[t].output_bytes

    @cached_property
    def min_feasible_ram_bytes(self) -> int:
        """A lower bound on any schedule's RAM: the largest node plus all of its inputs."""
        return max(
            node.output_bytes + sum(self.nodes[d].output_bytes for d in node.deps) for node in self.nodes
        )

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
