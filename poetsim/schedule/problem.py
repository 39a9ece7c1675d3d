"""A problem: one training graph on one platform under resolved budgets, what every strategy takes.

It is the join of the user's inputs (a model, a platform, a RAM budget, a runtime budget, a
timing model) once they have been turned into numbers: the graph, the per-node cost table and
the budgets in bytes and seconds.
"""

from dataclasses import dataclass, replace

from poetsim.graphs.graph import TrainingGraph
from poetsim.graphs.io import load_graph
from poetsim.inputs.profiles import Platform, load_platform
from poetsim.schedule.costs import CostTable, node_costs
from poetsim.schedule.model import Budgets, Moves, Timing
from poetsim.units import RamSpec

#: What each training-state reservation keeps in RAM besides activations, in multiples of the
#: parameter bytes: the parameters, their gradients and the optimiser's state per parameter.
RESERVE_MULTIPLE = {"none": 0, "sgd": 2, "momentum": 3, "adam": 4}


@dataclass(frozen=True)
class Problem:
    """A graph on a platform under resolved budgets: everything a strategy needs."""

    graph: TrainingGraph
    platform: Platform
    costs: CostTable
    budgets: Budgets
    ram: RamSpec
    runtime_x: float
    timing: Timing
    reserved_bytes: int

    @property
    def ram_capacity_bytes(self) -> int:
        """What the simulator may allocate: the platform's RAM less the reserved training state."""
        return self.platform.ram_bytes - self.reserved_bytes

    def solver_inputs(self, moves: Moves) -> tuple:
        """Everything a solve with `moves` reads, and nothing else.

        Two problems with equal solver inputs have the same schedules, energies and proofs for
        those moves.

        Without paging no schedule moves a byte to storage, so the storage costs (transfer time
        and energy, DMA channels) are left out: rpi4 and rpi4-nocache, which differ only there,
        are one problem for recompute-only. The platform's other figures (its RAM, its memory
        bus) are the simulator's, not the solver's, and are left out too.
        """
        costs = self.costs
        if not moves.page:
            zero = (0.0,) * len(costs)
            costs = replace(costs, page_in_s=zero, page_in_j=zero, page_out_s=zero, page_out_j=zero, dma_channels=1)
        return (self.graph, costs, self.budgets, self.timing)


def reserved_bytes(graph: TrainingGraph, reserve_training_state: str) -> int:
    """RAM kept for parameters, gradients and optimiser state (0 unless the scenario asks)."""
    return RESERVE_MULTIPLE[reserve_training_state] * graph.param_bytes


def make_problem(
    graph: TrainingGraph,
    platform: Platform,
    ram: RamSpec,
    runtime_x: float,
    timing: Timing | str = Timing.OVERLAP,
    reserve_training_state: str = "none",
) -> Problem:
    """Derive the costs of `graph` on `platform` and resolve the budgets to bytes and seconds.

    `timing` is a Timing or its value ("overlap", "compute-only").
    """
    costs = node_costs(graph, platform)
    budgets = Budgets(ram_bytes=ram.resolve(graph.keep_all_peak_bytes), runtime_s=runtime_x * costs.plain_runtime_s)
    return Problem(graph, platform, costs, budgets, ram, runtime_x, Timing(timing), reserved_bytes(graph, reserve_training_state))


def build_problem(
    model: str,
    platform: str,
    ram: RamSpec,
    runtime_x: float,
    timing: Timing | str = Timing.OVERLAP,
    batch_size: int | None = None,
    input_size: int | None = None,
    seq_len: int | None = None,
    flops_per_cost_unit: float = 1e6,
    reserve_training_state: str = "none",
) -> Problem:
    """Load the graph (zoo name or file) and the platform (name or file), then `make_problem`."""
    graph = load_graph(model, batch_size, input_size, seq_len, flops_per_cost_unit)
    return make_problem(graph, load_platform(platform), ram, runtime_x, timing, reserve_training_state)
