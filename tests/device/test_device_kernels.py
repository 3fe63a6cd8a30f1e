"""The device policy's GPU-only kernels (FP8 linear layers, FA3): off on CPUs and Macs with the
reason, available only on the GPUs that have them, never used yet, and stated in health."""

from __future__ import annotations

from device_machines import CPU_BOX, MAC_16, RTX_3070, RTX_4090, gpus

from inline_core.device import DevicePolicy
from inline_core.device.kernels import fa3_choice, fp8_choice
from inline_core.device.policy import DeviceSettings
from inline_core.device.profile import Profile


def test_a_cpu_reports_both_off_with_the_reason() -> None:
    described = DevicePolicy(CPU_BOX).describe()
    assert described["fp8"] == {
        "available": False,
        "enabled": False,
        "reason": "FP8 matmuls need a CUDA GPU with FP8 tensor cores, not a cpu",
    }
    assert described["fa3"] == {
        "available": False,
        "enabled": False,
        "reason": "FA3 is a CUDA kernel for Hopper GPUs, not a cpu",
    }
    # The CPU profile on a GPU machine computes on the CPU: the same answer.
    on_cpu = DevicePolicy(RTX_4090, DeviceSettings(profile=Profile.CPU))
    assert on_cpu.fp8 == DevicePolicy(CPU_BOX).fp8 and on_cpu.fa3 == DevicePolicy(CPU_BOX).fa3


def test_a_mac_and_gpus_without_the_kernels_say_why() -> None:
    assert "not a mps" in DevicePolicy(MAC_16).fp8.reason
    ampere = DevicePolicy(RTX_3070)
    assert not ampere.fp8.available and "8.9" in ampere.fp8.reason
    assert not ampere.fa3.available and "Hopper" in ampere.fa3.reason
    ada = DevicePolicy(RTX_4090)
    assert not ada.fa3.available and "Hopper" in ada.fa3.reason


def test_hopper_has_both_when_installed_and_uses_neither_yet() -> None:
    hopper = gpus(2, nvlink=True)  # two H100s
    fp8 = fp8_choice(hopper, "cuda", torchao=True)
    assert fp8.available and not fp8.enabled and "not used by the server yet" in fp8.reason
    assert fp8_choice(hopper, "cuda", torchao=False).reason == "torchao is not installed"
    fa3 = fa3_choice(hopper, "cuda", module=True)
    assert fa3.available and not fa3.enabled
    missing = fa3_choice(hopper, "cuda", module=False)
    assert not missing.available and "flash_attn_interface" in missing.reason
    assert fp8_choice(DevicePolicy(RTX_4090).hardware, "cuda", torchao=True).available
