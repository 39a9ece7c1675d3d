"""From a captured joint aten graph to poetsim nodes: one node per layer, one per layer's backward.

Granularity is POET's (docs/graphs.md): a leaf module call (a module that calls no other module:
`nn.Conv2d`, `nn.BatchNorm2d`, `nn.ReLU`, `nn.MultiheadAttention`) is one node, named by its
path. An op written directly in a container's `forward` (the `out += identity` of a residual
block, an `F.relu` in a model's own code) is a node of its own, named `<path>.<op>`
(`layer1.0.add`). Each forward node's backward ops form the node `<name>.grad`. The rules:

- *Views* (ops whose output aliases their input: view, transpose, expand, detach, getitem of a
  view-returning op) join the node that made the storage they view, wherever they appear, so a
  storage belongs to exactly one node and is freed with it. They cost nothing.
- *Static* ops read only parameters, buffers and constants (a weight's transpose, `arange`);
  they run once, before the step, and live outside the activation budget with the parameters.
- A backward op belongs to the backward of the forward op whose autograd node ran it (their
  sequence numbers match). Gradient accumulation (the sum where a tensor fans out) belongs to
  the node that consumes the sum, as in the zoo; ops with no forward op of their own likewise.
- A node's `output_bytes` is the storage of every tensor it makes that another node reads:
  the layer's output, plus whatever its backward needs besides (BatchNorm's batch mean and
  inverse deviation, max pooling's indices, the loss's log-probabilities). Its `deps` are the
  nodes whose tensors it reads. This is exactly what the executor holds, frees and pages.
- A node's tensors live until its last reader, so a layer whose backward reads some of its
  tensors would keep its output that long too, although only the next layer reads it. The ops
  at the end of a layer that its backward needs nothing of (`nn.MultiheadAttention`'s output
  projection, after the attention kernel whose output and inputs the backward reads) therefore
  form a node of their own, named by the submodule whose parameters they read
  (`self_attn.out_proj`), provided they read only tensors the backward keeps anyway. Their
  output is freed once the next layer has read it, as in eager PyTorch; their backward ops stay
  in the layer's backward node.
- The per-channel (per-row) statistics of a normalisation layer (BatchNorm's batch mean and
  inverse deviation and its new running statistics, LayerNorm's mean and inverse deviation)
  are kept with the parameters, outside the activation budget, as poetsim's zoo keeps them:
  they are a few numbers per channel, and counting them in the layer's output would keep the
  whole output alive until the backward pass, which reads only the statistics.
- Parameter bytes go on the first forward node that reads the parameter.
- An op that draws random numbers (dropout's noise, stochastic depth's) is computed in its
  layer, even when it reads only constants, and marks its node as random: a recomputation of
  the node redraws the same numbers from the generator's state saved at its first compute
  (poetsim.pytorch.randomness).
"""

import heapq
import operator
from dataclasses import dataclass
from typing import Any

import torch
from torch import fx

from poetsim.errors import UserInputError
from poetsim.graphs.graph import Node
from poetsim.pytorch.flops import op_flops, op_name
from poetsim.pytorch.kinds import MODULE_KINDS, RANDOM_KIND, op_kind
from poetsim.pytorch.randomness import draws_random_numbers, out_of_order, state_bytes

#: Outputs (getitem indices) of normalisation ops that are statistics, held with the parameters.
_STATISTICS = {"_native_batch_norm_legit_functional": {1, 2, 3, 4}, "native_batch_norm": {1, 2}, "native_layer_norm": {1, 2}}
#: Ops that return a view of an argument although their schema does not say so.
_UNDECLARED_VIEWS = {"_unsafe_view"}

INPUT_KEY = ("input",)


@dataclass(frozen=True)
class NodeProgram:
    """What the executor runs for one poetsim node.

    `ops` are the aten ops (views included) in graph order; `reads` the tensors of other nodes
    they take; `keeps` the tensors of this node that other nodes read (what stays in RAM, is
    freed or paged); `statistics` the normalisation statistics it makes, held with the
    parameters. The input node has no compute ops: its data placeholders are read from
    storage, then its views (a flatten of the batch) run. `random` says whether its ops draw
    random numbers (poetsim.pytorch.randomness: a recomputation redraws from a saved state).
    """

    ops: tuple[fx.Node, ...]
    reads: tuple[fx.Node, ...]
    keeps: tuple[fx.Node, ...]
    statistics: tuple[fx.Node, ...] = ()
    random: bool = False


@dataclass(frozen=True)
class Built:
    """The poetsim nodes of a captured graph and what the executor needs to run them."""

    nodes: tuple[Node, ...]
    programs: tuple[NodeProgram, ...]
    static_ops: tuple[fx.Node, ...]
    seeded_ops: tuple[fx.Node, ...]  # the static ops that read the loss's gradient
    params: tuple[tuple[fx.Node, str], ...]
    buffers: tuple[tuple[fx.Node, str], ...]
    data: tuple[fx.Node, ...]
    tangents: tuple[fx.Node, ...]
    grads: tuple[tuple[fx.Node, str], ...]
    buffer_updates: tuple[tuple[fx.Node, str], ...]
    loss: fx.Node
    meta: dict[str, str]
    constants: tuple[tuple[fx.Node, torch.Tensor], ...] = ()


def build(gm: fx.GraphModule, calls: dict, name: str, tied: frozenset[str] = frozenset()) -> Built:
    """Group the joint graph `gm`, whose ops carry module-call labels, into poetsim nodes.

    `tied` names parameters that are another parameter under a second name (weight tying): the
    joint graph has an input for each name, and their bytes count once, under the first.
    """
    return _Grouping(gm, calls, name, tied).build()


class _Grouping:
    """One pass over the graph per rule of the module docstring, in that order."""

    def __init__(self, gm: fx.GraphModule, calls: dict, name: str, tied: frozenset[str] = frozenset()):
        self.name = name
        self.calls = calls
        self.tied = tied
        self.nodes = list(gm.graph.nodes)
        self.position = {n: i for i, n in enumerate(self.nodes)}
        self.role: dict[fx.Node, str] = {}  # static, data, view, statistic, compute
        self.owner: dict[fx.Node, fx.Node] = {}  # view -> the value it views
        self.group: dict[fx.Node, tuple] = {}
        self.tails: dict[tuple, str] = {}  # key of a layer's tail node -> its name after the layer's
        self.params: list[tuple[fx.Node, str]] = []
        self.buffers: list[tuple[fx.Node, str]] = []
        self.tangents: list[fx.Node] = []
        #: The loss's gradient and the static views of it, which a step makes again from its own gradient.
        self.seeded: set[fx.Node] = set()
        self.random: list[fx.Node] = []  # ops that draw random numbers, in graph order (few)
        data: list[tuple[int, fx.Node]] = []
        #: Tensors the step makes from nothing (`torch.tensor(16.0)`, the index of `h[[1, 3]]`),
        #: which the trace keeps on the graph module: static, like the parameters.
        self.constants: list[tuple[fx.Node, torch.Tensor]] = []
        for n in self.nodes:
            if n.op == "placeholder":
                self._placeholder(n, data)
            elif n.op == "get_attr":
                self.constants.append((n, getattr(gm, str(n.target))))
                self.role[n] = "static"
        self.data = [n for _, n in sorted(data, key=lambda pair: pair[0])]
        self.param_target = dict(self.params)
        self._params_memo: dict[fx.Node, frozenset[fx.Node]] = {}

    def _placeholder(self, n: fx.Node, data: list) -> None:
        # torch's AOT input descriptors, told apart by class name: their module is private.
        desc: Any = n.meta.get("desc")
        kind = type(desc).__name__
        if kind == "ParamAOTInput":
            self.params.append((n, desc.target))
        elif kind == "BufferAOTInput":
            self.buffers.append((n, desc.target))
        elif kind == "TangentAOTInput":
            self.tangents.append(n)
            self.seeded.add(n)
        elif kind == "PlainAOTInput":
            data.append((desc.idx, n))
            self.role[n] = "data"
            self.group[n] = INPUT_KEY
            return
        elif kind == "ForwardTokenAOTInput":
            raise UserInputError(
                f"{self.name}: the step runs an op with a side effect that the capture orders by a token "
                "(torch.linalg's inv, solve and cholesky check their input for errors that way; their _ex "
                "forms, such as torch.linalg.inv_ex, do not): poetsim cannot replay it"
            )
        else:
            raise UserInputError(f"{self.name}: the captured step has an input poetsim cannot feed ({desc})")
        self.role[n] = "static"

    # -- roles -------------------------------------------------------------------------------

    def build(self) -> Built:
        calls = [n for n in self.nodes if n.op == "call_function"]
        for n in calls:
            self._classify(n)
        self._assign_forward_and_backward(calls)
        self._split_tails(calls)
        self._assign_views(calls)
        order, members = self._order()
        return self._assemble(order, members)

    def _label(self, n: fx.Node) -> str:
        return _whole_loss((n.meta.get("custom") or {}).get("call", ""))

    def _where(self, n: fx.Node) -> str:
        label = self._label(n)
        return f"module '{label}'" if label else "the model"

    def _classify(self, n: fx.Node) -> None:
        target = n.target
        inputs = n.all_input_nodes
        schema = getattr(target, "_schema", None)
        if schema is not None and any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
            raise UserInputError(
                f"{self.name}: {self._where(n)}: in-place op aten.{op_name(target)} survived "
                "functionalisation; poetsim cannot give its output to one node"
            )
        if draws_random_numbers(n):  # computed in its layer, even from constants alone: never once before the step
            if n.kwargs.get("generator") is not None:
                raise UserInputError(
                    f"{self.name}: {self._where(n)}: random op aten.{op_name(target)} draws from a torch.Generator "
                    "of its own; poetsim redraws recomputed random ops from the default generator only"
                )
            self.role[n] = "compute"
            self.random.append(n)
        elif all(self.role[i] == "static" for i in inputs) and not self._made_from_the_gradient(n):
            self.role[n] = "static"
            if any(i in self.seeded for i in inputs):
                self.seeded.add(n)  # a view of the loss's gradient: run again as the backward starts
        elif target is operator.getitem:
            producer = n.args[0]
            assert isinstance(producer, fx.Node)  # getitem takes an item of an op's outputs
            viewed = self._viewed_argument(producer)
            statistic = n.args[1] in _STATISTICS.get(op_name(producer.target), ())
            self.role[n] = "statistic" if statistic and self.role[producer] == "compute" else "view"
            self.owner[n] = viewed if viewed is not None else producer
        elif (viewed := self._viewed_argument(n)) is not None and self.role[viewed] != "static":
            self.role[n] = "view"
            self.owner[n] = viewed
        else:
            self.role[n] = "compute"

    def _made_from_the_gradient(self, n: fx.Node) -> bool:
        """Whether `n` makes a tensor of its own from the loss's gradient (a mean's divide over the whole output).

        Such a tensor is as large as what the loss reads, and made each step: an activation of the
        loss's backward, not a static tensor held beside the parameters. Views of the gradient
        (the mean's expand) hold no bytes of their own and stay static.
        """
        return any(i in self.seeded for i in n.all_input_nodes) and self._viewed_argument(n) is None

    def _viewed_argument(self, n: fx.Node) -> fx.Node | None:
        """The argument whose storage `n`'s output shares, if `n` is a view op."""
        target = n.target
        schema = getattr(target, "_schema", None)
        if schema is None:
            return None
        aliases = any(r.alias_info is not None for r in schema.returns) or op_name(target) in _UNDECLARED_VIEWS
        if not aliases:
            return None
        first = n.args[0] if n.args else None
        return first if isinstance(first, fx.Node) else None

    def root(self, n: fx.Node) -> fx.Node:
        """The node that made the storage `n` shares (`n` itself unless it is a view)."""
        while self.role.get(n) in ("view", "statistic"):
            n = self.owner[n]
        return n

    def outside(self, n: fx.Node) -> bool:
        """Whether `n`'s value lives outside the activation budget (parameters, statistics)."""
        while self.role.get(n) == "view":
            n = self.owner[n]
        return self.role.get(n) in ("static", "statistic")

    def statistic(self, n: fx.Node) -> bool:
        """Whether `n` is a normalisation statistic or a view of one (held with the parameters).

        InstanceNorm's running statistics are BatchNorm's over a view that stacks the instances;
        their update averages a view of the new ones, maybe in a node of its own.
        """
        while self.role.get(n) == "view":
            n = self.owner[n]
        return self.role.get(n) == "statistic"

    def storage_key(self, n: fx.Node) -> tuple[fx.Node, object]:
        """Equal for two values that share one storage: its maker and which of its outputs.

        An item of a multi-output compute op (max pooling's values and indices) is an output of
        its own; an item of a view op's list (`chunk`, `split`, `unbind`) is a piece of the
        storage that op views.
        """
        while self.role.get(n) == "view":
            owner = self.owner[n]
            if n.target is operator.getitem and owner is n.args[0] and self.role.get(owner) == "compute":
                return owner, n.args[1]
            n = owner
        return n, 0

    # -- groups ------------------------------------------------------------------------------

    def _is_backward(self, n: fx.Node) -> bool:
        return n.meta.get("partitioner_tag") == "is_backward" or bool(n.meta.get("autograd_backward"))

    def _forward_key(self, n: fx.Node) -> tuple:
        label = self._label(n)
        call = self.calls.get(label)
        if label == "loss" or (call is not None and call.leaf and label):
            return ("fwd", label)
        return ("fwd", label, n.name)

    def _assign_forward_and_backward(self, calls: list[fx.Node]) -> None:
        creators: dict[int, fx.Node] = {}
        for n in calls:
            seq = n.meta.get("seq_nr")
            if not self._is_backward(n) and seq is not None:
                creators.setdefault(seq, n)
        unresolved, forward_keys = [], set()
        for n in calls:
            if self.role[n] != "compute":
                continue
            if not self._is_backward(n):
                self.group[n] = self._forward_key(n)
                forward_keys.add(self.group[n])
                continue
            key = self._backward_key(n, creators, forward_keys)
            if key is not None:
                self.group[n] = key
            else:
                unresolved.append(n)
        pending = []
        for n in reversed(unresolved):  # consumers come later in the graph: resolve them first
            key = self._consumer_key(n)
            if key is None:
                pending.append(n)
            else:
                self.group[n] = key
        for n in reversed(pending):  # producers come earlier: resolve in graph order
            self.group[n] = self._producer_key(n)

    def _backward_key(self, n: fx.Node, creators: dict[int, fx.Node], forward_keys: set) -> tuple | None:
        """The backward group of a backward op: its layer's, or None to decide by its readers.

        The module call that created the autograd node running `n` names the layer; when that
        call is a container (its own ops are layers of their own), the forward op with the same
        sequence number names it, provided it came from the same call.
        """
        label = (n.meta.get("custom") or {}).get("grad_of")
        if label is None or n.meta.get("is_gradient_acc"):
            return None
        label = _whole_loss(label)
        forward = ("fwd", label)
        call = self.calls.get(label)
        if label == "loss" or (call is not None and call.leaf and label):
            return ("bwd", forward) if forward in forward_keys else None
        seq_nr = n.meta.get("seq_nr")
        creator = creators.get(seq_nr) if seq_nr is not None else None
        if creator is None or self.outside(creator) or self._label(creator) != label:
            return None
        key = self.group.get(self.root(creator))
        return ("bwd", key) if key is not None and key != INPUT_KEY else None

    def _consumer_key(self, n: fx.Node) -> tuple | None:
        """The group of the first op that computes with `n`'s value (looking through views)."""
        frontier, consumers = [n], []
        while frontier:
            for user in frontier.pop().users:
                if self.role.get(user) == "view":
                    frontier.append(user)
                elif self.role.get(user) == "compute" and user in self.group:
                    consumers.append(user)
        return self.group[min(consumers, key=self.position.__getitem__)] if consumers else None

    def _producer_key(self, n: fx.Node) -> tuple:
        """The group of the latest op whose value `n` reads."""
        producers = [self.root(i) for i in n.all_input_nodes if not self.outside(i)]
        producers = [p for p in producers if p in self.group]
        if not producers:
            raise UserInputError(f"{self.name}: {self._where(n)}: op aten.{op_name(n.target)} belongs to no layer")
        return self.group[max(producers, key=self.position.__getitem__)]

    def _split_tails(self, calls: list[fx.Node]) -> None:
        """Move the ops at the end of each leaf layer that its backward needs nothing of into a node of their own.

        Only ops that read nothing but tensors the backward reads are moved (module docstring).
        """
        backward_reads: set[tuple] = set()  # storage keys of forward tensors that backward ops read
        for n in calls:
            if self.role[n] == "compute" and self.group[n][0] == "bwd":
                backward_reads.update(self.storage_key(i) for i in n.all_input_nodes if not self.outside(i))
        needed_roots = {key[0] for key in backward_reads}
        for key, ops in self._leaf_layers(calls).items():
            in_layer = set(ops)
            needed = [n for n in ops if n in needed_roots]
            seen = set(needed)
            while needed:  # the ops the backward's tensors are computed from
                for i in needed.pop().all_input_nodes:
                    if (r := self.root(i)) in in_layer and r not in seen:
                        seen.add(r)
                        needed.append(r)
            tail = [n for n in ops if n not in seen]
            if not seen or not tail:
                continue
            reads_kept = all(
                self.storage_key(i) in backward_reads
                for n in tail
                for i in n.all_input_nodes
                if not self.outside(i) and self.root(i) in seen
            )
            if reads_kept:
                tail_key = ("fwd", key[1], tail[0].name)
                self.tails[tail_key] = self._tail_name(tail, key[1])
                for n in tail:
                    self.group[n] = tail_key

    def _leaf_layers(self, calls: list[fx.Node]) -> dict[tuple, list[fx.Node]]:
        """The forward compute ops of each leaf layer, by group key; the loss stays one node."""
        layers: dict[tuple, list[fx.Node]] = {}
        for n in calls:
            key = self.group.get(n)
            if (
                self.role[n] == "compute"
                and key is not None
                and key[0] == "fwd"
                and len(key) == 2
                and key[1] != "loss"
                and not self._is_backward(n)
            ):
                layers.setdefault(key, []).append(n)
        return layers

    def _tail_name(self, tail: list[fx.Node], label: str) -> str:
        """The submodule (relative to `label`) whose parameters `tail` reads, else its first op's name."""
        targets = {self.param_target[p] for n in tail for i in n.all_input_nodes for p in self.params_of(i)}
        paths = {t.removeprefix("model.").removeprefix(f"{label}.").rpartition(".")[0] for t in targets}
        if len(paths) == 1 and (path := paths.pop()):
            return path
        return op_name(tail[0].target)

    def params_of(self, n: fx.Node) -> frozenset[fx.Node]:
        """The parameters whose value `n` is, or is computed from by static ops only (a transpose)."""
        if n not in self._params_memo:
            if n in self.param_target:
                self._params_memo[n] = frozenset((n,))
            elif self.role.get(n) == "static":
                self._params_memo[n] = frozenset().union(*(self.params_of(i) for i in n.all_input_nodes))
            else:
                self._params_memo[n] = frozenset()
        return self._params_memo[n]

    def _assign_views(self, calls: list[fx.Node]) -> None:
        for n in calls:
            if self.role[n] in ("view", "statistic"):
                self.group[n] = self.group[self.root(n)]

    def _order(self) -> tuple[list[tuple], dict[tuple, list[fx.Node]]]:
        """Groups in a topological order: forward ones first, each by its first op.

        Backward groups whose ops feed each other both ways (the backward of ops written in a
        container's forward, such as a circular `F.pad` on a layer's output or a loop over it,
        wound through the layer's) are one node, under the first layer's name among them.
        """
        members, edges = self._members_and_edges()
        order = self._topological(members, edges)
        cycles = [cycle for cycle in _cycles(edges, set(members) - set(order)) if all(key[0] == "bwd" for key in cycle)]
        for cycle in cycles:
            kept = min(cycle, key=lambda key: (len(key[1]) != 2, self.position[members[key][0]]))
            for n in (n for key in cycle for n in members[key]):
                self.group[n] = kept
        if cycles:
            members, edges = self._members_and_edges()
            order = self._topological(members, edges)
        if len(order) != len(members):
            first = {key: self.position[group[0]] for key, group in members.items()}
            stuck = sorted(set(members) - set(order), key=first.__getitem__)[:2]
            raise UserInputError(
                f"{self.name}: the ops of {' and '.join(map(_describe_key, stuck))} interleave, "
                "so they cannot be grouped into layers"
            )
        return order, members

    def _topological(self, members: dict[tuple, list[fx.Node]], edges: dict[tuple, set[tuple]]) -> list[tuple]:
        """The groups in a topological order, forward ones first, each by its first op; short where a cycle stops it."""
        waiting = dict.fromkeys(members, 0)
        for readers in edges.values():
            for reader in readers:
                waiting[reader] += 1
        first = {key: self.position[group[0]] for key, group in members.items()}
        ready = [(key[0] == "bwd", first[key], key) for key in members if waiting[key] == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            _, _, key = heapq.heappop(ready)
            order.append(key)
            for reader in edges[key]:
                waiting[reader] -= 1
                if waiting[reader] == 0:
                    heapq.heappush(ready, (reader[0] == "bwd", first[reader], reader))
        return order

    def _members_and_edges(self) -> tuple[dict[tuple, list[fx.Node]], dict[tuple, set[tuple]]]:
        """Each group's ops in graph order, and the groups that read each group's values."""
        members: dict[tuple, list[fx.Node]] = {}
        for n in self.nodes:
            if n in self.group and self.role[n] != "static":
                members.setdefault(self.group[n], []).append(n)
        edges: dict[tuple, set[tuple]] = {key: set() for key in members}
        for key, group in members.items():
            for source in {self.group[i] for n in group for i in n.all_input_nodes if not self.outside(i)} - {key}:
                edges[source].add(key)
        return members, edges

    # -- nodes -------------------------------------------------------------------------------

    def _assemble(self, order: list[tuple], members: dict[tuple, list[fx.Node]]) -> Built:
        ids = {key: i for i, key in enumerate(order)}
        reads: dict[tuple, set[fx.Node]] = {key: set() for key in order}
        keeps: dict[tuple, set[fx.Node]] = {key: set() for key in order}
        for key in order:
            for n in members[key]:
                for i in n.all_input_nodes:
                    if not self.outside(i) and self.group[i] != key:
                        reads[key].add(i)
                        keeps[self.group[i]].add(i)
        names = self._names(order, members)
        random = set(self.random)
        late = out_of_order([ids[self.group[n]] for n in self.random])
        if late is not None:
            n = self.random[late]
            raise UserInputError(
                f"{self.name}: {self._where(n)}: random op aten.{op_name(n.target)} draws after a later layer's, "
                "so a scheduled step would not draw the random numbers of a plain one"
            )
        first_reader = self._first_param_readers(order, members)
        by_position = self.position.__getitem__
        nodes, programs = [], []
        for key in order:
            group = members[key]
            compute = [n for n in group if self.role[n] == "compute"]
            flops = [op_flops(n.target, *_values(n), n.meta.get("val")) for n in compute]
            nodes.append(
                Node(
                    id=ids[key],
                    name=names[key],
                    op=self._kind(key, compute, flops, members),
                    backward=key[0] == "bwd",
                    deps=tuple(sorted({ids[self.group[i]] for i in reads[key]})),
                    output_bytes=self._bytes(keeps[key]),
                    param_bytes=sum(
                        _storage_bytes(p)
                        for p, reader in first_reader.items()
                        if reader == key and self.param_target[p] not in self.tied
                    ),
                    flops=float(sum(flops)),
                )
            )
            programs.append(
                NodeProgram(
                    ops=tuple(n for n in group if self.role[n] != "data"),
                    reads=tuple(sorted(reads[key], key=by_position)),
                    keeps=tuple(sorted(keeps[key], key=by_position)),
                    statistics=tuple(n for n in group if self.statistic(n)),
                    random=any(n in random for n in group),
                )
            )
        output = next(n for n in self.nodes if n.op == "output")
        grads, updates, loss = self._outputs(output)
        static_ops = tuple(n for n in self.nodes if n.op == "call_function" and self.role[n] == "static")
        param_count = sum(p.meta["val"].numel() for p, target in self.params if target not in self.tied)
        random_nodes = sum(program.random for program in programs)
        return Built(
            nodes=tuple(nodes),
            programs=tuple(programs),
            static_ops=static_ops,
            seeded_ops=tuple(n for n in static_ops if n in self.seeded),
            params=tuple(self.params),
            buffers=tuple(self.buffers),
            data=tuple(self.data),
            tangents=tuple(self.tangents),
            grads=grads,
            buffer_updates=updates,
            loss=loss,
            constants=tuple(self.constants),
            meta={
                "param_count": str(param_count),
                "random_nodes": str(random_nodes),
                "random_state_bytes": str(random_nodes * state_bytes()),
            },
        )

    def _bytes(self, values: set[fx.Node]) -> int:
        """Bytes of the distinct storages behind `values`."""
        sizes: dict[tuple[fx.Node, object], int] = {}
        for v in values:
            sizes.setdefault(self.storage_key(v), _storage_bytes(v))
        return sum(sizes.values())

    def _names(self, order: list[tuple], members: dict) -> dict[tuple, str]:
        names: dict[tuple, str] = {}
        used: set[str] = set()
        counts: dict[str, int] = {}
        for key in order:
            if key == INPUT_KEY:
                base = "input"
            elif key[0] == "bwd":
                continue
            elif len(key) == 2:
                base = key[1]
            elif key in self.tails:
                base = f"{key[1]}.{self.tails[key]}"
            else:
                op = op_name(members[key][0].target)
                base = f"{key[1]}.{op}" if key[1] else op
            counts[base] = counts.get(base, 0) + 1
            name = base if counts[base] == 1 else f"{base}#{counts[base]}"
            while name in used:
                name += "'"
            names[key] = name
            used.add(name)
        for key in order:
            if key[0] == "bwd":
                names[key] = f"{names[key[1]]}.grad"
        return names

    def _kind(self, key: tuple, compute: list[fx.Node], flops: list[float], members: dict) -> str:
        if key == INPUT_KEY:
            return "input"
        if key[0] == "bwd":
            forward = key[1]
            compute = [n for n in members[forward] if self.role[n] == "compute"]
            flops = [op_flops(n.target, *_values(n), n.meta.get("val")) for n in compute]
            return f"{self._kind(forward, compute, flops, members)}_grad"
        if key[1] == "loss":
            return "loss"
        call = self.calls.get(key[1])
        if len(key) == 2 and call is not None and call.module_type in MODULE_KINDS:
            return MODULE_KINDS[call.module_type]
        if not compute:
            return "op"
        if any(n in self.random for n in compute):
            return RANDOM_KIND
        dominant = compute[max(range(len(compute)), key=lambda k: (flops[k], -k))]
        return op_kind(dominant, reads_weights=any(self.role[a] == "static" for a in dominant.all_input_nodes))

    def _first_param_readers(self, order: list[tuple], members: dict) -> dict[fx.Node, tuple]:
        """For each parameter, the first forward group whose ops read it (through static ops)."""
        readers: dict[fx.Node, tuple] = {}
        for key in order:
            if key[0] != "fwd":
                continue
            for n in members[key]:
                for i in n.all_input_nodes:
                    for p in self.params_of(i):
                        readers.setdefault(p, key)
        return readers

    def _outputs(self, output: fx.Node):
        grads, updates, loss = [], [], None
        values = output.args[0]
        assert isinstance(values, (tuple, list))  # the output node returns one sequence of values
        for value, desc in zip(values, output.meta.get("desc") or ()):
            kind = type(desc).__name__
            if value is None:
                continue
            if kind == "GradAOTOutput" and type(desc.grad_of).__name__ == "PlainAOTInput":
                continue  # a batch tensor the forward made require its gradient (x.requires_grad_()): not trained
            if kind == "GradAOTOutput":
                grads.append((value, desc.grad_of.target))
            elif kind == "InputMutationAOTOutput" and type(desc.mutated_input).__name__ == "BufferAOTInput":
                updates.append((value, desc.mutated_input.target))
            elif kind == "PlainAOTOutput" and desc.idx == 0:
                loss = value
            elif kind == "InputMutationAOTOutput":
                raise UserInputError(f"{self.name}: {self._written_in_place(desc.mutated_input, value)}")
            else:
                raise UserInputError(f"{self.name}: the captured step has an output poetsim cannot place ({desc})")
        if loss is None:
            raise UserInputError(f"{self.name}: the captured step has no loss output")
        return tuple(grads), tuple(updates), loss

    def _written_in_place(self, mutated: Any, value: fx.Node) -> str:
        """Why a step that writes a batch tensor or a parameter in place is refused, and what to write instead."""
        call = (value.meta.get("custom") or {}).get("call") or (value.meta.get("custom") or {}).get("grad_of")
        where = f"module '{call}'" if call else "the model's own forward"
        if type(mutated).__name__ == "ParamAOTInput":
            what = f"parameter '{mutated.target.removeprefix('model.')}'"
        elif mutated.idx == len(self.data) - 1:
            what = "the labels"
        else:
            what = f"input {mutated.idx}"
        return (
            f"{where} writes {what} in place ({value.target}); a scheduled step reads its inputs and "
            "parameters again when it recomputes, so they must stay as they were: write the op out of "
            "place (y = x * 2, not x.mul_(2)), or change parameters in the optimiser step"
        )


def _values(n: fx.Node) -> tuple[tuple, dict]:
    """The (fake) values of an op's arguments, as recorded by the tracer."""

    def value(a):
        return a.meta.get("val")

    return fx.node.map_arg(n.args, value), fx.node.map_arg(n.kwargs, value)


def _storage_bytes(n: fx.Node) -> int:
    val = n.meta.get("val")
    return int(val.untyped_storage().nbytes()) if isinstance(val, torch.Tensor) else 0


def _whole_loss(label: str) -> str:
    """A module call's label, with the loss's submodules (a loss module holding `nn.MSELoss`) as the loss: one node."""
    return "loss" if label.startswith("loss.") else label


def _cycles(edges: dict[tuple, set[tuple]], keys: set[tuple]) -> list[list[tuple]]:
    """The sets of more than one of `keys` that reach each other along `edges` (strongly connected components)."""
    backwards: dict[tuple, set[tuple]] = {key: set() for key in keys}
    for key in keys:
        for reader in edges[key] & keys:
            backwards[reader].add(key)
    finished = _post_order(sorted(keys, key=repr), {key: edges[key] & keys for key in keys}, set())
    seen: set[tuple] = set()
    components = [_post_order([key], backwards, seen) for key in reversed(finished) if key not in seen]
    return [component for component in components if len(component) > 1]


def _post_order(starts: list[tuple], edges: dict[tuple, set[tuple]], seen: set[tuple]) -> list[tuple]:
    """The keys reachable from `starts` and not in `seen`, each after those it reaches (depth first); adds them to `seen`."""
    done: list[tuple] = []
    for start in (key for key in starts if key not in seen):
        seen.add(start)
        work = [(start, iter(sorted(edges[start], key=repr)))]
        while work:
            _, readers = work[-1]
            reader = next((r for r in readers if r not in seen), None)
            if reader is None:
                done.append(work.pop()[0])
            else:
                seen.add(reader)
                work.append((reader, iter(sorted(edges[reader], key=repr))))
    return done


def _describe_key(key: tuple) -> str:
    if key == INPUT_KEY:
        return "the input"
    if key[0] == "bwd":
        return f"the backward of {_describe_key(key[1])}"
    return f"module '{key[1]}'" if key[1] else "the model's own ops"
