"""Networks of the device runtime's operations that no zoo model has, for the device tests."""

from poetsim.graphs.layers import Network, Tensor


def grouped(net: Network) -> Tensor:
    """Batch norm, a grouped convolution, ReLU6, a depthwise convolution and global pooling.

    Two samples; the grouped convolution takes 8 channels in 2 groups to 12 (not depthwise).
    """
    x = net.input((2, 4, 9, 9), labels=2)
    x = net.relu(net.batchnorm(net.conv(x, 8, 3, stride=2, padding=1, name="stem"), name="bn"))
    x = net.relu6(net.conv(x, 12, 3, padding=1, groups=2, bias=True, name="grouped"))
    x = net.relu(net.depthwise_conv(x, 3, stride=2, padding=1, name="dw"))
    return net.linear(net.global_avgpool(x, name="pool"), 5, name="fc")
