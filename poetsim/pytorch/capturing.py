"""Import a PyTorch model: capture one training step at the aten level, as poetsim's training graph.

`from_torch(module, example_inputs, loss=...)` traces the forward pass, the loss and the
backward pass that autograd derives from them, all at once, with AOTAutograd's joint export
(`aot_export_joint_with_descriptors`, torch 2.13): one functional graph of aten ops whose
inputs are the parameters, buffers and the batch, and whose outputs are the loss, the
parameter gradients and the new buffer values. The trace runs on fake tensors, so it costs no
real compute, and a model whose control flow depends on the data stops with one line naming
the module where it happened.

While tracing, forward hooks label every aten op with the module call it came from
(`layer1.0.conv1`; a module called twice, as torchvision's ReLU in a basic block, gives
`layer1.0.relu` and `layer1.0.relu#2`). Autograd carries each forward op's sequence number to
the backward ops it causes, so every backward op is tied to the forward op whose derivative it
computes. `poetsim.pytorch.grouping` turns the labelled graph into poetsim nodes.
"""

import contextlib
import dataclasses
import itertools
import logging
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.fx.traceback as fx_traceback
from torch import fx, nn

from poetsim.errors import UserInputError, first_line
from poetsim.graphs.graph import TrainingGraph
from poetsim.pytorch import grouping, randomness, recurrent, tracing

#: The torch release whose AOTAutograd graphs this importer reads (it uses an API marked unstable).
SUPPORTED_TORCH = "2.13"
FAKE_TENSOR_LOG = "torch._subclasses.fake_tensor"  # logs a failing meta kernel's traceback, then raises


@dataclass(frozen=True)
class CallInfo:
    """One module call seen while tracing: its label, its class, whether it called other modules."""

    label: str
    module_type: str
    leaf: bool


@dataclass(frozen=True)
class Capture:
    """A captured training step: the aten graph, its poetsim graph and how one maps to the other.

    `programs[i]` is what poetsim node i runs (`poetsim.pytorch.grouping.NodeProgram`);
    `static_ops` depend on parameters and constants only (weight transposes, constants) and are
    evaluated once, outside the activation budget, like the parameters they come from;
    `seeded_ops`, those of them that read the loss's gradient (views of it), again from each
    step's own gradient as its backward starts.
    `inputs` are the batch the step was traced with: the model's inputs, then the labels.
    """

    graph: TrainingGraph
    fx_graph: fx.Graph
    programs: tuple
    static_ops: tuple[fx.Node, ...]
    seeded_ops: tuple[fx.Node, ...]
    params: tuple[tuple[fx.Node, str], ...]
    buffers: tuple[tuple[fx.Node, str], ...]
    data: tuple[fx.Node, ...]
    tangents: tuple[fx.Node, ...]
    grads: tuple[tuple[fx.Node, str], ...]
    buffer_updates: tuple[tuple[fx.Node, str], ...]
    loss: fx.Node
    step: "TrainingStep"
    inputs: tuple[torch.Tensor, ...]
    calls: tuple[CallInfo, ...] = field(default=())
    constants: tuple[tuple[fx.Node, torch.Tensor], ...] = ()  # tensors the step makes from nothing

    @property
    def model(self) -> nn.Module:
        """The user's module (the step wraps it with the loss)."""
        return self.step.model


class TrainingStep(nn.Module):
    """The user's model and loss as one module whose output is the scalar loss.

    `model` and `loss` are its children, so their parameters and buffers are named
    `model.<name>` and `loss.<name>` in the captured graph.
    """

    def __init__(self, model: nn.Module, loss: nn.Module):
        super().__init__()
        self.model = model
        self.loss = loss

    def forward(self, *batch: torch.Tensor) -> torch.Tensor:
        """The loss of the model on `batch`: the inputs, then the labels last."""
        *inputs, labels = batch
        loss = self.loss(self.model(*inputs), labels)
        if isinstance(loss, torch.Tensor) and loss.numel() == 1:
            return loss
        if isinstance(loss, torch.Tensor):
            raise UserInputError(
                f"the loss gives {describe(loss)}, not one value: reduce it (reduction='mean' or 'sum'); a step "
                "differentiates one scalar"
            )
        raise UserInputError(
            f"the loss gives a {type(loss).__name__}, not one scalar tensor: return the loss alone, and compute "
            "what else it returned (an accuracy) from the model's output outside the step"
        )


class _LossFunction(nn.Module):
    """A plain loss function as a module, so that its ops are labelled `loss` like nn losses."""

    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, output, labels):
        return self.function(output, labels)


def from_torch(
    module: nn.Module,
    example_inputs,
    loss=None,
    labels: torch.Tensor | None = None,
    name: str | None = None,
    meta: dict[str, str] | None = None,
) -> TrainingGraph:
    """The poetsim training graph of one training step of `module` on `example_inputs`.

    `loss` is an `nn.Module` or function of (output, labels) giving a scalar; by default
    cross-entropy against random class labels, one per row of classes in the last dimension of
    the output's logits (`ClassesLast`; `labels` gives them). The graph is what every other
    poetsim command takes; `capture` keeps the aten graph too, for the executor. UserInputError
    names the module when the model cannot be captured (data-dependent control flow, an
    unsupported op, inputs that do not fit). Random ops (dropout, stochastic depth) are captured
    with the model's own probabilities and redrawn exactly on recomputation
    (poetsim.pytorch.randomness); recurrent layers and upsampling as eager runs them
    (poetsim.pytorch.tracing).
    """
    return capture(module, example_inputs, loss, labels, name, meta).graph


def check_model(module: object) -> None:
    """UserInputError unless `module` is an nn.Module poetsim can capture: not one `torch.compile` made."""
    if not isinstance(module, nn.Module):
        raise UserInputError(f"the model must be a torch.nn.Module, got {type(module).__name__}")
    original = getattr(module, "_orig_mod", None)
    if type(module).__name__ == "OptimizedModule" and isinstance(original, nn.Module):
        raise UserInputError(
            f"the model is {type(original).__name__} compiled by torch.compile: pass the module itself (model._orig_mod); "
            "a scheduled step runs the graph poetsim captures, not the compiled one"
        )


def capture(
    module: nn.Module,
    example_inputs,
    loss=None,
    labels: torch.Tensor | None = None,
    name: str | None = None,
    meta: dict[str, str] | None = None,
) -> Capture:
    """Trace one training step of `module` and group it into poetsim nodes (see `from_torch`)."""
    _check_torch_version()
    check_model(module)
    inputs = as_inputs(example_inputs)
    name = name or type(module).__name__
    lazy = [path for path, p in module.named_parameters() if isinstance(p, nn.parameter.UninitializedParameter)]
    if lazy:
        raise UserInputError(
            f"{name}: parameter '{lazy[0]}' is not initialised yet (a lazy module): run the model once on an "
            "example batch before it is imported, as its first forward initialises it"
        )
    loss = loss_module(loss)
    if labels is not None and not isinstance(labels, torch.Tensor):
        raise UserInputError(
            f"{name}: labels must be one tensor, got a {type(labels).__name__}: pack several targets into one "
            "(boxes and classes side by side, padded) and unpack them in the loss"
        )
    labels = default_labels(module, inputs, name) if labels is None else compact(labels.detach())
    *separate, labels = apart((*inputs, labels))
    inputs = tuple(separate)
    step = TrainingStep(module, loss)
    gm, calls = _trace(step, (*inputs, labels), name)
    _refuse_attention_dropout_under_autocast(gm, name)
    built = grouping.build(gm, calls, name, frozenset(n for names in tied_parameters(step) for n in names[1:]))
    info = {
        "imported_from": "torch",
        "torch_version": torch.__version__,
        "inputs": ";".join(describe(t) for t in inputs),
        "labels": describe(labels),
        **(meta or {}),
    }
    graph = TrainingGraph.create(name, built.nodes, meta={**built.meta, **info})
    captured = Capture(
        graph=graph,
        fx_graph=gm.graph,
        programs=built.programs,
        static_ops=built.static_ops,
        seeded_ops=built.seeded_ops,
        params=built.params,
        buffers=built.buffers,
        data=built.data,
        tangents=built.tangents,
        grads=built.grads,
        buffer_updates=built.buffer_updates,
        loss=built.loss,
        step=step,
        inputs=(*inputs, labels),
        calls=tuple(calls.values()),
        constants=built.constants,
    )
    return _real_bytes(captured)


def _real_bytes(captured: Capture) -> Capture:
    """`captured` with each node's output bytes as one real keep-all step holds them.

    The grouping counts the storages of fake tensors; where a real kernel sizes one otherwise, the
    executor would hold other bytes than the graph says (`executor.real_output_bytes`).
    """
    from poetsim.pytorch.executor import real_output_bytes
    from poetsim.pytorch.host import keep_all_schedule

    graph = captured.graph
    real = real_output_bytes(captured, keep_all_schedule(graph))
    nodes = tuple(dataclasses.replace(n, output_bytes=real.get(n.id, n.output_bytes)) for n in graph.nodes)
    if nodes == graph.nodes:
        return captured
    return dataclasses.replace(captured, graph=TrainingGraph.create(graph.name, nodes, meta=dict(graph.meta)))


def _refuse_attention_dropout_under_autocast(gm: fx.GraphModule, name: str) -> None:
    """Refuse `scaled_dot_product_attention` with `dropout_p` traced under `torch.autocast`.

    The trace takes SDPA's math path (its `_safe_softmax`) in float32, where eager under autocast
    runs another kernel on bfloat16: the masks and sums differ.
    """
    if not torch.is_autocast_enabled("cpu"):
        return
    ops = [n for n in gm.graph.nodes if n.op == "call_function"]
    if any(n.target is torch.ops.aten._safe_softmax.default for n in ops) and any(
        randomness.draws_random_numbers(n) for n in ops
    ):
        raise UserInputError(
            f"{name}: scaled_dot_product_attention with dropout_p under torch.autocast: eager runs another kernel "
            "than the trace there; train it without autocast, or with dropout_p=0 and an nn.Dropout elsewhere"
        )


def tied_parameters(module: nn.Module) -> tuple[tuple[str, ...], ...]:
    """The names of each parameter that has several (weight tying: `emb.weight = head.weight`).

    The first is the one `named_parameters()` gives; the trace has an input and a gradient for
    each name, whose sum is the parameter's gradient.
    """
    names: dict[int, list[str]] = {}
    for name, parameter in module.named_parameters(remove_duplicate=False):
        names.setdefault(id(parameter), []).append(name)
    return tuple(tuple(group) for group in names.values() if len(group) > 1)


def default_labels(module: nn.Module, inputs: tuple[torch.Tensor, ...], name: str, seed: int = 0) -> torch.Tensor:
    """Random class labels for cross-entropy: one per row of the output, in [0, classes).

    The output's shape comes from running the model on fake tensors (no data, no compute), so
    the model's buffers are not touched. They keep their device, so that a model that makes
    tensors of its own in its forward (`torch.zeros(batch, hidden)`, a recurrent cell's state)
    runs as it does on the CPU. Its warnings are left out: the trace runs the model again. Where
    a plain fake pass stops at a check of values that the trace's own pass gets past (`istft`'s
    window check), the model runs once for real on copies of its parameters and buffers, the
    random state kept.
    """
    from torch._subclasses.fake_tensor import FakeTensorMode

    fake = FakeTensorMode()
    try:
        out = _output(module, inputs, name, fake, fake.from_tensor)
    except UserInputError:
        state = torch.get_rng_state()
        try:
            out = _output(module, inputs, name, contextlib.nullcontext(), _real_copy)
        except UserInputError:
            out = None
        finally:
            torch.set_rng_state(state)
        if out is None:
            raise
    if out is None or out.dim() < 1 or out.shape[-1] < 1:
        raise UserInputError(f"{name}: {NO_LOGITS}")
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, out.shape[-1], tuple(out.shape[:-1]), generator=generator, dtype=torch.int64)


def _real_copy(tensor: torch.Tensor) -> torch.Tensor:
    """A copy of `tensor` with its own storage and its `requires_grad`."""
    return tensor.detach().clone().requires_grad_(tensor.requires_grad)


def _output(module: nn.Module, inputs: tuple[torch.Tensor, ...], name: str, mode, copied: Callable) -> torch.Tensor | None:
    """The logits of one forward of `module` under `mode`, on `copied` parameters, buffers and inputs; the module kept."""
    state = {k: copied(v) for k, v in itertools.chain(module.named_parameters(), module.named_buffers())}
    with (
        warnings.catch_warnings(),
        tracing.attributes_kept(module),
        tracing.eager_causal_masks(),
        _attributed(name, TrainingStep(module, nn.Identity())),
        mode,
    ):
        warnings.simplefilter("ignore")
        batch = tuple(copied(t) for t in inputs)
        return logits(torch.func.functional_call(module, state, batch))


def _check_torch_version() -> None:
    if not torch.__version__.startswith(SUPPORTED_TORCH):
        raise UserInputError(f"poetsim's PyTorch import needs torch {SUPPORTED_TORCH} (the CPU build), found {torch.__version__}")


def as_inputs(example_inputs) -> tuple[torch.Tensor, ...]:
    """The model's inputs as a tuple of detached tensors (a tensor alone is one input), each on a storage of its own.

    A batch that is a view (`X[i : i + 8]` of a whole data set, an `expand`ed tensor) would count
    its base's storage as the input's bytes; a step holds a batch of its own size.
    """
    inputs = (example_inputs,) if isinstance(example_inputs, torch.Tensor) else tuple(example_inputs)
    if not inputs or not all(isinstance(t, torch.Tensor) for t in inputs):
        raise UserInputError("example_inputs must be a tensor or a tuple of tensors")
    return tuple(compact(t.detach()) for t in inputs)


def apart(tensors: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    """`tensors`, each on a storage of its own: one passed twice (an autoencoder's input as its labels) is copied.

    A step reads each input and the labels into a buffer of its own, so each counts.
    """
    seen: set[int] = set()
    kept = []
    for t in tensors:
        pointer = t.untyped_storage().data_ptr()
        kept.append(t.clone() if pointer in seen else t)
        seen.add(pointer)
    return tuple(kept)


def compact(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor`, or a contiguous copy of it where it is a view on a larger storage or not contiguous."""
    dense = tensor.is_contiguous() and tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()
    return tensor if dense else tensor.clone(memory_format=torch.contiguous_format)


#: What the default loss says of a model whose output holds no logits.
NO_LOGITS = (
    "the default loss (cross-entropy) needs logits with classes in their last dimension (the output, its "
    "'logits' entry, or its first element); from Python, pass loss= and labels= (from_torch, scheduled); "
    "from the command line, give a factory whose model returns its logits (a wrapper module that picks them)"
)


def logits(output) -> torch.Tensor | None:
    """The logits in a model's output: the output itself, its 'logits' entry, or its first element.

    A model of the Hugging Face kind returns a dict (or an output object) with `logits`, or a
    tuple whose first element they are. None where none is a tensor.
    """
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict) or hasattr(output, "logits"):
        found = output.get("logits") if isinstance(output, dict) else output.logits
    elif isinstance(output, (tuple, list)) and output:
        found = output[0]
    else:
        return None
    return found if isinstance(found, torch.Tensor) else None


class ClassesLast(nn.CrossEntropyLoss):
    """Cross-entropy of the output's logits (`logits`) with the classes in their last dimension: the default loss.

    Two-dimensional logits are `nn.CrossEntropyLoss`'s own case. Logits of more dimensions (a
    language model's, per token) are taken as rows of classes: flattened to (rows, classes) with
    the labels to (rows,), where `nn.CrossEntropyLoss` would take their second dimension for the
    classes.
    """

    def forward(self, output, labels):
        """The mean cross-entropy of every row of classes against its label."""
        found = logits(output)
        if found is None:
            raise UserInputError(NO_LOGITS)
        output = found
        if output.dim() > 2:
            output, labels = output.reshape(-1, output.shape[-1]), labels.reshape(-1)
        return super().forward(output, labels)


def loss_module(loss) -> nn.Module:
    """The loss as a module: cross-entropy over the last dimension by default, an nn.Module as it is, a function wrapped."""
    if loss is None:
        return ClassesLast()
    if isinstance(loss, nn.Module):
        return loss
    if callable(loss):
        return _LossFunction(loss)
    raise UserInputError(f"loss must be an nn.Module or a function of (output, labels), got {type(loss).__name__}")


def describe(t: torch.Tensor) -> str:
    """A tensor's shape and dtype as 'int64[8]' or 'float32[8,3,32,32]'."""
    return f"{str(t.dtype).removeprefix('torch.')}[{','.join(map(str, t.shape))}]"


class _CallTracker:
    """Forward hooks that label each module call and remember which calls are leaves.

    Labels are module paths relative to the user's model (`layer1.0.conv1`), `loss` for the
    loss, and the model's own ops have the empty label. A module called again gets `#2`, `#3`.
    The root step resets the counts, because the exporter runs the forward pass more than once.
    """

    def __init__(self, on_pass: Callable[[], None] | None = None) -> None:
        self.on_pass = on_pass
        self.calls: dict[str, CallInfo] = {}
        self.stack: list[tuple[str, contextlib.ExitStack]] = []
        #: Every annotation under way, forward calls' and backward nodes', in the order opened.
        self.opened: list[contextlib.ExitStack] = []
        self._counts: dict[str, int] = {}
        self._children: dict[str, bool] = {}
        self._types: dict[str, str] = {}
        self._first_sequence_nr: dict[str, int] = {}

    def install(self, step: nn.Module) -> list:
        handles = []
        for path, mod in step.named_modules():
            handles.append(mod.register_forward_pre_hook(lambda m, a, p=path: self._enter(m, p)))
            handles.append(mod.register_forward_hook(lambda m, a, o, p=path: self._leave(p, o)))
        return handles

    @property
    def active(self) -> str | None:
        """The innermost module call under way (where an error happened)."""
        return self.stack[-1][0] if self.stack else None

    def _enter(self, module: nn.Module, path: str) -> None:
        if path == "":  # the step itself: a new pass of the exporter; it labels no op
            if self.on_pass is not None:  # what an earlier pass left on the modules goes
                self.on_pass()
            self._counts.clear()
            self._children.clear()
            self.calls.clear()
            self.stack.clear()
            return
        relative = path.removeprefix("model.") if path != "model" else ""
        self._counts[relative] = count = self._counts.get(relative, 0) + 1
        label = relative if count == 1 else f"{relative}#{count}"
        if self.stack:
            self._children[self.stack[-1][0]] = True
        self._children.setdefault(label, False)
        self._types[label] = type(module).__name__
        context = contextlib.ExitStack()
        context.enter_context(fx_traceback.annotate({"call": label}))
        self.stack.append((label, context))
        self.opened.append(context)
        self._first_sequence_nr[label] = torch.autograd._get_sequence_nr()

    def _leave(self, path: str, output) -> None:
        if not self.stack or path == "":
            return
        label, context = self.stack.pop()
        self.opened.remove(context)
        context.close()
        self.calls[label] = CallInfo(label, self._types[label], not self._children.get(label, False))
        _label_autograd_nodes(output, label, self._first_sequence_nr[label], self.opened)

    def close(self) -> None:
        """Close the annotations an error left open, last opened first, while the tracer's node meta is there.

        Left open, each would be closed when collected, after the tracer's meta is gone, and
        print a stray KeyError beside the one-line refusal.
        """
        for context in reversed(self.opened):
            with contextlib.suppress(KeyError):  # the meta an error left behind may lack the entry
                context.close()
        self.opened.clear()
        self.stack.clear()


def _label_autograd_nodes(output, label: str, first_sequence_nr: int, open_contexts: list[contextlib.ExitStack]) -> None:
    """Mark the autograd nodes a module call created, so that its backward ops carry its label.

    Walking back from the call's outputs, a node created during the call (its sequence number
    is at least the one the call started at) and not yet marked is this call's: calls inside it
    ended first and marked theirs. Each marked node annotates the ops it runs in the backward
    pass with `grad_of`, held on `open_contexts` until the node has run. This follows in-place
    ops (an in-place ReLU6 replaces the history of its input), which matching sequence numbers
    of forward and backward ops alone would attribute to the layer before.
    """
    roots: list[torch.autograd.graph.Node | None] = [
        t.grad_fn for t in torch.utils._pytree.tree_leaves(output) if isinstance(t, torch.Tensor) and t.grad_fn is not None
    ]
    seen = set()
    while roots:
        node = roots.pop()
        if node is None or node in seen or node._sequence_nr() < first_sequence_nr:
            continue
        seen.add(node)
        roots.extend(next_node for next_node, _ in node.next_functions)
        # torch declares `metadata` as a method; the C++ nodes expose it as a dict attribute.
        metadata: dict = node.metadata  # type: ignore[assignment]
        if "poetsim_call" in metadata:  # an inner call's: walk on behind it
            continue
        metadata["poetsim_call"] = label
        contexts: list[contextlib.ExitStack] = []

        def enter(grad_outputs, label=label, contexts=contexts):
            context = contextlib.ExitStack()
            context.enter_context(fx_traceback.annotate({"grad_of": label}))
            contexts.append(context)
            open_contexts.append(context)

        def leave(grad_inputs, grad_outputs, contexts=contexts):
            if contexts:
                context = contexts.pop()
                open_contexts.remove(context)
                context.close()

        node.register_prehook(enter)
        node.register_hook(leave)


@contextlib.contextmanager
def _attributed(name: str, step: nn.Module, on_pass: Callable[[], None] | None = None):
    """Label module calls while the block runs.

    An error inside the model becomes one UserInputError naming the module call that raised it.
    The warnings the block raises are passed on when it succeeds; a refusal is its one line
    alone (torch warns on its way to most of the errors it then raises, and its fake-tensor mode
    logs the traceback of every meta kernel that fails before raising it).
    """
    tracker = _CallTracker(on_pass)
    handles = tracker.install(step)
    where = None
    try:
        with warnings.catch_warnings(record=True) as raised, _silenced(FAKE_TENSOR_LOG):
            warnings.simplefilter("always")
            with fx_traceback.preserve_node_meta():
                try:
                    yield tracker
                finally:
                    where = tracker.active
                    tracker.close()
        for warning in raised:
            warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    except UserInputError:
        raise
    except Exception as error:  # noqa: BLE001 - any failure of the user's model is reported, with its module
        module = f"module '{where}'" if where else "the model"
        if "convert all Tensors to FakeTensors" in str(error):
            raise UserInputError(f"{name}: {module}: {_unregistered(step)}") from None
        raise UserInputError(f"{name}: {module}: {_explain(error)}") from None
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def _silenced(logger_name: str):
    """Drop every record of the logger `logger_name` while the block runs."""
    logger = logging.getLogger(logger_name)

    def drop(record: logging.LogRecord) -> bool:
        return False

    logger.addFilter(drop)
    try:
        yield
    finally:
        logger.removeFilter(drop)


def _unregistered(step: nn.Module) -> str:
    """What to do about a tensor the step reads that is neither a parameter nor a buffer; named where an attribute holds it."""
    held = [
        ".".join(filter(None, (path.removeprefix("model").lstrip("."), attribute)))
        for path, module in step.named_modules()
        for attribute, value in vars(module).items()
        if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter)
    ]
    what = f"the tensor attribute '{held[0]}'" if held else "a tensor"
    return (
        f"{what} is neither a parameter nor a buffer, so the capture cannot follow it: register it with "
        "register_buffer; a tensor a loss function closes over (class weights), or another model the loss "
        "calls, belongs to an nn.Module loss that holds it"
    )


#: What to do about an op that reads tensor values as Python values, by the op the tracer names.
_VALUE_OPS = {
    "_pack_padded_sequence": "pack_padded_sequence reads the lengths' values: run the recurrent layer on the padded "
    "batch and mask its output by the lengths",
    "_ctc_loss": f"torch {torch.__version__} has no fake-tensor kernel for CTC loss (aten._ctc_loss), so a step with it "
    "cannot be captured",
}


def _explain(error: Exception) -> str:
    """What went wrong, in one line, by the kind of failure the tracer reports."""
    kind = type(error).__name__
    first = first_line(error) or kind
    if isinstance(error, tracing.UnknownCausality):
        return first
    if "use_reentrant=True" in first:
        return (
            "torch.utils.checkpoint with use_reentrant=True: its backward runs autograd inside the step, which "
            "cannot be captured; use use_reentrant=False (PyTorch's recommended form), which poetsim replays"
        )
    special = next((why for op, why in _VALUE_OPS.items() if f"aten.{op}." in first), None)
    if special is not None:
        return special
    clues = ("data-dependent", "data dependent", "cannot be called on meta tensors", "_local_scalar_dense")
    if kind in ("DataDependentOutputException", "GuardOnDataDependentSymNode", "DynamicOutputShapeException") or any(
        clue in first.lower() for clue in clues
    ):
        number = (
            " (a Python number taken from a tensor: .item(), int(), float(), or an if on a tensor; keep it a tensor, "
            "as pos.sum().clamp(min=1) for max(pos.sum().item(), 1))"
            if "_local_scalar_dense" in first
            else ""
        )
        return (
            f"data-dependent control flow or output shape ({first}){number}; poetsim captures one static "
            "training step, so branches and shapes must not depend on tensor values" + _read_where(error)
        )
    if kind == "UnsupportedOperatorException":
        return f"unsupported op {first}: it has no fake-tensor kernel, so it cannot be captured"
    if "does not require grad and does not have a grad_fn" in first:
        return (
            "the forward differentiates (torch.autograd.grad or backward inside it: a Hamiltonian network, a "
            "gradient penalty), and a captured step differentiates once, after the loss"
        )
    if "don't support automatic differentiation" in first:
        return f"autograd refuses an op of the forward, so eager PyTorch cannot train this model either: {first}"
    if "modified by an inplace operation" in first:
        return (
            f"an in-place op changes a tensor that the backward needs ({first.partition(': ')[2].partition(' Hint')[0]}); "
            "eager PyTorch refuses this step too: write that op out of place"
        )
    if isinstance(error, (RuntimeError, ValueError, IndexError, TypeError)):
        return f"the inputs do not fit the model: {first}"
    return f"cannot be captured: {kind}: {first}"


def _read_where(error: Exception) -> str:
    """The way out when torch's own Python code read the values: torch.distributions' or a functional loss's argument checks."""
    frames = [frame.filename.replace("\\", "/") + ":" + frame.name for frame in traceback.extract_tb(error.__traceback__)]
    if any("torch/distributions/" in frame for frame in frames):
        return (
            "; here torch.distributions checks its arguments' values: pass validate_args=False to the "
            "distribution (or call torch.distributions.Distribution.set_default_validate_args(False))"
        )
    functional = [frame.rpartition(":")[2] for frame in frames if "torch/nn/functional.py:" in frame]
    if functional:
        return (
            f"; here torch.nn.functional.{functional[-1]} checks its arguments' values: write its formula out "
            "in the model or the loss"
        )
    return ""


def _trace(step: TrainingStep, batch: tuple[torch.Tensor, ...], name: str):
    """The joint forward-backward aten graph of `step` on `batch`, with module-call labels."""
    from torch._functorch.aot_autograd import aot_export_joint_with_descriptors

    with (
        tracing.attributes_kept(step) as restore,
        tracing.eager_causal_masks(),
        _attributed(name, step, restore) as tracker,
        contextlib.ExitStack() as stack,
        randomness.eager_dropout(),
        recurrent.eager_recurrent(),
        tracing.eager_kernels(),
    ):
        gm = aot_export_joint_with_descriptors(stack, step, batch).graph_module
    recurrent.size_workspaces(gm)
    return gm, dict(tracker.calls)
