"""The device policy's attention: which of torch's exact SDPA kernels each device class tries
first, stated in health, and applied to torch without changing a number."""

from __future__ import annotations

from typing import Any, cast

import pytest
import torch
from device_machines import CPU_BOX, MAC_16, RTX_2080_TI, RTX_4090, cuda, gpus

from inline_core.device import DevicePolicy, HardwareDescription
from inline_core.device.attention import TORCH_ORDER, AttentionChoice, attention_choice
from inline_core.diffusion.compile.attention import sdpa_order, use_attention

_TORCH: Any = torch


def test_hopper_tries_cudnn_first() -> None:
    choice = DevicePolicy(gpus(2, nvlink=True)).attention  # two H100s
    assert choice.order[0] == "cudnn" and choice.order[-1] == "math"
    assert "Hopper" in choice.reason


def test_older_gpus_a_mix_and_other_devices_keep_torchs_order() -> None:
    mixed = HardwareDescription(
        gpus=(cuda(81559, cc=(9, 0)), cuda(24564, cc=(8, 9), index=1)),
        ram_mb=65536,
        cpu_count=16,
        backend="cuda",
    )
    for hardware in (RTX_4090, RTX_2080_TI, mixed, CPU_BOX, MAC_16):
        choice = DevicePolicy(hardware).attention
        assert choice.order == TORCH_ORDER, hardware
    assert "CPU" in attention_choice(CPU_BOX, "cpu").reason


def test_health_says_the_order() -> None:
    body = DevicePolicy(gpus(1, nvlink=False)).describe()
    attention = cast(dict[str, Any], body["attention"])
    assert attention["sdpa"] == ["cudnn", "flash", "mem_efficient", "math"]


def test_an_order_without_math_or_with_an_unknown_kernel_is_refused() -> None:
    with pytest.raises(ValueError, match="ending in math"):
        AttentionChoice(("flash",), "no fallback")
    with pytest.raises(ValueError, match="ending in math"):
        AttentionChoice(("fa3", "math"), "unknown")
    with pytest.raises(ValueError, match="ending in math"):  # what follows math is never tried
        AttentionChoice(("math", "cudnn"), "cuDNN unreachable")


def test_the_order_is_applied_and_the_numbers_stay() -> None:
    saved = cast(list[int], _TORCH._C._get_sdp_priority_order())
    generator = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 4, 33, 16, generator=generator) for _ in range(3))
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    try:
        hopper = AttentionChoice(("cudnn", "flash", "mem_efficient", "math"), "test")
        assert use_attention(hopper) == ["cudnn", "flash", "mem_efficient", "math"]
        assert sdpa_order()[:4] == ["cudnn", "flash", "mem_efficient", "math"]
        # cuDNN cannot run on the CPU: the call falls through to the next kernel.
        got = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        torch.testing.assert_close(got, expected)
        assert use_attention(attention_choice(CPU_BOX, "cpu"))[:3] == list(TORCH_ORDER)
    finally:
        _TORCH._C._set_sdp_priority_order(saved)
