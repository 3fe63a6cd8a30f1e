"""The device policy's compiled blocks: per device class, family and dtype, stated in health,
turned off by the flag or its variable."""

from __future__ import annotations

from device_machines import BF16_CPU_BOX, CPU_BOX, MAC_16, RTX_2080_TI, RTX_4090

from inline_core.config import Config
from inline_core.device import DevicePolicy
from inline_core.device.compile import RECOMPILE_LIMIT, compile_choice
from inline_core.device.hardware import HardwareDescription
from inline_core.device.policy import DeviceSettings

ZIMAGE = "alibaba/z-image"


def test_gpus_compile_in_every_dtype() -> None:
    for hardware, dtype in ((RTX_4090, "bfloat16"), (RTX_2080_TI, "float16")):
        policy = DevicePolicy(hardware)
        assert policy.placement("denoiser").dtype == dtype
        choice = policy.compile_for(ZIMAGE, dtype)
        assert choice.enabled and choice.dynamic
        assert choice.recompile_limit == RECOMPILE_LIMIT
        assert policy.compile_for(ZIMAGE, "float32").enabled


def test_metal_never_compiles() -> None:
    choice = DevicePolicy(MAC_16).compile_for(ZIMAGE, "float16")
    assert not choice.enabled and "Metal" in choice.reason


def test_cpus_follow_what_was_measured() -> None:
    for hardware, dtype in ((CPU_BOX, "float32"), (BF16_CPU_BOX, "bfloat16")):
        policy = DevicePolicy(hardware)
        assert policy.placement("denoiser").dtype == dtype
        choice = policy.compile_for(ZIMAGE, dtype)
        assert "measured" in choice.reason and f"cpu in {dtype}" in choice.reason
    one_core = HardwareDescription.cpu_only(ram_mb=8192, cpu_count=1)
    choice = compile_choice(one_core, "cpu", ZIMAGE, "float32")
    assert not choice.enabled and "one CPU" in choice.reason


def test_the_flag_and_its_variable_turn_it_off() -> None:
    config = Config.from_env({"INLINE_NO_COMPILE": "1"})
    assert config.no_compile
    settings = DeviceSettings.from_config(config)
    assert settings.compile is False
    choice = DevicePolicy(RTX_4090, settings).compile_for(ZIMAGE, "bfloat16")
    assert not choice.enabled and "INLINE_NO_COMPILE" in choice.reason
    assert DeviceSettings.from_config(Config.from_env({})).compile is None


def test_asked_for_it_compiles_wherever_the_device_can() -> None:
    settings = DeviceSettings.from_config(Config.from_env({"INLINE_COMPILE": "1"}))
    assert settings.compile is True
    choice = DevicePolicy(CPU_BOX, settings).compile_for(ZIMAGE, "float32")
    assert choice.enabled and "INLINE_COMPILE" in choice.reason
    assert not DevicePolicy(MAC_16, settings).compile_for(ZIMAGE, "float16").enabled
    both = Config.from_env({"INLINE_COMPILE": "1", "INLINE_NO_COMPILE": "1"})
    assert DeviceSettings.from_config(both).compile is False  # off wins


def test_health_states_the_choice() -> None:
    on = DevicePolicy(RTX_4090).describe()["compile"]
    assert on == {
        "enabled": True,
        "reason": "measured to pay on cuda in bfloat16",
        "dynamic": True,
        "recompileLimit": RECOMPILE_LIMIT,
    }
    off = DevicePolicy(RTX_4090, DeviceSettings(compile=False)).describe()["compile"]
    assert isinstance(off, dict) and off["enabled"] is False
