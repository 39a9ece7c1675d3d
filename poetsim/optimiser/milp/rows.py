"""The MILP as arrays: columns, sparse rows grouped in named families, and their builder.

`formulation` states POET's model through `RowBuilder`; `solvers` hands the arrays to HiGHS and
`model` turns the families into Pyomo components. Keeping the rows in one record is what makes
the LP file, the HiGHS model and the GLPK/CBC model the same model.
"""

from dataclasses import dataclass
from functools import cached_property

from poetsim.errors import InternalError
from poetsim.schedule.model import Moves, Timing

#: A term's reference to the constant 1 (R[t,t], substituted rather than made a column).
ONE = -1

INF = float("inf")


@dataclass(frozen=True)
class VarFamily:
    """One indexed variable of the model: its columns are start .. start + len(keys) - 1."""

    name: str
    doc: str
    keys: tuple[tuple[int, ...], ...]
    start: int
    binary: bool

    @cached_property
    def column(self) -> dict[tuple[int, ...], int]:
        """Column of each key."""
        return {key: self.start + n for n, key in enumerate(self.keys)}


@dataclass(frozen=True)
class RowFamily:
    """One indexed constraint of the model, named for the rule it enforces."""

    name: str
    doc: str
    keys: tuple[tuple[int, ...], ...]
    start: int


@dataclass(frozen=True)
class Formulation:
    """The model as arrays: columns (bounds, cost, integrality), CSR rows and their families."""

    graph_name: str
    moves: Moves
    timing: Timing
    num_nodes: int
    col_lower: tuple[float, ...]
    col_upper: tuple[float, ...]
    col_cost: tuple[float, ...]
    col_binary: tuple[bool, ...]
    row_start: tuple[int, ...]
    row_index: tuple[int, ...]
    row_value: tuple[float, ...]
    row_lower: tuple[float, ...]
    row_upper: tuple[float, ...]
    variables: tuple[VarFamily, ...]
    constraints: tuple[RowFamily, ...]
    keep_all_j: float
    energy_scale_j: float
    time_scale_s: float
    mem_scale_bytes: float

    @property
    def num_columns(self) -> int:
        """How many columns the model has."""
        return len(self.col_cost)

    @property
    def num_rows(self) -> int:
        """How many rows the model has (each a range: lower <= terms <= upper)."""
        return len(self.row_lower)

    def family(self, name: str) -> VarFamily:
        """The variable family called `name` (an empty one when the strategy has none)."""
        for fam in self.variables:
            if fam.name == name:
                return fam
        return VarFamily(name, "", (), 0, True)

    def column_names(self) -> list[str]:
        """'R[3,1]'-style names of all columns, in column order."""
        return [f"{fam.name}[{','.join(map(str, key))}]" for fam in self.variables for key in fam.keys]

    def objective(self, values) -> float:
        """The objective (scaled overhead) at the column values `values`."""
        return sum(c * v for c, v in zip(self.col_cost, values) if c)

    def row_activity(self, values) -> list[float]:
        """Each row's left-hand side at the column values `values` (for checks and tests)."""
        starts, index, value = self.row_start, self.row_index, self.row_value
        return [sum(value[n] * values[index[n]] for n in range(starts[r], starts[r + 1])) for r in range(self.num_rows)]


class RowBuilder:
    """Accumulates columns and rows; terms are (coefficient, column | ONE | None) pairs."""

    def __init__(self):
        self.lower: list[float] = []
        self.upper: list[float] = []
        self.cost: list[float] = []
        self.binary: list[bool] = []
        self.var_families: list[VarFamily] = []
        self.starts = [0]
        self.index: list[int] = []
        self.value: list[float] = []
        self.row_lower: list[float] = []
        self.row_upper: list[float] = []
        self.row_families: list[RowFamily] = []
        self._keys: list[tuple] = []
        self._family: str | None = None

    def variables(self, name: str, doc: str, keys, binary: bool, upper: float = 1.0, cost=None) -> dict:
        """Add one column per key; `cost(key)` gives its objective coefficient."""
        keys = tuple(keys)
        fam = VarFamily(name, doc, keys, len(self.cost), binary)
        for key in keys:
            self.lower.append(0.0)
            self.upper.append(upper)
            self.cost.append(cost(key) if cost else 0.0)
            self.binary.append(binary)
        self.var_families.append(fam)
        return fam.column

    def rule(self, rule, context) -> None:
        """Add the rows of one rule.

        `rule(builder, context)`, a function named for the rule whose docstring's first line states
        it; they form the constraint family of that name.
        """
        name, doc, start = rule.__name__, rule.__doc__.strip().splitlines()[0], len(self.row_lower)
        self._family, self._keys = name, []
        rule(self, context)
        if self._keys:
            self.row_families.append(RowFamily(name, doc, tuple(self._keys), start))
        self._family = None

    def build(self, **about) -> "Formulation":
        """The finished model; `about` gives the Formulation's descriptive fields."""
        return Formulation(
            col_lower=tuple(self.lower),
            col_upper=tuple(self.upper),
            col_cost=tuple(self.cost),
            col_binary=tuple(self.binary),
            row_start=tuple(self.starts),
            row_index=tuple(self.index),
            row_value=tuple(self.value),
            row_lower=tuple(self.row_lower),
            row_upper=tuple(self.row_upper),
            variables=tuple(self.var_families),
            constraints=tuple(self.row_families),
            **about,
        )

    def row(self, key: tuple, terms, lower: float, upper: float) -> None:
        """Add the row lower <= sum(coef * ref) <= upper; constants move to the bounds, absent refs drop out."""
        merged: dict[int, float] = {}
        constant = 0.0
        for coef, ref in terms:
            if ref is None or coef == 0.0:
                continue
            if ref == ONE:
                constant += coef
            else:
                merged[ref] = merged.get(ref, 0.0) + coef
        lower, upper = lower - constant, upper - constant
        merged = {c: v for c, v in merged.items() if v != 0.0}
        if not merged:
            # A row without variables is a fact about the data. The budget pre-checks and the
            # variable windows make every such row hold; one that does not is a formulation bug.
            if lower > 1e-9 or upper < -1e-9:
                raise InternalError(f"constraint {self._family}{key} cannot hold: {lower} <= 0 <= {upper}")
            return
        for col in sorted(merged):
            self.index.append(col)
            self.value.append(merged[col])
        self.starts.append(len(self.index))
        self.row_lower.append(lower)
        self.row_upper.append(upper)
        self._keys.append(key)
