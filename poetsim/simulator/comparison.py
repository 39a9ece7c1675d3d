"""The optimiser's prediction against the simulation of its schedule: what differs, by how much, and why.

`summary.json` is the simulator's own record (`SimulationResult.summary`); this is the other
file of a simulated run, `comparison.json`: the checked prediction under the run's timing
model beside the simulated figures, with the makespan difference split by cause. Under
`overlap` timing the causes are the simulator's `MakespanDelta`; under `compute-only` one more
part, `timing_model_s`, is what the paper's model leaves out (transfer time beyond compute),
so the parts always add up to simulated minus predicted.
"""

from dataclasses import asdict, dataclass

from poetsim.schedule.model import Budgets, Figures, Timing
from poetsim.simulator.result import SimulationResult, explain_causes

#: Below this share of the predicted makespan a difference is rounding, not a finding.
_NOTEWORTHY = 1e-9


@dataclass(frozen=True)
class SimulatedVsPredicted:
    """A prediction and its simulation side by side.

    `makespan_causes_s` sums to `simulated.runtime_s - predicted.runtime_s`; `energy_difference_j`
    is simulated minus predicted per energy component (only static energy can differ: the same
    instructions cost the same per-instruction energy). `flags` say, in words, what breaks or
    surprises: a missed deadline, stalls, a peak above the prediction.
    """

    mode: str
    timing: str
    predicted: Figures
    simulated: Figures
    makespan_causes_s: dict[str, float]
    energy_difference_j: dict[str, float]
    stall_s: float
    waits_s: dict[str, float]
    busy: dict[str, float]
    flags: tuple[str, ...]
    budgets: Budgets

    def to_dict(self) -> dict:
        """The comparison as plain JSON-ready data (comparison.json)."""
        pairs = {
            "makespan_s": (self.predicted.runtime_s, self.simulated.runtime_s),
            "peak_ram_bytes": (self.predicted.peak_ram_bytes, self.simulated.peak_ram_bytes),
            "energy_j": (self.predicted.total_j, self.simulated.total_j),
        }
        return {
            "mode": self.mode,
            "timing": self.timing,
            "predicted": {name: p for name, (p, _) in pairs.items()},
            "simulated": {name: s for name, (_, s) in pairs.items()},
            "difference_pct": {name: (100.0 * (s - p) / p if p else 0.0) for name, (p, s) in pairs.items()},
            "makespan_causes_s": {**self.makespan_causes_s, "total_s": sum(self.makespan_causes_s.values())},
            "energy_difference_j": self.energy_difference_j,
            "simulated_breakdown_j": {
                name: getattr(self.simulated, name)
                for name in ("compute_j", "recompute_j", "page_in_j", "page_out_j", "static_j")
            },
            "stall_s": self.stall_s,
            "waits_s": self.waits_s,
            "busy": self.busy,
            "flags": list(self.flags),
            "budgets": asdict(self.budgets),
        }


def compare(predicted: Figures, timing: Timing | str, result: SimulationResult, budgets: Budgets) -> SimulatedVsPredicted:
    """Set `result` beside `predicted` (the checked figures under `timing`) and explain the difference."""
    timing = Timing(timing)
    simulated = result.figures
    causes = {"timing_model_s": result.stage_model.runtime_s - predicted.runtime_s}
    causes.update(asdict(result.delta))
    energy = {
        name: getattr(simulated, name) - getattr(predicted, name)
        for name in ("compute_j", "recompute_j", "page_in_j", "page_out_j", "static_j")
    }
    return SimulatedVsPredicted(
        mode=result.mode,
        timing=timing.value,
        predicted=predicted,
        simulated=simulated,
        makespan_causes_s=causes,
        energy_difference_j=energy,
        stall_s=result.stall_s,
        waits_s=dict(result.waits_s),
        busy={"compute": result.compute_busy, "dma": result.dma_busy, "bus": result.bus_busy},
        flags=tuple(_flags(predicted, result, budgets, causes)),
        budgets=budgets,
    )


def _flags(predicted: Figures, result: SimulationResult, budgets: Budgets, causes: dict[str, float]) -> list[str]:
    simulated = result.figures
    flags = []
    if simulated.peak_ram_bytes > budgets.ram_bytes:
        flags.append(f"simulated peak RAM {simulated.peak_ram_bytes:,.0f} bytes is over the budget of {budgets.ram_bytes:,}")
    if not budgets.meets_deadline(simulated.runtime_s):
        flags.append(
            f"simulated makespan {simulated.runtime_s:.6g} s is over the deadline of {budgets.runtime_s:.6g} s "
            f"({100 * (simulated.runtime_s / budgets.runtime_s - 1):+.2f} %)"
        )
    difference_s = simulated.runtime_s - predicted.runtime_s
    if abs(difference_s) > _NOTEWORTHY * max(predicted.runtime_s, 1e-300):
        flags.append(
            f"simulated makespan {100 * difference_s / predicted.runtime_s:+.3f} % against the prediction: "
            + explain_causes(causes, _NOTEWORTHY * predicted.runtime_s)
        )
    if result.stall_s > 0:
        flags.append(
            f"the compute engine waited {result.waits_s['input']:.6g} s for inputs still being paged in and "
            f"{result.waits_s['ram']:.6g} s for RAM held by transfers in flight"
        )
    if simulated.peak_ram_bytes > predicted.peak_ram_bytes:
        flags.append(
            f"simulated peak RAM {simulated.peak_ram_bytes:,.0f} bytes is above the predicted "
            f"{predicted.peak_ram_bytes:,.0f} bytes ({result.pending_at_peak_bytes:,} bytes of it freed "
            "buffers still held by transfers)"
        )
    return flags
