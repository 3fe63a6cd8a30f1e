"""Computing in one dtype from weights kept in another: a part whose weights stay in their file's
dtype, mapped (`device/storage.py` says when: an fp8 file always), casts each linear layer's and
embedding's weights to the compute dtype as the layer runs, and the rest of its numbers (norms,
biases of other layers, convolutions: small) once, at load. A linear layer of a scaled fp8 file
multiplies its cast weight by its per-tensor scale, as ComfyUI's scaled fp8 layers do when they
compute in a wider float.

The layers change class rather than gaining a wrapper or a bound function, so a deep copy (a fused
LoRA copy) casts its own weights, and code that looks for `nn.Linear` still finds them.

On a CPU, with no gradient recorded, a linear layer casts into a buffer its thread reuses
(`cast_scratch`) rather than into a new tensor: a cast of 64 MB or more is a block glibc maps on
its own, so each new one was zero-filled page by page and unmapped after. A real-size Qwen3-4B
text encoder kept in bfloat16 cast 10.7 GB so per prompt encode, 2.6 million page faults and
4-6 s of kernel time beside 9 s of its own (bench/cold_start_profile.py). The buffer holds the
largest weight its thread cast (a Qwen3-4B MLP's, 100 MB in float32) for as long as the thread
lives."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn

_SCRATCH = threading.local()  # per thread: compute dtype -> the buffer its casts reuse


def cast_scratch(weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | None:
    """A tensor of `weight`'s shape in `dtype` to cast it into, reused by every cast on this
    thread; None where a cast must get a tensor of its own: off the CPU (the device's allocator
    reuses blocks already), where autograd records (it could keep the weight for backward), or
    inside `torch.compile` (dynamo would trace the thread's buffer into the graph and guard on it:
    a recompile per thread and each time it grows; inductor plans the graph's memory itself);
    None too where the weight is in `dtype` already (a layer computed at load): no cast at all."""
    if weight.dtype == dtype or weight.device.type != "cpu" or torch.is_grad_enabled():
        return None
    if torch.compiler.is_compiling():
        return None
    buffers: dict[torch.dtype, torch.Tensor] = _SCRATCH.__dict__.setdefault("buffers", {})
    numbers = weight.numel()
    buffer = buffers.get(dtype)
    if buffer is None or buffer.numel() < numbers:
        buffers.pop(dtype, None)  # the smaller one freed before the larger is made
        with torch.inference_mode(False):  # usable in and out of inference mode
            buffer = buffers[dtype] = torch.empty(numbers, dtype=dtype)
    return buffer[:numbers].view(weight.shape)


class CastLinear(nn.Linear):
    """An `nn.Linear` whose weight is kept in another dtype: cast per call."""

    compute_dtype: torch.dtype

    def computed_weight(self, out: torch.Tensor | None = None) -> torch.Tensor:
        """The weight the layer computes with, in the compute dtype: a new tensor, or `out`
        (of the weight's shape, in the compute dtype) filled with it."""
        if out is None:
            return self.weight.to(self.compute_dtype)
        return out.copy_(self.weight)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        dtype = self.compute_dtype
        bias = cast("torch.Tensor | None", self.bias)  # typed a Parameter; None without one
        weight = self.computed_weight(cast_scratch(self.weight, dtype))
        return F.linear(input.to(dtype), weight, None if bias is None else bias.to(dtype))


class ScaledCastLinear(CastLinear):
    """A `CastLinear` of a scaled fp8 file: its weight times its per-tensor `weight_scale` (a
    buffer, so it moves with the layer)."""

    weight_scale: torch.Tensor

    def computed_weight(self, out: torch.Tensor | None = None) -> torch.Tensor:
        dtype = self.compute_dtype
        if out is None:
            return self.weight.to(dtype) * self.weight_scale.to(dtype)
        return out.copy_(self.weight).mul_(self.weight_scale.to(dtype))


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
