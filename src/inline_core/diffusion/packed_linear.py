"""Linear layers whose weight oneDNN reordered once, at load, into its own blocked layout
(`torch.ops.mkldnn._reorder_linear_weight`, what inductor's freezing emits on a CPU), so each
matmul reads it as is. `F.linear` in bfloat16 on a CPU is oneDNN too, but it takes the weight in
its plain layout every call; at the few hundred tokens a CPU render has, that is a large part of
the matmul (`bench/cpu_matmul.py`). The numbers are the same: the same oneDNN kernel, the same
order of sums (the tests compare bitwise).

A packed layer computes from its packed copy only while its `weight` is the parameter it was
packed from, unchanged: a LoRA's fused copy swaps the parameter for a forward (`adapters/fused`)
and a layer patched in place bumps its version, and either runs `F.linear` on the weight it holds.
Per-row LoRA deltas are a forward hook on the output, the same either way. Under `torch.compile`
(dynamo cannot trace an opaque oneDNN tensor) and where autograd records, it is `F.linear` too.

The packed copy is new memory beside the weight (a mapped bfloat16 file's pages stay mapped):
it counts in the part's footprint (`packed_bytes`), and a part whose copy would take more than
half the memory budget is not packed (`device/matmul.pack_fits`). The layers change class, as
`layer_cast`'s do, so code that looks for `nn.Linear` still finds them.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from inline_core.device.matmul import pack_fits
from inline_core.diffusion.layer_cast import named_layers
from inline_core.diffusion.placement import torch_dtype

__all__ = ["PackedLinear", "pack_linears", "pack_part", "packable_bytes", "packed_bytes"]

log = logging.getLogger(__name__)

_REORDER: Any = torch.ops.mkldnn._reorder_linear_weight  # pyright: ignore[reportUnknownMemberType]
_LINEAR: Any = torch.ops.mkldnn._linear_pointwise  # pyright: ignore[reportUnknownMemberType]


class _Packed:
    """A layer's packed weight and what it was packed from; a deep copy of the layer gets none
    (an opaque oneDNN tensor cannot be copied) and computes with `F.linear`."""

    def __init__(self, source: torch.Tensor, packed: torch.Tensor) -> None:
        self.source, self.packed = source, packed
        self.version = source._version  # pyright: ignore[reportPrivateUsage]
        self.address = source.data_ptr()

    def holds(self, weight: torch.Tensor) -> bool:
        """Whether `weight` is the tensor packed, unchanged and in place (a layer moved to
        another device, or its `.data` swapped, keeps the parameter with new bytes)."""
        return (
            weight is self.source
            and weight._version == self.version  # pyright: ignore[reportPrivateUsage]
            and weight.data_ptr() == self.address
            and weight.device.type == "cpu"
        )

    def __deepcopy__(self, memo: dict[int, object]) -> None:
        return None


class PackedLinear(nn.Linear):
    """An `nn.Linear` computing from a oneDNN-packed copy of its weight while that weight is the
    one packed."""

    _packed_weight: _Packed | None

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        weight = self.weight
        bias = cast("torch.Tensor | None", self.bias)  # typed a Parameter; None without one
        if torch.compiler.is_compiling():  # first: dynamo must not trace the checks below
            return F.linear(input, weight, bias)
        packed = self.__dict__.get("_packed_weight")
        if (
            isinstance(packed, _Packed)
            and packed.holds(weight)
            and input.dtype == weight.dtype
            and input.device.type == "cpu"
            and not torch.is_grad_enabled()
        ):
            return _LINEAR(input, packed.packed, bias, "none", [], "")
        return F.linear(input, weight, bias)


def packable(layer: nn.Module, dtype: torch.dtype) -> bool:
    """A plain `nn.Linear` on the CPU whose weight (and bias) is in `dtype`: a layer that casts
    kept weights (`layer_cast`) or is somewhere else is left as it is."""
    if type(layer) is not nn.Linear:
        return False
    weight = layer.weight
    bias = cast("torch.Tensor | None", layer.bias)
    same = bias is None or (bias.dtype == dtype and bias.device.type == "cpu")
    return weight.dtype == dtype and weight.device.type == "cpu" and weight.dim() == 2 and same


def packable_bytes(model: nn.Module, dtype: torch.dtype) -> int:
    """What packing `model`'s linear layers for `dtype` would take."""
    weights = [
        cast(torch.Tensor, layer.weight)
        for _name, layer in named_layers(model)
        if packable(layer, dtype)
    ]
    return sum(weight.numel() * weight.element_size() for weight in weights)


def pack_linears(model: nn.Module, dtype: torch.dtype) -> int:
    """Pack every plain linear layer of `model` computing in `dtype` on the CPU; the bytes the
    packed copies take (0: none packed, or done before)."""
    total = 0
    with torch.no_grad():
        for _name, layer in named_layers(model):
            if not packable(layer, dtype):
                continue
            weight = cast(torch.Tensor, layer.weight)
            packed: torch.Tensor = _REORDER(weight, None)
            layer.__dict__["_packed_weight"] = _Packed(weight, packed)
            layer.__class__ = PackedLinear
            total += weight.numel() * weight.element_size()
    return total


def packed_bytes(model: nn.Module) -> int:
    """The bytes the packed copies of `model`'s layers take."""
    total = 0
    for _name, layer in named_layers(model):
        packed = layer.__dict__.get("_packed_weight")
        if isinstance(packed, _Packed):
            total += packed.source.numel() * packed.source.element_size()
    return total


def pack_part(value: object, dtype: str, budget_bytes: int | None, name: str) -> object:
    """`value` (the loaded part `name` computing in the dtype named `dtype`), its linear layers
    packed where it is a module and the packed copy fits the memory budget (`pack_fits`);
    anything else as it is."""
    if not isinstance(value, nn.Module):
        return value
    wanted = packable_bytes(value, torch_dtype(dtype))
    if not pack_fits(wanted, budget_bytes):
        log.info(
            "%s: linear weights not packed for oneDNN: the copy (%.1f GiB) would take more than"
            " half the memory budget",
            name,
            wanted / 1024**3,
        )
        return value
    pack_linears(value, torch_dtype(dtype))
    return value
