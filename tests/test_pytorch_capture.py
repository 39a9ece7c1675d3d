"""Importing PyTorch models: node granularity and names, FLOPs and bytes against the zoo, errors."""

import gc
import json
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from poetsim.cli import app  # noqa: E402
from poetsim.errors import UserInputError  # noqa: E402
from poetsim.graphs import zoo  # noqa: E402
from poetsim.graphs.io import read_graph_file, save_graph  # noqa: E402
from poetsim.pytorch import models  # noqa: E402
from poetsim.pytorch.capturing import capture, from_torch  # noqa: E402


@pytest.fixture(scope="module")
def mlp_graph():
    """The zoo's MLP written in torch, batch 4."""
    torch.manual_seed(0)
    return from_torch(models.mlp(), torch.randn(4, 1, 28, 28), name="mlp")


@pytest.fixture(scope="module")
def tiny():
    """A conv-BN-ReLU stem, one residual basic block, max and average pooling, a classifier."""
    torch.manual_seed(0)
    return capture(models.tiny_cnn(), (torch.randn(2, 3, 8, 8),), name="tiny")


def by_name(graph):
    return {node.name: node for node in graph.nodes}


def test_mlp_matches_the_zoo_mlp_in_flops_peak_and_parameters(mlp_graph):
    """Same network, same batch: FLOPs and parameters exact, keep-all peak within the labels' width."""
    reference = zoo.build_model("mlp", batch_size=4)
    assert mlp_graph.forward_flops == reference.forward_flops
    assert mlp_graph.param_bytes == reference.param_bytes
    assert mlp_graph.backward_flops == pytest.approx(reference.backward_flops, rel=0.01)
    # int64 labels (torch) against int32 (the zoo): 4 labels x 4 bytes more.
    assert mlp_graph.keep_all_peak_bytes - reference.keep_all_peak_bytes == 16


def test_nodes_are_layers_named_by_module_path_with_a_backward_each(mlp_graph):
    """Sequential children are named by index; each layer's backward is '<name>.grad', after the loss."""
    names = [node.name for node in mlp_graph.nodes]
    assert names[:8] == ["input", "1", "2", "3", "4", "5", "loss", "loss.grad"]
    assert names[8:] == ["5.grad", "4.grad", "3.grad", "2.grad", "1.grad"]
    nodes = by_name(mlp_graph)
    assert [nodes[n].op for n in ("input", "1", "2", "loss", "1.grad")] == ["input", "linear", "relu", "loss", "linear_grad"]
    assert all(node.backward == node.name.endswith(".grad") for node in mlp_graph.nodes)
    assert nodes["1"].param_bytes == (784 * 512 + 512) * 4 and nodes["1.grad"].param_bytes == 0


def test_backward_dependencies_follow_autograd(tiny):
    """ReLU's backward reads its output, a convolution's its input, BatchNorm's its input; add's nothing."""
    graph = tiny.graph
    nodes = by_name(graph)
    deps = {node.name: {graph.nodes[d].name for d in node.deps} for node in graph.nodes}
    assert deps["3.relu.grad"] == {"3.relu", "3.conv2.grad"}
    assert deps["3.conv2.grad"] == {"3.relu", "3.bn2.grad"}
    assert deps["3.bn1.grad"] == {"3.conv1", "3.relu.grad"}
    assert "3.add.grad" not in nodes  # the addition passes its gradient on: no op, no node
    # the block input (node 2, the stem's ReLU) fans out: its backward sums both paths
    assert deps["2.grad"] == {"2", "3.relu#2.grad", "3.conv1.grad"}


def test_a_module_called_twice_gives_two_nodes_and_container_ops_are_named_by_op(tiny):
    """A module called twice gives two nodes, and a container's own op is named by its op.

    torchvision's basic block calls one ReLU module twice; `out += identity` is the block's own op.
    """
    nodes = by_name(tiny.graph)
    assert {"3.relu", "3.relu#2", "3.add"} <= set(nodes)
    assert nodes["3.add"].op == "add"
    assert [tiny.graph.nodes[d].name for d in nodes["3.add"].deps] == ["2", "3.bn2"]


def test_output_bytes_are_real_storages_with_statistics_kept_apart(tiny):
    """BatchNorm keeps only its output (its statistics go with the parameters); max pooling keeps int64 indices."""
    nodes = by_name(tiny.graph)
    assert nodes["1"].output_bytes == 2 * 8 * 8 * 8 * 4
    assert nodes["4"].op == "maxpool" and nodes["4"].output_bytes == 2 * 8 * 4 * 4 * (4 + 8)
    assert nodes["input"].output_bytes == 2 * 3 * 8 * 8 * 4 + 2 * 8
    assert nodes["0.grad"].output_bytes == 0  # the first convolution passes no gradient to the data


def test_flops_count_convolutions_as_the_zoo_does(tiny):
    """Forward convolution = 2 x MACs; its backward twice that, once for the first layer (no input gradient)."""
    nodes = by_name(tiny.graph)
    stem = 2 * 2 * 8 * 8 * 8 * 3 * 9
    assert nodes["0"].flops == stem and nodes["0.grad"].flops == stem
    block = 2 * 2 * 8 * 8 * 8 * 8 * 9
    assert nodes["3.conv1"].flops == block and nodes["3.conv1.grad"].flops == 2 * block


@pytest.fixture(scope="module")
def zoo_pairs():
    """Outside models imported, each beside its zoo graph, small enough to capture in a second or two.

    They are torchvision's ResNet-18 and MobileNetV2 and the zoo's transformer.
    """
    torch.manual_seed(0)
    cases = {
        "resnet18": (models.resnet18(), torch.randn(2, 3, 32, 32), {"batch_size": 2, "input_size": 32}),
        "mobilenet_v2": (models.mobilenet_v2(), torch.randn(1, 3, 64, 64), {"input_size": 64}),
        "transformer": (models.transformer(), torch.randint(0, 8192, (1, 16)), {"seq_len": 16}),
    }
    return {
        name: (from_torch(module, x, name=name), zoo.build_model(name, **options)) for name, (module, x, options) in cases.items()
    }


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "transformer"])
def test_imported_keep_all_peak_and_flops_match_the_zoo(zoo_pairs, name):
    """Imported and zoo graphs agree on the keep-all peak and, within 2 %, on FLOPs.

    Both sides keep what PyTorch's autograd saves (max pooling's indices, ReLU6's input, fused
    attention's log-sum-exp): the keep-all peaks agree to 0.01 % (the rest is int64 labels and
    token ids against the zoo's int32); FLOPs within the 2 % target.
    """
    imported, reference = zoo_pairs[name]
    assert imported.keep_all_peak_bytes == pytest.approx(reference.keep_all_peak_bytes, rel=0.001)
    flops = imported.forward_flops + imported.backward_flops
    assert flops == pytest.approx(reference.forward_flops + reference.backward_flops, rel=0.02)


def test_relu6_keeps_a_copy_of_its_input_as_inplace_relu6_does_in_pytorch(zoo_pairs):
    """An in-place ReLU6 keeps a copy of its input, as autograd does for it in PyTorch.

    torchvision's ReLU6(inplace=True): autograd saves its input before overwriting it, so the
    ReLU6 node holds two tensors: that copy (its backward reads it) and its output.
    """
    graph = zoo_pairs["mobilenet_v2"][0]
    nodes = by_name(graph)
    relu6, bn = nodes["features.0.2"], nodes["features.0.1"]
    assert relu6.op == "relu6" and nodes["features.0.2.grad"].op == "relu6_grad"
    assert relu6.output_bytes == 2 * bn.output_bytes
    assert graph.nodes[relu6.id].id in nodes["features.0.2.grad"].deps


def test_attention_output_projection_is_a_node_whose_output_the_backward_does_not_keep(zoo_pairs):
    """The attention's output projection is a node whose output the backward does not keep.

    nn.MultiheadAttention's backward reads q, k, v and the attention kernel's output, not the
    output projection's result: that is a node of its own, freed once the next layer read it.
    """
    graph = zoo_pairs["transformer"][0]
    nodes = by_name(graph)
    attention, projection = nodes["encoder.layers.0.self_attn"], nodes["encoder.layers.0.self_attn.out_proj"]
    assert attention.op == "attention" and projection.op == "linear"
    assert projection.deps == (attention.id,) and projection.flops == 2 * 16 * 256 * 256
    assert all(not graph.nodes[c].backward for c in graph.consumers[projection.id])
    assert "encoder.layers.0.self_attn.out_proj.grad" not in nodes  # its backward ops stay in the layer's
    # The attention node keeps q, k and v (one storage), the kernel's output and its log-sum-exp.
    assert attention.output_bytes == (3 * 16 * 256 + 16 * 256 + 4 * 16) * 4


def test_depthwise_convolution_backward_is_twice_the_forward():
    """A depthwise convolution's backward costs twice its forward, whatever torch's FLOP counter says.

    torch's counter multiplies a depthwise weight gradient by the groups; poetsim does not.
    """
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 1), nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.Flatten(), nn.Linear(8 * 16, 4))
    nodes = by_name(from_torch(net, torch.randn(2, 3, 4, 4)))
    assert nodes["1"].op == "depthwise_conv"
    assert nodes["1.grad"].flops == 2 * nodes["1"].flops


def test_graph_file_round_trips_and_poetsim_graph_reads_it(tmp_path, mlp_graph):
    """The imported graph is an ordinary poetsim-graph file: saved, read back equal, summarised by the CLI."""
    path = tmp_path / "mlp.json"
    save_graph(mlp_graph, path)
    again = read_graph_file(path)
    assert again.nodes == mlp_graph.nodes
    result = CliRunner().invoke(app, ["graph", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["keep_all_peak_bytes"] == mlp_graph.keep_all_peak_bytes


def test_capture_leaves_the_module_untouched(tiny):
    """Tracing runs on fake tensors: BatchNorm's running statistics are not updated."""
    torch.manual_seed(0)
    module = models.tiny_cnn()
    before = {k: v.clone() for k, v in module.state_dict().items()}
    capture(module, (torch.randn(2, 3, 8, 8),))
    assert all(torch.equal(before[k], v) for k, v in module.state_dict().items())


class _Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = _Gate()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(self.gate(x))


class _Gate(nn.Module):
    def forward(self, x):
        return x * 2 if x.sum() > 0 else x


@pytest.mark.parametrize("labels", [None, torch.tensor([0, 1, 0])])
def test_data_dependent_control_flow_is_one_line_naming_the_module(labels):
    """Found when the output's shape is worked out (no labels given) or while tracing the step."""
    with pytest.raises(UserInputError, match=r"module 'gate'.*data-dependent") as error:
        from_torch(_Branchy(), torch.randn(3, 4), labels=labels)
    assert "\n" not in str(error.value)


def test_inputs_that_do_not_fit_name_the_module():
    with pytest.raises(UserInputError, match=r"module '1'.*do not fit"):  # '0' is the flatten
        from_torch(models.mlp(), torch.randn(2, 1, 20, 20))


def test_a_model_that_is_not_a_module_is_refused():
    with pytest.raises(UserInputError, match=r"torch\.nn\.Module"):
        from_torch(lambda x: x, torch.randn(2))  # type: ignore[arg-type]  # the wrong type is the point


class _TokenLogits(nn.Module):
    """A language model's shape of output: logits per token, (batch, tokens, vocabulary)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(32, 8)
        self.head = nn.Linear(8, 32)

    def forward(self, tokens):
        """The logits of every token."""
        return self.head(torch.tanh(self.embed(tokens)))


def test_per_token_logits_take_the_default_loss_over_their_last_dimension(tmp_path):
    """Labels per token, and cross-entropy over the rows of classes, as a language model is trained."""
    from poetsim.pytorch.executor import execute
    from poetsim.pytorch.host import keep_all_schedule

    torch.manual_seed(0)
    model, tokens = _TokenLogits(), torch.randint(0, 32, (4, 6))
    captured = capture(model, (tokens,), name="tokens")
    labels = captured.inputs[-1]
    assert labels.shape == (4, 6)
    result = execute(captured, keep_all_schedule(captured.graph), tmp_path)
    with torch.no_grad():
        expected = nn.functional.cross_entropy(model(tokens).reshape(-1, 32), labels.reshape(-1))
    assert result.gradients_equal and result.loss == pytest.approx(float(expected), rel=1e-6)


class _Wrapped(nn.Module):
    """A classifier whose output wraps its logits: a dict with 'logits', or a tuple that starts with them."""

    def __init__(self, kind: str):
        super().__init__()
        self.fc = nn.Linear(6, 3)
        self.kind = kind

    def forward(self, x):
        """The logits, wrapped with the features beside them."""
        out = self.fc(x)
        return {"logits": out, "features": x} if self.kind == "dict" else (out, x)


@pytest.mark.parametrize("kind", ["dict", "tuple"])
def test_the_default_loss_finds_the_logits_in_a_dict_or_a_tuple(tmp_path, kind):
    """The logits entry, or the first element, is what cross-entropy takes; gradients as plain PyTorch's."""
    from poetsim.pytorch.executor import execute
    from poetsim.pytorch.host import keep_all_schedule

    torch.manual_seed(0)
    captured = capture(_Wrapped(kind), (torch.randn(4, 6),), name=kind)
    assert captured.inputs[-1].shape == (4,)
    assert execute(captured, keep_all_schedule(captured.graph), tmp_path).gradients_equal


class _NoLogits(nn.Module):
    """A model whose output is a dict without logits."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        """Scores under another name."""
        return {"scores": self.fc(x)}


def test_an_output_without_logits_is_refused_in_one_line():
    """A dict without 'logits' is refused, naming what the default loss looks for."""
    with pytest.raises(UserInputError, match="needs logits with classes in their last dimension") as caught:
        capture(_NoLogits(), (torch.randn(4, 6),), name="scores")
    assert "\n" not in str(caught.value)
    with pytest.raises(UserInputError, match="needs logits with classes in their last dimension"):
        capture(_NoLogits(), (torch.randn(4, 6),), labels=torch.zeros(4, dtype=torch.int64), name="scores")


class _WritesInPlace(nn.Module):
    """A forward that writes its input, or a parameter, in place."""

    def __init__(self, what: str):
        super().__init__()
        self.fc = nn.Linear(6, 3)
        self.what = what

    def forward(self, x):
        """Logits after the write."""
        if self.what == "input":
            x.mul_(2)
        else:
            with torch.no_grad():
                self.fc.weight.clamp_(-0.1, 0.1)
        return self.fc(x)


@pytest.mark.parametrize(("what", "named"), [("input", "input 0"), ("parameter", "parameter 'fc.weight'")])
def test_a_forward_that_writes_its_input_or_a_parameter_in_place_is_refused_naming_it_and_the_remedy(what, named):
    with pytest.raises(UserInputError, match=rf"writes {named} in place \(aten\..*\);.* out of place") as caught:
        capture(_WritesInPlace(what), (torch.randn(4, 6),), name="writer")
    assert "\n" not in str(caught.value) and "AOT" not in str(caught.value)


class _Sampled(nn.Module):
    """A reparameterised Normal sample, its arguments checked by torch.distributions or not."""

    def __init__(self, validate: bool):
        super().__init__()
        self.fc = nn.Linear(6, 3)
        self.validate = validate

    def forward(self, x):
        """A sample around the layer's output."""
        return torch.distributions.Normal(self.fc(x), torch.ones(3), validate_args=self.validate).rsample()


def test_a_distributions_argument_check_is_refused_naming_validate_args_and_imports_without_it():
    with pytest.raises(UserInputError, match=r"data-dependent .*; here torch.distributions .* validate_args=False"):
        capture(_Sampled(validate=True), (torch.randn(4, 6),), name="sampled")
    assert len(capture(_Sampled(validate=False), (torch.randn(4, 6),), name="sampled").graph) > 0


class _Tempered(nn.Module):
    """Logits over a temperature kept as a plain tensor attribute, or registered as a buffer."""

    def __init__(self, registered: bool):
        super().__init__()
        self.fc = nn.Linear(6, 3)
        if registered:
            self.register_buffer("temperature", torch.tensor(2.0))
        else:
            self.temperature = torch.tensor(2.0)

    def forward(self, x):
        """Tempered logits."""
        return self.fc(x) / self.temperature


def test_a_tensor_that_is_neither_parameter_nor_buffer_is_refused_naming_it_and_register_buffer():
    x, labels = torch.randn(4, 6), torch.tensor([0, 1, 2, 0])
    with pytest.raises(UserInputError, match=r"model: the tensor attribute 'temperature' is neither .* register_buffer"):
        capture(_Tempered(registered=False), (x,), name="tempered")
    weights = torch.tensor([1.0, 2.0, 3.0])
    with pytest.raises(UserInputError, match=r"module 'loss': a tensor is neither .* nn.Module loss that holds it"):
        capture(nn.Linear(6, 3), (x,), loss=lambda out, y: nn.functional.cross_entropy(out, y, weight=weights), labels=labels)
    assert len(capture(_Tempered(registered=True), (x,), name="tempered").graph) > 0


def test_a_loss_that_is_not_one_scalar_is_refused_saying_what_to_return():
    x, labels = torch.randn(4, 6), torch.tensor([0, 1, 2, 0])

    def with_accuracy(out, y):
        return nn.functional.cross_entropy(out, y), (out.argmax(-1) == y).float().mean()

    def per_sample(out, y):
        return nn.functional.cross_entropy(out, y, reduction="none")

    with pytest.raises(UserInputError, match=r"the loss gives a tuple, not one scalar tensor: return the loss alone"):
        capture(nn.Linear(6, 3), (x,), loss=with_accuracy, labels=labels)
    with pytest.raises(UserInputError, match=r"the loss gives float32\[4\], not one value: reduce it"):
        capture(nn.Linear(6, 3), (x,), loss=per_sample, labels=labels)


def test_an_example_batch_a_kernel_refuses_is_one_line_naming_the_node_and_the_input_range():
    """Token ids past the embedding's size pass the trace (fake tensors hold no values) and fail the real step."""
    model = nn.Sequential(nn.Embedding(10, 4), nn.Flatten(), nn.Linear(12, 3))
    refused = r"one real step on the example batch failed at node '0': index out of range.*--input-high"
    with pytest.raises(UserInputError, match=refused):
        capture(model, (torch.tensor([[1, 2, 30], [4, 5, 6]]),), name="ids")


class _Refused(nn.Module):
    """Ordinary code a captured step cannot hold, one case per `case`."""

    def __init__(self, case: str):
        super().__init__()
        self.inner, self.fc, self.case = nn.Linear(6, 6), nn.Linear(6, 3), case

    def forward(self, x):
        """Logits, after the case's construct."""
        if self.case == "in-place after a saved output":
            for _ in range(2):
                x = nn.functional.dropout(torch.relu(self.inner(x)), 0.3, True, inplace=True)
            return self.fc(x)
        if self.case == "a functional loss's check":
            out = self.fc(x)
            return out - nn.functional.gaussian_nll_loss(out, torch.zeros_like(out), out.exp())
        lengths = torch.tensor([3, 2])
        return self.fc(nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True).data)


@pytest.mark.parametrize(
    ("case", "said"),
    [
        ("in-place after a saved output", r"an in-place op changes a tensor that the backward needs .* out of place$"),
        ("a functional loss's check", r"torch.nn.functional.gaussian_nll_loss checks its arguments' values: write"),
        ("packed sequences", r"pack_padded_sequence reads the lengths' values: run the recurrent layer on the padded"),
    ],
)
def test_constructs_a_step_cannot_hold_are_refused_naming_them(case, said):
    x = torch.randn(2, 3, 6) if case == "packed sequences" else torch.randn(2, 6)
    with pytest.raises(UserInputError, match=said) as caught:
        capture(_Refused(case), (x,))
    assert "Hint" not in str(caught.value) and "inputs do not fit" not in str(caught.value)


class _Hamiltonian(nn.Module):
    """The output is the gradient of a learned energy with respect to the input, taken in the forward."""

    def __init__(self):
        super().__init__()
        self.energy = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 1))

    def forward(self, x):
        """The symplectic gradient of the energy."""
        x = x.requires_grad_(True)
        q, p = torch.autograd.grad(self.energy(x).sum(), x, create_graph=True)[0].chunk(2, -1)
        return torch.cat([p, -q], -1)


def test_a_gradient_taken_in_the_forward_imports_and_runs_bitwise_recomputed_and_paged(tmp_path):
    """The default labels come from a pass with gradients on, as the forward needs; the input's own gradient is not trained."""
    from pytorch_cases import run_recomputed_and_paged

    torch.manual_seed(0)
    captured = capture(_Hamiltonian(), (torch.randn(4, 6),), name="hamiltonian")
    result, predicted = run_recomputed_and_paged(captured, tmp_path, ("energy.0",))
    assert result.gradients_equal, result.differing_gradients
    assert result.peak_activation_bytes == predicted.peak_ram_bytes


class _Resynthesised(nn.Module):
    """A spectrogram gain and back to a waveform: `istft` checks its window's values, which a plain fake pass cannot read."""

    def __init__(self):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(9, 1))
        self.fc = nn.Linear(64, 3)

    def forward(self, x):
        """Logits of the resynthesised signal."""
        window = torch.hann_window(16)
        spectrum = torch.stft(x, 16, 8, window=window, return_complex=True) * self.gain
        return self.fc(torch.istft(spectrum, 16, 8, window=window, length=64))


def test_default_labels_come_from_a_real_pass_where_a_fake_one_stops_at_a_value_check():
    torch.manual_seed(0)
    model = _Resynthesised()
    before = {name: value.clone() for name, value in model.state_dict().items()}
    signal = torch.randn(2, 64)
    state = torch.get_rng_state()
    captured = capture(model, (signal,), name="istft")
    assert captured.inputs[-1].shape == (2,) and captured.inputs[-1].dtype == torch.int64
    assert all(torch.equal(before[name], value) for name, value in model.state_dict().items())
    assert torch.equal(state, torch.get_rng_state())


class _HeldLoss(nn.Module):
    """A loss module that calls a loss it holds between ops of its own (a detection or uncertainty-weighted loss)."""

    def __init__(self):
        super().__init__()
        self.mse = nn.MSELoss()

    def forward(self, out, y):
        """Half the squared error of the sigmoid."""
        return self.mse(torch.sigmoid(out), y) * 0.5


def test_a_loss_module_holding_a_loss_is_the_loss_node_and_runs_bitwise(tmp_path):
    from pytorch_cases import run_recomputed_and_paged

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    captured = capture(net, (torch.randn(4, 6),), loss=_HeldLoss(), labels=torch.rand(4, 3), name="held")
    names = [node.name for node in captured.graph.nodes]
    assert names.count("loss") == 1 and not any(name.startswith("loss.mse") for name in names), names
    result, predicted = run_recomputed_and_paged(captured, tmp_path, ("0",))
    assert result.gradients_equal, result.differing_gradients
    assert result.peak_activation_bytes == predicted.peak_ram_bytes


def test_labels_that_are_not_one_tensor_and_a_number_taken_from_a_tensor_are_one_line_naming_the_way_out():
    x, y = torch.randn(4, 6), torch.tensor([0, 1, 2, 0])
    with pytest.raises(UserInputError, match=r"labels must be one tensor, got a tuple: pack several targets into one"):
        capture(nn.Linear(6, 3), (x,), loss=lambda out, t: out.sum(), labels=(y, y))  # type: ignore[arg-type]

    def normalised(out, t):
        return nn.functional.cross_entropy(out, t, reduction="sum") / max((t > 0).sum().item(), 1)

    with pytest.raises(UserInputError, match=r"a Python number taken from a tensor: .item\(\).*clamp\(min=1\)"):
        capture(nn.Linear(6, 3), (x,), loss=normalised, labels=y)


class Pieces(nn.Module):
    """Outputs cut into views: a gated convolution (`chunk`), a SwiGLU (`split`), q, k, v (`unbind`)."""

    def __init__(self):
        super().__init__()
        self.gate = nn.Conv2d(3, 8, 1)
        self.up = nn.Linear(6, 16)
        self.qkv = nn.Linear(8, 24)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        """The logits of a batch of images."""
        a, b = self.gate(x).chunk(2, dim=1)
        h = (a * torch.sigmoid(b)).mean(1)  # (B, H, W)
        u, v = torch.split(self.up(h), [8, 8], dim=-1)  # (B, H, 8) each
        q, k, w = self.qkv(nn.functional.silu(u) * v).unflatten(-1, (3, 8)).unbind(2)
        return self.fc((q * k + w).mean(1))


def test_pieces_of_one_output_count_its_storage_once_and_run_as_predicted(tmp_path):
    """`chunk`, `split` and `unbind` views of a layer's output are one storage: counted once, as executed.

    Each piece was counted as a storage of its own: the predicted peak then exceeded the measured one.
    """
    from pytorch_cases import run_recomputed_and_paged

    torch.manual_seed(0)
    captured = capture(Pieces(), (torch.randn(2, 3, 6, 6),), name="pieces")
    nodes = by_name(captured.graph)
    assert nodes["gate"].output_bytes == 2 * 8 * 6 * 6 * 4
    assert nodes["up"].output_bytes == 2 * 6 * 16 * 4
    assert nodes["qkv"].output_bytes == 2 * 6 * 24 * 4
    result, predicted = run_recomputed_and_paged(captured, tmp_path, ("gate", "up", "qkv"))
    assert result.gradients_equal, result.differing_gradients
    assert result.peak_activation_bytes == predicted.peak_ram_bytes


class Bags(nn.Module):
    """A recommender's embedding bags (mean and max keep a bag index) and an assignment into a strided slice."""

    def __init__(self):
        super().__init__()
        self.mean = nn.EmbeddingBag(50, 8, mode="mean")
        self.max = nn.EmbeddingBag(50, 8, mode="max")
        self.mix = nn.Linear(8, 9)
        self.fc = nn.Linear(9, 3)

    def forward(self, ids):
        """The logits of a batch of bags of ids."""
        h = self.mix(self.mean(ids) + self.max(ids))
        out = torch.zeros_like(h)
        out[:, :5] = h[:, :5] * 2
        return self.fc(out)


def test_output_bytes_are_what_the_real_kernels_hold(tmp_path):
    """Where a real kernel sizes a storage otherwise than its fake tensor, the graph has the real bytes.

    `EmbeddingBag` in mean and max modes keeps a bag index whose real storage is larger than the
    fake one; a copy into a strided slice is another such op. The executor then holds exactly
    the predicted bytes, node by node, keep-all and paged.
    """
    from poetsim.inputs.profiles import load_platform
    from poetsim.optimiser import keep_all
    from poetsim.pytorch.executor import execute
    from poetsim.schedule.checker import check_schedule
    from poetsim.schedule.costs import node_costs
    from poetsim.schedule.model import Timing

    torch.manual_seed(0)
    captured = capture(Bags(), (torch.randint(0, 50, (4, 3)),), name="bags")
    costs = node_costs(captured.graph, load_platform("rpi4"))
    schedule, _ = keep_all(captured.graph, costs, Timing.OVERLAP)
    predicted = check_schedule(schedule, captured.graph, costs, Timing.OVERLAP)
    result = execute(captured, schedule, tmp_path, budget_bytes=int(predicted.peak_ram_bytes))
    assert result.mismatched_nodes == () and result.gradients_equal
    assert result.peak_activation_bytes == predicted.peak_ram_bytes


class CausalLM(nn.Module):
    """A decoder-only language model on `nn.TransformerEncoder` with a causal mask, as PyTorch's tutorials make it."""

    def __init__(self, vocab: int = 20, width: int = 16, hand_made: bool = False):
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(width, 2, 32, batch_first=True), 2)
        self.head = nn.Linear(width, vocab)
        self.hand_made = hand_made

    def forward(self, ids):
        """Per-token logits."""
        size = ids.size(1)
        if self.hand_made:
            mask = torch.triu(torch.full((size, size), float("-inf")), diagonal=1)
        else:
            mask = nn.Transformer.generate_square_subsequent_mask(size)
        return self.head(self.encoder(self.emb(ids), mask=mask))


def test_a_causal_mask_takes_eagers_causal_path_recomputed_and_paged(tmp_path):
    """A mask from `generate_square_subsequent_mask`: eager's causal kernel, bitwise, recomputed and paged.

    Given without `is_causal`, eager checks the mask's values and takes attention's causal kernel;
    the capture decides alike.
    """
    from pytorch_cases import run_recomputed_and_paged

    torch.manual_seed(0)
    captured = capture(CausalLM(), (torch.randint(0, 20, (2, 6)),), name="causal")
    result, predicted = run_recomputed_and_paged(captured, tmp_path)
    assert result.gradients_equal, result.differing_gradients
    assert result.peak_activation_bytes == predicted.peak_ram_bytes


def test_a_mask_whose_causality_only_its_values_tell_is_refused_naming_the_hint():
    torch.manual_seed(0)
    refusal = r"module 'encoder': an attention mask given without is_causal.*is_causal=True or False"
    with pytest.raises(UserInputError, match=refusal):
        capture(CausalLM(hand_made=True), (torch.randint(0, 20, (2, 6)),), name="causal")


class _Scan(nn.Module):
    """A linear recurrence over time steps, as a selective-scan layer runs it: a Python loop."""

    def __init__(self, width: int = 4):
        super().__init__()
        self.decay = nn.Parameter(torch.rand(width))

    def forward(self, b, c):
        """The gated states of every time step."""
        h, states = torch.zeros_like(b[:, 0]), []
        for t in range(b.size(1)):
            h = self.decay * h + b[:, t]
            states.append(h * c[:, t])
        return torch.stack(states, 1)


class Scanned(nn.Module):
    """A projection split in two, then the scan: in a module of its own, or inlined in the model's forward."""

    def __init__(self, inline: bool):
        super().__init__()
        self.proj = nn.Linear(4, 8, bias=False)
        self.scan = _Scan()
        self.head = nn.Linear(4, 3)
        self.inline = inline

    def forward(self, x):
        """The logits of a batch of sequences."""
        b, c = self.proj(x).split(4, dim=-1)
        return self.head((_Scan.forward(self.scan, b, c) if self.inline else self.scan(b, c)).mean(1))


@pytest.mark.parametrize("inline", [True, False])
def test_a_loop_over_a_layers_output_runs_bitwise_inline_or_as_a_module(tmp_path, inline):
    """Inlined in the model's forward, the loop's backward winds through the projection's: both are one backward node."""
    from pytorch_cases import run_recomputed_and_paged

    torch.manual_seed(0)
    captured = capture(Scanned(inline=inline), (torch.randn(2, 5, 4),), name="scanned")
    names = [node.name for node in captured.graph.nodes]
    assert ("proj.grad" in names) and (inline or "scan.grad" in names), names
    result, predicted = run_recomputed_and_paged(captured, tmp_path, ("proj",))
    assert result.gradients_equal, result.differing_gradients
    assert result.peak_activation_bytes == predicted.peak_ram_bytes


def test_the_backward_of_a_circular_pad_on_a_layers_output_joins_the_layers_and_runs_bitwise(tmp_path):
    """`F.pad(conv(x), mode="circular")` in the model's forward: its backward and the convolution's feed each other."""
    from pytorch_cases import run_recomputed_and_paged

    class Padded(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.fc = nn.Conv2d(3, 4, 3, padding=1), nn.Linear(4, 5)

        def forward(self, x):
            return self.fc(nn.functional.pad(self.conv(x), (1, 1, 1, 1), mode="circular").mean((2, 3)))

    torch.manual_seed(0)
    captured = capture(Padded(), (torch.randn(2, 3, 6, 6),), name="padded")
    result, predicted = run_recomputed_and_paged(captured, tmp_path, ("conv",))
    assert result.gradients_equal, result.differing_gradients
    assert result.peak_activation_bytes == predicted.peak_ram_bytes


class _Inverse(nn.Module):
    """A learned linear map applied through its inverse: `torch.linalg.inv` or its `_ex` form."""

    def __init__(self, checked: bool):
        super().__init__()
        self.matrix = nn.Parameter(torch.eye(4) * 2 + 0.1 * torch.randn(4, 4))
        self.checked = checked

    def forward(self, x):
        """The logits of a batch of feature vectors."""
        inverse = torch.linalg.inv(self.matrix) if self.checked else torch.linalg.inv_ex(self.matrix)[0]
        return x @ inverse


def test_lazy_modules_and_error_checked_linear_algebra_are_refused_in_one_line_naming_the_way_out():
    """An uninitialised lazy parameter, and linalg.inv's run-time error check: one line each, with the remedy."""
    torch.manual_seed(0)
    lazy = r"parameter '1\.weight' is not initialised yet \(a lazy module\): run the model once"
    with pytest.raises(UserInputError, match=lazy):
        capture(nn.Sequential(nn.Flatten(), nn.LazyLinear(3)), (torch.randn(2, 4),), name="lazy")
    with pytest.raises(UserInputError, match=r"side effect .* torch\.linalg\.inv_ex"):
        capture(_Inverse(checked=True), (torch.randn(2, 4),), name="inverse")
    assert len(capture(_Inverse(checked=False), (torch.randn(2, 4),), name="inverse").graph) > 0


class _Checkpointed(nn.Module):
    """A block under `torch.utils.checkpoint`, in its reentrant or its recommended form."""

    def __init__(self, reentrant: bool):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 3)
        self.reentrant = reentrant

    def forward(self, x):
        """The logits of a batch of feature vectors."""
        return torch.utils.checkpoint.checkpoint(self.b, torch.relu(self.a(x)), use_reentrant=self.reentrant)


def test_reentrant_checkpointing_is_refused_naming_the_form_that_imports_and_nothing_else_is_printed():
    torch.manual_seed(0)
    unraisable: list = []
    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        with warnings.catch_warnings(record=True) as raised:
            warnings.simplefilter("always")
            with pytest.raises(UserInputError, match=r"use_reentrant=True: .* use use_reentrant=False"):
                capture(_Checkpointed(reentrant=True), (torch.randn(2, 4),), name="checkpointed")
            gc.collect()  # an annotation left open would be closed here, and raise
    finally:
        sys.unraisablehook = hook
    assert [str(w.message) for w in raised] == []
    assert [repr(u.exc_value) for u in unraisable] == []
    assert len(capture(_Checkpointed(reentrant=False), (torch.randn(2, 4),), name="checkpointed").graph) > 0


def test_every_name_the_package_exports_is_what_it_names_after_its_modules_are_imported():
    """`poetsim.pytorch.capture` is the function, not the module its code lives in, however often it is read."""
    import types

    import poetsim.pytorch as package

    for name in package.__all__:
        assert not isinstance(getattr(package, name), types.ModuleType), name
        assert not isinstance(getattr(package, name), types.ModuleType), name  # read again, once its module is imported
    traced = package.capture(models.tiny_cnn(), (torch.randn(2, 3, 8, 8),))
    assert type(traced).__name__ == "Capture" and len(traced.graph) == len(
        package.from_torch(models.tiny_cnn(), (torch.randn(2, 3, 8, 8),))
    )
