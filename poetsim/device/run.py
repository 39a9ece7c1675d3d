"""One schedule on the emulated device, held against its prediction and a host reference.

`run_on_device(problem, schedule)` exports what the runtime needs (the program, the schedule as
`encode_binary` writes it, seeded weights and batch), links the runtime with an arena of exactly
the RAM budget, and runs two steps on QEMU: the schedule, and the keep-all schedule (every node
once, nothing paged) in an arena of its own peak. Then it checks, each a `Check`:

- gradients: the scheduled step's weight gradients and losses are bitwise those of keep-all;
- reference: both within `REFERENCE_RTOL` of a NumPy float64 step (poetsim.device.reference);
- peak: the arena's peak (largest sum of live allocations) equals the checker's predicted peak;
- budget: that peak, and the highest byte the arena touched, are within the RAM budget;
- traffic: bytes and operations paged out and in equal the schedule's;
- recomputations: equal the schedule's.

Time is reported beside the prediction, not checked: the device's figure is an instruction
count at the platform's clock (poetsim.device.qemu), the prediction the profile's cost model.
"""

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from poetsim import optimiser
from poetsim.device.build import MAX_ARENA_BYTES, TARGETS, Runtime, Target, build_runtime, code_sizes, compiler, flash_bytes
from poetsim.device.formats import (
    PROGRAM_CHECK_TEXT,
    STATUS_TEXT,
    RawResult,
    pack_image,
    pack_program,
    parse_result,
)
from poetsim.device.program import DeviceProgram, device_program
from poetsim.device.qemu import DEFAULT_TIMEOUT_S, emulator, instructions, run_image
from poetsim.device.reference import REFERENCE_RTOL, ReferenceStep, reference_step
from poetsim.device.tensors import StepTensors, make_tensors
from poetsim.errors import DeviceError, UserInputError
from poetsim.inputs.profiles import Platform
from poetsim.schedule.checker import check_schedule
from poetsim.schedule.costs import INPUT_OP
from poetsim.schedule.formats import encode_binary
from poetsim.schedule.model import Compute, Figures, PageIn, PageOut, Schedule
from poetsim.schedule.problem import Problem
from poetsim.strategies import KEEP_ALL


@dataclass(frozen=True)
class Step:
    """One step the runtime ran: its result, the weight gradients it wrote, the emulator's wall time."""

    raw: RawResult
    grads: bytes
    wall_s: float

    def instructions(self, name: str) -> float:
        """Instructions of the step's `name` ticks: step, compute, transfer or compact."""
        return instructions(self.raw.ticks(name))

    def same_bits(self, other: "Step") -> bool:
        """Whether the two steps wrote the same gradients and losses, bit for bit."""
        return self.grads == other.grads and self.raw.losses == other.raw.losses


@dataclass(frozen=True)
class Check:
    """One comparison of the device against the prediction or the reference."""

    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class NodeTime:
    """One node's computes on the device beside their predicted time."""

    node: int
    name: str
    op: str
    computes: int
    instructions: float
    measured_s: float
    predicted_s: float


@dataclass(frozen=True)
class DeviceRun:
    """A schedule run on the emulated device, with the prediction beside every measured figure."""

    model: str
    platform: str
    target: str
    clock_hz: float
    timing: str
    ram_budget_bytes: int
    schedule_bytes: int
    flash_bytes: int  # the runtime's code, constants and data initialisers (`build.flash_bytes`)
    predicted: Figures
    step: Step = field(repr=False)
    keep_all: Step = field(repr=False)
    expected_traffic: dict[str, int]
    reference_error: float
    nodes: tuple[NodeTime, ...]
    checks: tuple[Check, ...]

    @property
    def ok(self) -> bool:
        """Whether every check passed."""
        return all(check.ok for check in self.checks)

    @property
    def failed(self) -> list[Check]:
        """The checks that did not pass."""
        return [check for check in self.checks if not check.ok]

    @property
    def compute_s(self) -> float:
        """Measured compute time of every node but the batch read (an instruction count at the clock)."""
        return sum(n.measured_s for n in self.nodes if n.op != INPUT_OP)

    @property
    def predicted_compute_s(self) -> float:
        """Predicted compute time of the same computes, from the platform profile."""
        return sum(n.predicted_s for n in self.nodes if n.op != INPUT_OP)

    @property
    def step_s(self) -> float:
        """The whole step's instructions at the clock: computes, copies to and from storage, bookkeeping."""
        return self.step.instructions("step") / self.clock_hz

    def summary(self) -> dict:
        """Every figure as plain values (what `poetsim device run --json` prints)."""
        f = self.step.raw.fields
        return {
            "model": self.model,
            "platform": self.platform,
            "target": self.target,
            "clock_hz": self.clock_hz,
            "timing": self.timing,
            "ok": self.ok,
            "checks": {c.name: {"ok": c.ok, "detail": c.detail} for c in self.checks},
            "gradients_bitwise_equal": self.step.same_bits(self.keep_all),
            "reference_max_error": self.reference_error,
            "reference_rtol": REFERENCE_RTOL,
            "ram_budget_bytes": self.ram_budget_bytes,
            "arena_bytes": f["arena_bytes"],
            "predicted_peak_bytes": int(self.predicted.peak_ram_bytes),
            "peak_bytes": f["peak_bytes"],
            "high_water_bytes": f["high_water_bytes"],
            "compactions": f["compactions"],
            "moved_bytes": f["moved_bytes"],
            "keep_all_peak_bytes": self.keep_all.raw.fields["peak_bytes"],
            "page_out_bytes": f["page_out_bytes"],
            "page_outs": f["page_outs"],
            "page_in_bytes": f["page_in_bytes"],
            "page_ins": f["page_ins"],
            "recomputations": f["recomputations"],
            "expected": dict(self.expected_traffic),
            "schedule_bytes": self.schedule_bytes,
            "instructions": {name: self.step.instructions(name) for name in ("step", "compute", "transfer", "compact")},
            "compute_s": self.compute_s,
            "predicted_compute_s": self.predicted_compute_s,
            "step_s": self.step_s,
            "predicted_runtime_s": self.predicted.runtime_s,
            "keep_all_instructions": self.keep_all.instructions("step"),
            "runtime_flash_bytes": self.flash_bytes,
            "runtime_stack_bytes": f["stack_bytes"],
            "runtime_static_bytes": f["static_bytes"],
            "losses": list(self.step.raw.losses),
            "emulator_wall_s": self.step.wall_s,
            "nodes": [n.__dict__ for n in self.nodes],
        }


def target_of(platform: Platform) -> tuple[Target, float]:
    """The runtime's target and clock for `platform`; UserInputError if its profile names none."""
    if platform.device is None:
        raise UserInputError(
            f"platform {platform.name} has no 'device' section (core and clock): poetsim device runs microcontroller "
            "profiles such as nrf52840 and mkr1000"
        )
    return TARGETS[platform.device.core], platform.device.clock_hz


def require_tools() -> None:
    """ToolMissingError (one line: what to install) unless the cross-compiler and the emulator are both installed.

    Commands call it before any solve, sweep or measurement, so that a missing tool stops them
    at once instead of failing every schedule after the work.
    """
    compiler()
    emulator()


def check_runnable(problem: Problem) -> tuple[Target, float, DeviceProgram]:
    """The target, clock and program of `problem`; UserInputError at once if the device cannot run it."""
    target, clock_hz = target_of(problem.platform)
    return target, clock_hz, device_program(problem.graph)


def execute(
    runtime: Runtime,
    program: DeviceProgram,
    tensors: StepTensors,
    schedule: bytes,
    folder: Path,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> Step:
    """Run `schedule` (binary) once; DeviceError naming the runtime's status if it refuses or fails."""
    storage = sum(program.graph.output_bytes)
    image = pack_image(pack_program(program.records), schedule, tensors.weight_bytes(), tensors.batch_bytes(), storage)
    output = run_image(runtime, image, folder, timeout_s)
    raw = parse_result(output.result)
    if raw.fields["status"] != 0 or output.grads is None:
        raise DeviceError(describe_failure(raw, program))
    return Step(raw, output.grads, output.wall_s)


def describe_failure(raw: RawResult, program: DeviceProgram) -> str:
    """The runtime's status in one line, with the stage, instruction and node where it stopped."""
    f = raw.fields
    status = f["status"]
    text = STATUS_TEXT.get(status, f"unknown status {status}")
    names = [node.name for node in program.graph.nodes]

    def name(node: int) -> str:
        """'node 20 (block.relu2.grad)', or the bare id of a node outside the graph."""
        return f"node {node} ({names[node]})" if node < len(names) else f"node {node}"

    if status == 2:
        return f"the device refused the program: {name(f['err_node'])}: {PROGRAM_CHECK_TEXT.get(f['err_b'], 'malformed')}"
    if status == 1:
        return f"the device refused the image: {text}"
    if 10 <= status < 30:
        return f"the device refused the schedule: {text} (at byte {f['err_a']})"
    if status == 40:
        return (
            f"the device stopped at stage {f['err_stage']}, instruction {f['err_index']}, {name(f['err_node'])}: {text} "
            f"({f['err_a']:,} bytes asked with {f['err_b']:,} of {f['arena_bytes']:,} live)"
        )
    if status == 32:
        where = f"the device stopped at stage {f['err_stage']}, Compute of {name(f['err_node'])}"
        return f"{where}: input {name(f['err_a'])} is not in RAM"
    if status == 50:
        return f"the device took a fault (exception {f['err_a']})"
    return f"the device stopped at stage {f['err_stage']}, instruction {f['err_index']}, {name(f['err_node'])}: {text}"


def schedule_traffic(schedule: Schedule, program: DeviceProgram) -> dict[str, int]:
    """Bytes and operations the schedule pages out and in, and how many computes it runs."""
    sizes = program.graph.output_bytes
    traffic = {"page_out_bytes": 0, "page_outs": 0, "page_in_bytes": 0, "page_ins": 0, "computes": 0}
    for _, ins in schedule.instructions():
        if isinstance(ins, PageOut):
            traffic["page_out_bytes"] += sizes[ins.node]
            traffic["page_outs"] += 1
        elif isinstance(ins, PageIn):
            traffic["page_in_bytes"] += sizes[ins.node]
            traffic["page_ins"] += 1
        elif isinstance(ins, Compute):
            traffic["computes"] += 1
    return traffic


@dataclass
class Session:
    """Runtimes, programs and keep-all steps already made, shared by the runs of a study."""

    seed: int = 0
    timeout_s: float = DEFAULT_TIMEOUT_S
    keep_all_steps: dict = field(default_factory=dict)

    def keep_all(self, problem: Problem, target: Target, program: DeviceProgram, tensors: StepTensors, folder: Path) -> Step:
        """The keep-all step of `problem`'s graph on `target`, in an arena of its own peak (run once)."""
        key = (problem.graph.name, problem.graph.meta, target.name, problem.timing, self.seed)
        if key not in self.keep_all_steps:
            schedule, _ = optimiser.keep_all(problem.graph, problem.costs, problem.timing)
            peak = int(check_schedule(schedule, problem.graph, problem.costs, problem.timing).peak_ram_bytes)
            if peak > MAX_ARENA_BYTES:
                raise UserInputError(
                    f"{problem.graph.name}: its keep-all step, which every device run is held to, needs an arena of "
                    f"{peak:,} bytes, more than the emulated board holds ({MAX_ARENA_BYTES:,}); the device runs models "
                    "whose keep-all step fits it"
                )
            runtime = build_runtime(target, peak)
            self.keep_all_steps[key] = execute(
                runtime, program, tensors, encode_binary(schedule), folder / KEEP_ALL.name, self.timeout_s
            )
        return self.keep_all_steps[key]


def run_on_device(
    problem: Problem,
    schedule: Schedule,
    out_dir: Path | None = None,
    session: Session | None = None,
) -> DeviceRun:
    """Run `schedule` (checked against `problem` first) on the emulated device and compare (module doc)."""
    session = session or Session()
    target, clock_hz, program = check_runnable(problem)
    predicted = check_schedule(schedule, problem.graph, problem.costs, problem.timing, problem.budgets)
    tensors = make_tensors(program, session.seed)
    blob = encode_binary(schedule)
    with tempfile.TemporaryDirectory(prefix="poetsim-device-") as scratch:
        folder = Path(out_dir) if out_dir is not None else Path(scratch)
        keep_all = session.keep_all(problem, target, program, tensors, folder)
        runtime = build_runtime(target, problem.budgets.ram_bytes)
        step = execute(runtime, program, tensors, blob, folder / "schedule", session.timeout_s)
        flash = flash_bytes(code_sizes(runtime))
    reference = reference_step(program, tensors)
    error = reference_error(step, reference, program)
    expected = schedule_traffic(schedule, program)
    nodes = _node_times(step, problem, clock_hz)
    checks = _checks(step, keep_all, predicted, problem.budgets.ram_bytes, expected, error)
    return DeviceRun(
        model=problem.graph.name,
        platform=problem.platform.name,
        target=target.name,
        clock_hz=clock_hz,
        timing=problem.timing.value,
        ram_budget_bytes=problem.budgets.ram_bytes,
        schedule_bytes=len(blob),
        flash_bytes=flash,
        predicted=predicted,
        step=step,
        keep_all=keep_all,
        expected_traffic=expected,
        reference_error=error,
        nodes=nodes,
        checks=checks,
    )


def reference_error(step: Step, reference: ReferenceStep, program: DeviceProgram) -> float:
    """The largest difference from the reference, as a share of each weight tensor's, and the losses', largest magnitude."""
    device = np.frombuffer(step.grads, dtype="<f4").astype(np.float64)
    worst = 0.0
    for block in program.params:
        span = slice(block.offset, block.offset + block.floats)
        scale = float(np.abs(reference.grads[span]).max()) or 1.0
        worst = max(worst, float(np.abs(device[span] - reference.grads[span]).max()) / scale)
    losses = np.asarray(step.raw.losses, dtype=np.float64)
    if len(losses) != len(reference.losses):
        return float("inf")
    if len(losses):
        scale = float(np.abs(reference.losses).max()) or 1.0
        worst = max(worst, float(np.abs(losses - reference.losses).max()) / scale)
    return worst


def _node_times(step: Step, problem: Problem, clock_hz: float) -> tuple[NodeTime, ...]:
    rows = []
    for node, ticks in zip(problem.graph.nodes, step.raw.nodes):
        computes = 1 + ticks.recomputes  # every node's first compute, in its own stage
        count = instructions(ticks.first + ticks.recompute)
        rows.append(
            NodeTime(
                node.id,
                node.name,
                node.op,
                computes,
                count,
                count / clock_hz,
                problem.costs.compute_s[node.id] * computes,
            )
        )
    return tuple(rows)


def _checks(
    step: Step, keep_all: Step, predicted: Figures, budget: int, expected: dict[str, int], error: float
) -> tuple[Check, ...]:
    f = step.raw.fields
    peak = int(predicted.peak_ram_bytes)
    traffic = [(name, f[name], expected[name]) for name in ("page_out_bytes", "page_outs", "page_in_bytes", "page_ins")]
    differing = [f"{name} {got:,} (scheduled {want:,})" for name, got, want in traffic if got != want]
    return (
        Check(
            "gradients",
            step.same_bits(keep_all),
            "bitwise equal to the keep-all step's" if step.same_bits(keep_all) else "differ from the keep-all step's",
        ),
        Check(
            "reference",
            error <= REFERENCE_RTOL,
            f"largest difference {error:.2e} of the tensor's scale (limit {REFERENCE_RTOL:g})",
        ),
        Check("peak", f["peak_bytes"] == peak, f"arena peak {f['peak_bytes']:,} bytes, predicted {peak:,}"),
        Check(
            "budget",
            f["peak_bytes"] <= budget and f["high_water_bytes"] <= budget,
            f"peak {f['peak_bytes']:,} and highest byte {f['high_water_bytes']:,} of a {budget:,}-byte arena",
        ),
        Check(
            "traffic",
            not differing,
            "; ".join(differing)
            or f"{f['page_outs']} page-outs ({f['page_out_bytes']:,} bytes), "
            f"{f['page_ins']} page-ins ({f['page_in_bytes']:,} bytes), as scheduled",
        ),
        Check(
            "recomputations",
            f["recomputations"] == predicted.recomputations,
            f"{f['recomputations']} run, {predicted.recomputations} scheduled",
        ),
    )
