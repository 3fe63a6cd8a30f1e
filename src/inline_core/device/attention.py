"""Which of torch's exact attention kernels (`scaled_dot_product_attention`'s backends) a device
tries first: a pure function of the device class, as every choice here.

Every family's attention goes through torch's SDPA (diffusers' native backend), which picks the
first backend in its priority order that can run the inputs, falling back down the order; all of
them compute the same attention within float rounding, so the order only moves the time. Torch's
own order is flash, memory-efficient, math, cuDNN: cuDNN's fused attention, the fastest exact one
on Hopper GPUs (PyTorch 2.5's release notes: up to 75% over flash-attention 2 on an H100), is never
reached there, since the math kernel always can run. `diffusion/compile/attention.py` applies the
order; health's `device.attention` says it.
"""

from __future__ import annotations

from dataclasses import dataclass

from inline_core.device.hardware import HardwareDescription

__all__ = ["SDPA_BACKENDS", "TORCH_ORDER", "AttentionChoice", "attention_choice"]

# torch's SDPA backends by the names torch gives them (`torch.nn.attention`'s backend names).
SDPA_BACKENDS = ("cudnn", "flash", "mem_efficient", "math")
# Torch's own order, less cuDNN (which it tries after math, so never).
TORCH_ORDER = ("flash", "mem_efficient", "math")


@dataclass(frozen=True)
class AttentionChoice:
    """The SDPA backends in the order they are tried on this machine, and why."""

    order: tuple[str, ...]
    reason: str

    def __post_init__(self) -> None:
        unknown = [name for name in self.order if name not in SDPA_BACKENDS]
        if unknown or not self.order or self.order[-1] != "math":  # math runs all: none after
            raise ValueError(f"an SDPA order of {SDPA_BACKENDS} ending in math, not {self.order}")

    def to_json(self) -> dict[str, object]:
        return {"sdpa": list(self.order), "reason": self.reason}


def attention_choice(hardware: HardwareDescription, kind: str) -> AttentionChoice:
    """The SDPA order for device class `kind` ("cuda", "mps", "cpu") on `hardware`."""
    if kind == "cuda":
        capabilities = [gpu.compute_capability for gpu in hardware.gpus if gpu.vendor == "cuda"]
        known = [cc for cc in capabilities if cc is not None]
        if known and len(known) == len(hardware.gpus) and min(known) >= (9, 0):
            return AttentionChoice(
                ("cudnn", "flash", "mem_efficient", "math"),
                "Hopper or later: cuDNN's fused attention first, flash where it cannot run",
            )
        return AttentionChoice(
            TORCH_ORDER, "torch's own order: flash where it runs (sm80 on), else memory-efficient"
        )
    if kind == "cpu":
        return AttentionChoice(
            TORCH_ORDER, "torch's own order: its fused flash attention for the CPU, else math"
        )
    return AttentionChoice(TORCH_ORDER, f"torch's own order on {kind}")
