"""Measure this machine as a poetsim platform profile: compute per operator kind, storage, memory.

`profile_host(swap_dir)` times what the executor really does and writes it in the profile
schema (poetsim.inputs.profiles), every figure with a source "measured on <cpu> on <date>":

- compute: per operator kind (`compute.op_flops_per_s`), the FLOPs of every node of that kind
  over the time the executor took to compute it in the fastest of a few keep-all runs of a
  calibration set of models (by default small ones of the zoo's kinds, or the model itself);
  `compute.flops_per_s` is the same ratio over all nodes, for kinds the set does not cover.
  FLOPs are counted as the importer counts them (poetsim.pytorch.flops), so a node's predicted
  time is its FLOPs over the rate measured for its kind; Python's per-op overhead is in the rate.
- storage: page-out and page-in of files of 4 KiB to 32 MiB, written and read as the executor
  pages (poetsim.pytorch.swap, durable by default), fitted as latency + bytes / bandwidth to
  the fastest transfer of each size.
- memory bus: a large tensor copy (bytes read plus written per second).
- one DMA channel: the executor runs transfers on one I/O thread.
- interference (a note, not a figure of the model): how much slower computes and transfers run
  while the other runs, which the overlap stage model does not count.
- energy: from RAPL counters under /sys/class/powercap when readable (busy minus idle power);
  otherwise the powers are poetsim assumptions and the profile says energy is modelled.

Why the fastest: on a shared machine other jobs only ever add time, and by as much as a fifth
of a step from one run to the next (docs/pytorch.md); the least disturbed run is the one that
describes the host. `poetsim validate-run` measures a schedule's step the same way, as the
fastest of its runs.
"""

import datetime
import functools
import os
import platform as platform_module
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml

from poetsim.errors import UserInputError
from poetsim.inputs.profiles import Platform, load_platform
from poetsim.optimiser import keep_all
from poetsim.pytorch import models, swap
from poetsim.pytorch.capturing import capture
from poetsim.pytorch.executor import default_threads, execute
from poetsim.schedule.costs import node_costs
from poetsim.schedule.model import Timing
from poetsim.units import format_bytes

#: Sizes of the storage test files: latency dominates the small ones, bandwidth the large ones.
STORAGE_SIZES = (4096, 65536, 1 << 20, 8 << 20, 32 << 20)
RAPL_ROOT = Path("/sys/class/powercap")
#: How the profile's note on its compute rates begins (recalibration replaces that note).
COMPUTE_NOTE = "Compute rates are"
#: Modelled powers when no energy counter is readable (poetsim assumptions, stated in the profile).
MODELLED_CORE_POWER_W = 5.0
MODELLED_IDLE_POWER_W = 1.0
MODELLED_STORAGE_POWER_W = 2.0


@dataclass(frozen=True)
class Workload:
    """A model to calibrate compute on: the module and an example batch."""

    name: str
    module: torch.nn.Module
    inputs: tuple[torch.Tensor, ...]


@dataclass(frozen=True)
class TransferFit:
    """latency + bytes / bandwidth fitted to timed transfers (the fastest of each size)."""

    latency_s: float
    bytes_per_s: float
    samples: tuple[tuple[int, float], ...]


def default_workloads() -> list[Workload]:
    """Small models covering the zoo's operator kinds (convolutions, depthwise, attention, ...)."""
    generator = torch.Generator().manual_seed(0)
    return [
        Workload("resnet18_cifar@b4", models.resnet18_cifar(), (torch.randn(4, 3, 32, 32, generator=generator),)),
        Workload("mobilenet_v2@64px", models.mobilenet_v2(), (torch.randn(2, 3, 64, 64, generator=generator),)),
        Workload(
            "transformer@64", models.TransformerClassifier(layers=2), (torch.randint(0, 8192, (2, 64), generator=generator),)
        ),
        Workload("mlp@b32", models.mlp(), (torch.randn(32, 1, 28, 28, generator=generator),)),
    ]


def profile_host(
    swap_dir: Path,
    *,
    workloads: list[Workload] | None = None,
    captures=None,
    durable: bool = True,
    threads: int | None = None,
    repeats: int = 5,
    name: str = "host",
    rapl_root: Path = RAPL_ROOT,
    storage_sizes: tuple[int, ...] = STORAGE_SIZES,
) -> Platform:
    """Measure this machine and return its platform profile (see the module docstring).

    Compute is calibrated on `captures` (captured models, e.g. the one to be run) if given,
    else on `workloads`, else on `default_workloads()`.
    """
    swap_dir = Path(swap_dir)
    swap_dir.mkdir(parents=True, exist_ok=True)
    threads = threads or default_threads()
    cpu, today = cpu_name(), datetime.date.today().isoformat()
    measured = f"measured on {cpu} on {today}"
    rapl = _Rapl(rapl_root)
    idle_w = rapl.power_w(lambda: time.sleep(1.0)) if rapl.readable else None
    if captures is None:
        captures = [capture(w.module, w.inputs, name=w.name) for w in (workloads or default_workloads())]
    op_rates, overall, compute_w = compute_rates(captures, swap_dir, threads=threads, repeats=repeats, rapl=rapl)
    page_out, page_in, storage_w = measure_storage(swap_dir, durable=durable, rapl=rapl, sizes=storage_sizes)
    interference = measure_interference(captures[0], swap_dir, threads=threads, repeats=repeats, durable=durable)
    bus = memory_bus_bytes_per_s()
    energy = idle_w is not None and compute_w is not None and storage_w is not None
    how = "fsync and page cache dropped after each write" if durable else "through the page cache"
    data = {
        "name": name,
        "title": f"This host: {cpu}, {threads} thread(s), storage in {swap_dir}",
        "ram_bytes": _ram_bytes(),
        "compute": {
            "flops_per_s": overall,
            "power_w": max(compute_w - idle_w, 0.0) if energy else MODELLED_CORE_POWER_W * threads,
            "op_flops_per_s": op_rates,
        },
        "static_power_w": idle_w if energy else MODELLED_IDLE_POWER_W * threads,
        "storage": {
            "kind": f"files in {swap_dir} ({_filesystem(swap_dir)}), {how}",
            "page_in": {"latency_s": page_in.latency_s, "bytes_per_s": page_in.bytes_per_s},
            "page_out": {"latency_s": page_out.latency_s, "bytes_per_s": page_out.bytes_per_s},
            "power_w": max(storage_w - idle_w, 0.0) if energy else MODELLED_STORAGE_POWER_W,
        },
        "dma_channels": 1,
        "memory_bus_bytes_per_s": bus,
        "notes": [
            f"Measured by poetsim profile with torch {torch.__version__} on {threads} thread(s): run `poetsim execute` "
            "with the same thread count for its timings to apply.",
            f"{COMPUTE_NOTE} FLOPs (as poetsim's importer counts them) over the executor's time per node in the "
            f"fastest of {repeats} keep-all runs, per operator kind, of: {', '.join(c.graph.name for c in captures)}.",
            interference.note(),
            "Energy is measured from RAPL counters (busy minus idle power)."
            if energy
            else "Energy is modelled, not measured: no RAPL energy counter is readable under /sys/class/powercap, so the "
            "powers are poetsim assumptions (see sources).",
        ],
        "sources": {},
    }
    modelled = "modelled, not measured (no readable RAPL counter): poetsim assumption of"
    data["sources"] = {
        "ram_bytes": f"MemTotal of /proc/meminfo, read on {today}",
        "compute.flops_per_s": f"{measured}: all nodes' FLOPs over their compute time in the fastest keep-all run",
        **{
            f"compute.op_flops_per_s.{op}": f"{measured}: {op} nodes' FLOPs over their time in the fastest keep-all run"
            for op in op_rates
        },
        "compute.power_w": f"{measured} with RAPL: package power while computing minus idle"
        if energy
        else f"{modelled} {MODELLED_CORE_POWER_W} W per busy thread ({threads}), a server core's share of its package power",
        "static_power_w": f"{measured} with RAPL: package power over 1 s idle"
        if energy
        else f"{modelled} {MODELLED_IDLE_POWER_W} W per thread ({threads}) while idle",
        "storage.page_in.latency_s": f"{measured}: fit of reads of {_sizes(storage_sizes)} files",
        "storage.page_in.bytes_per_s": f"{measured}: fit of reads of {_sizes(storage_sizes)} files",
        "storage.page_out.latency_s": f"{measured}: fit of writes of {_sizes(storage_sizes)} files",
        "storage.page_out.bytes_per_s": f"{measured}: fit of writes of {_sizes(storage_sizes)} files",
        "storage.power_w": f"{measured} with RAPL: package power while paging minus idle"
        if energy
        else f"{modelled} {MODELLED_STORAGE_POWER_W} W for a disk while it transfers",
        "dma_channels": "poetsim's executor runs every transfer on one I/O thread",
        "memory_bus_bytes_per_s": f"{measured}: bytes read and written per second by a 64 MiB tensor copy",
    }
    return Platform.model_validate(data)


def write_profile(profile: Platform, path: Path) -> None:
    """Write a profile as YAML that `poetsim --platform PATH` reads back."""
    data = profile.model_dump(exclude_none=True)
    data["notes"] = list(data["notes"])
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(yaml.safe_dump(data, sort_keys=False, width=120))
    except OSError as error:
        raise UserInputError(f"{path}: cannot write: {error.strerror or error}") from None


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux) and its logical core count."""
    name = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name or platform_module.processor() or platform_module.machine()} ({os.cpu_count()} logical CPUs)"


def compute_rates(captures, swap_dir: Path, *, threads: int, repeats: int, rapl=None):
    """FLOP/s per op kind and overall, from each node's compute time in the fastest keep-all run.

    The fastest of `repeats` runs of each model, taken whole (its nodes' times belong together),
    is the one other jobs disturbed least (module docstring).
    Returns (rates by kind, overall rate, package power while computing or None).
    """
    energy_j, busy_s = 0.0, 0.0
    runs = []
    for captured in captures:
        schedule = keep_all_schedule(captured.graph)
        execute(captured, schedule, swap_dir, check_gradients=False, threads=threads)  # warm-up
        run = functools.partial(execute, captured, schedule, swap_dir, check_gradients=False, threads=threads)
        fastest = None
        for _ in range(repeats):
            if rapl is not None and rapl.readable:
                start_j, start = rapl.energy_j(), time.perf_counter()
                result = run()
                energy_j += rapl.energy_j() - start_j
                busy_s += time.perf_counter() - start
            else:
                result = run()
            if fastest is None or result.total_s < fastest.total_s:
                fastest = result
        assert fastest is not None  # repeats >= 1
        runs.append((captured.graph, fastest))
    rates, overall = rates_of(runs)
    return rates, overall, (energy_j / busy_s if busy_s > 0 else None)


def rates_of(runs) -> tuple[dict[str, float], float]:
    """FLOP/s per op kind and overall of keep-all runs: (graph, Execution) pairs.

    Each kind's rate is its nodes' FLOPs over their measured compute time (the input node, a
    read of the batch, and nodes without FLOPs apart).
    """
    flops: dict[str, float] = {}
    seconds: dict[str, float] = {}
    for graph, execution in runs:
        times = {r.node: r.duration_s for r in execution.records if r.kind == "compute"}
        for node in graph.nodes:
            if node.op == "input" or node.flops <= 0 or node.id not in times:
                continue
            flops[node.op] = flops.get(node.op, 0.0) + node.flops
            seconds[node.op] = seconds.get(node.op, 0.0) + times[node.id]
    rates = {op: flops[op] / seconds[op] for op in sorted(flops) if seconds[op] > 0}
    if not rates:
        raise UserInputError("the calibration models have no node with FLOPs to time")
    return rates, sum(flops.values()) / sum(seconds.values())


def recalibrated(profile: Platform, graph, execution, how: str) -> Platform:
    """`profile` with the compute rates of one keep-all run of `graph` (an Execution), sources saying `how`.

    Kinds the run does not time keep their rates; storage, memory bus and powers are unchanged.
    """
    rates, overall = rates_of([(graph, execution)])
    measured = f"measured on {cpu_name()} on {datetime.date.today().isoformat()}"
    sources = dict(profile.sources)
    sources["compute.flops_per_s"] = f"{measured}: all nodes' FLOPs over their compute time in {how}"
    sources.update({f"compute.op_flops_per_s.{op}": f"{measured}: {op} nodes' FLOPs over their time in {how}" for op in rates})
    compute = profile.compute.model_copy(
        update={"flops_per_s": overall, "op_flops_per_s": {**profile.compute.op_flops_per_s, **rates}}
    )
    notes = [note for note in profile.notes if not note.startswith(COMPUTE_NOTE)]
    notes.insert(
        0,
        f"{COMPUTE_NOTE} FLOPs (as poetsim's importer counts them) over the executor's time per node in "
        f"{how}, per operator kind, of {graph.name}.",
    )
    return Platform.model_validate(
        {**profile.model_dump(), "compute": compute.model_dump(), "sources": sources, "notes": tuple(notes)}
    )


def keep_all_schedule(graph):
    """The keep-all schedule of a graph (costs do not change it)."""
    return keep_all(graph, node_costs(graph, load_platform("rpi4")), Timing.OVERLAP)[0]


def measure_storage(swap_dir: Path, *, durable: bool = True, repeats: int = 5, rapl=None, sizes: tuple[int, ...] = STORAGE_SIZES):
    """Fitted page-out and page-in (latency + bytes / bandwidth), and power while paging."""
    writes: list[tuple[int, float]] = []
    reads: list[tuple[int, float]] = []
    energy_j, busy_s = 0.0, 0.0
    start_j = rapl.energy_j() if rapl is not None and rapl.readable else None
    start_all = time.perf_counter()
    for size in sizes:
        data = torch.randint(0, 255, (size,), dtype=torch.uint8)
        for attempt in range(repeats + 1):
            path = Path(swap_dir) / f"profile{size}.bin"
            start = time.perf_counter()
            swap.write_storages(path, [data.untyped_storage()], durable)
            written = time.perf_counter() - start
            buffer = torch.empty(size, dtype=torch.uint8)
            start = time.perf_counter()
            swap.read_into(path, [buffer])
            read = time.perf_counter() - start
            path.unlink(missing_ok=True)
            if attempt:  # the first round warms the file system up
                writes.append((size, written))
                reads.append((size, read))
    if start_j is not None:
        energy_j = rapl.energy_j() - start_j
        busy_s = time.perf_counter() - start_all
    return _fit(writes), _fit(reads), (energy_j / busy_s if busy_s > 0 else None)


@dataclass(frozen=True)
class Interference:
    """How much computes and transfers slow each other when they overlap, as fractions (0.1 = 10 %)."""

    compute_slowdown: float
    transfer_slowdown: float

    def note(self) -> str:
        """The interference in words, for a profile's notes: what was measured and what it means for a prediction."""
        return (
            f"Measured, not modelled: while the I/O thread paged {format_bytes(INTERFERENCE_BYTES)} files without "
            f"pause, keep-all computes ran {_change(self.compute_slowdown)} and each transfer "
            f"{_change(self.transfer_slowdown)} than alone. The overlap stage model (max of compute and transfers) "
            "assumes they do not slow each other: where these are well above zero, a schedule that pages runs "
            "slower than predicted, by up to that share of its overlapped time (docs/pytorch.md)."
        )


def _change(fraction: float) -> str:
    """A slowdown as words: '12 % slower', '3 % faster'."""
    return f"{abs(100 * fraction):.0f} % {'slower' if fraction >= 0 else 'faster'}"


#: Size of the files the interference measurement pages (a ResNet-18 CIFAR activation at batch 8).
INTERFERENCE_BYTES = 2 << 20


def measure_interference(captured, swap_dir: Path, *, threads: int, repeats: int = 5, durable: bool = True) -> Interference:
    """Time keep-all computes alone and beside an I/O thread that pages without pause, and the reverse.

    The executor overlaps transfers and computes exactly so (one I/O thread, `threads` compute
    threads); the cost model assumes they do not slow each other. Computes: the fastest of
    `repeats` keep-all runs each way. Transfers: the median write-and-read cycle of a file of
    INTERFERENCE_BYTES, alone and while the keep-all runs compute.
    """
    schedule = keep_all_schedule(captured.graph)
    run = functools.partial(execute, captured, schedule, swap_dir, check_gradients=False, threads=threads)
    data = torch.randint(0, 255, (INTERFERENCE_BYTES,), dtype=torch.uint8)
    buffer = torch.empty_like(data)
    path = Path(swap_dir) / "interference.bin"

    def cycle() -> float:
        start = time.perf_counter()
        swap.write_storages(path, [data.untyped_storage()], durable)
        swap.read_into(path, [buffer])
        return time.perf_counter() - start

    try:
        run()  # warm-up
        alone_compute = min(run().compute_s for _ in range(repeats))
        alone_cycles = [cycle() for _ in range(repeats + 1)][1:]
        stop, cycles = threading.Event(), []

        def pump() -> None:
            while not stop.is_set():
                cycles.append(cycle())

        pumper = threading.Thread(target=pump, name="poetsim-interference", daemon=True)
        pumper.start()
        try:
            together_compute = min(run().compute_s for _ in range(repeats))
        finally:
            stop.set()
            pumper.join()
    finally:
        path.unlink(missing_ok=True)
    together_cycles = cycles[1:] or cycles
    return Interference(
        compute_slowdown=together_compute / alone_compute - 1.0,
        transfer_slowdown=statistics.median(together_cycles) / statistics.median(alone_cycles) - 1.0,
    )


def memory_bus_bytes_per_s(size_bytes: int = 64 << 20, repeats: int = 5) -> float:
    """Bytes read plus written per second by the best of a few large tensor copies."""
    source = torch.ones(size_bytes // 4)
    target = torch.empty_like(source)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        target.copy_(source)
        best = min(best, time.perf_counter() - start)
    return 2 * size_bytes / best


def _fit(samples: list[tuple[int, float]]) -> TransferFit:
    """A transfer's time as latency + size / bandwidth, fitted to the fastest time per size (module docstring).

    Least squares of the relative error (weights 1 / time^2), so that the small files, whose
    time is almost all latency, count as much as the large ones, whose time is bandwidth.
    """
    by_size: dict[int, list[float]] = {}
    for size, seconds in samples:
        by_size.setdefault(size, []).append(seconds)
    points = sorted((size, min(times)) for size, times in by_size.items())
    weights = [1.0 / max(y, 1e-12) ** 2 for _, y in points]
    sw = sum(weights)
    mean_x = sum(w * x for w, (x, _) in zip(weights, points)) / sw
    mean_y = sum(w * y for w, (_, y) in zip(weights, points)) / sw
    sxx = sum(w * (x - mean_x) ** 2 for w, (x, _) in zip(weights, points))
    slope = max(sum(w * (x - mean_x) * (y - mean_y) for w, (x, y) in zip(weights, points)) / sxx, 1e-15)
    return TransferFit(max(mean_y - slope * mean_x, 0.0), 1.0 / slope, tuple(points))


def _ram_bytes() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _filesystem(path: Path) -> str:
    """The file system and device behind `path`, from /proc/mounts (best match)."""
    try:
        target = str(Path(path).resolve())
        best = ("", "?", "?")
        for line in Path("/proc/mounts").read_text().splitlines():
            device, mount, kind = line.split()[:3]
            if (target == mount or target.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best[0]):
                best = (mount, kind, device)
        return f"{best[1]} on {best[2]}"
    except OSError:
        return "unknown file system"


def _sizes(sizes: tuple[int, ...]) -> str:
    return f"{format_bytes(min(sizes))} to {format_bytes(max(sizes))}"


class _Rapl:
    """The package energy counters under /sys/class/powercap (Intel and AMD RAPL), if readable."""

    def __init__(self, root: Path):
        # Packages only (intel-rapl:0, amd-rapl:1), not their sub-domains (intel-rapl:0:0).
        found = sorted(Path(root).glob("*-rapl:*/energy_uj")) if Path(root).is_dir() else []
        self.files = [f for f in found if f.parent.name.count(":") == 1]
        self.readable = bool(self.files) and all(os.access(f, os.R_OK) for f in self.files)

    def energy_j(self) -> float:
        return sum(int(f.read_text()) for f in self.files) / 1e6

    def power_w(self, activity) -> float:
        start_j, start = self.energy_j(), time.perf_counter()
        activity()
        return (self.energy_j() - start_j) / (time.perf_counter() - start)
