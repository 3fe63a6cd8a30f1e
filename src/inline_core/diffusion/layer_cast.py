"""Computing in one dtype from weights kept in another: a part whose weights stay in their file's
dtype, mapped (`device/storage.py` says when: an fp8 file always), casts each linear layer's and
embedding's weights to the compute dtype as the layer runs, and the rest of its numbers (norms,
biases of other layers, convolutions: small) once, at load. A linear layer of a scaled fp8 file
multiplies its cast weight by its per-tensor scale, as ComfyUI's scaled fp8 layers do when they
compute in a wider float.

The layers change class rather than gaining a wrapper or a bound function, so a deep copy (a fused
LoRA copy) casts its own weights, and code that looks for `nn.Linear` still finds them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn


class CastLinear(nn.Linear):
    """An `nn.Linear` whose weight is kept in another dtype: cast per call."""

    compute_dtype: torch.dtype

    def computed_weight(self) -> torch.Tensor:
        """The weight the layer computes with, in the compute dtype."""
        return self.weight.to(self.compute_dtype)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        dtype = self.compute_dtype
        bias = cast("torch.Tensor | None", self.bias)  # typed a Parameter; None without one
        return F.linear(
            input.to(dtype), self.computed_weight(), None if bias is None else bias.to(dtype)
        )


class ScaledCastLinear(CastLinear):
    """A `CastLinear` of a scaled fp8 file: its weight times its per-tensor `weight_scale` (a
    buffer, so it moves with the layer)."""

    weight_scale: torch.Tensor

    def computed_weight(self) -> torch.Tensor:
        dtype = self.compute_dtype
        return self.weight.to(dtype) * self.weight_scale.to(dtype)


class CastEmbedding(nn.Embedding):
    """An `nn.Embedding` whose table is kept in another dtype: only the rows looked up are cast."""

    compute_dtype: torch.dtype

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        return super().forward(input).to(self.compute_dtype)


def named_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """`model.named_modules()`, typed."""
    return list(model.named_modules())  # pyright: ignore[reportUnknownArgumentType]


def compute_in(
    model: nn.Module, dtype: torch.dtype, scales: Mapping[str, torch.Tensor] | None = None
) -> nn.Module:
    """Make `model` compute in `dtype` while its linear and embedding weights stay as stored.
    `scales`: the per-tensor weight scale of each scaled linear layer, by module name."""
    scales = scales or {}
    for name, layer in named_layers(model):
        if type(layer) is nn.Linear:
            layer.__class__ = ScaledCastLinear if name in scales else CastLinear
            if name in scales:
                layer.register_buffer("weight_scale", scales[name], persistent=False)
        elif type(layer) is nn.Embedding:
            layer.__class__ = CastEmbedding
        if isinstance(layer, CastLinear | CastEmbedding):
            layer.compute_dtype = dtype
            continue
        for key, param in list(layer.named_parameters(recurse=False)):
            if param.is_floating_point() and param.dtype != dtype:
                setattr(layer, key, nn.Parameter(param.to(dtype), requires_grad=False))
        for key, buffer in list(layer.named_buffers(recurse=False)):
            if buffer.is_floating_point() and buffer.dtype != dtype:
                setattr(layer, key, buffer.to(dtype))
    return model
