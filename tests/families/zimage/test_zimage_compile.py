"""A Z-Image render through the server's stacks with compiled blocks (`INLINE_COMPILE`): the
transformer's and the VAE decoder's, the same pixels as eager within a level, and health shows
the compiled blocks warm.

Compiles the tiny transformer's and VAE decoder's blocks once (shared with tests/diffusion's
compile tests when they run in one process; minutes on a loaded CPU when inductor's cache is
cold)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

import pytest
from torch._inductor.runtime.cache_dir_utils import default_cache_dir
from zimage_harness import make_runner, max_diff, render, take_pixels

from inline_core.diffusion.compile.cache import CACHE_VARIABLE
from inline_core.families.zimage.kit import KitPaths
from inline_core.sampling.loop import StepLoopSampler
from tests.worker_groups import XDIST_INDUCTOR

# On the xdist worker of the other module that compiles the same blocks: one cold compile.
pytestmark = pytest.mark.xdist_group(XDIST_INDUCTOR)


def test_compiled_render_equals_eager(
    kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Inductor's own default folder, kept between runs of the suite (not the tmp data folder).
    monkeypatch.setenv(CACHE_VARIABLE, os.environ.get(CACHE_VARIABLE) or default_cache_dir())
    eager = make_runner(kit.root, sampler, data_dir=tmp_path / "eager")
    compiled = make_runner(kit.root, sampler, data_dir=tmp_path / "compiled", compile=True)
    try:
        expected = take_pixels(render(eager, tmp_path / "a", steps=4, seed=11))
        got = take_pixels(render(compiled, tmp_path / "b", steps=4, seed=11))
        assert max_diff(got, expected) <= 1
        stats = compiled.stats()
        assert "compile" not in eager.stats() or eager.stats()["compile"] == stats["compile"]
        compile_stats = cast(dict[str, Any], stats["compile"])
        (block,) = [b for b in compile_stats["blocks"] if b["block"] == "ZImageTransformerBlock"]
        assert block["state"] == "warm" and block["compiledCalls"] > 0
        assert block["graphs"] <= block["recompileLimit"]
        assert any(m["model"].startswith("Z-Image") for m in compile_stats["models"])
        decoded = [b for b in compile_stats["blocks"] if b["block"] == "UpDecoderBlock2D"]
        assert decoded and decoded[0]["state"] == "warm" and decoded[0]["compiledCalls"] > 0
        assert any(m["model"] == "Z-Image vae decoder" for m in compile_stats["models"])
    finally:
        eager.close()
        compiled.close()
