"""Op kinds (`Node.op`) of imported nodes: by the module called, else by the node's dominant aten op.

The kind is what a platform profile prices per operator (`compute.op_flops_per_s`) and what
charts colour by; it follows the zoo's names (conv, depthwise_conv, linear, batchnorm, relu6).
"""

from torch import fx

from poetsim.pytorch.flops import op_name

#: Op kinds (`Node.op`) by the dominant aten op of a node; others keep the aten name.
KINDS = {
    "convolution": "conv",
    "addmm": "linear",
    "bmm": "matmul",
    "baddbmm": "matmul",
    "_native_batch_norm_legit_functional": "batchnorm",
    "native_batch_norm": "batchnorm",
    "native_layer_norm": "layernorm",
    "relu": "relu",
    "threshold": "relu",
    "gelu": "gelu",
    "tanh": "tanh",
    "sigmoid": "sigmoid",
    "add": "add",
    "_softmax": "softmax",
    "_log_softmax": "loss",
    "nll_loss_forward": "loss",
    "max_pool2d_with_indices": "maxpool",
    "mean": "avgpool",
    "avg_pool2d": "avgpool",
    "_adaptive_avg_pool2d": "avgpool",
    "_scaled_dot_product_flash_attention_for_cpu": "attention",
    "embedding": "embedding",
    "mkldnn_rnn_layer": "lstm",
}
#: The kind of a node that draws random numbers and is not a module of MODULE_KINDS.
RANDOM_KIND = "dropout"
#: Op kinds of leaf module calls whose dominant aten op would misname them.
MODULE_KINDS = {
    "LSTM": "lstm",
    "GRU": "gru",
    "RNN": "rnn",
    "MultiheadAttention": "attention",
    "ReLU6": "relu6",
    "StochasticDepth": "stochastic_depth",
}


def op_kind(dominant: fx.Node, reads_weights: bool) -> str:
    """The kind of a node whose most expensive op is `dominant`; `reads_weights` when it reads a parameter."""
    name = op_name(dominant.target)
    if name == "convolution":
        source, groups = dominant.args[0], dominant.args[8]  # aten.convolution(input, weight, ..., groups)
        assert isinstance(source, fx.Node) and isinstance(groups, int)
        channels = source.meta["val"].shape[1]
        return "depthwise_conv" if groups > 1 and groups == channels else "conv"
    if name == "mm":
        return "linear" if reads_weights else "matmul"
    if name == "hardtanh" and tuple(dominant.args[1:3]) == (0.0, 6.0):
        return "relu6"  # F.relu6 is hardtanh(x, 0, 6); its backward reads its input, unlike ReLU's
    return KINDS.get(name, name.strip("_"))
