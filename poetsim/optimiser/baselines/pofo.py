"""POFO: the dynamic program of Beaumont, Eyraud-Dubois and Shilova (NeurIPS 2021) on poetsim's model.

"Efficient Combination of Rematerialization and Offloading for Training DNNs" schedules a chain
(`poetsim.optimiser.baselines.chain`) to minimise the makespan of one iteration under a memory limit. Its
schedules are *persistent*: the forward pass runs once from the first block to the loss, and
each step of the chain is one of
- `F_all(s)`: compute block s keeping what its backward reads, go on with block s+1, and run
  block s's backward when the rest is done;
- `F_ck(s..j)`: compute blocks s..j keeping only block j's output and the checkpoint (block s's
  input), go on with block j+1, then run the backward of s..j, recomputing from the checkpoint
  with rotor's recursion (Beaumont et al. 2019): each block either recomputed keeping all it
  needs, or a further stretch recomputed without keeping, checkpointed, and solved the same way;
each step may also *offload its input* (POFO's choice): page the tensors it received from the
previous step out during its forward, and back in just before its own backward starts.

What poetsim decides (docs/paper.md lists it with the reasons):
- Time and memory are poetsim's, not POFO's continuous model: stage time is
  max(compute, DMA / channels) under `overlap` timing, RAM is counted as `poetsim.schedule.model`
  states, so the program's makespan equals the checker's runtime of the schedule it returns.
- A page-out is issued in the stage that last reads the tensor in the forward pass (or the
  step's first stage); the page-in of a step's input in the last stage before its backward.
- Offloading happens only in the first forward pass, as in POFO; recomputation never pages.
- Memory is counted in `slots` steps of the limit (tensor sizes rounded up), as rotor and POFO
  do, so the program never accepts a schedule over the limit; with `slots=None` it counts bytes.

`pofo_schedule` returns the fastest schedule of this space within the RAM limit, or, if none
fits, the one with the smallest limit that does (the pipeline then reports it over budget).
"""

import math
from bisect import bisect_right
from dataclasses import dataclass

from poetsim.errors import InternalError
from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.baselines.chain import Chain, chain_of_blocks
from poetsim.optimiser.baselines.pofo_tables import Rec, RecAll, RecCk, Tables, Top, TopAll, TopCk, Turn
from poetsim.optimiser.plans.plan import Plan, figures, to_schedule
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Figures, Schedule, Timing
from poetsim.strategies import POFO

__all__ = ["PofoSolution", "RecAll", "RecCk", "TopAll", "TopCk", "Turn", "plan_figures", "plan_of", "pofo_schedule"]

#: Memory steps of the dynamic program by default (rotor's and POFO's choice of 500).
DEFAULT_SLOTS = 500


@dataclass(frozen=True)
class PofoSolution:
    """POFO's schedule and what the dynamic program predicted for it."""

    schedule: Schedule
    plan: Plan
    tree: Top
    makespan_s: float  # the program's own figure; equals the checker's runtime
    limit_bytes: int  # the memory limit it was solved for
    fits: bool  # whether it met the limit that was asked for
    blocks: int
    slot_bytes: int


def pofo_schedule(
    graph: TrainingGraph, costs: CostTable, ram_bytes: int, timing: Timing, slots: int | None = DEFAULT_SLOTS
) -> PofoSolution:
    """The fastest POFO schedule within `ram_bytes` (UserInputError if the graph is no chain).

    If no schedule of the space fits, the limit is raised by a quarter at a time until one does,
    and that schedule is returned with `fits=False`.
    """
    chain = chain_of_blocks(graph)
    limit, fits = ram_bytes, True
    ceiling = 4 * max(graph.keep_all_peak_bytes, ram_bytes, 1)
    while True:
        solver = Tables(graph, costs, chain, Timing(timing), limit, slots)
        tree, makespan_s = solver.solve()
        if tree is not None:
            break
        if limit >= ceiling:
            raise InternalError(f"pofo: no schedule of graph '{graph.name}' fits even {limit:,} bytes")
        limit, fits = max(limit + 1, math.ceil(limit * 1.25)), False
    plan = plan_of(chain, graph, tree)
    schedule = to_schedule(
        plan, graph, costs, timing, {"strategy": POFO.name, "blocks": str(len(chain.blocks)), "limit_bytes": str(limit)}
    )
    return PofoSolution(schedule, plan, tree, makespan_s, limit, fits, len(chain.blocks), solver.slot_bytes)


# -- from a tree to a plan --------------------------------------------------------------------------


def plan_of(chain: Chain, graph: TrainingGraph, tree: Top) -> Plan:
    """The poetsim plan of a POFO tree: stages, recomputations, pages, and what is kept between."""
    T = len(graph)
    recompute: list[set[int]] = [set() for _ in range(T)]
    page_out: list[set[int]] = [set() for _ in range(T)]
    page_in: list[set[int]] = [set() for _ in range(T)]
    pending: list[int] = []

    def group(k: int) -> None:
        grads = chain.blocks[k].grads
        recompute[grads[0]].update(pending)
        pending.clear()

    def rec(node: Rec) -> None:
        blk = chain.blocks[node.s]
        if isinstance(node, RecAll):
            if node.rest is None:
                pending.extend(chain.needed(blk.saved - {blk.output}, [node.s]))
            else:
                pending.extend(chain.needed(blk.saved | {blk.output}, [node.s]))
                rec(node.rest)
            group(node.s)
        else:
            pending.extend(chain.needed({chain.blocks[node.k - 1].output}, range(node.s, node.k)))
            rec(node.right)
            rec(node.left)

    def top(node: Top, bar: bool) -> None:
        if isinstance(node, Turn):
            return
        last = node.s if isinstance(node, TopAll) else node.j
        checkpoint = isinstance(node, TopCk)
        if node.offload:
            moving = chain.retained(node.s, bar, checkpoint)
            for stage, tensors in chain.page_out_stages(node.s, moving, last).items():
                page_out[stage] |= tensors
            page_in[chain.blocks[last].grads[0] - 1] |= moving
        if isinstance(node, TopAll):
            top(node.rest, True)
            group(node.s)
        else:
            top(node.rest, False)
            rec(node.backward)

    top(tree, False)
    computed = tuple(tuple(sorted(recompute[t] | {t})) for t in range(T))
    return Plan(
        computed, _kept(graph, computed, page_out, page_in), tuple(map(frozenset, page_out)), tuple(map(frozenset, page_in))
    )


def _kept(
    graph: TrainingGraph, computed: tuple[tuple[int, ...], ...], page_out: list[set[int]], page_in: list[set[int]]
) -> tuple[frozenset[int], ...]:
    """What stays in RAM after each stage, one set per stage.

    An output stays while it is read (or paged out) again before it is next computed, except
    while it is on storage, from the end of its page-out's stage to its page-in's; a tensor
    paged in stays through the stage that pages it in, whatever reads it next.
    """
    T = len(graph)
    needs: list[list[int]] = [[] for _ in range(T)]  # per tensor: stages that read or page it out
    computes: list[list[int]] = [[] for _ in range(T)]
    for t, nodes in enumerate(computed):
        for k in nodes:
            computes[k].append(t)
            for d in graph.nodes[k].deps:
                needs[d].append(t)
        for v in page_out[t]:
            needs[v].append(t)
    for lists in (needs, computes):
        for stages in lists:
            stages.sort()

    def wanted(v: int, t: int) -> bool:
        later_need = bisect_right(needs[v], t)
        if later_need == len(needs[v]):
            return False
        later_compute = bisect_right(computes[v], t)
        return later_compute == len(computes[v]) or needs[v][later_need] < computes[v][later_compute]

    kept: list[frozenset[int]] = []
    resident: set[int] = set()
    for t in range(T):
        resident = (resident | set(computed[t]) | page_in[t]) - page_out[t]
        resident = {v for v in resident if v in page_in[t] or wanted(v, t)}
        kept.append(frozenset(resident))
    return tuple(kept)


def plan_figures(chain: Chain, graph: TrainingGraph, costs: CostTable, timing: Timing, tree: Top) -> Figures:
    """The figures poetsim's model gives a POFO tree's plan.

    The brute-force test compares the dynamic program's makespan against this, so the program
    is checked against the model rather than against itself.
    """
    return figures(plan_of(chain, graph, tree), graph, costs, timing)
