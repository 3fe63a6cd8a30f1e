"""The x264 instruction sets a take is encoded with: what this CPU has, less AVX-512.

x264 (PyAV's libx264) encodes the same frames to other bytes on a CPU with AVX-512: in one
process the first encoders of a 64x64 clip each wrote other bytes, and beside a busy loop 25
encodes of a 192x128 clip came out 8 ways, single-threaded or not. Its AVX-512 code reads memory
whose contents depend on what the process did before, so a take's bytes depended on the
machine's load and the run's history (an LTX-2 take re-run once differed from its first run).
Without AVX-512, every thread setting gave one output (`tests/runtime/test_x264_asm.py`).

x264 takes its instruction sets as a list (`asm=`) that replaces its own detection, so the list
is built from the CPU's flags: naming one the CPU lacks would crash the encoder. Where the
flags cannot be read (not Linux, not x86) x264 keeps its own detection.
"""

from __future__ import annotations

import functools
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
# Linux's flag -> x264's name for it, in x264's order; AVX-512 left out on purpose.
_X264_NAMES = (
    ("mmxext", "MMX2"),
    ("sse", "SSE"),
    ("sse2", "SSE2"),
    ("abm", "LZCNT"),
    ("pni", "SSE3"),
    ("ssse3", "SSSE3"),
    ("sse4_1", "SSE4.1"),
    ("sse4_2", "SSE4.2"),
    ("avx", "AVX"),
    ("xop", "XOP"),
    ("fma4", "FMA4"),
    ("fma", "FMA3"),
    ("bmi1", "BMI1"),
    ("bmi2", "BMI2"),
    ("avx2", "AVX2"),
)


def x264_asm(cpuinfo: str) -> str | None:
    """x264's `asm=` list for the CPU `cpuinfo` (/proc/cpuinfo's text) describes, without
    AVX-512; None where it names no x86 flags."""
    line = next((ln for ln in cpuinfo.splitlines() if ln.startswith("flags")), None)
    if line is None or "sse2" not in line.split(":", 1)[-1].split():
        return None
    flags = set(line.split(":", 1)[1].split())
    if "lzcnt" in flags:  # Intel names it apart from AMD's abm
        flags.add("abm")
    if "mmx" in flags and "sse" in flags:  # every SSE CPU has the MMX extensions x264 means
        flags.add("mmxext")
    names = [name for flag, name in _X264_NAMES if flag in flags]
    if "clflush size\t: 64" in cpuinfo or "clflush size : 64" in cpuinfo:
        names.append("Cache64")  # as x264's own detection marks 64-byte cache lines
    return ",".join(names)


@functools.cache
def take_x264_asm() -> str | None:
    """This machine's list (read once), or None: x264's own detection."""
    try:
        return x264_asm(CPUINFO.read_text(errors="replace"))
    except OSError:
        return None
