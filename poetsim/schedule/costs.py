"""The cost model: time and energy of computing, paging in and paging out each node.

This is the one place where a graph and a platform become numbers the optimiser, the checker
and the simulator share. Rules (docs/cost-model.md states them for users):

- compute time  = max(FLOPs / compute.flops_per_s, moved bytes / memory_bus_bytes_per_s), the
  roofline (Williams, Waterman, Patterson, CACM 2009): an operator is bound either by its
  arithmetic or by the bytes it moves over the memory bus, here its inputs and its output;
- compute energy = FLOPs x compute.power_w / (compute.energy_flops_per_s or flops_per_s)
- a profile may give measured rates per operator kind (compute.op_flops_per_s, written by
  `poetsim profile` and `poetsim device profile`): a node whose op is listed takes FLOPs / its
  kind's rate, plus its kind's fixed cost per call where compute.op_call_s lists one, as the
  arithmetic side of its roofline, and compute.power_w x that arithmetic time as energy
- page-in time  = storage.page_in.latency_s + output_bytes / storage.page_in.bytes_per_s
- page-in energy = page-in time x storage.power_w (likewise page-out)
- a node whose op is "input" (the data batch) is not computed but read from storage: its
  compute time and energy are those of a page-in of its output bytes, so "recomputing" it means
  reading the batch again, which needs no page-out first;
- a per-node measured cost in the graph file replaces the derived figure of the same name,
  field by field, after every rule above;
- static power is not per node: it is static_power_w x the iteration's makespan, added by the
  timing model that knows the makespan (`overlap`), and left out by the paper's (`compute-only`).
"""

from dataclasses import dataclass

from poetsim.graphs.graph import TrainingGraph
from poetsim.inputs.profiles import Platform
from poetsim.schedule.model import Timing

#: The `Node.op` of the data batch (see poetsim.graphs.layers), whose "compute" is a read from storage.
INPUT_OP = "input"


@dataclass(frozen=True)
class CostTable:
    """Per-node costs of one graph on one platform, as tuples indexed by node id.

    `moved_bytes` (inputs read + output written, see `moved_bytes`) is what the simulator's
    memory bus carries for each operator; tables built by hand may leave it out (None), and the
    simulator then derives it from the graph.
    """

    output_bytes: tuple[int, ...]
    compute_s: tuple[float, ...]
    compute_j: tuple[float, ...]
    page_in_s: tuple[float, ...]
    page_in_j: tuple[float, ...]
    page_out_s: tuple[float, ...]
    page_out_j: tuple[float, ...]
    static_power_w: float
    dma_channels: int
    moved_bytes: tuple[int, ...] | None = None

    def __len__(self) -> int:
        """How many nodes the table costs."""
        return len(self.output_bytes)

    @property
    def plain_runtime_s(self) -> float:
        """One forward+backward pass, every node once, nothing paged: the '1x' of runtime budgets."""
        return sum(self.compute_s)

    @property
    def plain_compute_j(self) -> float:
        """Compute energy of every node once: the energy floor of any schedule."""
        return sum(self.compute_j)

    def keep_all_energy_j(self, timing: Timing) -> float:
        """One plain pass's energy, the keep-all schedule's.

        Every node is computed once, and under `overlap` static power is paid for the plain
        runtime.
        """
        static_w = self.static_power_w if Timing(timing) is Timing.OVERLAP else 0.0
        return self.plain_compute_j + static_w * self.plain_runtime_s


def moved_bytes(graph: TrainingGraph) -> tuple[int, ...]:
    """Bytes each node's operator moves over the memory bus: its inputs read and its output written.

    The roofline's memory side (module doc), and the simulator's bus demand of the operator.
    """
    sizes = graph.output_bytes
    return tuple(sizes[node.id] + sum(sizes[d] for d in node.deps) for node in graph.nodes)


def node_costs(graph: TrainingGraph, platform: Platform) -> CostTable:
    """Derive every node's costs from FLOPs, bytes and the platform; measured costs win.

    The input node's FLOPs are ignored: reading the batch costs a page-in (module doc).
    Compute energy stays FLOPs x energy per FLOP whichever side of the roofline bounds the time:
    the profiles' compute powers were measured on arithmetic, and a bus-bound operator's extra
    time is charged at static power by the timing models that count it.
    """
    names = ("compute_s", "compute_j", "page_in_s", "page_in_j", "page_out_s", "page_out_j")
    columns: dict[str, list[float]] = {k: [] for k in names}
    storage = platform.storage
    bus_bytes_per_s = platform.memory_bus_bytes_per_s
    moved = moved_bytes(graph)
    for node, node_moved_bytes in zip(graph.nodes, moved):
        page_in_s = storage.page_in.seconds(node.output_bytes)
        page_out_s = storage.page_out.seconds(node.output_bytes)
        if node.op == INPUT_OP:
            compute_s = page_in_s
            compute_j = page_in_s * storage.power_w
        else:
            compute_s = max(platform.compute.seconds(node.op, node.flops), node_moved_bytes / bus_bytes_per_s)
            compute_j = platform.compute.joules(node.op, node.flops)
        derived = {
            "compute_s": compute_s,
            "compute_j": compute_j,
            "page_in_s": page_in_s,
            "page_in_j": page_in_s * storage.power_w,
            "page_out_s": page_out_s,
            "page_out_j": page_out_s * storage.power_w,
        }
        if node.measured is not None:
            derived.update(node.measured.given())
        for key, value in derived.items():
            columns[key].append(float(value))
    return CostTable(
        output_bytes=graph.output_bytes,
        static_power_w=platform.static_power_w,
        dma_channels=platform.dma_channels,
        moved_bytes=moved,
        **{k: tuple(v) for k, v in columns.items()},
    )
