"""The schedule: a typed instruction list per stage, the artefact the checker, the simulator
and a device consume. No solver, no simulator here: only the records and their meaning.

Stage t is the step in which node t is computed for the first time (stage form of Checkmate and
POET). Within a stage the instructions come in this order:

1. `PageOut(i)`: start copying i's output from RAM to storage. i must be resident at the start
   of the stage. It is on storage from the next stage on.
2. `PageIn(i)`: start copying i's output from storage back to RAM. i must have been paged out
   in an earlier stage. It is usable from the next stage on (never by a compute of this stage).
3. `Compute(k)` in ascending node order, each possibly followed by `Free(i)` of inputs whose
   last reader in this stage is k; every input of k must be resident when k runs. The last
   compute of stage t is `Compute(t)`; a node is never computed while its output is resident.
4. `Free(i)` of everything resident that is not kept for the next stage.

RAM accounting (what the checker recomputes and the MILP's U encodes), by timing model:
- `compute-only` (the paper's): RAM at stage start = resident outputs; a compute adds its output
  when it starts; a Free subtracts at once; a page-in adds its bytes only from the next stage.
- `overlap` (the default, a real device): as above, but a page-in holds its bytes from the
  start of the stage that issues it, and an output being paged out is not released before the
  end of the stage (its transfer may run until then), whatever Free says.
Peak RAM = the largest of the stage-start RAM and the RAM right after each compute allocates.

Time: `compute-only` counts compute time only; `overlap` makes each stage last
max(compute time, DMA time / channels), DMA time being the sum of latency + bytes / bandwidth of
the stage's transfers. Energy: compute + page-in + page-out energy, plus, under `overlap`,
static power x the sum of stage times.
"""

from dataclasses import dataclass, field
from enum import Enum


class Timing(str, Enum):
    """How stage time, deadline, energy and page-in RAM are modelled (see module doc)."""

    COMPUTE_ONLY = "compute-only"
    OVERLAP = "overlap"


class Strategy(str, Enum):
    """What the optimiser may do besides computing each node once."""

    HYBRID = "hybrid"
    RECOMPUTE_ONLY = "recompute-only"
    PAGING_ONLY = "paging-only"


# Instructions are frozen dataclasses, not NamedTuples: tuples compare by value across types,
# so Compute(3) == Free(3) would hold, and a set or a comparison of instructions would lie.
@dataclass(frozen=True, slots=True)
class Compute:
    """Run node `node` and allocate its output."""

    node: int


@dataclass(frozen=True, slots=True)
class PageOut:
    """Copy node `node`'s output from RAM to secondary storage."""

    node: int


@dataclass(frozen=True, slots=True)
class PageIn:
    """Copy node `node`'s output from secondary storage back to RAM."""

    node: int


@dataclass(frozen=True, slots=True)
class Free:
    """Release node `node`'s output from RAM."""

    node: int


Instruction = Compute | PageOut | PageIn | Free


@dataclass(frozen=True)
class Budgets:
    """Absolute budgets of one solve: activation RAM in bytes and the deadline in seconds."""

    ram_bytes: int
    runtime_s: float


@dataclass(frozen=True)
class Figures:
    """What a schedule costs: peak RAM, runtime and energy by component, and counts.

    `compute_j` is the first computation of every node; `recompute_j` every further one;
    `static_j` is static power x runtime (zero under compute-only timing).
    """

    peak_ram_bytes: float
    runtime_s: float
    compute_j: float
    recompute_j: float
    page_in_j: float
    page_out_j: float
    static_j: float
    recomputations: int
    page_ins: int
    page_outs: int

    @property
    def total_j(self) -> float:
        return self.compute_j + self.recompute_j + self.page_in_j + self.page_out_j + self.static_j


@dataclass(frozen=True)
class Schedule:
    """A stage-by-stage instruction list for one graph under one timing model."""

    graph_name: str
    num_nodes: int
    timing: Timing
    stages: tuple[tuple[Instruction, ...], ...]
    meta: tuple[tuple[str, str], ...] = field(default=())

    def instructions(self):
        """(stage, instruction) pairs in execution order."""
        for t, stage in enumerate(self.stages):
            for ins in stage:
                yield t, ins

    def counts(self) -> dict[str, int]:
        """How many instructions of each kind the schedule holds."""
        kinds = {"compute": 0, "page_out": 0, "page_in": 0, "free": 0}
        names = {Compute: "compute", PageOut: "page_out", PageIn: "page_in", Free: "free"}
        for _, ins in self.instructions():
            kinds[names[type(ins)]] += 1
        return kinds
