"""The cost model: time and energy of computing, paging in and paging out each node.

This is the one place where a graph and a platform become numbers the optimiser, the checker
and the simulator share. Rules (docs/cost-model.md states them for users):

- compute time  = FLOPs / compute.flops_per_s
- compute energy = FLOPs x compute.power_w / (compute.energy_flops_per_s or flops_per_s)
- a profile may give measured rates per operator kind (compute.op_flops_per_s, written by
  `poetsim profile`): a node whose op is listed takes FLOPs / its kind's rate, and compute.power_w
  x that time as energy
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

from poetsim.graph import TrainingGraph
from poetsim.profiles import Platform

#: The `Node.op` of the data batch (see poetsim.layers), whose "compute" is a read from storage.
INPUT_OP = "input"


@dataclass(frozen=True)
class CostTable:
    """Per-node costs of one graph on one platform, as tuples indexed by node id."""

    output_bytes: tuple[int, ...]
    compute_s: tuple[float, ...]
    compute_j: tuple[float, ...]
    page_in_s: tuple[float, ...]
    page_in_j: tuple[float, ...]
    page_out_s: tuple[float, ...]
    page_out_j: tuple[float, ...]
    static_power_w: float
    dma_channels: int

    def __len__(self) -> int:
        return len(self.output_bytes)

    @property
    def plain_runtime_s(self) -> float:
        """One forward+backward pass, every node once, nothing paged: the '1x' of runtime budgets."""
        return sum(self.compute_s)

    @property
    def plain_compute_j(self) -> float:
        """Compute energy of every node once: the energy floor of any schedule."""
        return sum(self.compute_j)


def node_costs(graph: TrainingGraph, platform: Platform) -> CostTable:
    """Derive every node's costs from FLOPs, bytes and the platform; measured costs win.

    The input node's FLOPs are ignored: reading the batch costs a page-in (module doc).
    """
    columns: dict[str, list[float]] = {k: [] for k in ("compute_s", "compute_j", "page_in_s", "page_in_j", "page_out_s", "page_out_j")}
    storage = platform.storage
    for node in graph.nodes:
        page_in_s = storage.page_in.seconds(node.output_bytes)
        page_out_s = storage.page_out.seconds(node.output_bytes)
        if node.op == INPUT_OP:
            compute_s = page_in_s
            compute_j = page_in_s * storage.power_w
        else:
            compute_s = platform.compute.seconds(node.op, node.flops)
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
        **{k: tuple(v) for k, v in columns.items()},
    )
