"""The compute dtype each component gets, as a pure function of the hardware and the settings."""

from __future__ import annotations

import pytest
from device_machines import (
    BF16_CPU_BOX,
    CPU_BOX,
    GIB,
    MAC_16,
    RTX_2080_TI,
    RTX_4090,
    V100_32,
)

from inline_core.config import Config
from inline_core.device import ROLES, DevicePolicy, DeviceSettings, HardwareDescription
from inline_core.device.detect import cpu_bf16_from_cpuinfo
from inline_core.device.policy import parse_dtype
from inline_core.device.profile import Profile
from inline_core.errors import InvalidRequest


def dtypes(policy: DevicePolicy, **kwargs: bool) -> dict[str, str]:
    return {role: policy.placement(role, **kwargs).dtype for role in ROLES}


def test_a_cpu_with_native_bf16_computes_in_bf16_and_one_without_in_float32() -> None:
    assert dtypes(DevicePolicy(BF16_CPU_BOX)) == dict.fromkeys(ROLES, "bfloat16")
    assert dtypes(DevicePolicy(CPU_BOX)) == dict.fromkeys(ROLES, "float32")
    # float16 is never chosen on a CPU, even for a family that overflows it or prefers it.
    assert dtypes(DevicePolicy(CPU_BOX), prefer_fp16=True) == dict.fromkeys(ROLES, "float32")
    assert dtypes(DevicePolicy(BF16_CPU_BOX), fp16_safe=False)["denoiser"] == "bfloat16"


def test_the_cpu_profile_on_a_gpu_machine_asks_the_cpu() -> None:
    cpu = DeviceSettings(profile=Profile.CPU)
    assert DevicePolicy(RTX_4090, cpu).placement("denoiser").dtype == "float32"
    gpu_box = HardwareDescription(
        gpus=RTX_4090.gpus, ram_mb=64 * GIB, cpu_count=16, backend="cuda", cpu_bf16=True
    )
    assert DevicePolicy(gpu_box, cpu).placement("denoiser").dtype == "bfloat16"
    assert DevicePolicy(gpu_box).placement("denoiser").device == "cuda"


@pytest.mark.parametrize(
    ("hardware", "denoiser", "overflowing", "preferring"),
    [
        (RTX_4090, "bfloat16", "bfloat16", "float16"),
        (RTX_2080_TI, "float16", "float32", "float16"),
        (V100_32, "float16", "float32", "float16"),
        (MAC_16, "float16", "bfloat16", "float16"),
    ],
)
def test_gpus_get_bf16_where_they_have_it_and_fp16_where_a_family_asks(
    hardware: HardwareDescription, denoiser: str, overflowing: str, preferring: str
) -> None:
    policy = DevicePolicy(hardware)
    assert policy.placement("denoiser").dtype == denoiser
    assert policy.placement("denoiser", fp16_safe=False).dtype == overflowing
    assert policy.placement("denoiser", prefer_fp16=True).dtype == preferring
    # A family that both prefers and overflows float16 cannot have it.
    assert policy.placement("denoiser", fp16_safe=False, prefer_fp16=True).dtype == overflowing
    # The VAE never decodes in float16.
    assert policy.placement("vae", prefer_fp16=True).dtype != "float16"


def test_a_stated_dtype_wins_except_where_float16_would_overflow() -> None:
    as_fp32 = DevicePolicy(BF16_CPU_BOX, DeviceSettings(dtype="float32"))
    assert dtypes(as_fp32) == dict.fromkeys(ROLES, "float32")
    as_bf16 = DevicePolicy(CPU_BOX, DeviceSettings(dtype="bfloat16"))  # emulated, but asked for
    assert dtypes(as_bf16) == dict.fromkeys(ROLES, "bfloat16")
    as_fp16 = DevicePolicy(RTX_4090, DeviceSettings(dtype="float16"))
    assert as_fp16.placement("denoiser").dtype == "float16"
    assert as_fp16.placement("denoiser", fp16_safe=False).dtype == "bfloat16"
    assert as_fp16.placement("vae").dtype == "float32"
    turing = DevicePolicy(RTX_2080_TI, DeviceSettings(dtype="float16"))
    assert turing.placement("text_encoder", fp16_safe=False).dtype == "float32"


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        (None, None),
        ("", None),
        ("auto", None),
        ("bf16", "bfloat16"),
        ("BFloat16", "bfloat16"),
        ("torch.float16", "float16"),
        ("fp32", "float32"),
        ("half", "float16"),
    ],
)
def test_dtype_settings_parse(text: str | None, parsed: str | None) -> None:
    assert parse_dtype(text) == parsed


def test_a_bad_dtype_setting_is_a_startup_error_naming_the_choices() -> None:
    with pytest.raises(InvalidRequest, match="INLINE_DTYPE must be auto or one of float32"):
        DeviceSettings.from_config(Config.from_env({"INLINE_DTYPE": "int4"}))
    with pytest.raises(InvalidRequest, match="INLINE_DTYPE"):
        DeviceSettings(dtype="double")


def test_health_shows_the_dtype_its_setting_and_the_cpus_bf16() -> None:
    body = DevicePolicy(BF16_CPU_BOX).describe()
    assert (body["dtype"], body["dtypeSetting"], body["cpuBf16"]) == ("bfloat16", "auto", True)
    stated = DevicePolicy(BF16_CPU_BOX, DeviceSettings.from_config(Config(dtype="fp32")))
    body = stated.describe()
    assert (body["dtype"], body["dtypeSetting"]) == ("float32", "float32")


def test_a_ram_budget_bounds_the_models_in_ram() -> None:
    config = Config.from_env({"INLINE_PROFILE": "cpu", "INLINE_RAM_BUDGET_GB": "8"})
    policy = DevicePolicy(BF16_CPU_BOX, DeviceSettings.from_config(config))
    assert policy.memory_budget_mb == 8 * 1024
    assert DevicePolicy(BF16_CPU_BOX).memory_budget_mb == int(32 * GIB * 0.70)
    with pytest.raises(InvalidRequest, match="INLINE_RAM_BUDGET_GB"):
        DeviceSettings(ram_budget_gb=0)


ZEN4_FLAGS = (
    "processor\t: 0\nvendor_id\t: AuthenticAMD\n"
    "flags\t\t: fpu vme sse2 avx2 avx512f avx512_bf16 avx512_vnni\n"
)
SAPPHIRE_RAPIDS_FLAGS = "flags\t\t: fpu avx2 avx512f amx_bf16 amx_tile amx_int8\n"
SKYLAKE_FLAGS = "flags\t\t: fpu avx2 avx512f avx512bw avx512_vnni\n"
ARM_FEATURES = "Features\t: fp asimd bf16 i8mm\n"


@pytest.mark.parametrize(
    ("cpuinfo", "native"),
    [
        (ZEN4_FLAGS, True),
        (SAPPHIRE_RAPIDS_FLAGS, True),
        (SKYLAKE_FLAGS, False),
        (ARM_FEATURES, False),
        ("", False),
    ],
)
def test_native_bf16_is_read_from_the_cpus_flags(cpuinfo: str, native: bool) -> None:
    assert cpu_bf16_from_cpuinfo(cpuinfo) is native
