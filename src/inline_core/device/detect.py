"""Detect the machine once: GPUs and VRAM (torch), RAM and CPUs (psutil), NVLink (NVML).

torch and nvidia-ml-py are optional and imported only inside the functions that use them, so a
core install (no torch) detects a CPU machine. torch is the authority on which GPUs are usable:
a CPU-only torch build on a GPU box describes a CPU machine. On Linux torch is imported only
when a GPU driver's device nodes exist; where it is imported (GPU boxes, macOS) that costs about
2 s, so call `detect_hardware()` off the server's start-up path if start-up time matters.
Detection never raises: anything that fails leaves the CPU description.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol, cast

from inline_core.device.hardware import Backend, GpuInfo, HardwareDescription

log = logging.getLogger(__name__)

_MB = 1024 * 1024


@functools.cache
def detect_hardware() -> HardwareDescription:
    """The machine's description, detected on the first call and cached. Never raises."""
    try:
        return _detect()
    except Exception:
        log.warning("hardware detection failed; describing a plain CPU machine", exc_info=True)
        return HardwareDescription.cpu_only(ram_mb=0, cpu_count=os.cpu_count() or 1)


def detect_cpu() -> HardwareDescription:
    """The machine without its GPUs (no torch import): RAM, CPUs, the CPU's bf16."""
    return HardwareDescription.cpu_only(
        ram_mb=_ram_mb(), cpu_count=_cpu_count(), cpu_bf16=_cpu_bf16()
    )


def _detect() -> HardwareDescription:
    ram_mb, cpu_count = _ram_mb(), _cpu_count()
    try:
        gpus, backend = _torch_gpus(ram_mb)
    except Exception:  # a broken driver or torch build must not stop the server
        log.warning("GPU detection failed; using the CPU", exc_info=True)
        gpus, backend = (), "cpu"
    nvlink = False
    if backend == "cuda" and all(gpu.vendor == "cuda" for gpu in gpus):
        gpus, nvlink = with_nvml_details(gpus)
    return HardwareDescription(
        gpus=gpus,
        ram_mb=ram_mb,
        cpu_count=cpu_count,
        nvlink=nvlink,
        backend=backend,
        cpu_bf16=_cpu_bf16(),
    )


# x86 feature flags of native bfloat16 arithmetic (Sapphire Rapids' AMX tiles; Cooper Lake's and
# Zen 4's AVX512 dot products), as /proc/cpuinfo spells them.
BF16_CPU_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})


def cpu_bf16_from_cpuinfo(text: str) -> bool:
    """Whether /proc/cpuinfo's flags list a native bf16 instruction set."""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags" and BF16_CPU_FLAGS & set(value.split()):
            return True
    return False


def _cpu_bf16() -> bool:
    text = _read_text(Path("/proc/cpuinfo"))
    return text is not None and cpu_bf16_from_cpuinfo(text)


def _ram_mb() -> int:
    """Physical RAM, capped by a container's cgroup memory limit."""
    total = 0
    try:
        import psutil

        total = int(psutil.virtual_memory().total) // _MB
    except Exception:
        log.warning("psutil could not read the RAM size", exc_info=True)
    limit = _cgroup_memory_limit_mb()
    if limit is not None and (total == 0 or limit < total):
        return limit
    return total


def _cpu_count() -> int:
    """CPUs this process may use: its affinity mask, capped by a cgroup CPU quota."""
    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        count = os.cpu_count() or 1
    quota = _read_text(Path("/sys/fs/cgroup/cpu.max"))
    limit = cgroup_cpu_limit(quota) if quota is not None else None
    return max(1, min(count, limit) if limit is not None else count)


def _cgroup_memory_limit_mb() -> int | None:
    for path in (
        Path("/sys/fs/cgroup/memory.max"),  # cgroup v2
        Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),  # cgroup v1
    ):
        text = _read_text(path)
        if text is not None:
            return cgroup_memory_limit_mb(text)
    return None


def cgroup_memory_limit_mb(text: str) -> int | None:
    """Parse a cgroup memory limit ("max", or bytes; v1's "no limit" is a huge number)."""
    raw = text.strip()
    if not raw.isdigit():
        return None
    limit = int(raw)
    return None if limit >= 1 << 60 else limit // _MB


def cgroup_cpu_limit(text: str) -> int | None:
    """Parse cgroup v2 `cpu.max` ("max 100000" or "200000 100000") into whole CPUs."""
    parts = text.split()
    if len(parts) != 2 or not parts[0].isdigit() or not parts[1].isdigit() or parts[1] == "0":
        return None
    return max(1, math.ceil(int(parts[0]) / int(parts[1])))


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def gpu_device_nodes_present(dev: Path = Path("/dev")) -> bool:
    """Whether a GPU driver's device nodes exist (Linux), so torch is worth importing.

    CUDA opens /dev/nvidiactl and /dev/nvidiaN, ROCm /dev/kfd, WSL2 /dev/dxg: without any of
    them no GPU can be used, and a CPU-only box is described without the ~2 s torch import.
    """
    if (dev / "nvidiactl").exists() or (dev / "kfd").exists() or (dev / "dxg").exists():
        return True
    try:
        return any(entry.name.startswith("nvidia") for entry in dev.iterdir())
    except OSError:
        return True  # cannot tell: let torch decide


def _torch_gpus(ram_mb: int) -> tuple[tuple[GpuInfo, ...], Backend]:
    if sys.platform.startswith("linux") and not gpu_device_nodes_present():
        return (), "cpu"
    if importlib.util.find_spec("torch") is None:
        return (), "cpu"
    import torch

    if torch.cuda.is_available():
        # ROCm builds of torch expose AMD GPUs through the cuda API; torch treats every ROCm
        # architecture it supports as bf16-capable.
        rocm = torch.version.hip is not None
        gpus: list[GpuInfo] = []
        for index in range(torch.cuda.device_count()):
            props = _cuda_properties(index)
            gpus.append(
                GpuInfo(
                    index=index,
                    name=props.name,
                    total_mb=int(props.total_memory) // _MB,
                    vendor="rocm" if rocm else "cuda",
                    compute_capability=(props.major, props.minor),
                    bf16=True if rocm else None,
                )
            )
        if gpus:
            return tuple(gpus), "cuda"
    if torch.backends.mps.is_available():
        # Apple GPUs share RAM; Metal's recommended working set is what they may use.
        total = int(torch.mps.recommended_max_memory()) // _MB or ram_mb
        try:
            torch.ones(1, dtype=torch.bfloat16, device="mps")
            bf16 = True
        except Exception:  # macOS before 14 has no bf16 on MPS
            bf16 = False
        return (GpuInfo(index=0, name="Apple MPS", total_mb=total, vendor="mps", bf16=bf16),), "mps"
    return (), "cpu"


class _CudaProperties(Protocol):
    name: str
    major: int
    minor: int
    total_memory: int
    uuid: object


def _cuda_properties(index: int) -> _CudaProperties:
    import torch

    # torch leaves get_device_properties' return type unannotated; _CudaProperties names the
    # fields we read.
    return cast(_CudaProperties, torch.cuda.get_device_properties(index))  # pyright: ignore[reportUnknownMemberType]


class _MemoryInfo(Protocol):
    total: int
    free: int


class _Nvml(Protocol):
    """The slice of nvidia-ml-py (`pynvml`) used here; the package itself is untyped."""

    NVML_FEATURE_ENABLED: int
    NVML_NVLINK_MAX_LINKS: int

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> object: ...
    def nvmlDeviceGetUUID(self, handle: object) -> str | bytes: ...
    def nvmlDeviceGetMemoryInfo(self, handle: object) -> _MemoryInfo: ...
    def nvmlDeviceGetNvLinkState(self, handle: object, link: int) -> int: ...


def with_nvml_details(gpus: tuple[GpuInfo, ...]) -> tuple[tuple[GpuInfo, ...], bool]:
    """Add free memory and NVLink from NVML when nvidia-ml-py and the driver allow it."""
    try:
        nvml = cast(_Nvml, importlib.import_module("pynvml"))
        nvml.nvmlInit()
    except Exception:  # not installed, or no NVIDIA driver
        return gpus, False
    try:
        handles = _nvml_handles_for(nvml, gpus)
        if handles is None:
            return gpus, False
        enriched = tuple(
            replace(gpu, free_mb=int(nvml.nvmlDeviceGetMemoryInfo(handle).free) // _MB)
            for gpu, handle in zip(gpus, handles, strict=True)
        )
        links = [_active_nvlinks(nvml, handle) for handle in handles]
        return enriched, nvlink_connected(links)
    except Exception:
        log.warning("NVML query failed; assuming PCIe", exc_info=True)
        return gpus, False
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            log.debug("nvmlShutdown failed", exc_info=True)


def _nvml_handles_for(nvml: _Nvml, gpus: tuple[GpuInfo, ...]) -> list[object] | None:
    """NVML handles for torch's devices, matched by UUID (CUDA_VISIBLE_DEVICES and CUDA's device
    order can differ from NVML's), else by index when nothing is hidden."""
    by_uuid: dict[str, object] = {}
    count = nvml.nvmlDeviceGetCount()
    for index in range(count):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        by_uuid[_uuid_key(nvml.nvmlDeviceGetUUID(handle))] = handle
    uuids = [_uuid_key(_cuda_properties(gpu.index).uuid) for gpu in gpus]
    if all(uuid in by_uuid for uuid in uuids):
        return [by_uuid[uuid] for uuid in uuids]
    if count == len(gpus) and "CUDA_VISIBLE_DEVICES" not in os.environ:
        return [nvml.nvmlDeviceGetHandleByIndex(gpu.index) for gpu in gpus]
    return None


def _uuid_key(uuid: object) -> str:
    text = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
    return text.strip().lower().removeprefix("gpu-")


def _active_nvlinks(nvml: _Nvml, handle: object) -> int:
    active = 0
    for link in range(nvml.NVML_NVLINK_MAX_LINKS):
        try:
            if nvml.nvmlDeviceGetNvLinkState(handle, link) == nvml.NVML_FEATURE_ENABLED:
                active += 1
        except Exception:  # NotSupported / InvalidArgument for links the GPU lacks
            continue
    return active


def nvlink_connected(active_links: Sequence[int]) -> bool:
    """NVLink counts only when there are several GPUs and every one has an active link: with
    some GPUs on PCIe, a split's all-to-all would still cross PCIe."""
    return len(active_links) > 1 and all(count > 0 for count in active_links)
