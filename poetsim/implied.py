"""Facts that one point of a sweep proves about another: infeasibility and bounds, carried across.

A point *relaxes* another when every schedule that fits the other fits it too: the same graph,
platform and timing, a RAM budget and a deadline at least as large, and every move the other
may use. Its least energy is then no greater. So, within one sweep:

- a relaxation proven infeasible proves the tighter point infeasible (a smaller RAM budget, a
  shorter deadline or fewer moves cannot make room);
- a relaxation's lower bound is a lower bound at the tighter point, and a schedule there that
  meets it is optimal.

Each solve proves what it can within its own time limit, and how far a time-limited step gets
depends on the machine's speed. These implications do not: they are applied after the sweep, to
the rows as written, in one pass whose result does not depend on the order in which points ran.
On the ResNet-18 study, paging-only on the Jetson TX2 at 70 % RAM and 1.2x is proven infeasible
this way by the same budget at 1.5x, where the timed cover finds no placement of the transfers.
"""

from dataclasses import replace

from poetsim import strategies
from poetsim.runs import ResultRow
from poetsim.status import Status
from poetsim.strategies import Kind

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
    if not (_solved(loose) and _solved(tight)):
        return False
    same = ("model", "platform", "timing", "reserved_bytes", "keep_all_peak_bytes", "keep_all_energy_j")
    if any(getattr(loose, name) != getattr(tight, name) for name in same):
        return False
    if (loose.ram_budget_bytes is None or tight.ram_budget_bytes is None or loose.deadline_s is None
            or tight.deadline_s is None):
        return False
    return (loose.ram_budget_bytes >= tight.ram_budget_bytes and loose.deadline_s >= tight.deadline_s
            and strategies.get(loose.strategy).moves.allows(strategies.get(tight.strategy).moves))


def apply_implied(rows: list[ResultRow]) -> list[ResultRow]:
    """The rows with every fact their relaxations prove applied; unchanged rows are the same objects.

    Relaxation is transitive, so one pass over the rows as given finds every implication.
    """
    return [_improved(row, [other for other in rows if relaxes(other, row)]) for row in rows]


def _improved(row: ResultRow, relaxations: list[ResultRow]) -> ResultRow:
    if row.status not in _OPEN or not relaxations:
        return row
    for loose in sorted(relaxations, key=lambda other: other.point_key):   # the same proof whatever the order
        if loose.status is Status.INFEASIBLE:
            return replace(row, status=Status.INFEASIBLE, bound_j=None, gap_total=None, gap_overhead=None,
                           message=f"infeasible: {_name(loose)} is proven infeasible, and every schedule "
                                   "that fits here would fit there")
    bounds = [(loose.bound_j, loose) for loose in relaxations if loose.bound_j is not None]
    if not bounds:
        return row
    bound_j, source = max(bounds, key=lambda pair: (pair[0], pair[1].point_key))
    if row.bound_j is not None and bound_j <= row.bound_j:
        return row
    total_j, keep_all_j = row.predicted_total_j, row.keep_all_energy_j
    if row.status is Status.NO_SOLUTION or total_j is None or keep_all_j is None:
        return replace(row, bound_j=bound_j)
    overhead_j = max(total_j - keep_all_j, 0.0)
    gap_j = max(total_j - bound_j, 0.0)
    if gap_j <= REL_GAP * overhead_j + 1e-12 * total_j:
        return replace(row, status=Status.OPTIMAL, bound_j=bound_j, gap_total=0.0, gap_overhead=0.0,
                       message=f"proven optimal by the lower bound of {_name(source)}, whose budgets "
                               "and moves admit every schedule that fits here")
    gap_overhead = gap_j / overhead_j if overhead_j > 0 else None
    narrowed = "" if gap_overhead is None else f"; the lower bound of {_name(source)} narrows the gap to " \
        f"{100 * gap_overhead:.3g} % of the overhead"
    return replace(row, bound_j=bound_j, gap_total=gap_j / total_j, gap_overhead=gap_overhead,
                   message=row.message + narrowed)


def _solved(row: ResultRow) -> bool:
    strategy = strategies.REGISTRY.get(row.strategy)   # one this poetsim does not know proves nothing
    return strategy is not None and strategy.kind is Kind.SOLVED


def _name(row: ResultRow) -> str:
    return f"{row.strategy} at {row.ram} RAM, {row.runtime_x:g}x"
