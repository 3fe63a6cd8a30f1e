"""The device policy: the one place a device, dtype, offload, memory saving or split is chosen.

Every decision is a pure function of a `HardwareDescription` and explicit `DeviceSettings`, so
each profile is tested from hand-written hardware. Components ask `placement(role)` and obey.

The policy prefers the GPU: under `lowvram` the weights stay resident on it and VAE tiling and
slicing, attention slicing and int8 weights do the saving. CPU offload happens only when the user
allows it (`INLINE_ALLOW_CPU_OFFLOAD=1`), and only under `lowvram`.
"""

from __future__ import annotations

from dataclasses import dataclass

from inline_core.config import Config
from inline_core.device.adapters import AdapterMode, adapter_mode
from inline_core.device.attention import AttentionChoice, attention_choice
from inline_core.device.compile import CompileChoice, compile_choice
from inline_core.device.hardware import HardwareDescription
from inline_core.device.kernels import FA3_MODULE, KernelChoice, fa3_choice, fp8_choice, installed
from inline_core.device.matmul import packed_linear_choice
from inline_core.device.profile import Profile, choose_profile, resolve_profile
from inline_core.device.split import (
    ModelParallelSupport,
    ParallelSpec,
    check_ranks,
    choose_split,
)
from inline_core.errors import InvalidRequest
from inline_core.runtime.step_cache import DBCACHE, StepCacheSettings

__all__ = [
    "ROLES",
    "DevicePolicy",
    "DeviceSettings",
    "Placement",
    "Profile",
    "choose_profile",
    "compute_dtype",
    "has_bf16",
    "make_placement",
    "parse_dtype",
    "memory_budget_mb",
    "vram_budget_mb",
]

ROLES: tuple[str, ...] = ("text_encoder", "denoiser", "vae")

# Of the VRAM budget, this much stays free for activations (at least 1 GiB, or 10%).
ACTIVATION_RESERVE_MB = 1024
ACTIVATION_RESERVE_SHARE = 0.10
# The policy turns DBCache on for renders of at least this many steps. Its warmup (8 steps)
# always computes, so an 8-step Turbo render could reuse nothing; from 20 steps 12 or more may,
# where cache-dit reports its 1.3-2x on many-step models.
STEP_CACHE_FROM_STEPS = 20

# Share of RAM resident models may take when they live in RAM (cpu profile, or CPU offload):
# the rest is left to the OS, the server and activations.
RAM_SHARE = 0.70


@dataclass(frozen=True)
class Placement:
    """Where and how one component runs. `device` is a torch device string ("cuda" means the
    current CUDA device, so the same placement holds inside each worker rank)."""

    device: str
    dtype: str  # a torch dtype name: "bfloat16" | "float16" | "float32"
    offload: bool = False  # enable_model_cpu_offload(): weights rest in RAM between uses
    vae_tiling: bool = False
    vae_slicing: bool = False
    attention_slicing: bool = False
    quantize: str | None = None  # "int8" weights, or None
    # A held LoRA stack may get a fused copy (`device/adapters.py`; health's `device.adapters`).
    lora_fusing: bool = True
    # The dtype the weights are kept in when it is not `dtype`: their file's, mapped, each layer
    # casting them to `dtype` as it computes (`device/storage.py` says when). None: `dtype`.
    storage: str | None = None

    @property
    def adapters(self) -> AdapterMode:
        """How this placement applies LoRAs: per row, or also on a fused copy where one pays."""
        return adapter_mode(self.offload, self.quantize, self.lora_fusing)

    def to_json(self) -> dict[str, object]:
        return {
            "device": self.device,
            "dtype": self.dtype,
            "offload": self.offload,
            "vaeTiling": self.vae_tiling,
            "vaeSlicing": self.vae_slicing,
            "attentionSlicing": self.attention_slicing,
            "quantize": self.quantize,
            **({} if self.storage is None else {"storage": self.storage}),
        }


DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")
_DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}


def parse_dtype(text: str | None, *, source: str = "INLINE_DTYPE") -> str | None:
    """A stated compute dtype (`float32`, `bfloat16`, `float16`, or bf16/fp16/fp32), or None
    for `auto` / unset: chosen from the hardware."""
    key = (text or "").strip().lower().removeprefix("torch.")
    if key in ("", "auto"):
        return None
    key = _DTYPE_NAMES.get(key, key)
    if key not in DTYPES:
        raise InvalidRequest(f"{source} must be auto or one of {', '.join(DTYPES)}; got {text!r}")
    return key


def has_bf16(hw: HardwareDescription, profile: Profile) -> bool:
    """Whether the devices this profile computes on do bfloat16 natively."""
    if profile is Profile.CPU or not hw.gpus:
        return hw.cpu_bf16
    return all(gpu.supports_bf16 for gpu in hw.gpus)


def compute_dtype(
    hw: HardwareDescription,
    profile: Profile,
    *,
    fp16_safe: bool = True,
    prefer_fp16: bool = False,
    stated: str | None = None,
) -> str:
    """The working precision.

    CPU: bfloat16 where the CPU multiplies it natively (AMX-BF16, AVX512-BF16: several times
    faster than float32, and half the memory), else float32 (emulated bf16 is slower).
    CUDA/ROCm: bfloat16 when every GPU has it (compute capability >= 8 on NVIDIA), else float16.
    MPS: float16, Apple GPUs' fast half type.
    A model whose activations overflow float16 (some diffusers transformers do) passes
    `fp16_safe=False` and gets bfloat16 where supported, else float32; a family trained in float16
    passes `prefer_fp16` and gets it on a GPU. A `stated` dtype (INLINE_DTYPE) wins, except that
    float16 is never given to a model that overflows it.
    """
    bf16 = has_bf16(hw, profile)
    if stated is not None:
        if stated == "float16" and not fp16_safe:
            return "bfloat16" if bf16 else "float32"
        return stated
    if profile is Profile.CPU or not hw.gpus:
        return "bfloat16" if bf16 else "float32"
    if prefer_fp16 and fp16_safe:
        return "float16"
    if hw.backend == "mps" and fp16_safe:
        return "float16"
    if bf16:
        return "bfloat16"
    return "float16" if fp16_safe else "float32"


def make_placement(
    role: str,
    hw: HardwareDescription,
    profile: Profile,
    *,
    allow_cpu_offload: bool = False,
    fp16_safe: bool = True,
    prefer_fp16: bool = False,
    dtype: str | None = None,
    lora_fusing: bool = True,
) -> Placement:
    """The placement of one component role under a profile (`dtype`: the stated one, if any;
    `lora_fusing`: False where the user turned fused LoRA copies off)."""
    if role not in ROLES:
        raise ValueError(f"unknown component role {role!r}; roles: {', '.join(ROLES)}")
    chosen = compute_dtype(hw, profile, fp16_safe=fp16_safe, prefer_fp16=prefer_fp16, stated=dtype)
    if role == "vae" and chosen == "float16":
        # VAE decoders are known to overflow in float16; the VAE is small, so float32 is cheap.
        chosen = "float32"
    if profile is Profile.CPU:
        return Placement(device="cpu", dtype=chosen, lora_fusing=lora_fusing)
    if not hw.gpus:
        raise ValueError(f"profile {profile.value} needs a GPU")
    if profile is Profile.GPU_MAX:
        return Placement(device=hw.backend, dtype=chosen, lora_fusing=lora_fusing)
    return Placement(
        device=hw.backend,
        dtype=chosen,
        lora_fusing=lora_fusing,
        offload=offload_enabled(hw, profile, allow_cpu_offload),
        vae_tiling=role == "vae",
        vae_slicing=role == "vae",
        attention_slicing=role == "denoiser",
        quantize="int8" if role in ("denoiser", "text_encoder") else None,
    )


def offload_enabled(hw: HardwareDescription, profile: Profile, allow_cpu_offload: bool) -> bool:
    """Offload only when allowed, only under lowvram, and only on CUDA: Apple GPUs share memory
    with the CPU, so moving weights to "cpu" there frees nothing."""
    return allow_cpu_offload and profile is Profile.LOWVRAM and hw.backend == "cuda"


def vram_budget_mb(
    hw: HardwareDescription, profile: Profile, vram_budget_gb: float | None = None
) -> int:
    """Usable VRAM: the stated budget if any, else the smallest GPU's memory; 0 on the CPU."""
    if profile is Profile.CPU or not hw.gpus:
        return 0
    if vram_budget_gb is not None:
        return int(vram_budget_gb * 1024)
    return hw.smallest_gpu_mb


def memory_budget_mb(
    hw: HardwareDescription,
    profile: Profile,
    vram_mb: int,
    *,
    offload: bool = False,
    ram_budget_mb: int | None = None,
) -> int:
    """How much resident model memory the residency cache may keep.

    On a GPU: the VRAM budget less a reserve for activations. Where weights live in RAM (cpu
    profile, or CPU offload): the stated RAM budget (INLINE_RAM_BUDGET_GB), else a share of RAM.
    """
    if profile is Profile.CPU or offload:
        return ram_budget_mb if ram_budget_mb is not None else int(hw.ram_mb * RAM_SHARE)
    reserve = max(ACTIVATION_RESERVE_MB, int(vram_mb * ACTIVATION_RESERVE_SHARE))
    return max(0, vram_mb - reserve)


@dataclass(frozen=True)
class DeviceSettings:
    """The user's explicit device choices (`INLINE_PROFILE`, `INLINE_VRAM_BUDGET_GB`,
    `INLINE_RAM_BUDGET_GB`, `INLINE_DTYPE`, `INLINE_ALLOW_CPU_OFFLOAD`, `INLINE_PARALLEL`,
    `INLINE_NO_LORA_FUSING`, `INLINE_NO_COMPILE`). None means "decide from the hardware"."""

    profile: Profile | None = None
    vram_budget_gb: float | None = None
    allow_cpu_offload: bool = False
    parallel: ParallelSpec | None = None  # ParallelSpec() (from "off") forbids a split
    dtype: str | None = None  # the compute dtype of every component (None: per hardware)
    ram_budget_gb: float | None = None  # RAM that weights living in RAM may take
    lora_fusing: bool = True  # False: LoRAs per row only (INLINE_NO_LORA_FUSING)
    # None: where measured to pay; False: every block eager (INLINE_NO_COMPILE); True: wherever
    # the device can (INLINE_COMPILE).
    compile: bool | None = None

    def __post_init__(self) -> None:
        for name, value in (
            ("INLINE_VRAM_BUDGET_GB", self.vram_budget_gb),
            ("INLINE_RAM_BUDGET_GB", self.ram_budget_gb),
        ):
            if value is not None and not value > 0:
                raise InvalidRequest(f"{name} must be a positive number of GB, got {value}")
        if self.dtype is not None and self.dtype not in DTYPES:
            raise InvalidRequest(f"INLINE_DTYPE must be auto or one of {', '.join(DTYPES)}")

    @classmethod
    def from_config(cls, config: Config) -> DeviceSettings:
        return cls(
            profile=Profile.parse(config.profile) if config.profile else None,
            vram_budget_gb=config.vram_budget_gb,
            allow_cpu_offload=config.allow_cpu_offload,
            parallel=ParallelSpec.parse(config.parallel) if config.parallel else None,
            dtype=parse_dtype(config.dtype),
            ram_budget_gb=config.ram_budget_gb,
            lora_fusing=not config.no_lora_fusing,
            compile=False if config.no_compile else (True if config.compile else None),
        )


class DevicePolicy:
    """Decisions for one machine and one set of settings, computed once at construction.

    Construction validates an explicit split's rank count (a startup error, `InvalidRequest`);
    whether the model family supports it is checked by `split_for`.
    """

    def __init__(
        self, hardware: HardwareDescription, settings: DeviceSettings | None = None
    ) -> None:
        self._hardware = hardware
        self._settings = settings if settings is not None else DeviceSettings()
        s = self._settings
        stated_mb = None if s.vram_budget_gb is None else int(s.vram_budget_gb * 1024)
        self._profile, self._note = resolve_profile(hardware, s.profile, stated_mb)
        self._vram_budget_mb = vram_budget_mb(hardware, self._profile, s.vram_budget_gb)
        self._offload = offload_enabled(hardware, self._profile, s.allow_cpu_offload)
        ram_mb = None if s.ram_budget_gb is None else int(s.ram_budget_gb * 1024)
        self._memory_budget_mb = memory_budget_mb(
            hardware,
            self._profile,
            self._vram_budget_mb,
            offload=self._offload,
            ram_budget_mb=ram_mb,
        )
        self._placements = {role: self._make(role) for role in ROLES}
        if s.parallel is not None:
            check_ranks(s.parallel, hardware, self._profile)

    @property
    def hardware(self) -> HardwareDescription:
        return self._hardware

    @property
    def settings(self) -> DeviceSettings:
        return self._settings

    @property
    def profile(self) -> Profile:
        return self._profile

    @property
    def kind(self) -> str:
        """Where models run: "cuda", "mps" or "cpu"."""
        return "cpu" if self._profile is Profile.CPU else self._hardware.backend

    @property
    def vram_budget_mb(self) -> int:
        return self._vram_budget_mb

    @property
    def memory_budget_mb(self) -> int:
        return self._memory_budget_mb

    @property
    def note(self) -> str | None:
        """Why a requested profile was not used, if it was not."""
        return self._note

    def placement(
        self, role: str, *, fp16_safe: bool = True, prefer_fp16: bool = False
    ) -> Placement:
        """Placement of a component role ("text_encoder", "denoiser", "vae").

        `fp16_safe=False` is for models whose activations overflow float16; they get bfloat16
        or float32 instead. `prefer_fp16` is for models trained in float16 (used on GPUs).
        Unknown roles raise ValueError.
        """
        if fp16_safe and not prefer_fp16 and role in self._placements:
            return self._placements[role]
        return self._make(role, fp16_safe=fp16_safe, prefer_fp16=prefer_fp16)

    def split_for(self, support: ModelParallelSupport) -> ParallelSpec | None:
        """The split for a model family, or None to run in process. An explicit
        `INLINE_PARALLEL` the family cannot run raises `InvalidRequest` naming what it can."""
        return choose_split(self._hardware, support, self._settings.parallel, profile=self._profile)

    def step_cache(self, methods: frozenset[str], steps: int) -> StepCacheSettings | None:
        """Step caching for a render that asked for nothing: DBCache (cache-dit's defaults) for
        a family that supports it at `STEP_CACHE_FROM_STEPS` steps or more, else off."""
        if DBCACHE not in methods or steps < STEP_CACHE_FROM_STEPS:
            return None
        return StepCacheSettings()

    def compile_for(self, family: str, dtype: str) -> CompileChoice:
        """Whether `family`'s denoiser computing in `dtype` runs its blocks compiled."""
        return compile_choice(
            self._hardware, self.kind, family, dtype, stated=self._settings.compile
        )

    def packed_linear_for(self, dtype: str) -> KernelChoice:
        """Whether a denoiser computing in `dtype` packs its linear weights at load."""
        return packed_linear_choice(self._hardware, self.kind, dtype, stated=self._settings.compile)

    @property
    def attention(self) -> AttentionChoice:
        """The order torch's exact attention kernels are tried in on this device class."""
        return attention_choice(self._hardware, self.kind)

    @property
    def fp8(self) -> KernelChoice:
        """Whether FP8 linear layers (torchao) can run here and are used."""
        return fp8_choice(self._hardware, self.kind, torchao=installed("torchao"))

    @property
    def fa3(self) -> KernelChoice:
        """Whether flash-attention 3 can run here and is used."""
        return fa3_choice(self._hardware, self.kind, module=installed(FA3_MODULE))

    def describe(self) -> dict[str, object]:
        """The `device` object of /v1/health (camelCase)."""
        hw = self._hardware
        parallel = self._settings.parallel
        denoiser = self._placements["denoiser"]
        body: dict[str, object] = {
            "kind": self.kind,
            "profile": self._profile.value,
            "vramBudgetMb": self._vram_budget_mb,
            "memoryBudgetMb": self._memory_budget_mb,
            "dtype": self._placements["denoiser"].dtype,
            "dtypeSetting": self._settings.dtype or "auto",
            "cpuBf16": hw.cpu_bf16,
            "allowCpuOffload": self._settings.allow_cpu_offload,
            "offload": self._offload,
            "parallel": None if parallel is None else str(parallel),
            "gpus": [gpu.to_json() for gpu in hw.gpus],
            "nvlink": hw.nvlink,
            "ramMb": hw.ram_mb,
            "cpuCount": hw.cpu_count,
            "placements": {role: p.to_json() for role, p in self._placements.items()},
            "adapters": denoiser.adapters.to_json(),
            # Step caching for renders that ask for nothing: from this many steps, these settings.
            "stepCache": {"fromSteps": STEP_CACHE_FROM_STEPS, **StepCacheSettings().to_json()},
            # Compiled blocks for a denoiser in the default dtype (each family's in `models`).
            "compile": self.compile_for("", denoiser.dtype).to_json(),
            # Linear weights packed at load for a denoiser in the default dtype (oneDNN, CPU).
            "packedLinear": self.packed_linear_for(denoiser.dtype).to_json(),
            "attention": self.attention.to_json(),  # torch SDPA's order on this device
            "fp8": self.fp8.to_json(),  # GPU-only kernels: off, and why
            "fa3": self.fa3.to_json(),
        }
        if self._note is not None:
            body["note"] = self._note
        return body

    def _make(self, role: str, *, fp16_safe: bool = True, prefer_fp16: bool = False) -> Placement:
        return make_placement(
            role,
            self._hardware,
            self._profile,
            allow_cpu_offload=self._settings.allow_cpu_offload,
            fp16_safe=fp16_safe,
            prefer_fp16=prefer_fp16,
            dtype=self._settings.dtype,
            lora_fusing=self._settings.lora_fusing,
        )
