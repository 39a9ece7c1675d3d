"""Train with a schedule: a module that trains like the original while its steps follow a poetsim schedule.

    model = poetsim.pytorch.scheduled(net, (x,), platform="rpi4", ram="50%", strategy="hybrid")
    optimiser = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for x, y in loader:
        optimiser.zero_grad()
        loss = model(x, y)          # the schedule's forward stages, up to the loss
        loss.backward()             # its backward stages: gradients land in .grad
        optimiser.step()

`scheduled` captures one training step of the model with its loss (cross-entropy unless `loss`
is given: forward, loss and backward are one captured graph), solves it for the budgets on the
platform (every schedule has passed the independent checker) or takes a saved schedule, and
wraps the model. Called with the inputs and the labels in training mode, the wrapper runs the
schedule's forward stages on the real tensors (poetsim.pytorch.executor.Machine): what it pages
goes to files in `swap_dir` and comes back when a later stage needs it, what it recomputes is
recomputed (random ops redrawn exactly), the rest is kept. It returns the loss, whose
`backward()` runs the remaining stages from the loss's gradient and hands the parameter
gradients to autograd, which accumulates them into `.grad` as it does for the original. The
updated normalisation buffers are written back once, after the forward stages, whatever the
schedule recomputes. In evaluation mode or without gradients the wrapper is the plain model:
`model(x)` gives its output, `model(x, y)` the loss.

A batch of another shape or dtype than the one solved for stops with one line naming both, or,
with `on_new_shape="solve"`, is captured and solved for in turn (once per shape). So does a
model whose state the capture baked in has changed since (`model_state`: frozen parameters,
submodule modes, the plain attributes the capture read and hooks, of the model and of its loss
module; autocast).
`state_dict` and `load_state_dict` are the original model's; a deep copy is a scheduled copy of
a copy of the model.
"""

import contextlib
import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch import nn

from poetsim.errors import ScheduleError, UserInputError, parsed
from poetsim.inputs.profiles import Platform, load_platform
from poetsim.pytorch import tracing
from poetsim.pytorch.capturing import Capture, TrainingStep, capture, describe
from poetsim.pytorch.executor import Machine, default_threads
from poetsim.pytorch.validate import Prediction, predict
from poetsim.schedule.checker import check_made_for
from poetsim.schedule.model import Schedule, Timing
from poetsim.units import RamSpec, limits_or, parse_ram, parse_runtime

#: The optimiser's work (units) for a training schedule when neither an effort nor a time limit is given.
TRAIN_EFFORT = 6.0


@dataclass(frozen=True)
class Plan:
    """What one batch shape was solved to: the capture, its checked schedule and what it predicts."""

    capture: Capture
    schedule: Schedule
    strategy: str
    status: str
    budget_bytes: int
    predicted: Prediction
    platform: str
    forward_stages: int  # the stages up to the loss, run when the model is called
    state: tuple = ()  # the model's state it was captured in (`model_state`)
    #: The plain attributes its capture read, as (module path, name); None: all of them.
    reads: frozenset[tuple[str, str]] | None = None

    @property
    def signature(self) -> tuple[str, ...]:
        """The shapes and dtypes of the batch (inputs, then labels) it was solved for."""
        return tuple(describe(t) for t in self.capture.inputs)


#: A module's hooks, as torch keeps them (a dict per kind, keyed by each handle's id), and their names in words.
HOOK_KINDS = {
    "_forward_pre_hooks": "forward pre hook",
    "_forward_hooks": "forward hook",
    "_backward_pre_hooks": "backward pre hook",
    "_backward_hooks": "backward hook",
}


def _named_modules(model: nn.Module, loss: nn.Module | None) -> list[tuple[str, nn.Module]]:
    """The model's submodules by path, then the loss module's under `loss.`."""
    modules = [*model.named_modules()]
    if loss is not None:
        modules += [(f"loss.{path}" if path else "loss", module) for path, module in loss.named_modules()]
    return modules


def model_state(model: nn.Module, loss: nn.Module | None = None, reads: frozenset[tuple[str, str]] | None = None) -> tuple:
    """What a captured step depends on besides the batch, which the capture bakes into the graph.

    Autocast, and for the model and its loss module: each parameter's `requires_grad`, shape and
    dtype, each buffer's shape and dtype (a layer replaced by one of another size), each
    submodule's public attributes of plain values that the capture read (`reads`, all of them
    if None: `training`, a dropout's `p`, a loss's `label_smoothing`, ...) and its hooks (the
    capture ran those there, a step replays what they did): a change after the capture would be
    ignored. A loss given as a function is captured as its code read its variables then; nothing
    here can see them change.
    """
    modules = _named_modules(model, loss)
    autocast = ("autocast", torch.is_autocast_enabled("cpu"), str(torch.get_autocast_dtype("cpu")))
    grads = tuple(
        (f"{path}.{name}" if path else name, p.requires_grad)
        for path, module in modules
        for name, p in module.named_parameters(recurse=False, remove_duplicate=False)
    )
    tensors = tuple(
        (f"{path}.{name}" if path else name, tuple(t.shape), str(t.dtype).removeprefix("torch."))
        for path, module in modules
        for named in (module.named_parameters, module.named_buffers)
        for name, t in named(recurse=False, remove_duplicate=False)
        if t is not None
    )
    attributes = tuple(
        (path, name, value)
        for path, module in modules
        for name, value in vars(module).items()
        if tracing.plain_attribute(name, value) and (reads is None or (path, name) in reads)
    )
    hooks = tuple(
        (path, words, tuple(getattr(module, kind)))
        for path, module in modules
        for kind, words in HOOK_KINDS.items()
        if getattr(module, kind, None)
    )
    return (autocast, grads, tensors, attributes, hooks)


def _state_change(before: tuple, now: tuple) -> str:
    """The first differences between two `model_state`s, in words."""
    (cast_a, grads_a, tensors_a, attrs_a, hooks_a), (cast_b, grads_b, tensors_b, attrs_b, hooks_b) = before, now
    changes = []
    if cast_a != cast_b:
        changes.append(f"autocast {'on' if cast_b[1] else 'off'} ({cast_b[2]}), captured {'on' if cast_a[1] else 'off'}")
    old_grads = dict(grads_a)
    changes += [f"{name}.requires_grad now {flag}" for name, flag in grads_b if old_grads.get(name, flag) != flag]
    old_tensors = {name: (shape, dtype) for name, shape, dtype in tensors_a}
    changes += [
        f"{name} now {_tensor_words(shape, dtype)}, captured {_tensor_words(*old_tensors[name])}"
        for name, shape, dtype in tensors_b
        if old_tensors.get(name, (shape, dtype)) != (shape, dtype)
    ]
    old_attrs = {(path, name): value for path, name, value in attrs_a}
    changes += [
        f"{(path + '.') if path else ''}{name} now {value!r}, captured {old_attrs[path, name]!r}"
        for path, name, value in attrs_b
        if (path, name) in old_attrs and old_attrs[path, name] != value
    ]
    old_hooks, new_hooks = ({(path, kind): keys for path, kind, keys in hooks} for hooks in (hooks_a, hooks_b))
    changes += [
        f"the {kind}s of '{path or 'the model'}' now {len(new_hooks.get((path, kind), ()))}, "
        f"captured with {len(old_hooks.get((path, kind), ()))}"
        for path, kind in sorted(old_hooks.keys() | new_hooks.keys())
        if old_hooks.get((path, kind)) != new_hooks.get((path, kind))
    ]
    return "; ".join(changes[:3]) or "its structure"


def _tensor_words(shape: tuple[int, ...], dtype: str) -> str:
    return f"{'x'.join(map(str, shape)) or 'a scalar'} {dtype}"


@dataclass(frozen=True)
class StepRecord:
    """One scheduled training step as measured: its loss, time, activation peak and traffic."""

    step: int
    loss: float
    step_s: float  # forward and backward stages, the caller's code in between apart
    forward_s: float
    backward_s: float
    peak_activation_bytes: int
    bytes_written: int
    bytes_read: int
    recomputations: int


class ScheduledModule(nn.Module):
    """The user's model, trained one scheduled step at a time (see the module docstring).

    `model` is the original module (its parameters are this module's); `plan` the plan of the
    last step (the first shape's before any step); `last_step` the record of the last finished step.
    """

    def __init__(self, model: nn.Module, planner: "_Planner", plan: Plan):
        super().__init__()
        self.model = model
        self.loss_function = planner.loss_module
        self._planner = planner
        self._plans: dict[tuple[str, ...], list[Plan]] = {plan.signature: [plan]}
        self.plan = plan
        self.last_step: StepRecord | None = None
        self._pending: _Step | None = None
        self._steps = 0

    def forward(self, *args: torch.Tensor, **keywords: object) -> torch.Tensor:
        """The loss of a step with labels; the model's output without them (outside training only).

        `model(*inputs, labels)`: the loss of a scheduled step (training) or of a plain forward;
        `model(*inputs)`: the model's output. Keyword arguments go to the plain model outside
        training; a scheduled step takes its inputs in the order of the example's.
        """
        if keywords and (not self.model.training or not torch.is_grad_enabled()):
            return self.model(*args, **keywords)
        if keywords:
            raise UserInputError(
                f"a scheduled step takes its inputs positionally, as the example gave them, then the labels; got "
                f"{', '.join(keywords)} by keyword"
            )
        count = len(self.plan.capture.inputs) - 1
        if len(args) not in (count, count + 1):
            raise UserInputError(
                f"the scheduled model takes its {count} input(s) and then the labels; got {len(args)} argument(s)"
            )
        kinds = [type(a).__name__ for a in args if not isinstance(a, torch.Tensor)]
        if kinds:
            raise UserInputError(f"the scheduled model takes tensors (its inputs, then the labels); got a {kinds[0]}")
        inputs, labels = args[:count], (args[count] if len(args) > count else None)
        if not self.model.training or not torch.is_grad_enabled():
            output = self.model(*inputs)
            return output if labels is None else self.loss_function(output, labels)
        if labels is None:
            raise UserInputError(
                "in training the scheduled model is called with the inputs and the labels, model(*inputs, labels): "
                "its schedule covers forward, loss and backward"
            )
        wanted = [k for k, t in enumerate(inputs) if t.requires_grad]
        if wanted:
            raise UserInputError(
                f"input {wanted[0]} requires its gradient (an adversarial example, an input-gradient penalty): a "
                "scheduled step computes the parameters' gradients only; take that gradient through the plain "
                "model (scheduled_model.model), then train the scheduled one on the result"
            )
        batch = tuple(t.detach() for t in args)
        plan = self._plan_for(batch)
        if self._pending is not None:
            self._pending.discard()
        self._steps += 1
        step = _Step(self, plan, batch, self._steps)
        self._pending = step
        return _ScheduledStep.apply(step, *step.parameters)

    def train(self, mode: bool = True) -> "ScheduledModule":
        """Put the model in training (or evaluation) mode; the loss module keeps the mode its owner gave it.

        Whether a call is a scheduled step follows the model's own mode, so `net.train()` on the
        original model after `scheduled_model.eval()` trains scheduled steps again.
        """
        self.training = mode
        self.model.train(mode)
        return self

    def __deepcopy__(self, memo: dict) -> "ScheduledModule":
        """A scheduled copy of a copy of the model and its loss (an EMA's or `AveragedModel`'s), with the same plans.

        The plans' captures are not copied (their graphs hold the tracer's tensors): each is
        bound to the copies, whose parameters its steps then read and train.
        """
        model, loss = copy.deepcopy(self.model, memo), copy.deepcopy(self.loss_function, memo)
        planner = replace(
            self._planner,
            model=model,
            loss=loss if self._planner.loss is self.loss_function else self._planner.loss,
            loss_module=loss,
        )
        step = TrainingStep(model, loss)
        every = [plan for plans in self._plans.values() for plan in plans]
        copies = {id(plan): replace(plan, capture=replace(plan.capture, step=step)) for plan in every}
        twin = ScheduledModule(model, planner, copies[id(self.plan)])
        twin._plans = {signature: [copies[id(plan)] for plan in plans] for signature, plans in self._plans.items()}
        twin.training, twin.last_step, twin._steps = self.training, self.last_step, self._steps
        return twin

    def __reduce_ex__(self, protocol):
        """Refused in one line: its plans hold the tracer's graphs, which do not pickle."""
        raise TypeError(
            "a scheduled model does not pickle whole: save its state_dict() (or torch.save the original model, "
            "scheduled_model.model) and wrap the loaded model with scheduled() again"
        )

    def state_dict(self, *args, **kwargs):
        """The original model's state dict (its keys, its tensors)."""
        return self.model.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """Load into the original model, as its own `load_state_dict` does."""
        return self.model.load_state_dict(state_dict, strict=strict, assign=assign)

    def _plan_for(self, batch: tuple[torch.Tensor, ...]) -> Plan:
        signature = tuple(describe(t) for t in batch)
        for plan in self._plans.get(signature, ()):
            if model_state(self.model, self.loss_function, plan.reads) == plan.state:
                self.plan = plan
                return plan
        if not self._planner.solve_new_shapes:
            if signature != self.plan.signature:
                raise UserInputError(
                    f"the batch is {', '.join(signature)}, the schedule was solved for {', '.join(self.plan.signature)} "
                    "(inputs, then labels); pass on_new_shape='solve' to solve for each new shape"
                )
            state = model_state(self.model, self.loss_function, self.plan.reads)
            raise UserInputError(
                f"the model changed since its schedule was solved ({_state_change(self.plan.state, state)}); "
                "pass on_new_shape='solve' to solve again for each new shape or state of the model"
            )
        self.plan = plan = self._planner.plan(batch, as_now=True)
        self._plans.setdefault(signature, []).append(plan)
        return plan


class _Step:
    """One scheduled step under way: the machine between the forward stages and `loss.backward()`."""

    def __init__(self, owner: ScheduledModule, plan: Plan, batch: tuple[torch.Tensor, ...], number: int):
        self.owner, self.plan, self.batch, self.number = owner, plan, batch, number
        # a tied parameter is an input once per name: autograd sums its gradients, as in plain training
        step_params = dict(plan.capture.step.named_parameters(remove_duplicate=False))
        self.grad_names = tuple(name for _, name in plan.capture.grads)
        self.parameters = tuple(step_params[name] for name in self.grad_names)
        self.machine: Machine | None = None
        self.discarded = False

    def forward(self) -> torch.Tensor:
        planner, plan = self.owner._planner, self.plan
        with planner.threads_set():  # the machine computes the static tensors (weights made from parameters) as it starts
            machine = Machine(
                plan.capture, planner.timing, planner.swap_dir, planner.durable, plan.budget_bytes, batch=self.batch
            )
            machine.start()
            try:
                machine.run_stages(plan.schedule, range(plan.forward_stages))
            except BaseException:
                machine.close()
                raise
        buffers = dict(plan.capture.step.named_buffers(remove_duplicate=False))
        with torch.no_grad():
            for name, value in machine.buffers.items():
                buffers[name].copy_(value)
        self.machine = machine
        assert machine.loss_value is not None  # the loss node is a forward node
        return machine.loss_value.detach()

    def backward(self, gradient: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        machine = self.machine
        if machine is None:
            why = "a later call of the model discarded it" if self.discarded else "it already ran"
            raise RuntimeError(
                f"poetsim: the backward of scheduled step {self.number} cannot run: {why}; call loss.backward() once, "
                "before the model's next training call (for one loss over two calls, as two views or a consistency "
                "term take, schedule one module that calls the model on both)"
            )
        plan = self.plan
        machine.seed_backward(gradient.detach())
        with self.owner._planner.threads_set():
            try:
                machine.run_stages(plan.schedule, range(plan.forward_stages, len(plan.schedule.stages)))
            finally:
                machine.close()
        machine.check_complete()
        forward_s = sum(machine.stage_s[: plan.forward_stages])
        backward_s = sum(machine.stage_s[plan.forward_stages :])
        self.owner.last_step = StepRecord(
            step=self.number,
            loss=machine.loss,
            step_s=forward_s + backward_s,
            forward_s=forward_s,
            backward_s=backward_s,
            peak_activation_bytes=machine.peak_bytes,
            bytes_written=machine.bytes_written,
            bytes_read=machine.bytes_read,
            recomputations=sum(r.kind == "recompute" for r in machine.records),
        )
        self.machine = None
        if self.owner._pending is self:
            self.owner._pending = None
        return tuple(machine.grads.get(name) for name in self.grad_names)

    def discard(self) -> None:
        """Drop a step whose backward never ran: its tensors and page files go."""
        if self.machine is not None:
            self.machine.close()
            self.machine = None
            self.discarded = True


class _ScheduledStep(torch.autograd.Function):
    """The loss of a scheduled step as an autograd node whose inputs are the trained parameters."""

    @staticmethod
    def forward(ctx, step: _Step, *parameters: torch.Tensor) -> torch.Tensor:
        ctx.step = step
        return step.forward()

    @staticmethod
    def backward(ctx, gradient: torch.Tensor):
        if torch.is_grad_enabled():  # create_graph=True: its gradients would have to be differentiable
            raise RuntimeError(
                "poetsim: a scheduled step's gradients cannot be differentiated again (backward or autograd.grad "
                "with create_graph=True, as a penalty on the gradients takes): its backward replays the schedule's "
                "ops outside autograd; compute such a step through the plain model, model.model"
            )
        return (None, *ctx.step.backward(gradient))


@dataclass
class _Planner:
    """Captures and solves the model for a batch shape, with the settings `scheduled` was given."""

    model: nn.Module
    loss: object
    loss_module: nn.Module
    platform: Platform
    ram: RamSpec
    runtime_x: float
    strategy: str
    timing: Timing
    effort: float
    time_limit_s: float
    swap_dir: Path
    durable: bool
    threads: int
    solve_new_shapes: bool
    saved: Schedule | None
    name: str

    def plan(self, batch: tuple[torch.Tensor, ...], labels: torch.Tensor | None = None, as_now: bool = False) -> Plan:
        """The plan of one batch (the model's inputs and, unless `labels`, the labels last).

        The model is captured in its submodules' modes (a BatchNorm kept in eval while the rest
        trains), or all in training if it is in evaluation mode as a whole. The plan's state is the
        `model_state` the capture saw, or with `as_now` the one the model is in (a step's, which
        found no plan for it), over the plain attributes the capture read.
        """
        from poetsim.pipeline import baseline_starts, require_schedule, run_strategy
        from poetsim.schedule.checker import check_schedule
        from poetsim.schedule.problem import make_problem

        inputs, labels = (batch, labels) if labels is not None else (batch[:-1], batch[-1])
        modes = {module: module.training for module in self.model.modules()}
        if not self.model.training:
            self.model.train()
        modules = _named_modules(self.model, self.loss_module)
        try:
            with tracing.attribute_reads([module for _, module in modules]) as noted:
                captured = capture(self.model, inputs, self.loss, labels, name=self.name)
            paths: dict[int, list[str]] = {}
            for path, module in modules:
                paths.setdefault(id(module), []).append(path)
            reads = frozenset((path, name) for key, name in noted for path in paths.get(key, ()))
            seen = model_state(self.model, self.loss_module, reads)
        finally:
            for module, mode in modes.items():
                module.training = mode
        state = model_state(self.model, self.loss_module, reads) if as_now else seen
        graph = captured.graph
        problem = make_problem(graph, self.platform, self.ram, self.runtime_x, self.timing)
        if self.saved is not None:
            schedule = self.saved
            _check_made_for(schedule, graph)
            check_schedule(schedule, graph, problem.costs, self.timing, problem.budgets)
            strategy, status = str(dict(schedule.meta).get("strategy", "saved")), "saved"
        else:
            starts = baseline_starts(problem, self.strategy)
            run = require_schedule(
                run_strategy(
                    problem,
                    self.strategy,
                    effort=self.effort,
                    time_limit_s=self.time_limit_s,
                    simulate=False,
                    threads=1,
                    starts=starts,
                )
            )
            assert run.schedule is not None  # a run that is ok has a checked schedule
            schedule, strategy, status = run.schedule, self.strategy, str(run.status.value)
        forward = max(n.id for n in graph.nodes if not n.backward) + 1
        return Plan(
            capture=captured,
            schedule=schedule,
            strategy=strategy,
            status=status,
            budget_bytes=problem.budgets.ram_bytes,
            predicted=predict(graph, schedule, problem.costs, self.timing),
            platform=self.platform.name,
            forward_stages=forward,
            state=state,
            reads=reads,
        )

    @contextlib.contextmanager
    def threads_set(self):
        """The thread count of torch as the step runs (the cores less one, by default), restored after."""
        before = torch.get_num_threads()
        torch.set_num_threads(self.threads)
        try:
            yield
        finally:
            torch.set_num_threads(before)


def _check_made_for(schedule: Schedule, graph) -> None:
    """UserInputError if the saved schedule was made for another model or batch (`checker.check_made_for`)."""
    try:
        check_made_for(schedule, graph)
    except ScheduleError as exc:
        raise UserInputError(
            f"the saved schedule does not fit this model: {exc}; solve it again for this model and batch"
        ) from None


def scheduled(
    model: nn.Module,
    example_inputs,
    *,
    labels: torch.Tensor | None = None,
    loss=None,
    platform: str | Path | Platform = "rpi4",
    ram: str | RamSpec = "50%",
    runtime: str | float = "1.2x",
    strategy: str = "hybrid",
    schedule: str | Path | Schedule | None = None,
    timing: str | Timing = Timing.OVERLAP,
    effort: float | None = None,
    time_limit_s: float | None = None,
    swap_dir: str | Path = Path("build/swap"),
    durable: bool = True,
    threads: int | None = None,
    on_new_shape: str = "error",
    name: str | None = None,
) -> ScheduledModule:
    """`model` wrapped to train one scheduled step at a time (see the module docstring).

    `example_inputs` are a batch of the model's inputs (a tensor or a tuple): the schedule is
    solved for their shapes, with `labels` (random class labels by default) and `loss` (an
    `nn.Module` or function of (output, labels); cross-entropy by default). The budgets are
    `ram` (bytes, units or a percentage of the keep-all activation peak) and `runtime` (a
    multiple of one plain pass, "1.2x") on `platform` (a shipped profile, a profile YAML such as
    `poetsim profile` writes, or a Platform). `strategy` is any solved or baseline strategy of
    poetsim's registry, or `schedule` a saved schedule.json/.bin of this model and batch (it must
    pass the checker within the budgets). `effort` is the optimiser's work in work units
    (default TRAIN_EFFORT), the same schedule on any machine; `time_limit_s` its wall-clock
    guard (default `units.GUARD_S_PER_UNIT` seconds a unit; given alone, it sets the effort to a tenth of it). Page files go to
    `swap_dir` (on the device: its flash or SD card), written with fsync and dropped from the
    page cache unless `durable` is False.
    `threads` are torch's threads while a step runs (default: the cores less one, left to the
    I/O thread). `on_new_shape` is "error" or "solve" (capture and solve each new batch shape or
    model state).
    `name` names the graph (default: the model's class).
    UserInputError in one line for a model the capture cannot follow, naming the module;
    InfeasibleBudgetError when no schedule meets the budgets.
    """
    from poetsim import strategies
    from poetsim.pytorch.capturing import as_inputs, check_model, loss_module
    from poetsim.schedule.formats import load_schedule

    check_model(model)
    if on_new_shape not in ("error", "solve"):
        raise UserInputError(f"on_new_shape: use 'error' or 'solve', not '{on_new_shape}'")
    strategies.get(strategy)
    saved = load_schedule(Path(schedule)) if isinstance(schedule, (str, Path)) else schedule
    if saved is not None and on_new_shape == "solve":
        raise UserInputError("on_new_shape='solve' needs a strategy to solve with, not a saved schedule")
    effort_units, guard_s = limits_or(TRAIN_EFFORT, effort, time_limit_s)
    planner = _Planner(
        model=model,
        loss=loss,
        loss_module=loss_module(loss),
        platform=platform if isinstance(platform, Platform) else load_platform(platform),
        ram=ram if isinstance(ram, RamSpec) else parsed(parse_ram, str(ram), "ram"),
        runtime_x=float(runtime) if isinstance(runtime, (int, float)) else parsed(parse_runtime, str(runtime), "runtime"),
        strategy=strategy,
        timing=parsed(Timing.of, timing, "timing"),
        effort=effort_units,
        time_limit_s=guard_s,
        swap_dir=Path(swap_dir),
        durable=durable,
        threads=threads or default_threads(),
        solve_new_shapes=on_new_shape == "solve",
        saved=saved,
        name=name or type(model).__name__,
    )
    try:
        planner.swap_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UserInputError(f"{planner.swap_dir}: cannot create the swap folder: {error.strerror or error}") from None
    inputs = as_inputs(example_inputs)
    plan = planner.plan(inputs, labels if labels is not None else _labels(model, inputs, loss))
    return ScheduledModule(model, planner, plan)


def fit(
    model: ScheduledModule,
    batches: Iterable,
    optimizer: torch.optim.Optimizer,
    steps: int | None = None,
    on_step: Callable[[StepRecord], None] | None = None,
) -> tuple[StepRecord, ...]:
    """Train on `batches` (a DataLoader, or any iterable of (inputs..., labels)); at most `steps` steps.

    Each step zeroes the gradients, calls the model, `loss.backward()`, then `optimizer.step()`.
    A model in evaluation mode is put in training mode first; one in training mode is left as it
    is, with any submodule kept in `eval()` (a frozen BatchNorm).

    Returns one record per step; `on_step` hears each as it finishes (progress, logging).
    """
    records = []
    if not model.model.training:  # a model in evaluation as a whole; submodules the user froze in eval() stay so
        model.train()
    for number, batch in enumerate(batches, start=1):
        if steps is not None and number > steps:
            break
        if isinstance(batch, dict):
            raise UserInputError(
                f"fit takes batches of (inputs..., labels); batch {number} is a dict ({', '.join(map(str, batch))}): "
                "make the collate_fn return a tuple, or unpack it in a loop of your own"
            )
        tensors = (batch,) if isinstance(batch, torch.Tensor) else tuple(batch)
        optimizer.zero_grad(set_to_none=True)
        loss = model(*tensors)
        loss.backward()
        optimizer.step()
        assert model.last_step is not None  # set by the backward that just ran
        records.append(model.last_step)
        if on_step is not None:
            on_step(model.last_step)
    return tuple(records)


def _labels(model: nn.Module, inputs: tuple[torch.Tensor, ...], loss) -> torch.Tensor:
    from poetsim.pytorch.capturing import default_labels

    if loss is not None:
        raise UserInputError("with loss=, give labels= too: an example of what the loss takes beside the output")
    return default_labels(model, inputs, type(model).__name__)
