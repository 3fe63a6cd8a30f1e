"""Device/memory profiles and the rule that picks one from the hardware."""

from __future__ import annotations

from enum import StrEnum

from inline_core.device.hardware import HardwareDescription
from inline_core.errors import InvalidRequest

# Below this much VRAM the weights of a 6B DiT plus its encoder do not sit comfortably in bf16,
# so the memory-saving profile applies. Nominal 16 GB cards report a little under 16 GiB
# (e.g. 16117 or 16375 MiB), hence 15 GiB and not 16.
LOWVRAM_BELOW_MB = 15 * 1024


class Profile(StrEnum):
    GPU_MAX = "gpu-max"  # everything resident, full precision for the device, no savings
    LOWVRAM = "lowvram"  # still resident on the GPU: tiling, slicing and int8 do the saving
    CPU = "cpu"  # on the CPU: bfloat16 where it is native, else float32

    @classmethod
    def parse(cls, text: str, *, source: str = "INLINE_PROFILE") -> Profile:
        """`gpu-max`, `lowvram` or `cpu`; case, `-` and `_` are not significant."""
        key = text.strip().lower().replace("-", "").replace("_", "")
        for profile in cls:
            if profile.value.replace("-", "") == key:
                return profile
        allowed = ", ".join(p.value for p in cls)
        raise InvalidRequest(f"{source} must be one of {allowed}; got {text!r}")


def choose_profile(hw: HardwareDescription, vram_budget_mb: int | None = None) -> Profile:
    """No GPU: cpu. A GPU (or a stated budget) under ~16 GB: lowvram. Otherwise gpu-max.

    With several GPUs the smallest decides, since every rank holds the full weights.
    """
    if not hw.gpus:
        return Profile.CPU
    vram = hw.smallest_gpu_mb if vram_budget_mb is None else vram_budget_mb
    return Profile.LOWVRAM if vram < LOWVRAM_BELOW_MB else Profile.GPU_MAX


def resolve_profile(
    hw: HardwareDescription, requested: Profile | None, vram_budget_mb: int | None
) -> tuple[Profile, str | None]:
    """The profile to run under, and a note when a request could not be honoured.

    A GPU profile asked for on a machine where no GPU is usable (none present, or torch without
    GPU support) runs on the CPU rather than refusing to start: a core install must still boot.
    """
    if requested is None:
        return choose_profile(hw, vram_budget_mb), None
    if requested is not Profile.CPU and not hw.gpus:
        note = f"profile {requested.value} asked for, but no usable GPU was found; using cpu"
        return Profile.CPU, note
    return requested, None
