"""The search of one `optimise` call after its pre-checks: its steps in order, and what they add up to.

`Search.run` runs, from the cheapest proof to the dearest:

1. the eviction cover (`steps.cover`): a proven lower bound, or a proof that nothing fits;
2. plans that need no solver (`steps.rule_plans`): keep-all, the plan of the cover's choice, the
   schedules of other strategies handed in as starts, the held-input plans; the cheapest that
   fits is the incumbent (if none fits, the first greedy plan that does);
3. the placement search (`placement`), the timed cover's linear relaxation (with paging, under
   `overlap`), the rebuilt greedy with hidden transfers (with paging, after the second restores),
   the covers that price page-ins' stalls (with the MILP confined to the first one's choice,
   `milp_steps.choice_solve`), the timed cover, the greedy plans,
   polishing, the recompute-only cover with second restores and the rebuilt greedy (`steps`),
   in the order `_middle` gives for the moves;
4. the stage MILP (`milp_steps`): its build, the run confined to a cover's choice, the full run
   from the incumbent. Where the MILP is too large for what is left, the greedy runs again
   instead if its own step was cut short;
5. the incumbent polished until no single change improves it, then, while effort is left,
   swapped (a change and an eviction) and polished again (`steps.settle`).

It stops as soon as the incumbent is within the gap of the best bound, a cover proves that
nothing fits, or the budget is spent; whatever stops it, the cheapest schedule found so far is
returned with the best proven bound (docs/optimiser.md, "The search").
"""

from collections.abc import Callable, Sequence
from dataclasses import replace

from poetsim.optimiser import milp_steps, steps
from poetsim.optimiser.allowance import Allowance
from poetsim.optimiser.call import Call, SolveSettings, Task
from poetsim.optimiser.clock import Clock, Reporter
from poetsim.optimiser.found import Found
from poetsim.optimiser.outcome import SolveOutcome, infeasible_message, pct
from poetsim.optimiser.placement import place
from poetsim.optimiser.plans import plan as plans
from poetsim.optimiser.shares import SHARES, Shares
from poetsim.optimiser.standing import Standing
from poetsim.optimiser.work import Work
from poetsim.schedule.model import Schedule
from poetsim.status import Status
from poetsim.strategies import KEEP_ALL

#: One step: what the steps before it found in, the same with its own products out.
Step = Callable[[Call, Found], Found]

#: The steps that run the MILP, each only when `milp_steps.time_for_milp` says there is room.
MILP_STEPS: tuple[Step, ...] = (milp_steps.build, milp_steps.restricted_solve, milp_steps.full_solve)


class Search:
    """One call's search: its `Call` (task, settings, budget, standing) and the steps it runs."""

    def __init__(
        self,
        task: Task,
        settings: SolveSettings,
        effort: float | None,
        clock: Clock,
        report: Reporter,
        shares: Shares = SHARES,
    ):
        standing = Standing(task.graph, task.costs, task.budgets, task.moves, task.timing, settings.mip_rel_gap)
        self.work = Work(clock)
        self.effort = effort
        self.call = Call(task, settings, shares, Allowance(self.work, effort), clock, report, standing)

    def run(self, starts: Sequence[Schedule] = ()) -> SolveOutcome:
        """The whole search (module docstring) and its outcome."""
        call = self.call
        found = steps.cover(call)
        if call.standing.infeasible:
            return self.outcome(found)
        found = steps.rule_plans(call, found, tuple(starts))
        for step in (place, *_middle(call), *MILP_STEPS):
            if call.done():
                break
            if step in MILP_STEPS and not milp_steps.time_for_milp(call, found):
                found = steps.without_milp(call, found)
                break
            found = step(call, found)
        return self.outcome(steps.settle(call, found))

    def bare(self) -> SolveOutcome:
        """The MILP alone, as POET states it: no cover, no plans, no start."""
        found = milp_steps.build(self.call, Found())
        self.call.standing.raise_bound(self.call.standing.keep_all_j, KEEP_ALL.name)  # the overhead is never negative
        return self.outcome(milp_steps.full_solve(self.call, found))

    def outcome(self, found: Found) -> SolveOutcome:
        """The outcome from the incumbent, the best bound and the solver's own account."""
        call, standing = self.call, self.call.standing
        task, solver, form = call.task, call.settings.solver, found.form
        common = SolveOutcome(
            moves=task.moves,
            timing=task.timing,
            solver=solver,
            status=Status.NO_SOLUTION,
            message="",
            build_s=found.build_s if found.build_s is not None else call.clock.elapsed_s(),
            handoff_s=found.handoff_s,
            solve_s=found.solve_s,
            num_variables=form.num_columns if form else 0,
            num_constraints=form.num_rows if form else 0,
            cover_bound_j=None if found.cover is None else found.cover.bound_j,
            work=self.work.done,
        )
        candidate = standing.best
        if candidate is None:
            status, message = self._unsolved(found)
            bound_j = None if status is Status.INFEASIBLE and standing.infeasible else standing.bound_j
            message = self._guarded(message)
            return replace(common, status=status, bound_j=bound_j, message=message, wall_s=call.clock.elapsed_s())
        objective_j = candidate.total_j
        bound_j = min(standing.bound_j, objective_j) if standing.bound_j is not None else standing.keep_all_j
        proven_gap = max(objective_j - bound_j, 0.0)
        overhead_j = objective_j - standing.keep_all_j
        gap_overhead = proven_gap / overhead_j if overhead_j > 0 else 0.0
        optimal = found.solver_status is Status.OPTIMAL or standing.proven()
        status = Status.OPTIMAL if optimal else Status.FEASIBLE
        by = standing.bound_by or KEEP_ALL.name
        if optimal and form is None:
            message = f"proven optimal with no solver run: {candidate.source} meets the lower bound from {by}"
        elif found.solver_status is Status.OPTIMAL:
            message = f"proven optimal by the {solver} MILP; the schedule is from {candidate.source}"
        elif optimal:
            message = f"proven optimal by the lower bound from {by}; the schedule is from {candidate.source}"
        else:
            message = (
                f"stopped with a gap of {pct(gap_overhead)} of the overhead (the lower bound from {by}); "
                f"the schedule is from {candidate.source}"
            )
        meta = {
            "moves": task.moves.label,
            "solver": solver,
            "status": status.value,
            "found_by": candidate.source,
            "ram_budget_bytes": str(task.budgets.ram_bytes),
            "runtime_budget_s": repr(task.budgets.runtime_s),
        }
        return replace(
            common,
            status=status,
            schedule=plans.to_schedule(candidate.plan, task.graph, task.costs, task.timing, meta),
            predicted=candidate.figures,
            objective_j=objective_j,
            bound_j=bound_j,
            gap_total=proven_gap / objective_j if objective_j > 0 else 0.0,
            gap_overhead=gap_overhead,
            message=self._guarded(message),
            found_by=candidate.source,
            wall_s=call.clock.elapsed_s(),
        )

    def _unsolved(self, found: Found) -> tuple[Status, str]:
        """The status and message of a call that found no schedule."""
        call, standing = self.call, self.call.standing
        solver = call.settings.solver
        if standing.infeasible:
            return Status.INFEASIBLE, standing.infeasible
        if found.solver_status is Status.INFEASIBLE:
            task = call.task
            return Status.INFEASIBLE, infeasible_message(task.graph, task.costs, task.budgets, task.moves)
        if found.solver_status is not None and found.solver_status.has_schedule:
            # Every solution is read through a plan and judged by the model's accounting: one that
            # breaks the budgets there is not reported (a solver's fault, not a schedule).
            return Status.NO_SOLUTION, (
                f"no schedule: the {solver} MILP's solution breaks the budgets under the model's accounting, "
                "and no other plan fits"
            )
        within = "" if self.effort is None else f" within the effort of {self.effort:.6g} units"
        return Status.NO_SOLUTION, f"no schedule was found{within}"

    def _guarded(self, message: str) -> str:
        """`message`, and if the guard stopped the call before its effort was spent, that too.

        Then the answer depends on the machine's speed.
        """
        if not self.work.guard_tripped:
            return message
        limit_s = self.call.clock.limit_s
        return (
            f"{message}; stopped by the time limit of {limit_s:.6g} s before the effort of {self.effort:.6g} units was "
            "spent (the answer depends on the machine's speed)"
        )


def _middle(call: Call) -> tuple[Step, ...]:
    """The steps between the placement search and the MILP, by the moves.

    With paging, the timed cover's linear relaxation comes first (under `overlap`: a bound of a
    few units where transfers crowd the stages, which the covers after it seldom reach), the
    second restores next (they serve only below the paging floor), then the rebuilt greedy with
    hidden transfers (it needs both moves and `overlap`, and is cheap where the covers after it
    are dear), and the timed cover, which places the transfers, before the greedy.
    Recompute-only runs the greedy before the timed cover, which there seldom raises the bound
    and would leave the greedy too little, and its second restores after polish. Both end with
    the rebuilt greedy, which takes its share from the MILP's.
    """
    if call.task.moves.page:
        return (
            steps.timed_relaxation,
            steps.second_restores,
            steps.rebuild_hiding,
            steps.page_in_bound,
            steps.timed,
            steps.greedy,
            steps.polish_step,
            steps.rebuild,
        )
    return (steps.page_in_bound, steps.greedy, steps.timed, steps.polish_step, steps.second_restores, steps.rebuild)
