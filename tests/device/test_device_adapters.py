"""The device policy's LoRA choices, per hardware description: which placements may fuse a held
stack into a private copy, and when a copy pays (how long one stack has held every row of every
forward, and the memory budget's room); health shows the mode and why."""

from __future__ import annotations

from typing import cast

import pytest
from device_machines import CPU_BOX, RTX_3070, RTX_4090, V100_32, gpus

from inline_core.device import DevicePolicy, DeviceSettings
from inline_core.device.adapters import (
    FUSE_AFTER_FORWARDS,
    FUSE_HELD,
    PER_ROW,
    AdapterMode,
    adapter_mode,
    fuse_decision,
)
from inline_core.device.hardware import HardwareDescription
from inline_core.device.policy import make_placement
from inline_core.device.profile import Profile

MIB = 2**20


def mode_on(hw: HardwareDescription, profile: Profile, *, offload: bool = False) -> AdapterMode:
    place = make_placement("denoiser", hw, profile, allow_cpu_offload=offload)
    return adapter_mode(place.offload, place.quantize)


@pytest.mark.parametrize(
    ("hw", "profile", "offload", "mode", "why"),
    [
        (CPU_BOX, Profile.CPU, False, FUSE_HELD, "fused copy"),
        (RTX_4090, Profile.GPU_MAX, False, FUSE_HELD, "fused copy"),
        (V100_32, Profile.GPU_MAX, False, FUSE_HELD, "fused copy"),
        (gpus(2, nvlink=True), Profile.GPU_MAX, False, FUSE_HELD, "fused copy"),
        (RTX_3070, Profile.LOWVRAM, False, PER_ROW, "int8 weights"),
        (RTX_3070, Profile.LOWVRAM, True, PER_ROW, "offloaded weights"),
    ],
    ids=["cpu", "gpu-max", "gpu-max-fp16", "two-gpus", "lowvram", "lowvram-offload"],
)
def test_which_placements_may_fuse(
    hw: HardwareDescription, profile: Profile, offload: bool, mode: str, why: str
) -> None:
    chosen = mode_on(hw, profile, offload=offload)
    assert chosen.mode == mode and why in chosen.reason
    # A placement that may not fuse never does, however long a stack holds and whatever room.
    decision = fuse_decision(chosen, held_forwards=1000, copy_bytes=MIB, room_bytes=None)
    assert decision.fuse is (mode == FUSE_HELD)


def test_a_copy_pays_once_a_stack_holds_and_fits_the_room() -> None:
    cpu = mode_on(CPU_BOX, Profile.CPU)
    first = fuse_decision(cpu, held_forwards=1, copy_bytes=MIB, room_bytes=100 * MIB)
    assert not first.fuse and f"pays from {FUSE_AFTER_FORWARDS}" in first.reason
    held = fuse_decision(
        cpu, held_forwards=FUSE_AFTER_FORWARDS, copy_bytes=MIB, room_bytes=100 * MIB
    )
    assert held.fuse and "fits the memory budget" in held.reason
    tight = fuse_decision(cpu, held_forwards=50, copy_bytes=100 * MIB, room_bytes=99 * MIB)
    assert not tight.fuse and "100.0 MiB" in tight.reason and "99.0 MiB" in tight.reason
    assert fuse_decision(cpu, held_forwards=50, copy_bytes=100 * MIB, room_bytes=None).fuse


def test_health_says_how_adapters_are_applied_and_why() -> None:
    cpu = cast(dict[str, str], DevicePolicy(CPU_BOX).describe()["adapters"])
    assert cpu["mode"] == FUSE_HELD and "share forwards" in cpu["reason"]
    lowvram = cast(dict[str, str], DevicePolicy(RTX_3070).describe()["adapters"])
    assert lowvram["mode"] == PER_ROW and "int8" in lowvram["reason"]
    settings = DeviceSettings(allow_cpu_offload=True)
    offloaded = cast(dict[str, str], DevicePolicy(RTX_3070, settings).describe()["adapters"])
    assert offloaded["mode"] == PER_ROW and "offloaded" in offloaded["reason"]
