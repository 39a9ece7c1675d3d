"""Benchmark of the device runtime: its size, schedule bytes, and emulated steps per second.

Rows, one per model, core and schedule (keep-all, and hybrid at 70 % of keep-all, 1.5x): the
runtime's code in flash (.text + .data) and its own RAM beside the arena (.data + .bss, and the
deepest stack the step used), the arena (the RAM budget), the schedule's bytes as the device
receives them, the step's instructions and their time at the core's clock, and how many steps
the emulator runs per wall-clock second (median of five runs, QEMU's start included).
"""

import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from benchmarks.common import machine, write_rows
from poetsim import optimiser
from poetsim.device.build import build_runtime, code_sizes, flash_bytes
from poetsim.device.run import check_runnable, execute
from poetsim.device.tensors import make_tensors
from poetsim.pipeline import run_strategy
from poetsim.schedule.checker import check_schedule
from poetsim.schedule.formats import encode_binary
from poetsim.schedule.problem import build_problem
from poetsim.units import parse_ram

RUNS = 5
CASES = (
    ("mlp", 2, "nrf52840"),
    ("mlp", 1, "mkr1000"),
    ("mcu_cnn", 1, "nrf52840"),
    ("mcu_cnn", 1, "mkr1000"),
    ("mcu_dscnn", 1, "nrf52840"),
    ("mcu_dscnn", 1, "mkr1000"),
)


@dataclass(frozen=True)
class DeviceRow:
    """One schedule of one model on one emulated core."""

    model: str
    batch_size: int
    platform: str
    target: str
    schedule: str
    schedule_bytes: int
    arena_bytes: int
    code_flash_bytes: int
    runtime_ram_bytes: int
    stack_bytes: int
    step_instructions: float
    step_s_at_clock: float
    recomputations: int
    page_outs: int
    wall_s: float
    steps_per_s: float
    machine: str


def _rows(work: Path):
    for model, batch, platform in CASES:
        for name, ram in (("keep-all", "100%"), ("hybrid", "70%")):
            problem = build_problem(model, platform, parse_ram(ram), 1.5, batch_size=batch)
            target, clock_hz, program = check_runnable(problem)
            if name == "keep-all":
                schedule, _ = optimiser.keep_all(problem.graph, problem.costs, problem.timing)
            else:
                run = run_strategy(problem, "hybrid", time_limit_s=30, simulate=False)
                assert run.schedule is not None, run.message
                schedule = run.schedule
            figures = check_schedule(schedule, problem.graph, problem.costs, problem.timing)
            runtime = build_runtime(target, problem.budgets.ram_bytes)
            sizes = code_sizes(runtime)
            tensors = make_tensors(program)
            blob = encode_binary(schedule)
            steps = [execute(runtime, program, tensors, blob, work / f"{model}-{platform}-{name}") for _ in range(RUNS)]
            wall = statistics.median(step.wall_s for step in steps)
            fields = steps[0].raw.fields
            yield DeviceRow(
                model=model,
                batch_size=batch,
                platform=platform,
                target=target.name,
                schedule=name,
                schedule_bytes=len(blob),
                arena_bytes=problem.budgets.ram_bytes,
                code_flash_bytes=flash_bytes(sizes),
                runtime_ram_bytes=sizes.get("data", 0) + sizes["bss"],
                stack_bytes=fields["stack_bytes"],
                step_instructions=steps[0].instructions("step"),
                step_s_at_clock=steps[0].instructions("step") / clock_hz,
                recomputations=figures.recomputations,
                page_outs=figures.page_outs,
                wall_s=wall,
                steps_per_s=1.0 / wall,
                machine=machine(),
            )


def run(out_csv: Path) -> pd.DataFrame:
    """Every case's row, written to `out_csv` as it finishes."""
    with tempfile.TemporaryDirectory(prefix="poetsim-bench-device-") as work:
        return write_rows(out_csv, DeviceRow, _rows(Path(work)))
