"""Executing schedules for real: gradients bitwise equal, peaks as predicted, real page files, errors."""

import os

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from poetsim.errors import ScheduleError, UserInputError  # noqa: E402
from poetsim.inputs.profiles import load_platform  # noqa: E402
from poetsim.optimiser import checkpoint_sqrt, keep_all, optimise  # noqa: E402
from poetsim.pytorch import models, swap  # noqa: E402
from poetsim.pytorch.capturing import capture  # noqa: E402
from poetsim.pytorch.executor import default_threads, execute  # noqa: E402
from poetsim.schedule.checker import check_schedule  # noqa: E402
from poetsim.schedule.costs import node_costs  # noqa: E402
from poetsim.schedule.model import Budgets, Free, Moves, PageIn, PageOut, Schedule, Timing  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return capture(models.tiny_cnn(), (torch.randn(2, 3, 8, 8),), name="tiny")


@pytest.fixture(scope="module")
def costs(tiny):
    return node_costs(tiny.graph, load_platform("rpi4"))


@pytest.mark.parametrize("timing", list(Timing))
@pytest.mark.parametrize("baseline", [keep_all, checkpoint_sqrt])
def test_baselines_give_bitwise_gradients_and_the_predicted_peak(tiny, costs, tmp_path, timing, baseline):
    """Keep-all and checkpoint-sqrt (which recomputes) match loss.backward() bit for bit and the checker's peak."""
    schedule, _ = baseline(tiny.graph, costs, timing)
    predicted = check_schedule(schedule, tiny.graph, costs, timing)
    result = execute(tiny, schedule, tmp_path)
    assert result.gradients_equal and result.buffers_equal, result.differing_gradients
    assert result.peak_activation_bytes == predicted.peak_ram_bytes
    assert result.mismatched_nodes == ()
    assert sum(r.kind == "recompute" for r in result.records) == predicted.recomputations


def test_by_default_a_step_leaves_one_core_to_the_io_thread(tiny, costs, tmp_path):
    """By default a step leaves one core to the I/O thread.

    The I/O thread is the DMA channel the overlap model runs beside the computes: it gets a core
    of its own (where there are two), and the step runs on the rest; torch's setting is back
    after.
    """
    cores = len(os.sched_getaffinity(0))
    before = torch.get_num_threads()
    result = execute(tiny, keep_all(tiny.graph, costs, Timing.OVERLAP)[0], tmp_path, check_gradients=False)
    assert result.threads == default_threads() == max(1, min(before, cores - 1))
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("timing", list(Timing))
def test_a_solved_paging_schedule_moves_the_predicted_bytes_through_real_files(tiny, costs, tmp_path, timing):
    """The optimiser's paging-only schedule at 60 %: bytes written and read as the schedule says, files gone after."""
    graph = tiny.graph
    budgets = Budgets(int(0.6 * graph.keep_all_peak_bytes), 10 * costs.plain_runtime_s)
    outcome = optimise(graph, costs, budgets, Moves(recompute=False, page=True), timing, time_limit_s=10, threads=1)
    schedule = outcome.schedule
    assert schedule is not None
    predicted = check_schedule(schedule, graph, costs, timing, budgets)
    result = execute(tiny, schedule, tmp_path, budget_bytes=budgets.ram_bytes)
    assert predicted.page_outs > 0
    assert result.gradients_equal
    assert result.peak_activation_bytes == predicted.peak_ram_bytes <= budgets.ram_bytes
    written = sum(graph.nodes[i.node].output_bytes for _, i in schedule.instructions() if isinstance(i, PageOut))
    read = sum(graph.nodes[i.node].output_bytes for _, i in schedule.instructions() if isinstance(i, PageIn))
    assert (result.bytes_written, result.bytes_read) == (written, read)
    assert sum(r.kind == "page_out" for r in result.records) == predicted.page_outs
    assert not list(tmp_path.glob("*.bin"))


def _keep_all_with_paging(graph, costs, node: int) -> Schedule:
    """Keep-all, but `node` is paged out after its last forward reader and in before its backward reader."""
    schedule, _ = keep_all(graph, costs, Timing.OVERLAP)
    stages = [list(stage) for stage in schedule.stages]
    last_forward = max(r for r in graph.consumers[node] if not graph.nodes[r].backward)
    first_backward = min(r for r in graph.consumers[node] if graph.nodes[r].backward)
    assert first_backward - 1 > last_forward + 1
    stages[last_forward + 1].insert(0, PageOut(node))
    stages[last_forward + 1].append(Free(node))
    stages[first_backward - 1].insert(0, PageIn(node))
    return Schedule(schedule.graph_name, schedule.num_nodes, Timing.OVERLAP, tuple(tuple(s) for s in stages))


def test_page_in_restores_the_exact_bytes(tiny, costs, tmp_path):
    """A paged node comes back bitwise: the gradients still equal loss.backward()'s."""
    graph = tiny.graph
    node = next(n.id for n in graph.nodes if n.name == "3.conv1")
    schedule = _keep_all_with_paging(graph, costs, node)
    check_schedule(schedule, graph, costs, Timing.OVERLAP)
    result = execute(tiny, schedule, tmp_path)
    assert result.gradients_equal
    assert result.bytes_written == result.bytes_read == graph.nodes[node].output_bytes


def test_a_missing_input_stops_naming_the_instruction(tiny, costs, tmp_path):
    """Freeing a node its reader still needs: one ScheduleError naming stage, instruction and both nodes."""
    graph = tiny.graph
    schedule, _ = keep_all(graph, costs, Timing.OVERLAP)
    stages = [list(stage) for stage in schedule.stages]
    stages[1].append(Free(0))  # the input, which the loss reads much later
    broken = Schedule(schedule.graph_name, schedule.num_nodes, Timing.OVERLAP, tuple(tuple(s) for s in stages))
    loss = next(n.id for n in graph.nodes if n.name == "loss")
    with pytest.raises(ScheduleError, match=rf"stage {loss}, Compute\({loss}\) 'loss': input 0 'input' is not in RAM"):
        execute(tiny, broken, tmp_path)


def test_over_budget_stops_naming_the_instruction(tiny, costs, tmp_path):
    schedule, _ = keep_all(tiny.graph, costs, Timing.OVERLAP)
    with pytest.raises(ScheduleError, match=r"stage \d+, Compute\(\d+\) '.*': the executor holds .* over the budget of 1,000"):
        execute(tiny, schedule, tmp_path, budget_bytes=1000)


def test_a_schedule_for_another_graph_is_refused(tiny, costs, tmp_path):
    schedule, _ = keep_all(tiny.graph, costs, Timing.OVERLAP)
    renamed = Schedule(
        schedule.graph_name,
        schedule.num_nodes,
        schedule.timing,
        schedule.stages,
        node_names=("input", "conv", *(n.name for n in tiny.graph.nodes[2:])),
    )
    with pytest.raises(ScheduleError, match="names node 1 'conv'"):
        execute(tiny, renamed, tmp_path)


def test_swap_round_trips_views_sharing_a_storage(tmp_path):
    """Two views of one storage are written once and rebuilt as views of one buffer."""
    base = torch.arange(12, dtype=torch.float32)
    values = {"a": base.view(3, 4), "b": base.view(3, 4).t()}
    storages, layouts = swap.layout(values)
    assert len(storages) == 1
    written = swap.write_storages(tmp_path / "n.bin", storages, durable=True)
    node = swap.SwappedNode(tmp_path / "n.bin", tuple(s.nbytes() for s in storages), layouts)
    buffers = swap.allocate(node)
    assert swap.read_into(node.path, buffers) == written == 48
    back = swap.rebuild(node, buffers)
    assert torch.equal(back["a"], values["a"]) and torch.equal(back["b"], values["b"])
    assert back["a"].untyped_storage().data_ptr() == back["b"].untyped_storage().data_ptr()


class _Unpooled(nn.Module):
    """Max pooling and max-unpooling (SegNet's decoder): unpooling has no deterministic kernel."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.pool = nn.MaxPool2d(2, return_indices=True)
        self.unpool = nn.MaxUnpool2d(2)
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        """The logits of a batch of images."""
        pooled, indices = self.pool(self.conv(x))
        return self.fc(self.unpool(pooled, indices).mean((2, 3)))


def test_an_op_without_a_deterministic_kernel_stops_the_run_in_one_line(tmp_path):
    """The step cannot be compared bit for bit: one line names the op, and torch's setting is restored."""
    torch.manual_seed(0)
    captured = capture(_Unpooled(), (torch.randn(2, 3, 8, 8),), name="unpooled")
    schedule, _ = keep_all(captured.graph, node_costs(captured.graph, load_platform("rpi4")), Timing.OVERLAP)
    with pytest.raises(UserInputError, match="max_unpooling2d_forward_out, which has no deterministic kernel") as caught:
        execute(captured, schedule, tmp_path)
    assert "\n" not in str(caught.value)
    assert not torch.are_deterministic_algorithms_enabled()


class Normalised(nn.Module):
    """Weights re-made in a forward pre-hook: legacy `weight_norm` and `spectral_norm` (power iteration)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.utils.weight_norm(nn.Conv2d(3, 8, 3, padding=1))
        self.mid = nn.utils.spectral_norm(nn.Conv2d(8, 8, 3, padding=1))
        self.fc = nn.utils.spectral_norm(nn.Linear(8, 5))

    def forward(self, x):
        """The logits of a batch of images."""
        h = torch.relu(self.mid(torch.relu(self.conv(x))))
        return self.fc(h.mean((2, 3)))


@pytest.mark.filterwarnings("ignore:`torch.nn.utils.weight_norm` is deprecated")
def test_weights_a_hook_makes_are_traced_and_the_step_runs_bitwise(tmp_path):
    """Hooks of `torch.nn.utils.weight_norm` and `spectral_norm` keep a computed `weight` on the module.

    The trace must not leave its traced tensors there, and the reference copy must take the
    computed ones: the step then runs recomputed and paged with the plain step's gradients, and
    spectral norm's power-iteration vectors (buffers updated in the forward) have its bits too.
    """
    from pytorch_cases import run_recomputed_and_paged

    torch.manual_seed(0)
    module = Normalised()
    before = module.conv.weight
    captured = capture(module, (torch.randn(2, 3, 8, 8),), name="normalised")
    assert module.conv.weight is before and type(module.mid.weight) is torch.Tensor
    result, predicted = run_recomputed_and_paged(captured, tmp_path, ("conv", "mid"))
    assert result.gradients_equal and result.buffers_equal, result.differing_gradients
    assert result.peak_activation_bytes == predicted.peak_ram_bytes


def test_swap_round_trips_conjugate_and_negative_views(tmp_path):
    """A lazily conjugated or negated view is rebuilt with its bit: the values read back are the values written."""
    base = torch.randn(6, dtype=torch.complex64)
    values = {"conj": base.conj(), "neg": torch._neg_view(base), "plain": base}
    storages, layouts = swap.layout(values)
    swap.write_storages(tmp_path / "n.bin", storages, durable=False)
    node = swap.SwappedNode(tmp_path / "n.bin", tuple(s.nbytes() for s in storages), layouts)
    buffers = swap.allocate(node)
    swap.read_into(node.path, buffers)
    back = swap.rebuild(node, buffers)
    for key, value in values.items():
        assert torch.equal(back[key].resolve_conj().resolve_neg(), value.resolve_conj().resolve_neg()), key
        assert (back[key].is_conj(), back[key].is_neg()) == (value.is_conj(), value.is_neg()), key


class _Spectral(nn.Module):
    """A Fourier layer (FNO): complex weights on the lowest modes; its backward keeps a conjugated view."""

    def __init__(self, channels: int = 4, modes: int = 5):
        super().__init__()
        self.lift = nn.Linear(1, channels)
        self.weights = nn.Parameter(torch.randn(channels, channels, modes, dtype=torch.cfloat) / channels)
        self.modes = modes
        self.fc = nn.Linear(channels, 3)

    def forward(self, x):
        """The logits of a batch of sequences (batch, points, 1)."""
        h = self.lift(x).transpose(1, 2)
        spectrum = torch.fft.rfft(h)
        mixed = torch.einsum("bix,iox->box", spectrum[:, :, : self.modes], self.weights)
        out = torch.zeros_like(spectrum)
        out[:, :, : self.modes] = mixed
        h = nn.functional.gelu(torch.fft.irfft(out, n=h.size(-1)) + h)
        return self.fc(h.mean(2))


def test_a_paged_conjugated_view_gives_the_plain_steps_gradients(tmp_path):
    """The Fourier layer's node, paged across the step, comes back with its conjugate bit: bitwise gradients."""
    torch.manual_seed(0)
    captured = capture(_Spectral(), (torch.randn(2, 16, 1),), name="spectral")
    graph = captured.graph
    costs = node_costs(graph, load_platform("rpi4"))
    spectral = next(n.id for n in graph.nodes if n.op == "fft_r2c")  # the spectrum, kept conjugated for the backward
    schedule = _keep_all_with_paging(graph, costs, spectral)
    result = execute(captured, schedule, tmp_path)
    assert result.gradients_equal, result.differing_gradients
    assert result.bytes_written == graph.nodes[spectral].output_bytes > 0


class _SparseBag(nn.Module):
    """Sparse embedding gradients (`sparse=True`), as recommenders train their tables."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(40, 8, sparse=True)
        self.bag = nn.EmbeddingBag(40, 8, mode="sum", sparse=True)
        self.fc = nn.Linear(8, 3)

    def forward(self, ids):
        """The logits of a batch of id lists."""
        return self.fc(torch.relu(self.emb(ids).mean(1) + self.bag(ids)))


def test_sparse_gradients_are_compared_as_stored(tmp_path):
    """A sparse gradient equals the plain step's in indices and values; one value off is told apart."""
    from poetsim.pytorch.reference import same_bits

    torch.manual_seed(0)
    captured = capture(_SparseBag(), (torch.randint(0, 40, (4, 3)),), name="sparse")
    costs = node_costs(captured.graph, load_platform("rpi4"))
    schedule, _ = checkpoint_sqrt(captured.graph, costs, Timing.OVERLAP)
    result = execute(captured, schedule, tmp_path)
    assert result.gradients_equal, result.differing_gradients
    grad = torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.tensor([1.0, -0.0]), (4,), check_invariants=True)
    assert same_bits(grad, grad.clone())
    assert not same_bits(
        grad, torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.tensor([1.0, 0.0]), (4,), check_invariants=True)
    )
    assert not same_bits(grad, grad.to_dense())


class _Probed(nn.Module):
    """Features kept by forward hooks, in a dict and a list, as feature extractors and probes keep them."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, 5)
        self.features: dict = {}
        self.history: list = []
        self.conv.register_forward_hook(lambda module, inputs, output: self.features.__setitem__("conv", output.detach()))
        self.fc.register_forward_hook(lambda module, inputs, output: self.history.append(output.detach()))

    def forward(self, x):
        """The logits of a batch of images."""
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


def test_tensors_hooks_keep_in_containers_do_not_outlive_the_trace(tmp_path):
    """The trace leaves the module's dict and list as they were; the step then runs bitwise."""
    torch.manual_seed(0)
    module = _Probed()
    captured = capture(module, (torch.randn(2, 3, 8, 8),), name="probed")
    assert module.features == {} and module.history == []
    costs = node_costs(captured.graph, load_platform("rpi4"))
    schedule, _ = checkpoint_sqrt(captured.graph, costs, Timing.OVERLAP)
    result = execute(captured, schedule, tmp_path)
    assert result.gradients_equal, result.differing_gradients


def test_instance_norm_running_statistics_update_bitwise_recomputed_and_paged(tmp_path):
    """InstanceNorm with running statistics: BatchNorm over the stacked instances, then the average of a view.

    The view of the new statistics that the update averages is held with the parameters as they
    are; the step runs recomputed and paged with the plain step's gradients and running statistics.
    """
    from pytorch_cases import run_recomputed_and_paged

    torch.manual_seed(0)
    net = nn.Sequential(
        nn.InstanceNorm2d(3, track_running_stats=True),  # on the data: the update is a node of its own
        nn.Conv2d(3, 8, 3, padding=1),
        nn.InstanceNorm2d(8, affine=True, track_running_stats=True),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(8 * 36, 5),
    )
    captured = capture(net, (torch.randn(2, 3, 6, 6),), name="instance")
    result, predicted = run_recomputed_and_paged(captured, tmp_path, ("0", "2"))
    assert result.gradients_equal and result.buffers_equal, result.differing_gradients
    assert result.peak_activation_bytes == predicted.peak_ram_bytes


class _Cached(nn.Module):
    """Python state in the forward: a tensor cached on first use, a call counter, a buffer shared by two modules."""

    def __init__(self, counting: bool = False):
        super().__init__()
        position = torch.arange(4.0)
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
        self.a.register_buffer("position", position)
        self.b.register_buffer("position", position)  # one tensor, two names
        self.scale = None
        self.counting = counting
        self.calls = 0

    def forward(self, x):
        """Logits; the scale is made once and kept, as rotary embeddings keep their cos and sin."""
        if self.scale is None:
            self.scale = torch.linspace(0.5, 1.5, 4)
        if self.counting:
            self.calls += 1
        h = self.a(x + self.a.position) * self.scale
        return self.b(torch.relu(h) + self.b.position)


def test_a_tensor_cached_in_the_forward_and_a_shared_buffer_run_bitwise_and_python_state_is_refused(tmp_path):
    """A cache made in the forward is the captured step's to compute: the module keeps None; a counter is refused."""
    torch.manual_seed(0)
    module = _Cached()
    captured = capture(module, (torch.randn(8, 4),), name="cached")
    assert module.scale is None and module.calls == 0
    costs = node_costs(captured.graph, load_platform("rpi4"))
    schedule, _ = checkpoint_sqrt(captured.graph, costs, Timing.OVERLAP)
    result = execute(captured, schedule, tmp_path)
    assert result.gradients_equal and result.buffers_equal, result.differing_gradients
    counting = _Cached(counting=True)
    refusal = r"the model changes its attribute 'calls' in its forward \(0 before the capture, 1 after\)"
    with pytest.raises(UserInputError, match=refusal):
        capture(counting, (torch.randn(8, 4),), name="counting")
    assert counting.calls == 0


class _TransposedNorm(nn.Module):
    """A linear layer over time steps, then BatchNorm1d over its channels: the transposed layout sequence models use."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.norm = nn.BatchNorm1d(4)

    def forward(self, x):
        """The logits of a batch of sequences (batch, steps, 4)."""
        return self.norm(self.linear(x).transpose(1, 2)).sum(2)


def test_a_view_planned_on_a_fake_tensors_strides_runs_on_the_real_ones(tmp_path):
    """BatchNorm's real input gradient is laid out otherwise than its fake one: the view after it still runs, bitwise."""
    from pytorch_cases import run_recomputed_and_paged

    torch.manual_seed(0)
    captured = capture(_TransposedNorm(), (torch.randn(8, 6, 4),), name="transposed")
    result, predicted = run_recomputed_and_paged(captured, tmp_path, ("linear",))
    assert result.gradients_equal and result.buffers_equal, result.differing_gradients
    assert result.peak_activation_bytes == predicted.peak_ram_bytes


class _Constants(nn.Module):
    """Tensors made in the forward from nothing: attention scaled by `torch.sqrt(torch.tensor(d))`, rows picked by a list."""

    def __init__(self):
        super().__init__()
        self.q, self.k, self.fc = nn.Linear(6, 6), nn.Linear(6, 6), nn.Linear(6, 3)

    def forward(self, x):
        """Logits of two picked rows of each sequence."""
        scores = self.q(x) @ self.k(x).transpose(1, 2) / torch.sqrt(torch.tensor(6.0))
        mixed = scores.softmax(-1) @ x
        return self.fc(mixed[:, [1, 3]]).mean(1)


def test_tensors_made_from_nothing_in_the_forward_are_static_and_run_bitwise_recomputed_and_paged(tmp_path):
    """The trace keeps such tensors on the graph module: they are constants of the step, beside the parameters."""
    from pytorch_cases import run_recomputed_and_paged

    torch.manual_seed(0)
    captured = capture(_Constants(), (torch.randn(2, 5, 6),), name="constants")
    assert len(captured.constants) == 2
    result, predicted = run_recomputed_and_paged(captured, tmp_path, ("q", "k"))
    assert result.gradients_equal and result.buffers_equal, result.differing_gradients
    assert result.peak_activation_bytes == predicted.peak_ram_bytes


class _SharedModules(nn.Module):
    """One module under two names (a decoder that is the encoder) and one block three times in a Sequential (ALBERT)."""

    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(6, 6)
        self.dec = self.enc
        block = nn.Sequential(nn.Linear(6, 6), nn.Tanh())
        self.body = nn.Sequential(*[block] * 3)
        self.out = nn.Linear(6, 3)

    def forward(self, x):
        """Logits through the shared layers."""
        return self.out(self.body(self.dec(torch.tanh(self.enc(x)))))


def test_a_module_registered_under_two_names_keeps_its_parameters_and_runs_bitwise_recomputed_and_paged(tmp_path):
    """The tracer swaps parameters by name: a module under two names gets its own tensors back, not the tracer's."""
    from pytorch_cases import run_recomputed_and_paged

    torch.manual_seed(0)
    net = _SharedModules()
    before = [id(p) for p in net.parameters()]
    captured = capture(net, (torch.randn(4, 6),), name="shared")
    assert [id(p) for p in net.parameters()] == before
    assert all(type(p) is nn.Parameter for p in net.parameters())
    result, predicted = run_recomputed_and_paged(captured, tmp_path, ("enc", "body.0.0"))
    assert result.gradients_equal and result.buffers_equal, result.differing_gradients
    assert result.peak_activation_bytes == predicted.peak_ram_bytes


def test_a_loss_that_reads_the_models_parameters_through_its_closure_is_compared_with_the_plain_step(tmp_path):
    """A weight penalty in a loss function: the plain reference runs the step itself, and leaves it as it was."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))

    def penalised(out, y):
        return nn.functional.cross_entropy(out, y) + 0.2 * sum((p * p).sum() for p in net.parameters())

    captured = capture(net, (torch.randn(4, 6),), loss=penalised, labels=torch.tensor([0, 1, 2, 0]), name="penalised")
    before = {name: b.clone() for name, b in net.named_buffers()}
    schedule, _ = keep_all(captured.graph, node_costs(captured.graph, load_platform("rpi4")), Timing.OVERLAP)
    result = execute(captured, schedule, tmp_path)
    assert result.gradients_equal and result.buffers_equal, result.differing_gradients
    assert all(p.grad is None for p in net.parameters())
    assert all(torch.equal(before[name], b) for name, b in net.named_buffers())


class _OutArgument(nn.Module):
    """A product written into a preallocated tensor (`out=`), which autograd refuses."""

    def __init__(self):
        super().__init__()
        self.a, self.w = nn.Linear(6, 4), nn.Parameter(torch.randn(4, 3))

    def forward(self, x):
        """Logits through the preallocated product."""
        out = torch.empty(x.shape[0], 3)
        return torch.matmul(self.a(x), self.w, out=out)


def test_a_model_plain_pytorch_cannot_train_is_refused_in_one_line_at_import():
    with pytest.raises(UserInputError, match=r"out: the model: autograd refuses an op .* cannot train this model either: matmul"):
        capture(_OutArgument(), (torch.randn(4, 6),), name="out")


class _NewTokensOnly(nn.Module):
    """An embedding whose old rows a gradient hook on the parameter freezes (training only newly added tokens)."""

    def __init__(self):
        super().__init__()
        self.emb, self.fc = nn.Embedding(12, 4), nn.Linear(4, 3)
        self.register_buffer("fresh", (torch.arange(12) >= 10).float().unsqueeze(1))
        self.emb.weight.register_hook(lambda grad: grad * self.fresh)

    def forward(self, ids):
        """Logits of the mean embedding."""
        return self.fc(self.emb(ids).mean(1))


def test_a_parameters_gradient_hook_applies_to_the_compared_gradient_and_to_the_plain_copy(tmp_path):
    """Autograd applies the hook before accumulating: the run's gradient is compared after it, and a plain copy keeps it."""
    from poetsim.pytorch.reference import copy_module

    torch.manual_seed(0)
    model = _NewTokensOnly()
    captured = capture(model, (torch.randint(0, 12, (4, 5)),), name="tokens")
    schedule, _ = keep_all(captured.graph, node_costs(captured.graph, load_platform("rpi4")), Timing.OVERLAP)
    result = execute(captured, schedule, tmp_path)
    assert result.gradients_equal, result.differing_gradients
    twin = copy_module(model)
    nn.functional.cross_entropy(twin(torch.randint(0, 12, (4, 5))), torch.tensor([0, 1, 2, 0])).backward()
    grad = dict(twin.named_parameters())["emb.weight"].grad
    assert grad is not None and not grad[:10].any()
