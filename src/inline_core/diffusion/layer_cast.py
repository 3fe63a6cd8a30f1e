"""Computing in one dtype from weights kept in another: a part whose weights stay in their file's
dtype, mapped (`device/storage.py` says when), casts each linear layer's and embedding's weights
to the compute dtype as the layer runs, and the rest of its numbers (norms, biases of other
layers, convolutions: small) once, at load.

The layers change class rather than gaining a wrapper or a bound function, so a deep copy (a fused
LoRA copy) casts its own weights, and code that looks for `nn.Linear` still finds them."""

from __future__ import annotations

from typing import cast

import torch
import torch.nn.functional as F
from torch import nn


class CastLinear(nn.Linear):
    """An `nn.Linear` whose weight is kept in another dtype: cast per call."""

    compute_dtype: torch.dtype

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        dtype = self.compute_dtype
        bias = cast("torch.Tensor | None", self.bias)  # typed a Parameter; None without one
        return F.linear(
            input.to(dtype), self.weight.to(dtype), None if bias is None else bias.to(dtype)
        )


class CastEmbedding(nn.Embedding):
    """An `nn.Embedding` whose table is kept in another dtype: only the rows looked up are cast."""

    compute_dtype: torch.dtype

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return super().forward(input).to(self.compute_dtype)


def compute_in(model: nn.Module, dtype: torch.dtype) -> nn.Module:
    """Make `model` compute in `dtype` while its linear and embedding weights stay as stored."""
    for layer in model.modules():
        if type(layer) is nn.Linear:
            layer.__class__ = CastLinear
        elif type(layer) is nn.Embedding:
            layer.__class__ = CastEmbedding
        if isinstance(layer, CastLinear | CastEmbedding):
            layer.compute_dtype = dtype
            continue
        for name, param in list(layer.named_parameters(recurse=False)):
            if param.is_floating_point() and param.dtype != dtype:
                setattr(layer, name, nn.Parameter(param.to(dtype), requires_grad=False))
        for name, buffer in list(layer.named_buffers(recurse=False)):
            if buffer.is_floating_point() and buffer.dtype != dtype:
                setattr(layer, name, buffer.to(dtype))
    return model
