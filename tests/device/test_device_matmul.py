"""The device policy's packed linear weights (oneDNN, `diffusion/packed_linear.py`): on a CPU with
native bfloat16 in bfloat16, where `bench/cpu_matmul.py` measured them to pay; off elsewhere with
the reason; off with `--no-compile`; stated in health. A split's ranks pack by the same choice,
sharing the memory budget."""

from __future__ import annotations

import pytest
from device_machines import BF16_CPU_BOX, CPU_BOX, MAC_16, RTX_4090

from inline_core.device import DevicePolicy
from inline_core.device.matmul import RankPacking, pack_fits, packed_linear_choice, rank_packing
from inline_core.device.policy import DeviceSettings
from inline_core.device.profile import Profile


def test_a_bf16_cpu_packs_in_bfloat16_only() -> None:
    on = packed_linear_choice(BF16_CPU_BOX, "cpu", "bfloat16")
    assert on.available and on.enabled and on.reason == "measured to pay on cpu in bfloat16"
    wide = packed_linear_choice(BF16_CPU_BOX, "cpu", "float32")
    assert wide.available and not wide.enabled
    assert wide.reason == "measured not to pay on cpu in float32"
    half = packed_linear_choice(BF16_CPU_BOX, "cpu", "float16")
    assert not half.enabled and half.reason == "not measured on cpu in float16"


def test_a_cpu_without_bf16_and_the_gpus_do_not_pack() -> None:
    plain = packed_linear_choice(CPU_BOX, "cpu", "bfloat16")
    assert not plain.available and not plain.enabled and "no native bfloat16" in plain.reason
    for hardware, kind in ((RTX_4090, "cuda"), (MAC_16, "mps")):
        choice = packed_linear_choice(hardware, kind, "bfloat16")
        assert not choice.available and not choice.enabled and "CPU kernel" in choice.reason


def test_no_compile_turns_it_off_and_health_says_so() -> None:
    off = packed_linear_choice(BF16_CPU_BOX, "cpu", "bfloat16", stated=False)
    assert off.available and not off.enabled and "INLINE_NO_COMPILE" in off.reason
    policy = DevicePolicy(BF16_CPU_BOX, DeviceSettings(dtype="bfloat16"))
    assert policy.describe()["packedLinear"] == {
        "available": True,
        "enabled": True,
        "reason": "measured to pay on cpu in bfloat16",
    }
    stated_off = DevicePolicy(BF16_CPU_BOX, DeviceSettings(dtype="bfloat16", compile=False))
    assert stated_off.packed_linear_for("bfloat16") == off
    gpu_cpu_profile = DevicePolicy(RTX_4090, DeviceSettings(profile=Profile.CPU))
    assert not gpu_cpu_profile.packed_linear_for("bfloat16").available  # no native bf16 there


def test_a_packed_copy_is_made_only_within_half_the_memory_budget() -> None:
    gib = 1024**3
    assert pack_fits(2 * gib, None)  # no budget set
    assert pack_fits(2 * gib, 4 * gib)
    assert not pack_fits(2 * gib + 1, 4 * gib)  # a real-size Wan 14B's 28 GB under 24 GB: no


def test_a_splits_ranks_pack_by_the_choice_each_in_its_share_of_the_budget() -> None:
    on = packed_linear_choice(BF16_CPU_BOX, "cpu", "bfloat16")
    off = packed_linear_choice(BF16_CPU_BOX, "cpu", "bfloat16", stated=False)
    assert rank_packing(on, 8 * 1024**3, 2) == RankPacking(4 * 1024**3)
    assert rank_packing(on, None, 2) == RankPacking(None)  # no budget set
    assert rank_packing(off, 8 * 1024**3, 2) is None
    sent = RankPacking(123).to_json()
    assert sent == {"budgetBytes": 123} and RankPacking.from_json(sent) == RankPacking(123)
    with pytest.raises(ValueError, match="number of bytes"):
        RankPacking.from_json({"budgetBytes": "lots"})
