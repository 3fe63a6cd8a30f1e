"""Whether a denoiser's linear layers compute from weights oneDNN packed once at load
(`diffusion/packed_linear.py`), per device class and compute dtype: a pure function, as every
choice here. The numbers are the same as `F.linear`'s (the same oneDNN kernel); what differs is
the time and the memory (a packed copy beside each weight).

Measured (`bench/cpu_matmul.py`, the real-size Z-Image transformer's seven matmuls of a layer,
dim 3840, MLP 10240, bfloat16, on a 2-core AVX512-BF16 CPU without AMX at load 9-10; two runs):
packed against `F.linear` 1.14-1.21x at 32 tokens (a 64 px render's refiners), 1.085-1.09x at 64
(its main layer), 1.06-1.07x at 256-288 (a 256 px render's), bitwise the same numbers. One compute
thread instead of two was faster still on that loaded machine (packed 1.2-2.0x), an effect of the
load, not kept. Float32 compute on a float32 copy of the weights: 0.17-0.21x. Inductor's freezing
on the MLP: 1.03-1.28x, within 1.5 bf16 levels (it fuses the gate too). A whole real-size
Z-Image render (`bench/packed_render.py`, 64 px, 4 steps, packed and unpacked runtimes
alternating in one process; 4 runs of 3, 8, 8 and 8 pairs at load 7-13): seed-only 1.22x,
1.28x, 1.30x, 1.39x (medians; pairs 0.61-1.77x), a prompt change 1.05-1.22x, the takes bitwise
equal; the profile's matmuls 2.38 s unpacked, 1.69 s packed; with the threads waiting passively
at barriers (as the server chooses on an oversubscribed CPU, 6 pairs, load 5-7) 1.32x. Against
the bare calls (`bench/real_size_cpu.py`, which compute as diffusers does, paired; 2 runs of 6
and 8, load 4-10) the server's seed-only render took 0.79x and 0.72x their time (1.26x, 1.40x
faster), a prompt change 0.92x and 0.83x. At 256 px (3 pairs,
load 9-11) the steps run 1.46x (seed-only) and 1.92x (prompt change) faster, the whole render
1.18x and 1.33x (the VAE decode, 5-6 s there, is not a matmul). A worker group's CPU ranks
each load their own denoiser and pack it by the same choice (`rank_packing`): a split render on
2 ranks of one thread each (`bench/packed_split.py`, two groups alternating in one run, load
14-18, the takes bitwise equal) 1.10x, 1.32x and 1.24x seed-only, 1.15x, 1.23x and 1.14x a
prompt change at 64 px (3, 6 and 4 pairs; medians); at 256 px (3 pairs) 1.28x seed-only,
1.19x a prompt change; the group's start 13-21 s longer for the packing.
`--no-compile` (`INLINE_NO_COMPILE=1`) turns it off with compiled blocks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from inline_core.device.hardware import HardwareDescription
from inline_core.device.kernels import KernelChoice

__all__ = ["RankPacking", "pack_fits", "packed_linear_choice", "rank_packing"]

# Device classes and compute dtypes where packing was measured to pay. A CPU's bfloat16 matmul
# is oneDNN's either way; float32's is MKL's sgemm (oneDNN's packed float32 was not measured).
_PAYS: dict[tuple[str, str], bool] = {("cpu", "bfloat16"): True, ("cpu", "float32"): False}


def packed_linear_choice(
    hardware: HardwareDescription, kind: str, dtype: str, *, stated: bool | None = None
) -> KernelChoice:
    """Packed linear weights for a denoiser computing in `dtype` on device class `kind`
    ("cuda", "mps", "cpu"); `stated` False (`--no-compile`) turns them off."""
    if kind != "cpu":
        return KernelChoice(False, False, f"oneDNN's packed weights are a CPU kernel, not {kind}'s")
    if dtype == "bfloat16" and not hardware.cpu_bf16:
        return KernelChoice(False, False, "this CPU has no native bfloat16 (AVX512-BF16, AMX)")
    if stated is False:
        return KernelChoice(True, False, "turned off (--no-compile / INLINE_NO_COMPILE)")
    pays = _PAYS.get((kind, dtype))
    if pays is None:
        return KernelChoice(True, False, f"not measured on {kind} in {dtype}")
    if not pays:
        return KernelChoice(True, False, f"measured not to pay on {kind} in {dtype}")
    return KernelChoice(True, True, f"measured to pay on {kind} in {dtype}")


def pack_fits(packed_bytes: int, budget_bytes: int | None) -> bool:
    """Whether a part's packed copy (`packed_bytes`, new memory of its own beside its mapped
    weights) is made under the memory budget: not where it would take more than half of it, as
    `storage.kept_dtype` declines a converted copy (a real-size Wan 14B in bfloat16 maps 28 GB)."""
    return budget_bytes is None or packed_bytes * 2 <= budget_bytes


@dataclass(frozen=True)
class RankPacking:
    """What a worker group's ranks are told where the policy packs: each packs its own
    denoiser's linear weights at load, its copy within `budget_bytes` (`pack_fits`; None: no
    budget)."""

    budget_bytes: int | None

    def to_json(self) -> dict[str, int | None]:
        return {"budgetBytes": self.budget_bytes}

    @classmethod
    def from_json(cls, raw: Mapping[str, object]) -> RankPacking:
        budget = raw.get("budgetBytes")
        if budget is not None and not isinstance(budget, int):
            raise ValueError(f"a rank's packing budget must be a number of bytes, not {budget!r}")
        return cls(budget)


def rank_packing(choice: KernelChoice, budget_bytes: int | None, ranks: int) -> RankPacking | None:
    """A split's packing under the policy's `choice` (None: the ranks do not pack). Each of the
    `ranks` processes packs a copy of its own (new memory, where the weights' mapped pages are
    shared), and the server loads none under a split: the ranks share the memory budget."""
    if not choice.enabled:
        return None
    return RankPacking(None if budget_bytes is None else budget_bytes // max(1, ranks))
