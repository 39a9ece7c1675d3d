"""Run one training step for real, instruction by instruction, as a poetsim schedule says.

`execute(capture, schedule, swap_dir)` plays the schedule on the CPU with the captured aten
graph (poetsim.pytorch.capturing): `Compute(k)` runs node k's ops (again, for a recomputation)
on the tensors of the nodes it reads, `Free(i)` drops node i's tensors, `PageOut(i)` writes
them to a real file in the swap folder and `PageIn(i)` reads them back (poetsim.pytorch.swap).
The input node's compute reads the batch from a file too, as the cost model says.

It follows the schedule's timing model, which says when bytes are held and how transfers run:

- `overlap`: transfers run on one I/O thread (one DMA channel) while the computes of the stage
  run; the stage ends when both are done. A page-in's buffer is allocated when it is issued;
  a node being paged out is held until the end of the stage, whatever `Free` says.
- `compute-only` (the paper's): transfers run in line, a page-out before the instructions
  after it, and page-ins at the end of the stage, so their bytes are held from the next stage.

What it holds is measured, not replayed: the activation bytes are the sizes of the storages
of the tensors the executor keeps (deduplicated), summed at the same moments at which the
checker takes its peak (stage starts and right after each compute or page-in allocates).
Parameters, their gradients, static tensors, normalisation statistics and the generator states
saved for random nodes (poetsim.pytorch.randomness) are held outside that figure, as in the
cost model; the process's peak RSS is reported beside it. A schedule that
cannot run stops with one ScheduleError naming the stage, the instruction and the node.
"""

import contextlib
import functools
import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import fx

from poetsim.errors import InternalError, ScheduleError, UserInputError, first_line
from poetsim.pytorch import randomness, swap
from poetsim.pytorch.capturing import Capture
from poetsim.pytorch.reference import compare, plain_step
from poetsim.schedule.checker import check_made_for
from poetsim.schedule.model import Compute, Free, Instruction, PageIn, PageOut, Schedule, Timing

BATCH_FILE = "batch.bin"


@dataclass(frozen=True)
class Record:
    """One executed instruction: what, on which node, when (seconds from the step's start), bytes."""

    stage: int
    kind: str  # compute, recompute, page_out, page_in, free
    node: int
    name: str
    start_s: float
    end_s: float
    nbytes: int

    @property
    def duration_s(self) -> float:
        """How long the recorded event took."""
        return self.end_s - self.start_s


@dataclass(frozen=True)
class Execution:
    """What one executed training step measured (see the module docstring for the accounting)."""

    graph_name: str
    timing: Timing
    durable: bool
    threads: int
    loss: float
    gradients_equal: bool | None
    differing_gradients: tuple[str, ...]
    buffers_equal: bool | None
    peak_activation_bytes: int
    random_state_bytes: int
    peak_rss_bytes: int | None
    start_rss_bytes: int | None
    total_s: float
    stage_s: tuple[float, ...]
    bytes_written: int
    bytes_read: int
    batch_bytes_read: int
    reference_s: float | None
    records: tuple[Record, ...] = field(repr=False)
    mismatched_nodes: tuple[str, ...] = ()

    @property
    def compute_s(self) -> float:
        """Time spent computing and recomputing (the batch reads included), summed."""
        return sum(r.duration_s for r in self.records if r.kind in ("compute", "recompute"))

    @property
    def transfer_s(self) -> float:
        """Time spent paging out and in, summed (under overlap, partly hidden under compute)."""
        return sum(r.duration_s for r in self.records if r.kind in ("page_out", "page_in"))

    def summary(self) -> dict:
        """The figures as plain values, without the per-instruction records."""
        data = {k: v for k, v in asdict(self).items() if k not in ("records", "stage_s")}
        data["timing"] = Timing(self.timing).value
        data.update(
            compute_s=self.compute_s,
            transfer_s=self.transfer_s,
            recomputations=sum(r.kind == "recompute" for r in self.records),
            page_outs=sum(r.kind == "page_out" for r in self.records),
            page_ins=sum(r.kind == "page_in" for r in self.records),
        )
        return data


def default_threads() -> int:
    """Torch threads for a step and for the profile that prices it: the cores less one.

    The I/O thread stands for the platform's DMA channel, which the `overlap` stage model runs
    beside the computes. With as many compute threads as cores it has no core of its own, and
    torch's thread pool waits on whichever thread lost its core: on two cores with other jobs
    running, the computes that transfers overlapped took 2.7x their keep-all time with two
    threads (docs/pytorch.md). At least one, and never more than torch's own setting.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity call on this system
        cores = os.cpu_count() or 1
    return max(1, min(torch.get_num_threads(), cores - 1))


@contextlib.contextmanager
def deterministic(threads: int):
    """Torch's thread count and its deterministic algorithms for a run and its reference, restored after.

    An op with no deterministic kernel (max-unpooling's) stops the run with one line naming it:
    a step and its reference are compared bit for bit, which only deterministic kernels allow.
    """
    before = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    except RuntimeError as error:
        op, found, _ = str(error).partition(" does not have a deterministic implementation")
        if not found:
            raise
        raise UserInputError(
            f"the model runs {op.split()[-1]}, which has no deterministic kernel in torch {torch.__version__}: "
            "poetsim compares each step with plain PyTorch bit for bit, which needs deterministic algorithms"
        ) from None
    finally:
        torch.set_num_threads(before[0])
        torch.use_deterministic_algorithms(before[1])


def execute(
    capture: Capture,
    schedule: Schedule,
    swap_dir: Path,
    *,
    timing: Timing | None = None,
    durable: bool = True,
    budget_bytes: int | None = None,
    check_gradients: bool = True,
    threads: int | None = None,
) -> Execution:
    """Run one training step of `capture` following `schedule`; measure it; check its gradients.

    `timing` defaults to the schedule's. With `budget_bytes`, holding more activation bytes
    stops the run (ScheduleError naming the instruction). `threads` defaults to
    `default_threads()`. With `check_gradients`, a plain
    keep-all `loss.backward()` of the same module on the same batch follows, with deterministic
    algorithms on in both, and every parameter gradient and buffer is compared bit for bit.
    """
    graph = capture.graph
    check_made_for(schedule, graph)
    timing = Timing(timing or schedule.timing)
    swap_dir = Path(swap_dir)
    try:
        swap_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserInputError(f"{swap_dir}: cannot create the swap folder: {error.strerror or error}") from None
    threads = threads or default_threads()
    with deterministic(threads):
        # The plain step runs first: it gives the reference gradients and warms every kernel up,
        # so that the timed run does not pay for first calls. The scheduled step then draws its
        # random numbers from where the plain one started.
        generator_state = torch.get_rng_state()
        reference = plain_step(capture) if check_gradients else None
        torch.set_rng_state(generator_state)
        machine = Machine(capture, timing, swap_dir, durable, budget_bytes)
        start_rss = _reset_peak_rss()
        machine.run(schedule)
        peak_rss = _peak_rss_bytes() if start_rss is not None else None
        equal, buffers_equal, reference_s = None, None, None
        differing: tuple[str, ...] = ()
        if reference is not None:
            equal, differing, buffers_equal = compare(reference, machine)
            reference_s = reference.seconds
    return Execution(
        graph_name=graph.name,
        timing=timing,
        durable=durable,
        threads=threads,
        loss=float(machine.loss),
        gradients_equal=equal,
        differing_gradients=differing,
        buffers_equal=buffers_equal,
        peak_activation_bytes=machine.peak_bytes,
        random_state_bytes=machine.random.nbytes,
        peak_rss_bytes=peak_rss,
        start_rss_bytes=start_rss,
        total_s=machine.total_s,
        stage_s=tuple(machine.stage_s),
        bytes_written=machine.bytes_written,
        bytes_read=machine.bytes_read,
        batch_bytes_read=machine.batch_bytes_read,
        reference_s=reference_s,
        records=tuple(sorted(machine.records, key=lambda r: (r.start_s, r.stage))),
        mismatched_nodes=tuple(machine.mismatched),
    )


def real_output_bytes(capture: Capture, schedule: Schedule) -> dict[int, int]:
    """The bytes each node holds when `schedule` runs the step for real, by node (as first computed).

    The capture sizes storages from fake tensors, whose kernels can size a storage otherwise than
    the real one (an `EmbeddingBag`'s bag index, a copy into a strided slice). The random state
    is left as it was.
    """
    state = torch.get_rng_state()
    machine = None
    try:
        with tempfile.TemporaryDirectory(prefix="poetsim-bytes-") as folder:
            machine = Machine(capture, Timing.COMPUTE_ONLY, Path(folder), durable=False, budget_bytes=None)
            machine.run(schedule)
    except (UserInputError, ScheduleError, InternalError):
        raise
    except Exception as error:  # noqa: BLE001 - a kernel that checks values refused the example batch
        raise UserInputError(_refused_batch(capture, machine, error)) from None
    finally:
        torch.set_rng_state(state)
    return {r.node: r.nbytes for r in machine.records if r.kind == "compute"}


def _refused_batch(capture: Capture, machine: "Machine | None", error: Exception) -> str:
    """One line for a real step whose kernel refused the example batch's values, naming the node it ran."""
    graph = capture.graph
    done = 0 if machine is None else sum(r.kind == "compute" for r in machine.records)
    where = f"node '{graph.nodes[done].name}'" if machine is not None and done < len(graph) else "the parameters' set-up"
    first = first_line(error) or type(error).__name__
    hint = (
        "; integer inputs (token ids) must be below the size of what they index: --input-high, or the values given"
        if isinstance(error, IndexError)
        else ""
    )
    return f"{graph.name}: one real step on the example batch failed at {where}: {first}{hint}"


@dataclass
class _Stage:
    """One stage under way: its transfers, the nodes it pages in and out, its deferred frees."""

    t: int
    start_s: float
    transfers: list[Future] = field(default_factory=list)
    paging_out: dict[int, swap.SwappedNode] = field(default_factory=dict)
    paging_in: dict[int, tuple] = field(default_factory=dict)
    deferred_bytes: int = 0
    deferred_values: list = field(default_factory=list)


class Machine:
    """The executor's state: resident nodes' tensors, what is on storage, bytes held, records.

    `run` plays a whole schedule; `start`, `run_stages` and `close` play it in parts, as
    training does (the forward stages when the model is called, the rest at `loss.backward()`).
    With `batch` (the step's inputs and labels, in memory) the input node copies them at its
    compute; without, they are written to a file in the swap folder and read back, as a device
    reads its batch from storage.
    """

    def __init__(
        self,
        capture: Capture,
        timing: Timing,
        swap_dir: Path,
        durable: bool,
        budget_bytes: int | None,
        batch: tuple[torch.Tensor, ...] | None = None,
    ):
        self.capture = capture
        self.graph = capture.graph
        self.overlap = timing is Timing.OVERLAP
        self.swap_dir = swap_dir
        self.durable = durable
        self.budget_bytes = budget_bytes
        self.owner: dict[fx.Node, int] = {v: i for i, p in enumerate(capture.programs) for v in p.keeps}
        # An op's value may be several outputs: oneDNN's LSTM gradient gives both biases of a layer one value.
        outputs: dict[fx.Node, list[tuple[str, str]]] = {}
        for kind, pairs in (("grad", capture.grads), ("buffer", capture.buffer_updates), ("loss", ((capture.loss, "loss"),))):
            for n, name in pairs:
                outputs.setdefault(n, []).append((kind, name))
        self.outputs_of = [[(op, out) for op in p.ops for out in outputs.get(op, ())] for p in capture.programs]
        self.releases = [_releases(p, outputs) for p in capture.programs]
        self.input_node = next((n.id for n in self.graph.nodes if n.op == "input"), None)
        self.shared: dict[fx.Node, object] = {}
        self.store: dict[int, dict] = {}
        self.node_bytes: dict[int, int] = {}
        self.on_disk: dict[int, swap.SwappedNode] = {}
        self.grads: dict[str, torch.Tensor] = {}
        self.buffers: dict[str, torch.Tensor] = {}
        self.loss = float("nan")
        self.held_bytes = self.peak_bytes = 0
        self.bytes_written = self.bytes_read = self.batch_bytes_read = 0
        self.records: list[Record] = []
        self.stage_s: list[float] = []
        self.mismatched: list[str] = []
        self.random = randomness.RandomStates()
        self.total_s = 0.0
        self.loss_value: torch.Tensor | None = None
        self.io: ThreadPoolExecutor | None = None
        self.memory_batch = batch
        self._prepare()

    # -- set-up: parameters, constants and the batch file --------------------------------------

    def _prepare(self) -> None:
        capture = self.capture
        params = dict(capture.step.named_parameters(remove_duplicate=False))
        buffers = dict(capture.step.named_buffers(remove_duplicate=False))
        for n, name in capture.params:
            self.shared[n] = params[name].detach()
        for n, name in capture.buffers:
            self.shared[n] = buffers[name].detach().clone()
        loss_val = capture.loss.meta.get("val")
        for n in capture.tangents:
            self.shared[n] = torch.ones((), dtype=loss_val.dtype if loss_val is not None else torch.float32)
        for n, constant in capture.constants:
            self.shared[n] = constant
        for n in capture.static_ops:
            self.shared[n] = self._run_op(n, self.shared)
        for n, name in capture.buffer_updates:  # a static update: BatchNorm's num_batches_tracked + 1
            value = self.shared.get(n)
            if isinstance(value, torch.Tensor):
                self.buffers[name] = value
        if self.memory_batch is not None:
            return
        batch = dict(zip(capture.data, capture.inputs))
        storages, layouts = swap.layout(batch)
        path = self.swap_dir / BATCH_FILE
        swap.write_storages(path, storages, self.durable)
        self.batch = swap.SwappedNode(path, tuple(s.nbytes() for s in storages), layouts)

    def _run_op(self, op: fx.Node, env: dict, fallback: dict | None = None):
        def value(n):
            if n in env:
                return env[n]
            if fallback is not None and n in fallback:
                return fallback[n]
            raise InternalError(f"op {op.name} reads {n.name}, which no node provides")

        # A view the trace planned from a fake tensor's strides, where the real kernel's output has
        # others (BatchNorm's input gradient of a transposed input): reshape is the view wherever
        # one exists, and a copy of the same values where none does, as eager's backward of a view.
        target = torch.ops.aten.reshape.default if op.target is torch.ops.aten.view.default else randomness.kernel(op.target)
        assert callable(target), f"op {op.name} is not a function call"  # programs hold call_function nodes only
        return target(*fx.node.map_arg(op.args, value), **fx.node.map_arg(op.kwargs, value))

    # -- the run ---------------------------------------------------------------------------------

    def run(self, schedule: Schedule) -> None:
        """Play every stage of `schedule`, then check that every gradient was computed."""
        self.start()
        try:
            self.run_stages(schedule, range(len(schedule.stages)))
        finally:
            self.close()
        self.check_complete()

    def start(self) -> None:
        """Start the clock and, under overlap, the I/O thread."""
        self.io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="poetsim-dma") if self.overlap else None
        self.t0 = time.perf_counter()

    def run_stages(self, schedule: Schedule, stages: range) -> None:
        """Play the stages `stages` of `schedule`, in order."""
        # Each handler takes the instruction kind it is listed under, hence `Any` for the instruction.
        handlers: dict[type[Instruction], Callable[[_Stage, Any], None]] = {
            Compute: self._compute,
            Free: self._free,
            PageOut: self._page_out,
            PageIn: self._page_in,
        }
        # Grad mode stays on (no value here requires a gradient, so nothing is recorded): some kernels
        # keep what their backward needs only in grad mode, oneDNN's LSTM its workspace, and a scheduled
        # training step runs inside an autograd function's forward, where grad mode is off.
        with torch.enable_grad():
            for t in stages:
                stage = _Stage(t, self._now())
                self._note_peak()
                for ins in schedule.stages[t]:
                    handler = handlers.get(type(ins))
                    if handler is None:
                        raise ScheduleError(f"stage {t}: unknown instruction {ins!r}")
                    handler(stage, ins)
                self._end_stage(stage)
        self.total_s = self._now()

    def seed_backward(self, gradient: torch.Tensor) -> None:
        """Start the backward stages from `gradient`, the loss's gradient (1 for `loss.backward()`)."""
        for n in self.capture.tangents:
            self.shared[n] = gradient
        for n in self.capture.seeded_ops:
            self.shared[n] = self._run_op(n, self.shared)

    def close(self) -> None:
        """Stop the I/O thread and remove the page files (what is still held is dropped with the machine)."""
        if self.io is not None:
            self.io.shutdown(wait=True)
            self.io = None
        for path in self.swap_dir.glob("node*.bin"):
            path.unlink(missing_ok=True)
        (self.swap_dir / BATCH_FILE).unlink(missing_ok=True)

    def check_complete(self) -> None:
        """InternalError if a parameter's gradient was never computed."""
        missing = sorted({name for _, name in self.capture.grads} - set(self.grads))
        if missing:
            raise InternalError(f"the step computed no gradient for {', '.join(missing[:3])}")

    def _now(self) -> float:
        return time.perf_counter() - self.t0

    def _name(self, i: int) -> str:
        return self.graph.nodes[i].name

    def _fail(self, stage: _Stage, ins, problem: str):
        raise ScheduleError(f"stage {stage.t}, {type(ins).__name__}({ins.node}) '{self._name(ins.node)}': {problem}")

    def _check_node(self, stage: _Stage, ins) -> None:
        if not 0 <= ins.node < len(self.graph):
            raise ScheduleError(f"stage {stage.t}: {type(ins).__name__}({ins.node}): no such node")

    def _compute(self, stage: _Stage, ins: Compute) -> None:
        self._check_node(stage, ins)
        k = ins.node
        if k > stage.t:
            self._fail(stage, ins, f"node {k} is first computed in stage {k}")
        if k in self.store:
            self._fail(stage, ins, "its output is already in RAM")
        program = self.capture.programs[k]
        local: dict = {}
        for value in program.reads:
            d = self.owner[value]
            if d not in self.store:
                self._fail(stage, ins, f"input {d} '{self._name(d)}' is not in RAM")
            local[value] = self.store[d][value]
        start = self._now()
        if k == self.input_node:
            local.update(self._read_batch())
        with self.random.drawing(k) if program.random else contextlib.nullcontext():
            for op, released in zip(program.ops, self.releases[k]):
                local[op] = self._run_op(op, local, self.shared)
                for value in released:  # as eager PyTorch frees a temporary after its last use
                    del local[value]
        end = self._now()
        for op in program.statistics:
            self.shared[op] = local[op]
        self._take_outputs(k, local)
        values = {v: local[v] for v in program.keeps}
        self.store[k] = values
        nbytes = swap.storage_bytes(values.values())
        if nbytes != self.graph.nodes[k].output_bytes and self._name(k) not in self.mismatched:
            self.mismatched.append(self._name(k))
        self.node_bytes[k] = nbytes
        self.records.append(Record(stage.t, "compute" if k == stage.t else "recompute", k, self._name(k), start, end, nbytes))
        self._hold(stage, ins, nbytes)

    def _take_outputs(self, k: int, local: dict) -> None:
        """Take node k's step outputs from its values: parameter gradients, the loss, updated buffers.

        A buffer keeps its first computation's update: a recomputation does not update it twice.
        """
        taken: set[fx.Node] = set()
        for op, (kind, name) in self.outputs_of[k]:
            if kind == "grad":
                # each parameter gets a tensor of its own, as from autograd, even where one value is two gradients
                self.grads[name] = local[op].clone() if op in taken else local[op]
                taken.add(op)
            elif kind == "buffer":
                self.buffers.setdefault(name, local[op])
            else:
                self.loss_value = local[op]
                self.loss = float(local[op])

    def _read_batch(self) -> dict:
        """The batch, read into fresh buffers: from its file, or copied from the caller's tensors.

        Each buffer is contiguous, as the capture's example was (`capture.compact`): a strided
        batch (a time-major view of a batch-first one) is laid out as the captured ops read it.
        """
        if self.memory_batch is not None:
            values = {
                n: torch.empty_like(t, memory_format=torch.contiguous_format).copy_(t)
                for n, t in zip(self.capture.data, self.memory_batch)
            }
            self.batch_bytes_read += swap.storage_bytes(values.values())
            return values
        buffers = swap.allocate(self.batch)
        self.batch_bytes_read += swap.read_into(self.batch.path, buffers)
        return swap.rebuild(self.batch, buffers)

    def _free(self, stage: _Stage, ins: Free) -> None:
        self._check_node(stage, ins)
        i = ins.node
        if i not in self.store:
            self._fail(stage, ins, "it is not in RAM")
        values = self.store.pop(i)
        nbytes = self.node_bytes.pop(i)
        now = self._now()
        self.records.append(Record(stage.t, "free", i, self._name(i), now, now, nbytes))
        if self.overlap and i in stage.paging_out:
            stage.deferred_values.append(values)  # its write may run until the end of the stage
            stage.deferred_bytes += nbytes
        else:
            self.held_bytes -= nbytes

    def _page_out(self, stage: _Stage, ins: PageOut) -> None:
        self._check_node(stage, ins)
        i = ins.node
        if i not in self.store:
            self._fail(stage, ins, "it is not in RAM")
        if i in stage.paging_out:
            self._fail(stage, ins, "it is already being paged out in this stage")
        storages, layouts = swap.layout(self.store[i])
        swapped = swap.SwappedNode(self.swap_dir / f"node{i}.bin", tuple(s.nbytes() for s in storages), layouts)
        stage.paging_out[i] = swapped
        self._transfer(stage, "page_out", i, lambda: swap.write_storages(swapped.path, storages, self.durable))

    def _page_in(self, stage: _Stage, ins: PageIn) -> None:
        self._check_node(stage, ins)
        i = ins.node
        if i in self.store:
            self._fail(stage, ins, "it is already in RAM")
        if i not in self.on_disk:
            self._fail(stage, ins, "it is not on storage (it was not paged out in an earlier stage)")
        if i in stage.paging_in:
            self._fail(stage, ins, "it is already being paged in in this stage")
        swapped = self.on_disk[i]
        if not self.overlap:  # the paper's model: the bytes arrive for the next stage
            stage.paging_in[i] = (swapped, None)
            return
        buffers = swap.allocate(swapped)
        stage.paging_in[i] = (swapped, buffers)
        self._hold(stage, ins, swapped.nbytes)
        self._transfer(stage, "page_in", i, lambda: swap.read_into(swapped.path, buffers))

    def _transfer(self, stage: _Stage, kind: str, i: int, move) -> None:
        """Run a transfer: on the I/O thread under overlap, in line otherwise; record it."""

        def timed():
            start = self._now()
            nbytes = move()
            self.records.append(Record(stage.t, kind, i, self._name(i), start, self._now(), nbytes))
            if kind == "page_out":
                self.bytes_written += nbytes
            else:
                self.bytes_read += nbytes

        if self.io is None:
            timed()
        else:
            stage.transfers.append(self.io.submit(timed))

    def _end_stage(self, stage: _Stage) -> None:
        for transfer in stage.transfers:
            transfer.result()
        for i, (swapped, buffers) in stage.paging_in.items():
            if buffers is None:
                buffers = swap.allocate(swapped)
                self._transfer(stage, "page_in", i, functools.partial(swap.read_into, swapped.path, buffers))
                self.held_bytes += swapped.nbytes
            self.store[i] = swap.rebuild(swapped, buffers)
            self.node_bytes[i] = swapped.nbytes
        self.on_disk.update(stage.paging_out)
        self.held_bytes -= stage.deferred_bytes
        stage.deferred_values.clear()
        self.stage_s.append(self._now() - stage.start_s)

    def _hold(self, stage: _Stage, ins, nbytes: int) -> None:
        self.held_bytes += nbytes
        self._note_peak()
        if self.budget_bytes is not None and self.held_bytes > self.budget_bytes:
            self._fail(
                stage, ins, f"the executor holds {self.held_bytes:,} activation bytes, over the budget of {self.budget_bytes:,}"
            )

    def _note_peak(self) -> None:
        self.peak_bytes = max(self.peak_bytes, self.held_bytes)


def _releases(program, outputs: dict) -> list[list[fx.Node]]:
    """For each op of a node, the node's temporaries to drop after it.

    They are the values the node makes or reads that no later op of the node reads and that it
    neither keeps, records nor outputs.
    """
    kept = set(program.keeps) | set(program.statistics) | set(outputs)
    last: dict[fx.Node, int] = {}
    for index, op in enumerate(program.ops):
        for value in op.all_input_nodes:
            last[value] = index
        last.setdefault(op, index)
    released: list[list[fx.Node]] = [[] for _ in program.ops]
    mine = set(program.ops) | set(program.reads)
    for value, index in last.items():
        if value in mine and value not in kept:
            released[index].append(value)
    return released


def _reset_peak_rss() -> int | None:
    """Reset the kernel's peak-RSS mark of this process (Linux) and return the current RSS."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
        return _status_bytes("VmRSS")
    except OSError:
        return None


def _peak_rss_bytes() -> int | None:
    try:
        return _status_bytes("VmHWM")
    except OSError:
        return None


def _status_bytes(field_name: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) * 1024
    raise OSError(f"no {field_name} in /proc/self/status")
