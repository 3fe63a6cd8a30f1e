"""Applying a device policy's `Placement` to torch modules (the policy decides, this obeys).

Nothing here chooses a device or dtype: every value comes from the placement handed in.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Generator
from contextlib import contextmanager
from typing import Protocol

import torch
from torch import nn

log = logging.getLogger(__name__)


class PlacementLike(Protocol):
    """The fields of `inline_core.device.Placement` that components read."""

    @property
    def device(self) -> str: ...

    @property
    def dtype(self) -> str: ...

    @property
    def offload(self) -> bool: ...

    @property
    def vae_tiling(self) -> bool: ...

    @property
    def vae_slicing(self) -> bool: ...

    @property
    def attention_slicing(self) -> bool: ...

    @property
    def quantize(self) -> str | None: ...

    @property
    def lora_fusing(self) -> bool: ...

    @property
    def storage(self) -> str | None: ...


def torch_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dtype


def home_device(placement: PlacementLike) -> torch.device:
    """Where the module lives between uses: the CPU when offloaded, else its device."""
    return torch.device("cpu") if placement.offload else torch.device(placement.device)


def module_bytes(module: nn.Module) -> int:
    total = sum(p.numel() * p.element_size() for p in module.parameters())
    return total + sum(b.numel() * b.element_size() for b in module.buffers())


def quantize(module: nn.Module, placement: PlacementLike) -> nn.Module:
    """Apply the placement's weight quantization, when this install can."""
    if placement.quantize is None:
        return module
    if placement.quantize != "int8":
        log.warning("quantization %r is not supported; running unquantized", placement.quantize)
        return module
    try:
        from torchao.quantization import (  # pyright: ignore[reportMissingImports]
            Int8WeightOnlyConfig,  # pyright: ignore[reportUnknownVariableType]
            quantize_,  # pyright: ignore[reportUnknownVariableType]
        )
    except ImportError:
        log.warning("int8 asked for but torchao is not installed; running unquantized")
        return module
    quantize_(module, Int8WeightOnlyConfig())
    return module


class OffloadSwap:
    """Model-level CPU offload shared by one pipeline's offloaded modules.

    An offloaded module moves to its device when used and the previously used offloaded module
    goes back to the CPU (the semantics of diffusers' `enable_model_cpu_offload`). Uses are
    serialised so a module is never moved while another thread runs it.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._active: nn.Module | None = None

    @contextmanager
    def use(self, module: nn.Module, placement: PlacementLike) -> Generator[None, None, None]:
        if not placement.offload:
            yield
            return
        with self._lock:
            if self._active is not None and self._active is not module:
                self._active.to("cpu")
            module.to(torch.device(placement.device))
            self._active = module
            yield
