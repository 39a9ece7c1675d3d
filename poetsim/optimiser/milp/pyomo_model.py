"""The Pyomo model of a formulation: the only module that imports Pyomo.

Pyomo is the readable face of the MILP (named, documented components; the LP file) and the
hand-off to GLPK and CBC. Its components are made from `Formulation`'s rows, family by family,
so that the model HiGHS receives as arrays and the one Pyomo writes are the same rows.
"""

from pathlib import Path

import pyomo.environ as pyo
from pyomo.core.expr.numeric_expr import LinearExpression
from pyomo.opt import ProblemFormat

from poetsim.optimiser.milp.rows import Formulation


def build_model(form: Formulation) -> pyo.ConcreteModel:
    """One Var per variable family, one Constraint per row family, the overhead objective."""
    m = pyo.ConcreteModel(name=f"poet_{form.moves.label}_{form.timing.value}_{form.graph_name}")
    columns = [None] * form.num_columns
    for fam in form.variables:
        var = pyo.Var(
            list(fam.keys),
            within=pyo.Binary if fam.binary else pyo.NonNegativeReals,
            bounds=lambda model, *key, fam=fam: (form.col_lower[fam.column[key]], _finite(form.col_upper[fam.column[key]])),
            doc=fam.doc,
        )
        m.add_component(fam.name, var)
        for key, col in fam.column.items():
            columns[col] = var[key]

    def expression(row: int) -> LinearExpression:
        span = range(form.row_start[row], form.row_start[row + 1])
        return LinearExpression(
            constant=0.0,
            linear_coefs=[form.row_value[n] for n in span],
            linear_vars=[columns[form.row_index[n]] for n in span],
        )

    def bounded(row: int) -> tuple:
        return (_finite(form.row_lower[row]), expression(row), _finite(form.row_upper[row]))

    for row_fam in form.constraints:
        if row_fam.keys == ((),):  # a single row, such as the deadline
            m.add_component(row_fam.name, pyo.Constraint(expr=bounded(row_fam.start), doc=row_fam.doc))
            continue
        rows = {key: row_fam.start + n for n, key in enumerate(row_fam.keys)}
        m.add_component(
            row_fam.name,
            pyo.Constraint(list(row_fam.keys), rule=lambda model, *key, rows=rows: bounded(rows[key]), doc=row_fam.doc),
        )

    costly = [(c, columns[n]) for n, c in enumerate(form.col_cost) if c != 0.0]
    m.overhead = pyo.Objective(
        expr=LinearExpression(constant=0.0, linear_coefs=[c for c, _ in costly], linear_vars=[v for _, v in costly]),
        sense=pyo.minimize,
        doc=f"energy above keep-all, in units of energy_scale_j = {form.energy_scale_j:.6g} J",
    )
    return m


def write_model_lp(form: Formulation, path: Path) -> None:
    """Write the formulation as a CPLEX LP file with readable names (R[3,1], inputs_present(...))."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    build_model(form).write(str(path), format=ProblemFormat.cpxlp, io_options={"symbolic_solver_labels": True})


def _finite(bound: float) -> float | None:
    return None if bound in (float("inf"), float("-inf")) else bound
