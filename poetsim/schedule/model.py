"""The schedule: a typed instruction list per stage, which the checker, the simulator and a device consume.

No solver, no simulator here: only the records and their meaning.

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

    @classmethod
    def of(cls, value: "Timing | str") -> "Timing":
        """The timing model named `value`; ValueError naming both otherwise."""
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"unknown timing model '{value}' (use compute-only or overlap)") from None


@dataclass(frozen=True)
class Moves:
    """What a schedule may do besides computing each node once and keeping it until its last reader.

    Every strategy (poetsim.strategies) is declared with the moves its schedules use. A schedule
    that uses fewer moves is a schedule of a strategy with more, so its energy is an upper bound
    for that strategy: the optimiser takes such schedules as starts (hybrid is never reported
    worse than paging-only at the same point).
    """

    recompute: bool
    page: bool

    @property
    def label(self) -> str:
        """The moves in one word: recompute-page, recompute, page or none."""
        return "-".join(name for name, on in (("recompute", self.recompute), ("page", self.page)) if on) or "none"

    @property
    def phrase(self) -> str:
        """The moves as words that follow 'a schedule': 'that only recomputes'."""
        return {
            (True, True): "that recomputes and pages",
            (True, False): "that only recomputes",
            (False, True): "that only pages",
            (False, False): "that neither recomputes nor pages",
        }[(self.recompute, self.page)]

    def allows(self, other: "Moves") -> bool:
        """Whether every schedule that uses only `other`'s moves is allowed under these."""
        return (self.recompute or not other.recompute) and (self.page or not other.page)


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


#: A deadline is met when the runtime is within this share above it: runtimes are float sums taken
#: in different orders by the optimiser, the checker and the simulator, and a schedule that meets a
#: deadline exactly must not fail on its last bit. RAM is a sum of integers and compared exactly.
DEADLINE_RTOL = 1e-9


@dataclass(frozen=True)
class Budgets:
    """Absolute budgets of one solve: activation RAM in bytes and the deadline in seconds.

    `fits` and `overruns` are the one definition of "within budget" that the baselines, the
    optimiser, the checker and the simulator share.
    """

    ram_bytes: int
    runtime_s: float

    def meets_deadline(self, runtime_s: float) -> bool:
        """Whether `runtime_s` is within the deadline (to DEADLINE_RTOL)."""
        return runtime_s <= self.runtime_s * (1 + DEADLINE_RTOL)

    def fits(self, figures: "Figures") -> bool:
        """Whether a schedule with these figures meets both budgets."""
        return figures.peak_ram_bytes <= self.ram_bytes and self.meets_deadline(figures.runtime_s)

    def overruns(self, figures: "Figures") -> list[str]:
        """Each budget the figures miss, and by how much, in words (empty when they fit)."""
        problems = []
        if figures.peak_ram_bytes > self.ram_bytes:
            over = figures.peak_ram_bytes - self.ram_bytes
            problems.append(
                f"peak RAM {figures.peak_ram_bytes:,.0f} bytes is {over:,.0f} bytes{_share(over, self.ram_bytes)} "
                f"over the budget of {self.ram_bytes:,} bytes"
            )
        if not self.meets_deadline(figures.runtime_s):
            over = figures.runtime_s - self.runtime_s
            problems.append(
                f"runtime {figures.runtime_s:.6g} s is {over:.6g} s{_share(over, self.runtime_s)} "
                f"over the deadline of {self.runtime_s:.6g} s"
            )
        return problems


def _share(over: float, budget: float) -> str:
    """' (12.5%)' of the budget, or nothing for a zero budget."""
    return f" ({100 * over / budget:.3g}%)" if budget > 0 else ""


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
        """The energy of the step: compute, recompute, both transfers and static."""
        return self.compute_j + self.recompute_j + self.page_in_j + self.page_out_j + self.static_j


@dataclass(frozen=True)
class Schedule:
    """A stage-by-stage instruction list for one graph under one timing model.

    `node_names`, when given (one per node), lets a reader of the schedule file see which
    layer each id is, and lets an executor refuse a schedule made for another graph; it does
    not change what the schedule does.
    """

    graph_name: str
    num_nodes: int
    timing: Timing
    stages: tuple[tuple[Instruction, ...], ...]
    meta: tuple[tuple[str, str], ...] = field(default=())
    node_names: tuple[str, ...] = field(default=())

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
