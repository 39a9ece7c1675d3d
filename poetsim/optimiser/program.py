"""A small mixed 0-1 program built row by row and solved by HiGHS: the covers' common engine.

The eviction covers (`cover`, `timed_cover`) are small next to the stage MILP, so they are built
with keyed columns and solved to a tight gap; what they need back is the proven bound, the
status, and the values of the best solution by key.
"""

import math
from dataclasses import dataclass
from time import perf_counter

#: The covers are solved to this relative gap, with no absolute gap: the bound they report is the
#: solver's dual bound, and a tight gap keeps it next to the best solution.
REL_GAP = 1e-9
#: Feasibility tolerances far below HiGHS's defaults: a covering row scaled to 1 then misses its
#: excess by a fraction of a byte at most, and the LP bound of an integral root is the solution's.
FEASIBILITY_TOLERANCE = 1e-9
#: HiGHS's presolve checks no clock: on the timed cover of ResNet-50 (875,000 nonzeros) it ran
#: 26 s under a 10 s limit. A program with more nonzeros than this many per second of its time
#: limit is not solved at all (it would overrun the call's deadline), and yields no bound.
PRESOLVE_NONZEROS_PER_S = 30_000
#: HiGHS's symmetry detection is off: on the cascade covers of MobileNetV2 and ResNet-50 it made
#: presolve 2-3x slower, for no gain (docs/optimiser.md).
DETECT_SYMMETRY = False


@dataclass(frozen=True)
class Solved:
    """What the solver proved: infeasible, or a dual bound (model units) and the best solution."""

    infeasible: bool
    exact: bool                       # the best solution is proven optimal within REL_GAP
    bound: float                      # dual bound, >= 0 (the costs are non-negative)
    values: dict[tuple, float] | None  # the best solution by key, None if none was found


class Program:
    """Columns by key (made on first use, with a cost), rows of (column, coefficient) terms."""

    def __init__(self):
        self.columns: dict[tuple, int] = {}
        self.cost: list[float] = []
        self.upper: list[float] = []
        self.integer: list[bool] = []
        self.starts, self.index, self.value, self.row_lower, self.row_upper = [0], [], [], [], []

    def column(self, key: tuple, cost: float = 0.0, upper: float = 1.0, integer: bool = True) -> int:
        """The column of `key`; made with `cost`, bounds [0, upper] and integrality on first use."""
        col = self.columns.get(key)
        if col is None:
            col = self.columns[key] = len(self.cost)
            self.cost.append(cost)
            self.upper.append(upper)
            self.integer.append(integer)
        return col

    def row(self, terms, lower: float, upper: float) -> None:
        """lower <= sum(coef x col) <= upper; repeated columns are merged."""
        merged: dict[int, float] = {}
        for col, coef in terms:
            merged[col] = merged.get(col, 0.0) + coef
        for col, coef in sorted(merged.items()):
            if coef != 0.0:
                self.index.append(col)
                self.value.append(coef)
        self.starts.append(len(self.index))
        self.row_lower.append(lower)
        self.row_upper.append(upper)

    def solve(self, time_limit_s: float | None, enough: float | None = None, start: dict | None = None,
              rel_gap: float = REL_GAP) -> Solved:
        """Minimise the cost with HiGHS (one thread, fixed seed) within `time_limit_s`.

        With `enough`, a known lower bound of the cost from elsewhere, the solve stops as soon as
        it has a solution that costs no more (within REL_GAP): that solution is then optimal.
        `start` gives values of some columns by key (a partial MIP start HiGHS completes).
        `rel_gap` may be looser where only a good solution is wanted, not a bound.
        """
        import highspy
        import numpy as np

        from poetsim.optimiser.solvers import new_highs

        if time_limit_s is not None and len(self.index) > PRESOLVE_NONZEROS_PER_S * time_limit_s:
            return Solved(False, False, 0.0, None)
        n, rows = len(self.cost), len(self.row_lower)
        h = new_highs()
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = n, rows
        lp.col_cost_ = np.asarray(self.cost, dtype=np.float64)
        lp.col_lower_ = np.zeros(n)
        lp.col_upper_ = np.asarray(self.upper, dtype=np.float64)
        lp.row_lower_ = np.asarray(self.row_lower, dtype=np.float64)
        lp.row_upper_ = np.asarray(self.row_upper, dtype=np.float64)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n, rows
        lp.a_matrix_.start_ = np.asarray(self.starts, dtype=np.int32)
        lp.a_matrix_.index_ = np.asarray(self.index, dtype=np.int32)
        lp.a_matrix_.value_ = np.asarray(self.value, dtype=np.float64)
        kinds = highspy.HighsVarType
        lp.integrality_ = [kinds.kInteger if b else kinds.kContinuous for b in self.integer]
        h.passModel(lp)
        ends_at = None if time_limit_s is None else perf_counter() + max(time_limit_s, 0.01)
        given = [(self.columns[key], value) for key, value in (start or {}).items() if key in self.columns]
        if given:
            h.setSolution(len(given), np.asarray([c for c, _ in given], dtype=np.int32),
                          np.asarray([v for _, v in given], dtype=np.float64))
        def interrupt(event) -> None:
            # HiGHS checks its own time limit only now and then; the covers share the call's clock.
            if ends_at is not None and perf_counter() > ends_at:
                event.interrupt()
            elif enough is not None and event.data_out.mip_primal_bound <= enough * (1 + REL_GAP) + 1e-12:
                event.interrupt()

        h.cbMipInterrupt.subscribe(interrupt)
        options = {"mip_rel_gap": rel_gap, "mip_abs_gap": 0.0, "threads": 1, "random_seed": 0,
                   "mip_detect_symmetry": DETECT_SYMMETRY,
                   "mip_feasibility_tolerance": FEASIBILITY_TOLERANCE,
                   "primal_feasibility_tolerance": FEASIBILITY_TOLERANCE}
        if time_limit_s is not None:
            options["time_limit"] = max(float(time_limit_s), 0.01)
        for name, option in options.items():
            h.setOptionValue(name, option)
        highspy.Highs.resetGlobalScheduler(True)
        h.run()
        status = h.getModelStatus()
        info = h.getInfo()
        M = highspy.HighsModelStatus
        if status in (M.kInfeasible, M.kUnboundedOrInfeasible):
            return Solved(True, True, math.inf, None)
        if not any(self.integer):  # a linear program: its optimum is its bound
            bound = info.objective_function_value if status == M.kOptimal else 0.0
        else:
            bound = info.mip_dual_bound if math.isfinite(info.mip_dual_bound) else 0.0
        values = None
        if info.primal_solution_status == 2:
            col_value = h.getSolution().col_value
            values = {key: col_value[col] for key, col in self.columns.items()}
        exact = status == M.kOptimal
        if enough is not None and values is not None and info.objective_function_value <= enough * (1 + REL_GAP) + 1e-12:
            bound, exact = max(bound, min(enough, info.objective_function_value)), True
        return Solved(False, exact, max(bound, 0.0), values)
