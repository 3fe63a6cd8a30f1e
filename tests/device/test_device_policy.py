"""Every profile and placement decision, from hand-written hardware."""

from __future__ import annotations

import json

import pytest
from device_machines import (
    CPU_BOX,
    GIB,
    MAC_16,
    MAC_64,
    RTX_2080_TI,
    RTX_3070,
    RTX_4090,
    V100_32,
    cuda,
    gpus,
    mac,
    one_gpu,
)

from inline_core.config import Config
from inline_core.device import (
    ROLES,
    DevicePolicy,
    DeviceSettings,
    GpuInfo,
    HardwareDescription,
    ParallelSpec,
    Placement,
    Profile,
    choose_profile,
    policy_from_config,
)
from inline_core.errors import InvalidRequest


def flags(p: Placement) -> tuple[bool, bool, bool, bool, str | None]:
    return (p.offload, p.vae_tiling, p.vae_slicing, p.attention_slicing, p.quantize)


NO_SAVINGS = (False, False, False, False, None)


# --- choosing the profile ---------------------------------------------------------------------


def test_no_gpu_is_cpu_and_the_threshold_sits_just_under_16_gb() -> None:
    assert choose_profile(CPU_BOX) is Profile.CPU
    assert choose_profile(one_gpu(cuda(15 * GIB - 1))) is Profile.LOWVRAM
    assert choose_profile(one_gpu(cuda(15 * GIB))) is Profile.GPU_MAX
    assert choose_profile(one_gpu(cuda(16117))) is Profile.GPU_MAX  # a nominal 16 GB card
    assert choose_profile(RTX_3070) is Profile.LOWVRAM
    assert choose_profile(RTX_4090) is Profile.GPU_MAX


def test_a_stated_vram_budget_decides_instead_of_the_card() -> None:
    assert choose_profile(RTX_4090, 8 * GIB) is Profile.LOWVRAM
    assert choose_profile(RTX_3070, 20 * GIB) is Profile.GPU_MAX
    assert choose_profile(CPU_BOX, 80 * GIB) is Profile.CPU


def test_with_mixed_gpus_the_smallest_decides() -> None:
    hw = HardwareDescription(
        gpus=(cuda(24564, index=0), cuda(7982, index=1)), ram_mb=GIB * 64, cpu_count=8,
        backend="cuda",
    )  # fmt: skip
    assert choose_profile(hw) is Profile.LOWVRAM
    assert DevicePolicy(hw).vram_budget_mb == 7982


@pytest.mark.parametrize(
    ("text", "profile"),
    [("gpu-max", Profile.GPU_MAX), ("GPU_MAX", Profile.GPU_MAX), ("gpumax", Profile.GPU_MAX),
     ("lowvram", Profile.LOWVRAM), ("low-vram", Profile.LOWVRAM), (" cpu ", Profile.CPU)],
)  # fmt: skip
def test_profile_names_parse_loosely(text: str, profile: Profile) -> None:
    assert Profile.parse(text) is profile


def test_an_unknown_profile_name_lists_the_allowed_ones() -> None:
    with pytest.raises(InvalidRequest, match="gpu-max, lowvram, cpu; got 'turbo'"):
        Profile.parse("turbo")


# --- each profile's placements ----------------------------------------------------------------


def test_cpu_only_machine_runs_everything_in_float32_on_the_cpu() -> None:
    policy = DevicePolicy(CPU_BOX)
    assert policy.profile is Profile.CPU
    assert policy.kind == "cpu"
    for role in ROLES:
        p = policy.placement(role)
        assert (p.device, p.dtype) == ("cpu", "float32")
        assert flags(p) == NO_SAVINGS
    assert policy.vram_budget_mb == 0
    assert policy.memory_budget_mb == int(32 * GIB * 0.70)


def test_a_24_gb_card_is_gpu_max_in_bf16_with_no_savings() -> None:
    policy = DevicePolicy(RTX_4090)
    assert policy.profile is Profile.GPU_MAX
    for role in ROLES:
        p = policy.placement(role)
        assert (p.device, p.dtype) == ("cuda", "bfloat16")
        assert flags(p) == NO_SAVINGS
    assert policy.vram_budget_mb == 24564
    # A tenth of the VRAM stays free for activations.
    assert policy.memory_budget_mb == 24564 - 2456


def test_an_8_gb_card_saves_memory_on_the_gpu_without_offloading() -> None:
    policy = DevicePolicy(RTX_3070)
    assert policy.profile is Profile.LOWVRAM
    te, dn, vae = (policy.placement(r) for r in ("text_encoder", "denoiser", "vae"))
    assert {p.device for p in (te, dn, vae)} == {"cuda"}
    assert {p.dtype for p in (te, dn, vae)} == {"bfloat16"}
    assert flags(te) == (False, False, False, False, "int8")
    assert flags(dn) == (False, False, False, True, "int8")
    assert flags(vae) == (False, True, True, False, None)
    # Weights stay resident on the GPU: the budget is VRAM less the 1 GiB activation floor.
    assert policy.memory_budget_mb == 7982 - 1024


def test_lowvram_offloads_only_when_allowed_and_then_budgets_from_ram() -> None:
    policy = DevicePolicy(RTX_3070, DeviceSettings(allow_cpu_offload=True))
    assert all(policy.placement(role).offload for role in ROLES)
    assert policy.placement("denoiser").quantize == "int8"  # offload adds to the savings
    assert policy.placement("vae").vae_tiling
    assert policy.memory_budget_mb == int(64 * GIB * 0.70)
    assert policy.describe()["offload"] is True


def test_allowing_offload_does_not_offload_a_card_that_fits() -> None:
    policy = DevicePolicy(RTX_4090, DeviceSettings(allow_cpu_offload=True))
    assert not any(policy.placement(role).offload for role in ROLES)
    assert policy.describe()["allowCpuOffload"] is True
    assert policy.describe()["offload"] is False


def test_an_old_card_without_bf16_uses_float16_and_a_float32_vae() -> None:
    policy = DevicePolicy(RTX_2080_TI)  # 11 GB Turing
    assert policy.profile is Profile.LOWVRAM
    assert policy.placement("denoiser").dtype == "float16"
    assert policy.placement("text_encoder").dtype == "float16"
    assert policy.placement("vae").dtype == "float32"
    big_old = DevicePolicy(V100_32)
    assert big_old.profile is Profile.GPU_MAX
    assert big_old.placement("denoiser").dtype == "float16"


def test_a_model_that_overflows_in_fp16_gets_bf16_or_float32() -> None:
    assert DevicePolicy(RTX_2080_TI).placement("denoiser", fp16_safe=False).dtype == "float32"
    assert DevicePolicy(RTX_4090).placement("denoiser", fp16_safe=False).dtype == "bfloat16"
    assert DevicePolicy(CPU_BOX).placement("denoiser", fp16_safe=False).dtype == "float32"
    # The savings still apply to the fp16-unsafe placement.
    lowvram = DevicePolicy(RTX_2080_TI).placement("denoiser", fp16_safe=False)
    assert flags(lowvram) == (False, False, False, True, "int8")


def test_bf16_support_follows_the_compute_capability_or_a_detected_flag() -> None:
    assert cuda(8000, cc=(8, 0)).supports_bf16
    assert not cuda(8000, cc=(7, 5)).supports_bf16
    rocm = GpuInfo(index=0, name="MI300X", total_mb=196608, vendor="rocm", bf16=True)
    assert rocm.supports_bf16
    hw = HardwareDescription(gpus=(rocm,), ram_mb=GIB * 256, cpu_count=32, backend="cuda")
    assert DevicePolicy(hw).placement("denoiser").dtype == "bfloat16"


def test_a_16_gb_mac_is_lowvram_in_float16_and_never_offloads() -> None:
    policy = DevicePolicy(MAC_16, DeviceSettings(allow_cpu_offload=True))
    assert policy.profile is Profile.LOWVRAM
    assert policy.kind == "mps"
    dn = policy.placement("denoiser")
    assert (dn.device, dn.dtype, dn.offload, dn.quantize) == ("mps", "float16", False, "int8")
    assert policy.placement("vae").dtype == "float32"
    # Unified memory: the budget is Metal's working set, not RAM, even with offload allowed.
    assert policy.memory_budget_mb == 10923 - 1092


def test_a_mac_model_unsafe_in_fp16_uses_bf16_if_metal_has_it_else_float32() -> None:
    assert DevicePolicy(MAC_64).placement("denoiser", fp16_safe=False).dtype == "bfloat16"
    old_macos = mac(49152, bf16=False, ram_mb=64 * GIB)
    assert DevicePolicy(old_macos).placement("denoiser", fp16_safe=False).dtype == "float32"
    assert DevicePolicy(MAC_64).profile is Profile.GPU_MAX


def test_an_unknown_role_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown component role 'unet'"):
        DevicePolicy(RTX_4090).placement("unet")
    with pytest.raises(ValueError, match="unknown component role"):
        DevicePolicy(CPU_BOX).placement("unet", fp16_safe=False)


# --- explicit settings ------------------------------------------------------------------------


def test_forcing_cpu_on_a_gpu_machine_runs_on_the_cpu() -> None:
    policy = DevicePolicy(RTX_4090, DeviceSettings(profile=Profile.CPU))
    assert policy.kind == "cpu"
    assert policy.placement("denoiser") == Placement(device="cpu", dtype="float32")
    assert policy.vram_budget_mb == 0
    assert policy.memory_budget_mb == int(64 * GIB * 0.70)


def test_forcing_gpu_max_on_a_small_card_and_lowvram_on_a_big_one() -> None:
    small = DevicePolicy(RTX_3070, DeviceSettings(profile=Profile.GPU_MAX))
    assert flags(small.placement("denoiser")) == NO_SAVINGS
    big = DevicePolicy(RTX_4090, DeviceSettings(profile=Profile.LOWVRAM))
    assert big.placement("vae").vae_tiling
    assert big.placement("denoiser").quantize == "int8"


def test_a_gpu_profile_without_a_gpu_falls_back_to_cpu_with_a_note() -> None:
    policy = DevicePolicy(CPU_BOX, DeviceSettings(profile=Profile.LOWVRAM))
    assert policy.profile is Profile.CPU
    assert policy.placement("vae").device == "cpu"
    assert policy.note is not None and "lowvram" in policy.note
    assert policy.describe()["note"] == policy.note
    assert "note" not in DevicePolicy(CPU_BOX).describe()


def test_a_vram_budget_overrides_the_card_and_picks_the_profile() -> None:
    tight = DevicePolicy(RTX_4090, DeviceSettings(vram_budget_gb=8))
    assert tight.profile is Profile.LOWVRAM
    assert tight.vram_budget_mb == 8192
    assert tight.memory_budget_mb == 8192 - 1024
    roomy = DevicePolicy(RTX_3070, DeviceSettings(vram_budget_gb=20.5))
    assert roomy.profile is Profile.GPU_MAX
    assert roomy.vram_budget_mb == 20992
    assert DevicePolicy(CPU_BOX, DeviceSettings(vram_budget_gb=8)).vram_budget_mb == 0


@pytest.mark.parametrize("budget", [0.0, -4.0])
def test_a_non_positive_vram_budget_is_rejected(budget: float) -> None:
    with pytest.raises(InvalidRequest, match="INLINE_VRAM_BUDGET_GB"):
        DeviceSettings(vram_budget_gb=budget)


def test_the_same_inputs_give_the_same_decisions() -> None:
    settings = DeviceSettings(profile=Profile.LOWVRAM, allow_cpu_offload=True)
    a, b = DevicePolicy(RTX_4090, settings), DevicePolicy(RTX_4090, settings)
    assert a.describe() == b.describe()
    assert [a.placement(r) for r in ROLES] == [b.placement(r) for r in ROLES]


# --- config and health ------------------------------------------------------------------------


def test_policy_from_config_reads_every_device_setting() -> None:
    config = Config.from_env(
        {
            "INLINE_PROFILE": "lowvram",
            "INLINE_VRAM_BUDGET_GB": "6",
            "INLINE_ALLOW_CPU_OFFLOAD": "1",
            "INLINE_PARALLEL": "ulysses=2",
        }
    )
    policy = policy_from_config(config, gpus(2, nvlink=True))
    assert policy.profile is Profile.LOWVRAM
    assert policy.vram_budget_mb == 6144
    assert policy.placement("denoiser").offload
    assert policy.settings.parallel == ParallelSpec.of(ulysses=2)
    assert policy.describe()["parallel"] == "ulysses=2"


def test_policy_from_config_defaults_to_detection_of_the_given_hardware() -> None:
    policy = policy_from_config(Config(), RTX_4090)
    assert policy.hardware is RTX_4090
    assert policy.profile is Profile.GPU_MAX
    assert policy.settings == DeviceSettings()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"INLINE_PROFILE": "fast"}, "INLINE_PROFILE must be one of"),
        ({"INLINE_PARALLEL": "tensor=2"}, "unknown method 'tensor'"),
        ({"INLINE_PARALLEL": "ulysses=2"}, "needs 2 ranks"),  # one GPU
        ({"INLINE_VRAM_BUDGET_GB": "-1"}, "INLINE_VRAM_BUDGET_GB"),
    ],
)
def test_bad_device_settings_are_startup_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidRequest, match=message):
        policy_from_config(Config.from_env(env), RTX_4090)


def test_describe_is_camel_case_json_for_health() -> None:
    body = DevicePolicy(RTX_3070).describe()
    assert body["kind"] == "cuda"
    assert body["profile"] == "lowvram"
    assert body["vramBudgetMb"] == 7982
    assert body["memoryBudgetMb"] == 7982 - 1024
    assert body["dtype"] == "bfloat16"
    assert body["gpus"] == [
        {"index": 0, "name": "RTX 3070", "vendor": "cuda", "totalMb": 7982, "freeMb": None,
         "bf16": True, "computeCapability": "8.6"}
    ]  # fmt: skip
    placements = body["placements"]
    assert isinstance(placements, dict)
    assert placements["vae"] == {
        "device": "cuda", "dtype": "bfloat16", "offload": False, "vaeTiling": True,
        "vaeSlicing": True, "attentionSlicing": False, "quantize": None,
    }  # fmt: skip
    assert json.loads(json.dumps(body)) == body
    cpu = DevicePolicy(CPU_BOX).describe()
    assert (cpu["kind"], cpu["profile"], cpu["vramBudgetMb"]) == ("cpu", "cpu", 0)


# --- the hardware description itself ----------------------------------------------------------


def test_hardware_descriptions_reject_contradictions() -> None:
    with pytest.raises(ValueError, match="cpu backend has no GPUs"):
        HardwareDescription(gpus=(cuda(8000),), ram_mb=GIB, cpu_count=1, backend="cpu")
    with pytest.raises(ValueError, match="needs at least one GPU"):
        HardwareDescription(gpus=(), ram_mb=GIB, cpu_count=1, backend="cuda")
    with pytest.raises(ValueError, match="on a mps backend"):
        HardwareDescription(gpus=(cuda(8000),), ram_mb=GIB, cpu_count=1, backend="mps")
    with pytest.raises(ValueError, match="cpu_count"):
        HardwareDescription.cpu_only(ram_mb=GIB, cpu_count=0)
