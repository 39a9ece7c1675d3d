"""What became of one strategy at one point: the status word every layer reports.

The words are what users read in tables, `runs.csv` and reports; the properties say what a
status promises, so that no layer keeps its own list of "statuses with a schedule".
"""

from enum import Enum


class Status(str, Enum):
    """The outcome of one strategy at one point.

    - `optimal`: a schedule proven least-energy (within the gap settings), by the solver or by
      poetsim's own lower bound.
    - `feasible`: a checked schedule whose optimality is not proven; read its gap.
    - `baseline`: a schedule made by a fixed rule (keep-all, checkpoint-sqrt, Capuchin, POFO)
      that meets the budgets; nothing is claimed about optimality.
    - `checked`: a saved schedule, replayed (`simulate --schedule`), that the checker accepted
      within the budgets; how it was found is not known here.
    - `infeasible`: proven that no schedule of this strategy meets the budgets.
    - `over-budget`: a fixed rule's schedule misses the budgets (a fact about the rule, not a
      proof that nothing fits).
    - `no-solution`: the effort ran out before any schedule was found; not a proof.
    - `not-applicable`: the strategy does not apply to this graph (POFO's dynamic program needs a
      chain of blocks); the message says why. A fact about the graph, not a failure.
    - `invalid`: the independent checker rejected the optimiser's schedule (a bug in poetsim).
    - `failed`: the point could not be run; the message says why.
    """

    OPTIMAL = "optimal"
    FEASIBLE = "feasible"
    BASELINE = "baseline"
    CHECKED = "checked"
    INFEASIBLE = "infeasible"
    OVER_BUDGET = "over-budget"
    NO_SOLUTION = "no-solution"
    NOT_APPLICABLE = "not-applicable"
    INVALID = "invalid"
    FAILED = "failed"

    def __str__(self) -> str:
        """The status as runs.csv writes it: 'optimal'."""
        return self.value

    @property
    def meaning(self) -> str:
        """What the status tells a reader, in a few words (tables, keys and notes print it)."""
        return _MEANINGS[self]

    @property
    def has_schedule(self) -> bool:
        """Whether a checked schedule within the budgets comes with this status."""
        return self in (Status.OPTIMAL, Status.FEASIBLE, Status.BASELINE, Status.CHECKED)

    @property
    def is_proven(self) -> bool:
        """Whether the status is a fact that no machine's speed can change.

        `optimal` and `infeasible` are proofs; a rule's schedule (`baseline`, `over-budget`), a
        saved one (`checked`) and a rule's refusal (`not-applicable`) are deterministic. `feasible` and `no-solution` depend
        on the effort the search was given.
        """
        return self in (
            Status.OPTIMAL,
            Status.INFEASIBLE,
            Status.BASELINE,
            Status.CHECKED,
            Status.OVER_BUDGET,
            Status.NOT_APPLICABLE,
        )

    @classmethod
    def parse(cls, text: str) -> "Status":
        """The status named `text`; ValueError naming the known words otherwise."""
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"unknown status '{text}' (known: {', '.join(s.value for s in cls)})") from None


_MEANINGS = {
    Status.OPTIMAL: "proven least-energy",
    Status.FEASIBLE: "a checked schedule not proven optimal: read its gap",
    Status.BASELINE: "a fixed rule's schedule that meets the budgets",
    Status.CHECKED: "a saved schedule the checker accepted within the budgets",
    Status.INFEASIBLE: "proven: nothing fits",
    Status.OVER_BUDGET: "the rule's schedule misses a budget",
    Status.NO_SOLUTION: "the effort ran out before any schedule: not a proof",
    Status.NOT_APPLICABLE: "the strategy does not apply to this graph",
    Status.INVALID: "the checker rejected it",
    Status.FAILED: "the point could not be run",
}
