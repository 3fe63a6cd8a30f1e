"""Whether the two GPU-only speed-ups, FP8 linear layers (torchao) and FA3 (flash-attention 3),
can run on this machine, and whether the server uses them: a pure function of the device class,
the GPUs and what is installed, as every choice here.

Neither is used by the server yet: both change numbers (FP8 weights and activations lose
precision; FA3 is exact attention but a different kernel than the parity tests compare), so each
is a measured, opt-in choice, and the measurements need a GPU (`bench/gpu_compile.py --fp8
--fa3`). Health states each, with why it is off (`device.fp8`, `device.fa3`).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

from inline_core.device.hardware import HardwareDescription

__all__ = ["FA3_MODULE", "KernelChoice", "fa3_choice", "fp8_choice", "installed"]

FP8_CAPABILITY = (8, 9)  # FP8 tensor cores: Ada (8.9) and Hopper (9.0) on
FA3_MODULE = "flash_attn_interface"  # what flash-attention 3's Hopper build installs
_NOT_USED = "not used by the server yet: it changes numbers, so it waits on its GPU measurement"


@dataclass(frozen=True)
class KernelChoice:
    """One GPU-only kernel: whether this machine can run it, whether it is used, and why."""

    available: bool
    enabled: bool
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"available": self.available, "enabled": self.enabled, "reason": self.reason}


def installed(module: str) -> bool:
    """Whether `module` can be imported here (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _capabilities(hardware: HardwareDescription) -> list[tuple[int, int] | None]:
    return [gpu.compute_capability for gpu in hardware.gpus if gpu.vendor == "cuda"]


def fp8_choice(hardware: HardwareDescription, kind: str, *, torchao: bool) -> KernelChoice:
    """FP8 linear layers (torchao's dynamic float8) on device class `kind`; `torchao`: whether
    torchao is installed."""
    if kind != "cuda":
        return KernelChoice(
            False, False, f"FP8 matmuls need a CUDA GPU with FP8 tensor cores, not a {kind}"
        )
    capabilities = _capabilities(hardware)
    if not capabilities or any(cc is None or cc < FP8_CAPABILITY for cc in capabilities):
        return KernelChoice(
            False, False, "FP8 tensor cores need compute capability 8.9 or later on every GPU"
        )
    if not torchao:
        return KernelChoice(False, False, "torchao is not installed")
    return KernelChoice(True, False, _NOT_USED)


def fa3_choice(hardware: HardwareDescription, kind: str, *, module: bool) -> KernelChoice:
    """Flash-attention 3 on device class `kind`; `module`: whether its build is installed."""
    if kind != "cuda":
        return KernelChoice(False, False, f"FA3 is a CUDA kernel for Hopper GPUs, not a {kind}")
    capabilities = _capabilities(hardware)
    if not capabilities or any(cc is None or cc[0] != 9 for cc in capabilities):
        return KernelChoice(False, False, "FA3 runs on Hopper GPUs (compute capability 9.x) only")
    if not module:
        return KernelChoice(False, False, f"flash-attention 3 ({FA3_MODULE}) is not installed")
    return KernelChoice(True, False, _NOT_USED)
