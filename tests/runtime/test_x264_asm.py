"""An MP4 take's bytes are the same for the same frames: x264 runs without AVX-512, whose code
wrote other bytes for the same frames depending on what the process had done before."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from inline_core.runtime.x264_asm import x264_asm

AMD_AVX512 = (
    "processor\t: 0\nflags\t\t: fpu mmx fxsr sse sse2 mmxext pni ssse3 fma sse4_1 sse4_2 avx "
    "abm bmi1 avx2 bmi2 avx512f avx512dq avx512bw avx512vl\nclflush size\t: 64\n"
)


def test_the_list_is_the_cpus_own_sets_less_avx512() -> None:
    listed = x264_asm(AMD_AVX512)
    assert listed is not None
    names = listed.split(",")
    assert "AVX512" not in names
    assert {"SSE2", "SSSE3", "SSE4.2", "AVX", "FMA3", "BMI2", "AVX2", "LZCNT", "Cache64"} <= set(
        names
    )


def test_a_set_the_cpu_lacks_is_never_named() -> None:
    """Naming one replaces x264's detection, so a set the CPU lacks would crash the encoder."""
    old = "flags\t\t: fpu mmx sse sse2 pni ssse3\n"
    assert x264_asm(old) == "MMX2,SSE,SSE2,SSE3,SSSE3"
    intel = "flags\t\t: sse sse2 mmx avx avx2 lzcnt bmi1 avx512f\n"
    assert set((x264_asm(intel) or "").split(",")) == {"MMX2", "SSE", "SSE2", "LZCNT", "AVX"} | {
        "AVX2",
        "BMI1",
    }


def test_no_x86_flags_keeps_x264s_own_detection() -> None:
    assert x264_asm("processor\t: 0\nFeatures\t: fp asimd evtstrm aes\n") is None
    assert x264_asm("") is None


# A fresh process, as the first encoders of a process were where AVX-512 wrote other bytes: on
# an AVX-512 CPU, before the list, 5 of these 6 encodes differed.
ENCODES = textwrap.dedent(
    """
    import hashlib
    import numpy as np
    from inline_core.runtime.video import Video, encode_mp4
    y, x = np.mgrid[0:64, 0:64]
    frames = np.stack(
        [np.stack([(x * 4 + t * 9) % 256, (y * 4) % 256, (x + y + t * 5) % 256], -1)
         for t in range(9)]
    ).astype(np.uint8)
    print(" ".join(hashlib.sha256(encode_mp4(Video(frames, 24))).hexdigest() for _ in range(6)))
    """
)


def test_the_same_frames_encode_to_the_same_bytes_in_a_fresh_process() -> None:
    done = subprocess.run(
        [sys.executable, "-c", ENCODES], capture_output=True, text=True, timeout=120, check=True
    )
    digests = done.stdout.split()
    assert len(digests) == 6
    assert len(set(digests)) == 1, f"{len(set(digests))} different encodings of one clip"
