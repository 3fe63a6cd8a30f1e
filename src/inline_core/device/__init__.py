"""Device policy: the only owner of device, dtype, offload, memory saving and multi-GPU split.

Torch-free at import: the server builds a policy at start-up. `policy_from_config(config)` is the
entry point; components then ask `policy.placement(role)`.
"""

from __future__ import annotations

from inline_core.config import Config
from inline_core.device.detect import detect_hardware
from inline_core.device.hardware import Backend, GpuInfo, GpuVendor, HardwareDescription
from inline_core.device.policy import (
    ROLES,
    DevicePolicy,
    DeviceSettings,
    Placement,
    compute_dtype,
    make_placement,
    memory_budget_mb,
    vram_budget_mb,
)
from inline_core.device.profile import Profile, choose_profile
from inline_core.device.split import (
    METHODS,
    ModelParallelSupport,
    ParallelSpec,
    check_ranks,
    check_support,
    choose_split,
)

__all__ = [
    "METHODS",
    "ROLES",
    "Backend",
    "DevicePolicy",
    "DeviceSettings",
    "GpuInfo",
    "GpuVendor",
    "HardwareDescription",
    "ModelParallelSupport",
    "ParallelSpec",
    "Placement",
    "Profile",
    "check_ranks",
    "check_support",
    "choose_profile",
    "choose_split",
    "compute_dtype",
    "detect_hardware",
    "make_placement",
    "memory_budget_mb",
    "policy_from_config",
    "vram_budget_mb",
]


def policy_from_config(config: Config, hardware: HardwareDescription | None = None) -> DevicePolicy:
    """The policy for this machine (detected when `hardware` is None) and the config's explicit
    device settings. Raises `InvalidRequest` for a bad INLINE_PROFILE, INLINE_VRAM_BUDGET_GB or
    INLINE_PARALLEL (a startup error)."""
    hw = detect_hardware() if hardware is None else hardware
    return DevicePolicy(hw, DeviceSettings.from_config(config))
