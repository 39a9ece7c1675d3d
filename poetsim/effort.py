"""The effort of a solve and its wall-clock guard, as a scenario, the command line and `optimise` state them.

The optimiser counts its work in work units (`poetsim.optimiser.work`: about a second each on the
reference machine, idle), so that the same inputs give the same answer on any machine and at any
load; a wall-clock limit only guards against a machine far slower or busier than that.
"""

#: Unless stated, a call's wall-clock guard is this many seconds per unit of its effort: a normal
#: call, on an idle machine or one loaded twice over, never reaches it (a unit is about a second
#: there, within a factor of two either way).
GUARD_S_PER_UNIT = 10.0
#: ... and at least this many seconds: a call of little effort still starts its solver processes
#: and builds its model.
GUARD_MIN_S = 10.0


def resolve_limits(effort: float | None, time_limit_s: float | None) -> tuple[float | None, float | None]:
    """A call's effort (units) and guard (seconds) from what was stated.

    Either derives the other (the guard is GUARD_S_PER_UNIT seconds per unit of effort, at least
    GUARD_MIN_S), both stand as stated, and neither leaves the call unbounded (until proven).
    """
    if effort is None and time_limit_s is not None:
        return time_limit_s / GUARD_S_PER_UNIT, time_limit_s
    if effort is not None and time_limit_s is None:
        return effort, max(GUARD_S_PER_UNIT * effort, GUARD_MIN_S)
    return effort, time_limit_s
