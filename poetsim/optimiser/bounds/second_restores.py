"""Item 7 of the eviction cover: an output rebuilt for a cascade and absent again is restored twice.

The rows are added to a recompute-only cascade cover (`cover_model.CoverModel`) after its stage
rows: n_{t,o,J} (o is read in stages t+1..J), y_{o,J} (o is absent at some row from J on) and
x2_o >= n_{t,o,J} + (o absent at t) + y_{o,J} - 2, one more recomputation of o. Only the n
columns from which some x2 row can be reached are made, from the outputs whose next reader is
nearest first, until the program has its nonzero cap.
"""

import bisect
import math

from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.bounds.columns import Col
from poetsim.optimiser.milp.program import Program

#: Reads are followed from an output absent at t only when its next reader is at most this many
#: stages later, and to this many inputs deep: fewer rows, the same bound where it rises
#: (docs/optimiser.md, "Second restores").
SECOND_RESTORE_WINDOW = 16
SECOND_RESTORE_DEPTH = 8


def add_second_restores(
    program: Program,
    graph: TrainingGraph,
    absent_at: dict[tuple[int, int], int],
    recompute_j: tuple[float, ...],
    energy_scale: float,
    nonzero_cap: int | None,
) -> None:
    """Add item 7's rows to `program`, pricing each second restore x2_o at `recompute_j[o]`.

    `program` is a cascade cover whose absences of live outputs at rows are `absent_at` ((t, i) ->
    a_{t,i} or b_{t,i}).
    """
    _SecondRestores(program, graph, absent_at, recompute_j, energy_scale).add(absent_at, nonzero_cap)


class _SecondRestores:
    """The rows of item 7 over one program: which reads lead to a second restore, and their rows."""

    def __init__(self, program, graph, absent_at, recompute_j, energy_scale):
        self.program, self.graph = program, graph
        self.recompute_j, self.energy_scale = recompute_j, energy_scale
        self.deps = [node.deps for node in graph.nodes]
        # (t, o) -> o not in RAM at row t and restored after it: the live absences and the dead inputs' r_{t,d}
        self.absent = dict(absent_at)
        self.absent.update({(key[1], key[2]): col for key, col in program.columns.items() if key[0] == Col.REBUILT})
        self.rows_of: dict[int, list[int]] = {}
        for t, o in self.absent:
            self.rows_of.setdefault(o, []).append(t)
        self.useful: dict[tuple[int, int, int, int], bool] = {}

    def add(self, roots_at: dict[tuple[int, int], int], nonzero_cap: int | None) -> None:
        """From each live absence (t, i), nearest next reader first.

        i is rebuilt by that reader, reading its inputs in between.
        """
        readers, program = self.graph.consumers, self.program
        roots = sorted((readers[i][bisect.bisect_right(readers[i], t)] - t, t, i) for t, i in roots_at)
        for window, t, i in roots:
            if nonzero_cap is not None and len(program.index) > nonzero_cap:
                break
            col, due = roots_at[t, i], t + window
            self.twice(i, due, [col])
            if window > SECOND_RESTORE_WINDOW:
                break
            for d in self.deps[i]:
                self.reads(t, d, due, [col])

    def worth(self, t: int, o: int, due: int, depth: int) -> bool:
        """Whether o, read in (t, due] at `depth`, leads to an x2 row.

        Absent at t, and absent again from `due` on or with an input, within the depth, that is.
        """
        key = (t, o, due, depth)
        if key not in self.useful:
            self.useful[key] = (
                depth <= SECOND_RESTORE_DEPTH
                and (t, o) in self.absent
                and (
                    any(row >= due for row in self.rows_of.get(o, ()))
                    or any(self.worth(t, d, due, depth + 1) for d in self.deps[o])
                )
            )
        return self.useful[key]

    def reads(self, t: int, o: int, due: int, terms: list[int], depth: int = 1) -> None:
        """n_{t,o,due} >= every term - (their number - 1): o is read in (t, due] when they all hold."""
        if not self.worth(t, o, due, depth):
            return
        program, key = self.program, (Col.READ, t, o, due)
        fresh = key not in program.columns
        col = program.column(key)
        program.row([(col, 1.0)] + [(term, -1.0) for term in terms], 1.0 - len(terms), math.inf)
        if fresh:  # o is absent at t and restored by recomputation in (t, due]: it reads its inputs
            gone = self.absent[t, o]
            self.twice(o, due, [col, gone])
            for d in self.deps[o]:
                self.reads(t, d, due, [col, gone], depth + 1)

    def twice(self, o: int, due: int, terms: list[int]) -> None:
        """x2_o >= sum(terms) + y_{o,due} - len(terms): o is absent again at a row from `due` on."""
        program, key = self.program, (Col.ABSENT_AGAIN, o, due)
        if key not in program.columns:
            later = [self.absent[t, o] for t in self.rows_of.get(o, ()) if t >= due]
            if not later:
                return
            for col in later:
                program.row([(program.column(key), 1.0), (col, -1.0)], 0.0, math.inf)
        again = program.column((Col.TWICE, o), self.recompute_j[o] / self.energy_scale)
        program.row([(again, 1.0), (program.columns[key], -1.0)] + [(term, -1.0) for term in terms], -float(len(terms)), math.inf)
