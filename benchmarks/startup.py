"""How fast `poetsim` starts: `--help`, every `COMMAND --help`, `models`, and a small `solve`.

Each command runs as its own process, as a user types it, `REPEATS` times after `WARMUPS`
unmeasured runs (which fill the OS's file cache and write the .pyc files). A row records the
median, fastest and slowest wall time, the median CPU time of the child (user + system: less
noisy than wall time on a shared machine), the target and whether the median meets it, and the
machine's load average when the row began, so that a slow figure can be read against it.

    python -m benchmarks startup       # results/bench/startup.csv
"""

import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from benchmarks.common import machine, write_rows

#: The targets: help and the catalogue feel instant; a small graph solves well under a second.
HELP_TARGET_S = 0.35
SOLVE_TARGET_S = 1.0
REPEATS = 10
WARMUPS = 2
#: The small solve of the target: the MCU scenario's MLP on the nRF52840.
SOLVE = ("solve", "scenarios/mcu.yaml", "--platform", "nrf52840", "--ram", "70%", "--runtime", "1.5x", "--strategy", "hybrid")


@dataclass(frozen=True)
class Startup:
    """One command's start-up: wall and CPU seconds over the repeats, against its target."""

    command: str
    repeats: int
    median_s: float
    min_s: float
    max_s: float
    cpu_median_s: float
    target_s: float
    meets_target: bool
    load_1min: float
    machine: str


def _poetsim() -> str:
    """The `poetsim` script beside this interpreter (the one `make setup` installs)."""
    return str(Path(sys.executable).parent / "poetsim")


def command_names() -> list[str]:
    """Every command the app registers, sub-apps' commands as `GROUP NAME`."""
    import typer

    from poetsim.cli import app

    group = typer.main.get_command(app)
    names = []
    for name, command in sorted(group.commands.items()):  # type: ignore[attr-defined]
        sub = getattr(command, "commands", None)
        names += [f"{name} {inner}" for inner in sorted(sub)] if sub else [name]
    return names


def _once(argv: list[str]) -> tuple[float, float]:
    """Wall and child CPU seconds of one run; an exit code other than 0 is a failed benchmark."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(words: tuple[str, ...], target_s: float, repeats: int = REPEATS) -> Startup:
    """Run `poetsim WORDS` `repeats` times after the warm-ups; its row."""
    argv = [_poetsim(), *words]
    for _ in range(WARMUPS):
        _once(argv)
    load = os.getloadavg()[0]
    walls, cpus = zip(*(_once(argv) for _ in range(repeats)))
    median = statistics.median(walls)
    return Startup(
        command="poetsim " + " ".join(words),
        repeats=repeats,
        median_s=round(median, 4),
        min_s=round(min(walls), 4),
        max_s=round(max(walls), 4),
        cpu_median_s=round(statistics.median(cpus), 4),
        target_s=target_s,
        meets_target=median <= target_s,
        load_1min=round(load, 2),
        machine=machine(),
    )


def _rows(repeats: int) -> Iterator[Startup]:
    yield measure(("--help",), HELP_TARGET_S, repeats)
    yield measure(("models",), HELP_TARGET_S, repeats)
    for name in command_names():
        yield measure((*name.split(), "--help"), HELP_TARGET_S, repeats)
    yield measure(SOLVE, SOLVE_TARGET_S, repeats)


def run(out_csv: Path, repeats: int = REPEATS) -> pd.DataFrame:
    """Measure every row into `out_csv` (from the repository's root: the solve reads scenarios/)."""
    return write_rows(out_csv, Startup, _rows(repeats))
