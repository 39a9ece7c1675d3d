"""POET's MILP, stage formulation: its variables and one function per rule, stated once.

Both hand-offs read what this module builds (`rows.Formulation`): `solvers` passes the rows to
HiGHS as arrays, `model` turns them into a Pyomo model for the LP file, GLPK and CBC. So the
golden LP and the model HiGHS solves cannot diverge. No solver is imported here.

Symbols (docs/formulation.md; paper symbols live only inside the optimiser). Stage t first computes node t.
- R[t,i]     binary, i is (re)computed in stage t (i < t; R[t,t] = 1 is substituted as a constant)
- S_ram[t,i] binary, i's output is in RAM at the start of stage t (i < t)
- S_ssd[t,i] binary, i's output is on storage at the start of stage t
- M_in[t,i], M_out[t,i]  binary, i is paged in / out during stage t
- Free[t,i,k] binary, i's output is freed right after k is computed in stage t (k < t)
- U[t,k]     continuous, RAM in use right after k is computed in stage t, in units of mem_scale
- Extra[t]   continuous (overlap timing), stage t's time beyond computing t once, in time_scale

Variables exist only where they can be non-zero; each window is argued where it is made.
Scaling: bytes are divided by the largest output (`mem_scale_bytes`), seconds by the mean
compute time (`time_scale_s`) and joules by the mean compute energy of a node
(`energy_scale_j`), so that every coefficient is O(1) whatever the platform's units (uJ on a
microcontroller, J on a Pi) and HiGHS's absolute tolerances (1e-6 .. 1e-9) stay far below the
smallest decision. The objective is the energy OVERHEAD above keep-all (every node once, nothing
paged), not the total: with the total in joules a relative gap is measured against a constant
that dwarfs the decision, and a schedule a few thousandths of a percent worse is called optimal.
"""

from dataclasses import dataclass, field

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.milp.rows import INF, ONE, Formulation, RowBuilder
from poetsim.schedule.costs import CostTable
from poetsim.schedule.model import Budgets, Moves, Timing


@dataclass
class _Columns:
    """The variables of one model by key, and what the rules need to know about the problem."""

    graph: TrainingGraph
    costs: CostTable
    budgets: Budgets
    overlap: bool
    mem_scale: float
    time_scale: float
    R: dict = field(default_factory=dict)
    S_ram: dict = field(default_factory=dict)
    S_ssd: dict = field(default_factory=dict)
    M_in: dict = field(default_factory=dict)
    M_out: dict = field(default_factory=dict)
    Free: dict = field(default_factory=dict)
    U: dict = field(default_factory=dict)
    Extra: dict = field(default_factory=dict)
    frees_of: dict = field(default_factory=dict)  # (t, i) -> [(k, column of Free[t,i,k])]
    frees_after: dict = field(default_factory=dict)  # (t, k) -> [(i, column of Free[t,i,k])]
    positions: dict = field(default_factory=dict)  # t -> the k that stage t may compute

    def computed(self, t: int, k: int):
        """R[t,k] as a term reference: the constant 1 on the diagonal, None where it cannot be 1."""
        return ONE if k == t else self.R.get((t, k))


def last_useful_stage(graph: TrainingGraph) -> tuple[int, ...]:
    """For each node, the last stage whose node descends from it (-1 when nothing reads it).

    A computation exists only to enable a first computation R[t',t'] = 1 through a chain of
    reads; after the last stage t' that descends from i, no such chain can start at i. So every
    R, S_ram, S_ssd and paging variable of i beyond that stage is 0 in some optimal solution
    (dropping those computations and copies lowers energy, time and RAM), and is not created.
    """
    last = [-1] * len(graph)
    for node in reversed(graph.nodes):
        for reader in graph.consumers[node.id]:
            last[node.id] = max(last[node.id], reader, last[reader])
    return tuple(last)


#: The units of the model's numbers: "balanced" (every coefficient near 1, the module docstring)
#: or "plain" (bytes in KiB, energy in 0.01 J, time in seconds, the units of a plain HiGHS run we compared against). An
#: A/B on the zoo's graphs kept "balanced" (docs/optimiser.md).
UNITS = ("balanced", "plain")


def formulate(
    graph: TrainingGraph, costs: CostTable, budgets: Budgets, moves: Moves, timing: Timing, units: str = "balanced"
) -> Formulation:
    """State the model of one solve as sparse rows (see the module docstring for the symbols).

    `moves` restricts the model: without recomputation no R (and no Free) column exists, without
    paging no S_ssd, M_in or M_out column. `units` is one of UNITS.
    """
    timing = Timing(timing)
    T = len(graph)
    overlap = timing is Timing.OVERLAP
    if units == "plain":
        energy_scale, mem_scale, time_scale = 0.01, 1024.0, 1.0
    else:
        energy_scale = (sum(costs.compute_j) / T) or 1.0
        mem_scale, time_scale = float(max(costs.output_bytes)) or 1.0, (sum(costs.compute_s) / T) or 1.0
    v = _Columns(graph, costs, budgets, overlap, mem_scale=mem_scale, time_scale=time_scale)
    b = RowBuilder()
    _add_variables(b, v, moves, energy_scale)
    for rule in (
        inputs_present,
        present_once,
        ram_persistence,
        ssd_persistence,
        page_in_from_storage,
        page_in_is_kept,
        page_out_from_ram,
        page_out_once,
        free_after_compute,
        free_after_last_reader,
        paging_out_is_held,
        ram_in_use,
        stage_time_compute,
        stage_time_dma,
        deadline,
    ):
        b.rule(rule, v)
    keep_all_j = costs.keep_all_energy_j(timing)
    return b.build(
        graph_name=graph.name,
        moves=moves,
        timing=timing,
        num_nodes=T,
        keep_all_j=keep_all_j,
        energy_scale_j=energy_scale,
        time_scale_s=v.time_scale,
        mem_scale_bytes=v.mem_scale,
    )


def _add_variables(b: RowBuilder, v: _Columns, moves: Moves, energy_scale: float) -> None:
    """Create every column, only where it can be non-zero, with its objective coefficient."""
    graph, costs, T = v.graph, v.costs, len(v.graph)
    last = last_useful_stage(graph)
    may_recompute, may_page = moves.recompute, moves.page
    v.R = b.variables(
        "R",
        "node i is recomputed in stage t (t > i; the first computation R[t,t] = 1 is a constant)",
        ((t, i) for t in range(T) for i in range(t) if may_recompute and t <= last[i]),
        binary=True,
        cost=lambda k: costs.compute_j[k[1]] / energy_scale,
    )
    v.S_ram = b.variables(
        "S_ram",
        "node i's output is in RAM at the start of stage t",
        ((t, i) for t in range(1, T) for i in range(t) if t <= last[i]),
        binary=True,
    )
    # Paging windows (docs/formulation.md): i is first resident at the start of stage i+1, so a page-out is
    # issued from stage i+1, lands on storage from i+2, and a page-in (from i+2) is usable from
    # the stage after it. A page-in must be usable by a stage that descends from i (t+1 <= last),
    # hence none in the last stage, and a page-out must leave room for one (t <= T-3, last-2).
    v.S_ssd = b.variables(
        "S_ssd",
        "node i's output is on storage at the start of stage t",
        ((t, i) for t in range(T) for i in range(t - 1) if may_page and t <= min(T - 2, last[i] - 1)),
        binary=True,
    )
    v.M_in = b.variables(
        "M_in",
        "node i is paged in during stage t (usable from stage t+1)",
        ((t, i) for t in range(T) for i in range(t - 1) if may_page and t <= min(T - 2, last[i] - 1)),
        binary=True,
        cost=lambda k: costs.page_in_j[k[1]] / energy_scale,
    )
    v.M_out = b.variables(
        "M_out",
        "node i is paged out during stage t (on storage from stage t+1)",
        ((t, i) for t in range(T) for i in range(t) if may_page and t <= min(T - 3, last[i] - 2)),
        binary=True,
        cost=lambda k: costs.page_out_j[k[1]] / energy_scale,
    )
    # Free only for a real edge (i,k) with k < t: a free after Compute(t), the stage's last
    # compute, changes no U and equals the stage-end frees. None where t itself reads i: i is
    # then needed by the stage's last compute and cannot be freed before it.
    v.Free = b.variables(
        "Free",
        "node i's output is freed right after k is computed in stage t",
        (
            (t, i, k)
            for t in range(T)
            for (i, k) in graph.edges
            if k < t and v.computed(t, k) is not None and t not in graph.consumers[i]
        ),
        binary=True,
    )
    for (t, i, k), col in v.Free.items():
        v.frees_of.setdefault((t, i), []).append((k, col))
        v.frees_after.setdefault((t, k), []).append((i, col))
    v.positions = {t: [k for k in range(t + 1) if v.computed(t, k) is not None] for t in range(T)}
    v.U = b.variables(
        "U",
        "RAM in use right after k is computed in stage t (units of mem_scale_bytes)",
        ((t, k) for t in range(T) for k in v.positions[t]),
        binary=False,
        upper=v.budgets.ram_bytes / v.mem_scale,
    )
    if v.overlap:
        busy = [t for t in range(T) if len(v.positions[t]) > 1 or any((t, i) in v.M_in or (t, i) in v.M_out for i in range(t))]
        v.Extra = b.variables(
            "Extra",
            "stage t's time beyond computing node t once (units of time_scale_s)",
            ((t,) for t in busy),
            binary=False,
            upper=INF,
            cost=lambda k: costs.static_power_w * v.time_scale / energy_scale,
        )


def inputs_present(b: RowBuilder, v: _Columns) -> None:
    """Every input of a computation is in RAM: R[t,j] <= R[t,i] + S_ram[t,i]."""
    for i, j in v.graph.edges:
        for t in range(j, len(v.graph)):
            if v.computed(t, j) is not None:
                b.row((t, i, j), [(1, v.computed(t, j)), (-1, v.computed(t, i)), (-1, v.S_ram.get((t, i)))], -INF, 0)


def present_once(b: RowBuilder, v: _Columns) -> None:
    """Output i is at most one of resident at stage start, recomputed, paged in: S_ram + R + M_in <= 1.

    Exact: recomputing what is resident, paging in what is resident or what is computed in the
    same stage, are each dominated by not doing it (no more energy, time or RAM), and the
    checker rejects all three. One clique row states them.
    """
    for (t, i), col in v.S_ram.items():
        b.row((t, i), [(1, col), (1, v.R.get((t, i))), (1, v.M_in.get((t, i)))], -INF, 1)


def ram_persistence(b: RowBuilder, v: _Columns) -> None:
    """Kept or freed once only if present: sum_k Free[t,i,k] + S_ram[t+1,i] <= S_ram[t,i] + R[t,i] + M_in[t,i].

    Persistence with the frees folded in: i can be kept for stage t+1, or freed after one of
    its readers, only if it is in RAM during stage t, and not both (at most one free: freeing
    twice is meaningless). With present_once this also gives Free <= 1 - S_ram[t+1,i].
    """
    for t in range(len(v.graph)):
        for i in range(t):
            frees = [(1, col) for _, col in v.frees_of.get((t, i), ())]
            keep = v.S_ram.get((t + 1, i))
            if frees or keep is not None:
                present = [(-1, v.S_ram.get((t, i))), (-1, v.R.get((t, i))), (-1, v.M_in.get((t, i)))]
                b.row((t, i), [*frees, (1, keep), *present], -INF, 0)


def ssd_persistence(b: RowBuilder, v: _Columns) -> None:
    """On storage only if it was or has just been paged out: S_ssd[t+1,i] <= S_ssd[t,i] + M_out[t,i]."""
    for (t, i), col in v.S_ssd.items():
        b.row((t - 1, i), [(1, col), (-1, v.S_ssd.get((t - 1, i))), (-1, v.M_out.get((t - 1, i)))], -INF, 0)


def page_in_from_storage(b: RowBuilder, v: _Columns) -> None:
    """Page in only what is on storage: M_in[t,i] <= S_ssd[t,i]."""
    for key, col in v.M_in.items():
        b.row(key, [(1, col), (-1, v.S_ssd[key])], -INF, 0)


def page_in_is_kept(b: RowBuilder, v: _Columns) -> None:
    """A page-in is kept for the next stage: M_in[t,i] <= S_ram[t+1,i].

    Exact: a page-in that is not kept for stage t+1 was useless (it is usable only from t+1).
    """
    for (t, i), col in v.M_in.items():
        b.row((t, i), [(1, col), (-1, v.S_ram[t + 1, i])], -INF, 0)


def page_out_from_ram(b: RowBuilder, v: _Columns) -> None:
    """Page out only what is resident: M_out[t,i] <= S_ram[t,i]."""
    for key, col in v.M_out.items():
        b.row(key, [(1, col), (-1, v.S_ram[key])], -INF, 0)


def page_out_once(b: RowBuilder, v: _Columns) -> None:
    """Each output is paged out at most once: sum_t M_out[t,i] <= 1.

    Exact: storage never loses a copy, so a second page-out of the same output is useless. One
    row per node; with ssd_persistence it also gives M_out[t,i] + S_ssd[t,i] <= 1.
    """
    outs_of: dict[int, list[tuple[int, int]]] = {}
    for (_, i), col in v.M_out.items():
        outs_of.setdefault(i, []).append((1, col))
    for i, outs in sorted(outs_of.items()):
        if len(outs) > 1:
            b.row((i,), outs, -INF, 1)


def free_after_compute(b: RowBuilder, v: _Columns) -> None:
    """Output i can be freed after k only if k is computed: Free[t,i,k] <= R[t,k]."""
    for (t, i, k), col in v.Free.items():
        b.row((t, i, k), [(1, col), (-1, v.R[t, k])], -INF, 0)


def free_after_last_reader(b: RowBuilder, v: _Columns) -> None:
    """Output i is not freed before a reader j computed in stage t: sum_{k<j} Free[t,i,k] + R[t,j] <= 1.

    POET's hazard "no later reader j of i is computed in stage t", disaggregated by reader j and
    summed over the frees before j: since at most one free of i per stage is 1
    (ram_persistence), this is valid and at least as tight as one row per (k, j).
    """
    for (t, i), frees in v.frees_of.items():
        for j in v.graph.consumers[i]:
            before = [(1, col) for k, col in frees if k < j]
            if j < t and before and (t, j) in v.R:
                b.row((t, i, j), [*before, (1, v.R[t, j])], -INF, 1)


def paging_out_is_held(b: RowBuilder, v: _Columns) -> None:
    """Under overlap an output being paged out is held to the stage end: sum_k Free[t,i,k] + M_out[t,i] <= 1."""
    if not v.overlap:
        return
    for (t, i), frees in v.frees_of.items():
        if (t, i) in v.M_out:
            b.row((t, i), [(1, col) for _, col in frees] + [(1, v.M_out[t, i])], -INF, 1)


def ram_in_use(b: RowBuilder, v: _Columns) -> None:
    """U after each possible compute: stage-start RAM (+ page-ins under overlap), plus outputs, minus frees.

    U is needed only after the computes a stage may make: between two of them RAM only falls.
    The frees after a compute are subtracted at the next one, so U is the RAM right after an
    output is allocated, while its inputs are still held (Checkmate's accounting).
    """
    m, scale = v.costs.output_bytes, 1.0 / v.mem_scale
    for t in range(len(v.graph)):
        previous = None
        for k in v.positions[t]:
            terms = [(1, v.U[t, k]), (-m[k] * scale, v.computed(t, k))]
            if previous is None:
                terms += [(-m[i] * scale, v.S_ram.get((t, i))) for i in range(t)]
                if v.overlap:
                    terms += [(-m[i] * scale, v.M_in.get((t, i))) for i in range(t)]
            else:
                terms += [(-1, v.U[t, previous])]
                terms += [(m[i] * scale, col) for i, col in v.frees_after.get((t, previous), ())]
            b.row((t, k), terms, 0, 0)
            previous = k


def stage_time_compute(b: RowBuilder, v: _Columns) -> None:
    """Extra[t] covers the stage's recomputations: Extra[t] >= sum_{i<t} R[t,i] c_i."""
    for (t,), col in v.Extra.items():
        recomputes = [(-v.costs.compute_s[i] / v.time_scale, v.R[t, i]) for i in range(t) if (t, i) in v.R]
        if recomputes:
            b.row((t,), [(1, col), *recomputes], 0, INF)


def stage_time_dma(b: RowBuilder, v: _Columns) -> None:
    """Extra[t] covers the stage's transfers: c_t + Extra[t] >= sum (M_in tin + M_out tout) / channels."""
    per_channel = 1.0 / (v.costs.dma_channels * v.time_scale)
    for (t,), col in v.Extra.items():
        dma = [(-v.costs.page_in_s[i] * per_channel, v.M_in[t, i]) for i in range(t) if (t, i) in v.M_in]
        dma += [(-v.costs.page_out_s[i] * per_channel, v.M_out[t, i]) for i in range(t) if (t, i) in v.M_out]
        if dma:
            b.row((t,), [(1, col), *dma], -v.costs.compute_s[t] / v.time_scale, INF)


def deadline(b: RowBuilder, v: _Columns) -> None:
    """The iteration ends by the runtime budget.

    sum_t (c_t + Extra[t]) <= runtime (overlap), sum_{t,i} R[t,i] c_i <= runtime (compute-only)

    Both are stated as the time beyond one plain pass, which no schedule can avoid.
    """
    slack_s = _deadline_slack_s(v.budgets, v.costs)
    if v.overlap:
        terms = [(1, col) for col in v.Extra.values()]
    else:
        terms = [(v.costs.compute_s[i] / v.time_scale, col) for (t, i), col in v.R.items()]
    b.row((), terms, -INF, slack_s / v.time_scale)


def _deadline_slack_s(budgets: Budgets, costs: CostTable) -> float:
    """Runtime budget minus one plain pass; a budget that one plain pass meets has slack >= 0."""
    slack = budgets.runtime_s - costs.plain_runtime_s
    return max(slack, 0.0) if budgets.meets_deadline(costs.plain_runtime_s) else slack
