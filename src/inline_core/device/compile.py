"""Whether a family's transformer blocks run compiled (`torch.compile`, regional: each repeated
block, dynamic shapes), per device class, family and dtype: a pure function, as every choice here.

Compiled blocks give the same numbers as eager within float rounding; what differs is the time:
the first forward of a new shape class pays the compile (cached on disk after it), every later
one runs fused kernels. Whether that pays was measured per device class (`bench/compile_zimage.py`),
and the table below holds what was measured; `--no-compile` (`INLINE_NO_COMPILE=1`) turns it off
everywhere, `--compile` (`INLINE_COMPILE=1`) on wherever the device can. `diffusion/compile/`
does the compiling and shows its progress in health.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from inline_core.device.hardware import HardwareDescription

__all__ = ["RECOMPILE_LIMIT", "CompileChoice", "compile_choice"]

# Graphs one block's code may compile (dynamic shapes: one per shape class, such as a batch of
# one against several, or a mask present or not); past it the block runs eager for new shapes.
RECOMPILE_LIMIT = 8

# Device classes where compiled blocks were measured to pay, per compute dtype. CUDA: inductor's
# Triton kernels fuse the norms, RoPE and gates (SGLang's and diffusers' measurements; ours with
# `bench/compile_zimage.py --device cuda` when a GPU is lent). CPU (`bench/compile_zimage.py`, an
# AVX2 CPU in float32, 2 cores shared with other work): a forward 1.2-1.35x faster (tiny and
# 110M-parameter Z-Image at 512 px: RMSNorm's and the gates' elementwise ops fused), but its first
# forward compiles for 3-5 minutes cold and 1-1.5 minutes with the cache kept (dynamo traces on
# every start). The real-size transformer (dim 3840, 0.9B) in bfloat16 on an AVX512-BF16 CPU
# (2 cores, load 12-22): a step 1.84-2.33x faster (64 and 256 px; the matmuls take the same
# time, the float32 upcasts, RMSNorms and gates that eager spends a third of a step on are
# fused), its first compile 2.5-3 minutes cold and 20 s with the cache kept; the FLUX VAE's
# decode at 256 px 1.10x, its first 8 minutes cold. In float32 the real-size step is 1.27x (64
# px; its first compile 49 s cold). A whole real-size render in bfloat16 through the stacks
# (`bench/compile_render.py`: the Qwen3-4B encode, 4 steps, the FLUX VAE decode at 64 px; 4 runs,
# load 10-30 on 2 cores) is 0.96-1.12x seed-only and 0.85-1.23x with a prompt change, its steps
# 0.71-1.14x, the decode 0.41-1.45x. Where the time goes (`--profile`, every thread): a seed-only
# render's matmuls (`aten::mm`) take 3.8 s of its 5.4 s eager and 4.0 s compiled; compile fuses
# only what is around them, so 1.3x is out of its reach at this size. The matmuls themselves
# are faster from weights oneDNN packed at load (`device/matmul.py`, on without compile): the
# seed-only render 1.22-1.39x (`bench/packed_render.py`, 4 runs of 3-8 pairs, load 7-13; its
# `aten::mm` 2.38 s eager, 1.69 s packed; at 256 px its steps 1.46x), bitwise the same pixels;
# the server's seed-only render against the bare calls 1.26x and 1.40x (`bench/real_size_cpu.py`).
# Wan 2.1 1.3B's step (`bench/compile_zimage.py`, bfloat16, 64 px, 5 frames) 1.73x; the tiny
# Wan's 0.14x. Off until an end-to-end run shows it pays.
_PAYS: dict[tuple[str, str], bool] = {
    ("cuda", "bfloat16"): True,
    ("cuda", "float16"): True,
    ("cuda", "float32"): True,
    ("cpu", "float32"): False,
    ("cpu", "bfloat16"): False,
    ("cpu", "float16"): False,
}
# Families whose blocks do not compile cleanly yet (none known): named here, off everywhere.
_FAMILIES_OFF: frozenset[str] = frozenset()


@dataclass(frozen=True)
class CompileChoice:
    """The choice for one family's denoiser on this machine, and why."""

    enabled: bool
    reason: str
    dynamic: bool = True
    recompile_limit: int = RECOMPILE_LIMIT

    def to_json(self) -> dict[str, object]:
        return {
            "enabled": self.enabled,
            "reason": self.reason,
            "dynamic": self.dynamic,
            "recompileLimit": self.recompile_limit,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, object]) -> CompileChoice:
        """The choice `to_json` wrote (a worker group's ranks get the server's this way)."""
        limit = cast(int, raw.get("recompileLimit", RECOMPILE_LIMIT))
        return cls(bool(raw["enabled"]), str(raw["reason"]), bool(raw.get("dynamic", True)), limit)


def compile_choice(
    hardware: HardwareDescription,
    kind: str,
    family: str,
    dtype: str,
    *,
    stated: bool | None = None,
) -> CompileChoice:
    """Compiled blocks for `family`'s denoiser computing in `dtype` on device class `kind`
    ("cuda", "mps", "cpu"): where measured to pay (`stated` None), never (False), or wherever
    the device can (True)."""
    if stated is False:
        return CompileChoice(False, "turned off (--no-compile / INLINE_NO_COMPILE)")
    if family in _FAMILIES_OFF:
        return CompileChoice(False, f"{family}'s blocks are not compiled yet")
    if kind == "mps":
        return CompileChoice(False, "inductor's Metal backend is not used yet")
    if kind == "cpu" and hardware.cpu_count < 2:
        return CompileChoice(False, "one CPU: the compile would take the only core for minutes")
    if stated:
        return CompileChoice(True, "asked for (--compile / INLINE_COMPILE)")
    pays = _PAYS.get((kind, dtype))
    if pays is None:
        return CompileChoice(False, f"not measured on {kind} in {dtype}")
    if not pays:
        return CompileChoice(False, f"measured not to pay on {kind} in {dtype}")
    return CompileChoice(True, f"measured to pay on {kind} in {dtype}")
