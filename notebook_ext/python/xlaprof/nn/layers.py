"""Layers and activations with PyTorch's names, signatures and defaults."""

from __future__ import annotations

from typing import Any, Optional, Tuple, Union

from .. import _api, _native
from .._native import Tensor
from . import functional as F
from .module import Module, check_device, leaf


# ---- layers -------------------------------------------------------------------------------


class Linear(Module):
    """``y = x W^T + b``, with PyTorch's layout and initialization; ``seed`` (an xlaprof
    extension) fixes the initial values."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None, *, seed: Optional[int] = None) -> None:
        super().__init__()
        check_device(device)
        made = _native.Linear(in_features, out_features, bias, seed)
        self.in_features, self.out_features = in_features, out_features
        self.weight = leaf(made.weight, dtype)
        self.bias = None if made.bias is None else leaf(made.bias, dtype)

    def forward(self, input: Tensor) -> Tensor:
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


def _square(name: str, value: Any) -> int:
    if isinstance(value, int):
        return value
    a, b = value
    if a != b:
        raise ValueError(f"{name} must be square here, not {tuple(value)}")
    return int(a)


class Conv2d(Module):
    """2-D convolution over ``[N, C, H, W]``, with PyTorch's initialization; square kernels,
    ``padding_mode='zeros'``; ``padding`` may be ``'valid'`` or ``'same'``."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Union[int, Tuple[int, int]],
                 stride: Union[int, Tuple[int, int]] = 1,
                 padding: Union[str, int, Tuple[int, int]] = 0,
                 dilation: Union[int, Tuple[int, int]] = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", device: Any = None, dtype: Any = None, *,
                 seed: Optional[int] = None) -> None:
        super().__init__()
        check_device(device)
        if padding_mode != "zeros":
            raise ValueError(f"padding_mode {padding_mode!r} is not supported; only 'zeros'")
        if in_channels % groups or out_channels % groups:
            raise ValueError("in_channels and out_channels must be divisible by groups")
        k = _square("kernel_size", kernel_size)
        if padding == "valid":
            padding = 0
        elif padding == "same":
            d = _square("dilation", dilation)
            if _square("stride", stride) != 1 or (d * (k - 1)) % 2:
                raise ValueError("padding='same' needs stride 1 and an odd effective kernel here")
            padding = d * (k - 1) // 2
        made = _native.Conv2d(in_channels // groups, out_channels, k, 1, 0, seed)
        self.in_channels, self.out_channels, self.kernel_size = in_channels, out_channels, (k, k)
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        self.weight = leaf(made.weight, dtype)
        self.bias = leaf(made.bias, dtype) if bias else None

    def forward(self, input: Tensor) -> Tensor:
        return F.conv2d(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                        self.groups)

    def extra_repr(self) -> str:
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")


class LayerNorm(Module):
    """Layer normalization over the last dims, with a learned scale and shift."""

    def __init__(self, normalized_shape: Union[int, Tuple[int, ...]], eps: float = 1e-05,
                 elementwise_affine: bool = True, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        check_device(device)
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        self.elementwise_affine = elementwise_affine
        self.weight = self.bias = None
        if elementwise_affine:
            made = _native.LayerNorm(list(shape))
            self.weight = leaf(made.weight, dtype)
            self.bias = leaf(made.bias, dtype) if bias else None

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class Embedding(Module):
    """A table of ``num_embeddings`` vectors, looked up by integer ids; the ``padding_idx`` row
    starts at zero and gets no gradient."""

    def __init__(self, num_embeddings: int, embedding_dim: int,
                 padding_idx: Optional[int] = None, *, device: Any = None, dtype: Any = None,
                 seed: Optional[int] = None) -> None:
        super().__init__()
        check_device(device)
        made = _native.Embedding(num_embeddings, embedding_dim, seed)
        weight = made.weight
        if padding_idx is not None:
            if padding_idx < 0:
                padding_idx += num_embeddings
            if not 0 <= padding_idx < num_embeddings:
                raise ValueError("padding_idx must be within num_embeddings")
            values = weight.numpy()
            values[padding_idx] = 0
            weight = _api.tensor(values, requires_grad=True)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = padding_idx
        self.weight = leaf(weight, dtype)

    def forward(self, input: Tensor) -> Tensor:
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


class Dropout(Module):
    """Zeroes each element with probability ``p`` in training mode (and scales the others by
    ``1 / (1 - p)``); passes the input through in eval mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class MaxPool2d(Module):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, input: Tensor) -> Tensor:
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding)


class AvgPool2d(Module):
    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding)


# ---- activations --------------------------------------------------------------------------


class ReLU(Module):
    """``inplace=True`` is accepted; the result is a new tensor either way."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return input.relu()


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope)


class GELU(Module):
    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate must be 'none' or 'tanh', not {approximate!r}")
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return F.gelu(input, approximate=self.approximate)


class SiLU(Module):
    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return input.silu()


class Tanh(Module):
    def forward(self, input: Tensor) -> Tensor:
        return input.tanh()


class Sigmoid(Module):
    def forward(self, input: Tensor) -> Tensor:
        return input.sigmoid()


class Softmax(Module):
    def __init__(self, dim: Optional[int] = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim, _stacklevel=4)


class LogSoftmax(Module):
    def __init__(self, dim: Optional[int] = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim, _stacklevel=4)


class Identity(Module):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        return input


class Flatten(Module):
    """Flattens the dims from ``start_dim`` (after the batch, by default) to ``end_dim``."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)
