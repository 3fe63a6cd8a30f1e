"""A plain description of the machine: what the device policy decides from.

Detection (`detect.py`) fills these in; tests write them by hand. Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

GpuVendor = Literal["cuda", "rocm", "mps"]
Backend = Literal["cuda", "mps", "cpu"]

_VENDOR_BACKEND: dict[str, Backend] = {"cuda": "cuda", "rocm": "cuda", "mps": "mps"}


@dataclass(frozen=True)
class GpuInfo:
    """One accelerator as torch sees it (index is torch's device index)."""

    index: int
    name: str
    total_mb: int
    free_mb: int | None = None
    vendor: GpuVendor = "cuda"
    compute_capability: tuple[int, int] | None = None
    # Known bfloat16 support; None means "infer from the compute capability".
    bf16: bool | None = None

    def __post_init__(self) -> None:
        if self.total_mb < 0:
            raise ValueError(f"GpuInfo.total_mb must be >= 0, got {self.total_mb}")

    @property
    def supports_bf16(self) -> bool:
        if self.bf16 is not None:
            return self.bf16
        # NVIDIA: native bf16 arrived with Ampere (compute capability 8.0).
        if self.vendor == "cuda" and self.compute_capability is not None:
            return self.compute_capability[0] >= 8
        return False

    def to_json(self) -> dict[str, object]:
        body: dict[str, object] = {
            "index": self.index,
            "name": self.name,
            "vendor": self.vendor,
            "totalMb": self.total_mb,
            "freeMb": self.free_mb,
            "bf16": self.supports_bf16,
        }
        if self.compute_capability is not None:
            major, minor = self.compute_capability
            body["computeCapability"] = f"{major}.{minor}"
        return body


@dataclass(frozen=True)
class HardwareDescription:
    """The machine: accelerators, RAM, CPUs and whether the GPUs talk over NVLink.

    `cpu_bf16`: the CPU multiplies bfloat16 natively (x86 AMX-BF16 or AVX512-BF16), where bf16
    matmuls run several times faster than float32 ones; elsewhere torch emulates them, slower."""

    gpus: tuple[GpuInfo, ...]
    ram_mb: int
    cpu_count: int
    nvlink: bool = False
    backend: Backend = "cpu"
    cpu_bf16: bool = False

    def __post_init__(self) -> None:
        if self.backend == "cpu" and self.gpus:
            raise ValueError("a cpu backend has no GPUs")
        if self.backend != "cpu" and not self.gpus:
            raise ValueError(f"backend {self.backend!r} needs at least one GPU")
        for gpu in self.gpus:
            if _VENDOR_BACKEND[gpu.vendor] != self.backend:
                raise ValueError(f"GPU {gpu.name!r} ({gpu.vendor}) on a {self.backend} backend")
        if self.ram_mb < 0 or self.cpu_count < 1:
            raise ValueError("ram_mb must be >= 0 and cpu_count >= 1")

    @property
    def gpu_count(self) -> int:
        return len(self.gpus)

    @property
    def smallest_gpu_mb(self) -> int:
        """VRAM of the smallest GPU (0 without GPUs): every rank must fit on it."""
        return min((gpu.total_mb for gpu in self.gpus), default=0)

    @classmethod
    def cpu_only(
        cls, *, ram_mb: int, cpu_count: int, cpu_bf16: bool = False
    ) -> HardwareDescription:
        return cls(
            gpus=(), ram_mb=ram_mb, cpu_count=cpu_count, backend="cpu", cpu_bf16=cpu_bf16
        )
