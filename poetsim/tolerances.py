"""The float comparisons poetsim judges energies and times by, each defined once.

An energy or a time is a sum of thousands of products, and two schedules a person would call
equal can differ in the last bits, depending only on the order of the sums. So no layer compares
such figures with a bare `<` or `==`: it asks one of these questions, whose tolerances are
relative and far below anything a device or a solver's gap could show.
"""

#: A figure counts as lower than another only below this share under it: a schedule must beat
#: another by more than rounding before it replaces it (so equal schedules never churn).
CHEAPER_RTOL = 1e-12
#: A figure exceeds another only above this share over it (a transfer longer than its compute,
#: a stage over its capacity, a strategy dearer than the best of its row).
EXCEEDS_RTOL = 1e-9
#: Two figures are the same within this share of the larger.
SAME_RTOL = 1e-9


def cheaper(value: float, reference: float) -> bool:
    """Whether `value` is lower than `reference` by more than rounding."""
    return value < reference * (1 - CHEAPER_RTOL)


def exceeds(value: float, reference: float) -> bool:
    """Whether `value` is higher than `reference` by more than rounding."""
    return value > reference * (1 + EXCEEDS_RTOL)


def same(a: float, b: float) -> bool:
    """Whether `a` and `b` are equal up to rounding."""
    return abs(a - b) <= SAME_RTOL * max(abs(a), abs(b))
