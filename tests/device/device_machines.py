"""Hand-written machines for the device policy tests (no GPU needed)."""

from __future__ import annotations

from inline_core.device import GpuInfo, HardwareDescription, ModelParallelSupport

GIB = 1024

# Z-Image's transformer: Ulysses and Ring in xDiT, 30 attention heads.
ZIMAGE = ModelParallelSupport(
    family="z-image", methods=frozenset({"ulysses", "ring"}), heads=30, sequence_multiple=32
)


def cuda(
    total_mb: int, *, cc: tuple[int, int] = (8, 9), index: int = 0, name: str = "NVIDIA GPU"
) -> GpuInfo:
    return GpuInfo(index=index, name=name, total_mb=total_mb, compute_capability=cc)


def one_gpu(gpu: GpuInfo, *, ram_mb: int = 64 * GIB) -> HardwareDescription:
    return HardwareDescription(gpus=(gpu,), ram_mb=ram_mb, cpu_count=16, backend="cuda")


def gpus(count: int, *, nvlink: bool, total_mb: int = 80 * GIB) -> HardwareDescription:
    cards = tuple(cuda(total_mb, cc=(9, 0), index=i, name="H100") for i in range(count))
    return HardwareDescription(
        gpus=cards, ram_mb=512 * GIB, cpu_count=64, nvlink=nvlink, backend="cuda"
    )


def mac(working_set_mb: int, *, bf16: bool = True, ram_mb: int = 16 * GIB) -> HardwareDescription:
    gpu = GpuInfo(index=0, name="Apple MPS", total_mb=working_set_mb, vendor="mps", bf16=bf16)
    return HardwareDescription(gpus=(gpu,), ram_mb=ram_mb, cpu_count=8, backend="mps")


CPU_BOX = HardwareDescription.cpu_only(ram_mb=32 * GIB, cpu_count=8)
RTX_4090 = one_gpu(cuda(24564, name="RTX 4090"))  # 24 GB, Ada (8.9): bf16
RTX_3070 = one_gpu(cuda(7982, cc=(8, 6), name="RTX 3070"))  # 8 GB Ampere
RTX_2080_TI = one_gpu(cuda(11011, cc=(7, 5), name="RTX 2080 Ti"))  # Turing: no bf16
V100_32 = one_gpu(cuda(32501, cc=(7, 0), name="V100"))  # big but no bf16
MAC_16 = mac(10923)  # a 16 GB Mac: Metal's working set is about 2/3 of RAM
MAC_64 = mac(49152, ram_mb=64 * GIB)
# An AVX512-BF16 (Zen 4, Cooper Lake) or AMX (Sapphire Rapids) server CPU, no GPU.
BF16_CPU_BOX = HardwareDescription.cpu_only(ram_mb=32 * GIB, cpu_count=8, cpu_bf16=True)
