"""A training graph seen as a chain of blocks: the shape POFO's dynamic program works on.

POFO (Beaumont, Eyraud-Dubois, Shilova, NeurIPS 2021) and rotor before it schedule a *chain*: a
sequence of stages where each stage reads only the previous stage's output, and whose backward
step reads only its own stage's tensors and that input. A residual block is one such stage, as
in POFO's experiments. `chain_of_blocks` finds that structure in a poetsim training graph or
refuses the graph with one line saying why.

How the blocks are found:
- The forward nodes are the data inputs (`op: input`, kept in RAM throughout), the layers, and
  last the loss (the *turn*), which must read only the last layer and the inputs.
- The layers are cut where no forward edge jumps over a node (`forward_cut_points`): each cut
  node ends a block and is the next block's input. A skip connection over more than a quarter of
  the layers (`LONG_SKIP_SHARE`: a U-Net's or an FCN's) makes the graph no chain.
- The backward nodes, in stage order, are dealt to the blocks in reverse: each goes to the latest
  block whose nodes and input cover the forward tensors it reads. A backward node that reads
  tensors of two blocks that are not neighbours in this sense makes the graph no chain.
- Gradients may pass only from one block's group to the next one's (or from the loss to the
  last block); a gradient that skips a block makes the graph no chain.
- A block whose group is empty (no backward node reads its tensors) is merged into the previous.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property

from poetsim.errors import NotApplicableError
from poetsim.graphs.graph import TrainingGraph
from poetsim.optimiser.baselines.simple import forward_cut_points
from poetsim.schedule.costs import INPUT_OP


@dataclass(frozen=True)
class Block:
    """One stage of the chain: its forward nodes, its group of backward nodes, what they read.

    `saved` are the block's own outputs that its backward group reads (POFO's x-bar less the
    input); `reads_input` says whether the group also reads the block's input (the previous
    block's output); `gradients_in` are the backward outputs (or the loss) of the next group that
    this group reads, which are resident when it starts.
    """

    nodes: tuple[int, ...]
    grads: tuple[int, ...]
    saved: frozenset[int]
    reads_input: bool
    gradients_in: frozenset[int]

    @property
    def output(self) -> int:
        """The block's last node: the next block's input."""
        return self.nodes[-1]

    @property
    def keeps_output(self) -> bool:
        """Whether the block's own group reads its output (a ReLU's gradient reads its result)."""
        return self.output in self.saved


@dataclass(frozen=True)
class Chain:
    """A training graph as a chain of blocks, ready for POFO's dynamic program.

    Step s of POFO's first forward pass starts at block s; its *input* is what it receives from
    step s-1: block s-1's output, and with `bar` (POFO's x-bar, when block s-1 kept all its
    backward reads) block s-1's kept tensors too.
    """

    graph_name: str
    blocks: tuple[Block, ...]
    inputs: tuple[int, ...]
    turn: int
    deps: tuple[frozenset[int], ...]

    def input_of(self, k: int) -> int | None:
        """The node block k reads from the previous block (None for the first block)."""
        return self.blocks[k - 1].output if k > 0 else None

    def keeps(self, k: int) -> bool:
        """Whether block k's group reads block k's output (false for k < 0, no block)."""
        return k >= 0 and self.blocks[k].keeps_output

    def gradients_out(self, k: int) -> frozenset[int]:
        """Gradients made in block k's group that the previous block's group reads."""
        return self.blocks[k - 1].gradients_in if k > 0 else frozenset()

    @cached_property
    def turn_is_gradient(self) -> bool:
        """Whether the last block's group reads the loss's output (a loss without its own gradient node)."""
        return self.turn in self.blocks[-1].gradients_in

    def needed(self, targets: Iterable[int], blocks: Iterable[int]) -> list[int]:
        """Nodes of `blocks` to compute, ascending, so that `targets` exist again.

        The walk follows dependencies only within those blocks: an input from outside them (the
        checkpoint they start from, a data input) is taken as resident, and a target outside
        them is not computed.
        """
        members = {v for b in blocks for v in self.blocks[b].nodes}
        todo = list(targets)
        found: set[int] = set()
        while todo:
            v = todo.pop()
            if v not in found and v in members:
                found.add(v)
                todo.extend(self.deps[v])
        return sorted(found)

    def bundle(self, s: int, bar: bool) -> frozenset[int]:
        """Step s's input as it arrives (empty for the first step, whose input is the data)."""
        if s == 0:
            return frozenset()
        prev = self.blocks[s - 1]
        return frozenset({prev.output}) | (prev.saved if bar else frozenset())

    def retained(self, s: int, bar: bool, checkpoint: bool) -> frozenset[int]:
        """The part of step s's input still needed after its forward pass (empty for the first step).

        That is what block s-1's group reads (with `bar`), and block s-1's output if it is a
        checkpoint, if block s's group reads it, or if block s-1's own group does.
        """
        if s == 0:
            return frozenset()
        prev = self.blocks[s - 1]
        wanted = checkpoint or (s < len(self.blocks) and self.blocks[s].reads_input) or prev.keeps_output
        return (prev.saved if bar else frozenset()) | (frozenset({prev.output}) if wanted else frozenset())

    def page_out_stages(self, s: int, moving: frozenset[int], last_block: int) -> dict[int, set[int]]:
        """Where step s pages its input out: stage -> the tensors of `moving` paged out in it.

        Block s-1's output goes out in the stage that last reads it in the forward pass up to
        `last_block` (it is read there, so it cannot leave earlier); the rest go out in the step's
        first stage, since they are all resident at its start.
        """
        first = self.blocks[s].nodes[0]
        x = self.input_of(s)
        readers = [u for b in range(s, last_block + 1) for u in self.blocks[b].nodes if x in self.deps[u]]
        stages: dict[int, set[int]] = {}
        for v in moving:
            stages.setdefault(max([first, *readers]) if v == x else first, set()).add(v)
        return stages


def chain_of_blocks(graph: TrainingGraph) -> Chain:
    """The chain of blocks of `graph`; NotApplicableError (a UserInputError) naming the obstacle if it is no chain."""

    def refuse(reason: str) -> NotApplicableError:
        return NotApplicableError(
            f"pofo: graph '{graph.name}' is not a chain of blocks ({reason}); POFO's dynamic program applies only to chains"
        )

    nodes = graph.nodes
    forward = [n.id for n in nodes if not n.backward]
    backward = [n.id for n in nodes if n.backward]
    if not forward or not backward:
        raise refuse("it needs forward and backward nodes")
    if max(forward) > min(backward):
        raise refuse("forward and backward nodes are interleaved")
    inputs = tuple(i for i in forward if nodes[i].op == INPUT_OP)
    turn = forward[-1]
    layers = [i for i in forward if i not in inputs and i != turn]
    if turn in inputs or not layers:
        raise refuse("it has no layer between the data input and the loss")
    if inputs and max(inputs) > layers[0]:
        raise refuse(f"data input node {max(inputs)} comes after layer {layers[0]}")
    stray = set(nodes[turn].deps) - {layers[-1], *inputs}
    if stray:
        raise refuse(f"the loss ({nodes[turn].name}) reads node {min(stray)}, not only the last layer")

    _refuse_long_skips(graph, layers, refuse)
    cuts = forward_cut_points(graph, layers)
    blocks_nodes: list[tuple[int, ...]] = []
    start = 0
    for p in cuts:
        blocks_nodes.append(tuple(layers[start : p + 1]))
        start = p + 1
    groups = _deal_backward(graph, blocks_nodes, backward, turn, refuse)
    blocks_nodes, groups = _merge_empty(blocks_nodes, groups)
    return Chain(
        graph.name, _describe(graph, blocks_nodes, groups, turn, refuse), inputs, turn, tuple(frozenset(n.deps) for n in nodes)
    )


#: A forward edge that jumps over more than this share of the layers makes the graph no chain: the
#: block it spans would hold most of the network (a U-Net's or an FCN's encoder-decoder skips).
LONG_SKIP_SHARE = 0.25


def _refuse_long_skips(graph: TrainingGraph, layers: list[int], refuse: Callable[[str], NotApplicableError]) -> None:
    """Refuse a graph with a skip connection across more than LONG_SKIP_SHARE of its layers."""
    position = {v: p for p, v in enumerate(layers)}
    for v in layers:
        for d in graph.nodes[v].deps:
            if d in position and position[v] - position[d] - 1 > LONG_SKIP_SHARE * len(layers):
                raise refuse(
                    f"the skip connection from node {d} ({graph.nodes[d].name}) to node {v} "
                    f"({graph.nodes[v].name}) jumps over {position[v] - position[d] - 1} of its {len(layers)} layers"
                )


def _deal_backward(
    graph: TrainingGraph,
    blocks_nodes: list[tuple[int, ...]],
    backward: list[int],
    turn: int,
    refuse: Callable[[str], NotApplicableError],
) -> list[list[int]]:
    """Each backward node to the latest block whose nodes and input cover what it reads.

    A node that reads no layer (an addition's gradient, which only passes gradients on) goes with
    the next node that does, so that the gradients it passes stay within neighbouring groups.
    """
    block_of = {v: k for k, members in enumerate(blocks_nodes) for v in members}
    covers = [set(members) | ({blocks_nodes[k - 1][-1]} if k else set()) for k, members in enumerate(blocks_nodes)]
    last = len(blocks_nodes) - 1
    group_of: dict[int, int] = {}
    waiting: list[int] = []
    current = last
    for g in backward:
        reads = {d for d in graph.nodes[g].deps if d in block_of}
        if not reads and turn not in graph.nodes[g].deps:
            waiting.append(g)
            continue
        k = current
        while k >= 0 and not reads <= covers[k]:
            k -= 1
        if k < 0:
            names = ", ".join(graph.nodes[d].name for d in sorted(reads))
            raise refuse(f"backward node {g} ({graph.nodes[g].name}) reads {names}, which no single block and its input hold")
        if turn in graph.nodes[g].deps and k != last:
            raise refuse(f"backward node {g} ({graph.nodes[g].name}) reads the loss but belongs to an earlier block")
        for w in [*waiting, g]:
            group_of[w] = k
        waiting, current = [], k
    for w in waiting:
        group_of[w] = current
    groups: list[list[int]] = [[] for _ in blocks_nodes]
    for g in backward:
        groups[group_of[g]].append(g)
    return groups


def _merge_empty(blocks_nodes: list[tuple[int, ...]], groups: list[list[int]]) -> tuple[list[tuple[int, ...]], list[list[int]]]:
    """Merge each block whose group is empty into the previous block (the first one into the next).

    A residual block's final ReLU is a cut of its own, and its gradient reads the ReLU's output,
    the next block's input, so it goes to the next group; merging the ReLU back into its block
    gives the residual block as one stage, ending at its ReLU.
    """
    blocks_nodes, groups = list(blocks_nodes), list(groups)
    k = 0
    while len(blocks_nodes) > 1 and k < len(blocks_nodes):
        if groups[k]:
            k += 1
            continue
        other = k - 1 if k > 0 else k + 1
        low, high = min(k, other), max(k, other)
        blocks_nodes[low : high + 1] = [blocks_nodes[low] + blocks_nodes[high]]
        groups[low : high + 1] = [sorted(groups[low] + groups[high])]
        k = low
    return blocks_nodes, groups


def _describe(
    graph: TrainingGraph,
    blocks_nodes: list[tuple[int, ...]],
    groups: list[list[int]],
    turn: int,
    refuse: Callable[[str], NotApplicableError],
) -> tuple[Block, ...]:
    """The Block records, after checking that gradients pass only between neighbouring groups."""
    group_of = {g: k for k, members in enumerate(groups) for g in members}
    last = len(blocks_nodes) - 1
    blocks = []
    for k, (members, grads) in enumerate(zip(blocks_nodes, groups)):
        read = {d for g in grads for d in graph.nodes[g].deps}
        incoming = frozenset(d for d in read if (d in group_of and group_of[d] != k) or d == turn)
        for d in incoming:
            if not (d == turn and k == last) and group_of.get(d) != k + 1:
                raise refuse(
                    f"the gradient of node {d} ({graph.nodes[d].name}) skips a block "
                    f"on its way to node {min(g for g in grads if d in graph.nodes[g].deps)}"
                )
        saved = frozenset(read & set(members))
        reads_input = k > 0 and blocks_nodes[k - 1][-1] in read
        blocks.append(Block(tuple(members), tuple(grads), saved, reads_input, incoming))
    return tuple(blocks)
