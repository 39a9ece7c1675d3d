"""What the points of a sweep tell about each other: schedules, infeasibility and bounds, carried across.

Each solve proves what it can within its own effort. What the points of one grid say about each
other goes beyond any one solve, and once every point has its row, the sweep applies it (`sweep.carry_across_grid`):

- *Schedules.* A checked schedule of one point that fits another point's budgets, uses only
  that point's moves and costs less than what that point's own solve found, is a schedule
  there too (`schedule_donor`). So more RAM or a longer deadline never costs energy in a
  sweep's results, and a point whose solve spent its effort before finding a schedule takes one
  from a neighbour where it fits: on the ResNet-18 study the recompute-only schedules found at
  35 % RAM, 1.5x run in 1.14-1.17x, within the 1.2x deadline that their own solves left
  without a schedule.
- *Proofs.* A point *relaxes* another when every schedule that fits the other fits it too: the
  same graph, platform and timing, a RAM budget and a deadline at least as large, and every move
  the other may use; its least energy is then no greater. A relaxation proven infeasible proves
  the tighter point infeasible, and a relaxation's lower bound holds at the tighter point,
  where it may prove a schedule optimal (`apply_implied`). On the ResNet-18 study, paging-only
  on the Jetson TX2 at 70 % RAM and 1.2x is proven infeasible by the same budget at 1.5x.

Both read the rows as written, in passes whose result does not depend on which point ran
first.
"""

from dataclasses import replace

from poetsim import strategies
from poetsim.runs import ResultRow
from poetsim.schedule.model import Budgets, Moves
from poetsim.status import Status
from poetsim.strategies import Kind
from poetsim.tolerances import cheaper

#: A schedule within this share of its overhead (plus a 1e-12 share of its total) of an implied
#: bound is optimal: the optimiser's own relative gap (`SolverSettings.mip_rel_gap`).
REL_GAP = 1e-4

#: Statuses a relaxation's proofs can improve: what a solve left unproven.
_OPEN = (Status.FEASIBLE, Status.NO_SOLUTION)


def relaxes(loose: ResultRow, tight: ResultRow) -> bool:
    """Whether every schedule that fits `tight`'s budgets and moves fits `loose`'s.

    Both must be solved strategies of the same graph, platform and timing; the keep-all figures
    (peak and energy) must agree, a check that the graph and the costs are the same.
    """
    if loose.point_key == tight.point_key:
        return False
    if not (_solved(loose) and _solved(tight) and same_problem(loose, tight)):
        return False
    if loose.ram_budget_bytes is None or tight.ram_budget_bytes is None or loose.deadline_s is None or tight.deadline_s is None:
        return False
    return (
        loose.ram_budget_bytes >= tight.ram_budget_bytes
        and loose.deadline_s >= tight.deadline_s
        and strategies.get(loose.strategy).moves.allows(strategies.get(tight.strategy).moves)
    )


def same_graph(a: ResultRow, b: ResultRow) -> bool:
    """Whether two rows schedule the same graph under the same timing.

    The keep-all peak must agree too, a check that the graph is the same: a schedule of one is
    then an instruction list for the other, on any platform.
    """
    same = ("model", "timing", "reserved_bytes", "keep_all_peak_bytes")
    return all(getattr(a, name) == getattr(b, name) for name in same)


def same_problem(a: ResultRow, b: ResultRow) -> bool:
    """Whether two rows share graph, platform and timing.

    Their keep-all energies must agree too, a check that the costs are the same.
    """
    return same_graph(a, b) and a.platform == b.platform and a.keep_all_energy_j == b.keep_all_energy_j


def moves_used(row: ResultRow) -> Moves:
    """What a row's schedule does, read from its figures.

    A hybrid schedule that never pages uses the moves of recompute-only.
    """
    return Moves(recompute=bool(row.predicted_recomputations), page=bool(row.predicted_page_ins or row.predicted_page_outs))


def schedule_donor(row: ResultRow, rows: list[ResultRow]) -> ResultRow | None:
    """The row whose checked schedule is the cheapest to fit `row`'s budgets and moves, if cheaper.

    It must cost less than `row`'s own; None when there is none (or `row` is proven already).

    Any row with a schedule can give it: another strategy's, a baseline's, another budget's.
    What a schedule uses (recomputations, transfers) is read from its figures, not its strategy:
    a hybrid schedule that never pages is a recompute-only schedule.
    """
    if not is_open(row):
        return None
    assert row.ram_budget_bytes is not None and row.deadline_s is not None
    moves = strategies.get(row.strategy).moves
    budgets = Budgets(row.ram_budget_bytes, row.deadline_s)
    best = None
    for other in rows:
        if other.point_key == row.point_key or not other.status.has_schedule or not same_problem(other, row):
            continue
        total_j, peak, runtime_s = other.predicted_total_j, other.predicted_peak_ram_bytes, other.predicted_runtime_s
        if total_j is None or peak is None or runtime_s is None:
            continue
        if not moves.allows(moves_used(other)) or peak > budgets.ram_bytes or not budgets.meets_deadline(runtime_s):
            continue
        if row.predicted_total_j is not None and not cheaper(total_j, row.predicted_total_j):
            continue
        if best is None or (total_j, other.point_key) < (best.predicted_total_j, best.point_key):
            best = other
    return best


def is_open(row: ResultRow) -> bool:
    """Whether a row is a solved strategy's that its solve left unproven, with its budgets known.

    Such a row is what another point's schedule or proof can improve.
    """
    return row.status in _OPEN and _solved(row) and row.ram_budget_bytes is not None and row.deadline_s is not None


def judged(row: ResultRow, bound_j: float, source: str) -> ResultRow:
    """`row`, with a schedule, against a proven lower bound `bound_j` found by `source`.

    It is optimal when within the gap (REL_GAP of the overhead), else feasible with the gap this
    leaves.
    """
    total_j, keep_all_j = row.predicted_total_j, row.keep_all_energy_j
    assert total_j is not None and keep_all_j is not None
    overhead_j = max(total_j - keep_all_j, 0.0)
    gap_j = max(total_j - bound_j, 0.0)
    if gap_j <= REL_GAP * overhead_j + 1e-12 * total_j:
        return replace(
            row,
            status=Status.OPTIMAL,
            bound_j=bound_j,
            gap_total=0.0,
            gap_overhead=0.0,
            message=f"proven optimal by the lower bound of {source}",
        )
    gap_overhead = gap_j / overhead_j if overhead_j > 0 else None
    narrowed = (
        ""
        if gap_overhead is None
        else f"; the lower bound of {source} leaves a gap of {100 * gap_overhead:.3g} % of the overhead"
    )
    return replace(
        row,
        status=Status.FEASIBLE,
        bound_j=bound_j,
        gap_total=gap_j / total_j,
        gap_overhead=gap_overhead,
        message=row.message + narrowed,
    )


def apply_implied(rows: list[ResultRow]) -> list[ResultRow]:
    """The rows with every fact their relaxations prove applied; unchanged rows are the same objects.

    Relaxation is transitive, so one pass over the rows as given finds every implication.
    """
    return [_improved(row, [other for other in rows if relaxes(other, row)]) for row in rows]


def _improved(row: ResultRow, relaxations: list[ResultRow]) -> ResultRow:
    if row.status not in _OPEN or not relaxations:
        return row
    for loose in sorted(relaxations, key=lambda other: other.point_key):  # the same proof whatever the order
        if loose.status is Status.INFEASIBLE:
            return replace(
                row,
                status=Status.INFEASIBLE,
                bound_j=None,
                gap_total=None,
                gap_overhead=None,
                message=f"infeasible: {name(loose)} is proven infeasible, and every schedule that fits here would fit there",
            )
    bounds = [(loose.bound_j, loose) for loose in relaxations if loose.bound_j is not None]
    if not bounds:
        return row
    bound_j, source = max(bounds, key=lambda pair: (pair[0], pair[1].point_key))
    if row.bound_j is not None and bound_j <= row.bound_j:
        return row
    if row.status is Status.NO_SOLUTION or row.predicted_total_j is None or row.keep_all_energy_j is None:
        return replace(row, bound_j=bound_j)
    return judged(row, bound_j, f"{name(source)}, whose budgets and moves admit every schedule that fits here")


def _solved(row: ResultRow) -> bool:
    strategy = strategies.REGISTRY.get(row.strategy)  # one this poetsim does not know proves nothing
    return strategy is not None and strategy.kind is Kind.SOLVED


def name(row: ResultRow) -> str:
    """A point in words: its strategy and budgets."""
    return f"{row.strategy} at {row.ram} RAM, {row.runtime_x:g}x"
