"""Frame parity: a Wan take rendered through the node runner and the step loop equals what
diffusers' own `WanPipeline` renders from the same tiny weights, seed and params, pixel for pixel.

Compared on the lossless APNG take. Exact for the diffusers folder without guidance: the same
float32 ops in the same order on the same (owned, aligned) weights. Within a level or two, on a
handful of pixels, otherwise, for two reasons the check measures: with guidance our forward runs
the positive and negative prompts as one batch of two where diffusers runs two batches of one
(CPU kernels block a batch of two differently: a few ulps); and the ComfyUI file's weights are
used in place from the mapped file, at offsets safetensors aligns to 8 bytes, where diffusers'
own copies are 64-byte aligned, so the vector kernels take other paths (a few ulps again).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from wan_harness import max_diff, reference_frames, render, take_frames, wan_rig

from inline_core.families.wan.kit import WanKit
from inline_core.sampling.loop import StepLoopSampler

CASES = [
    pytest.param({"guidance": 1.0}, id="nocfg"),
    pytest.param({"guidance": 4.0, "negative_prompt": "blurry, static"}, id="cfg"),
    pytest.param({"guidance": 3.0, "width": 32, "height": 48, "frames": 5, "steps": 4}, id="tall"),
    pytest.param({"guidance": 1.0, "shift": 5.0}, id="shift"),
]
TOLERANCE = 2  # levels of 255
MAX_DIFFERING = 0.01  # share of channel values allowed to differ at all
MODELS = ["wan2.1_t2v_tiny_fp32.safetensors", "wan2.1_t2v_tiny_diffusers"]


@pytest.mark.parametrize("model", MODELS, ids=["comfy", "diffusers"])
@pytest.mark.parametrize("params", CASES)
def test_text_to_video_matches_wan_pipeline(
    wan_kit: WanKit,
    wan_sampler: StepLoopSampler,
    wan_reference: Any,
    tmp_path: Path,
    model: str,
    params: dict[str, Any],
) -> None:
    rig = wan_rig(wan_kit.root, wan_sampler)
    ours = take_frames(render(rig, tmp_path, model=model, **params))
    shift = params.get("shift")
    if shift is not None:  # the reference samples at the same shift
        from diffusers import UniPCMultistepScheduler  # pyright: ignore[reportPrivateImportUsage]

        scheduler: Any = wan_reference.scheduler
        wan_reference.scheduler = UniPCMultistepScheduler.from_config(  # pyright: ignore
            scheduler.config, flow_shift=shift
        )
        try:
            ref = reference_frames(wan_reference, **params)
        finally:
            wan_reference.scheduler = scheduler
    else:
        ref = reference_frames(wan_reference, **params)
    frames = params.get("frames", 9)
    assert ours.shape == (frames, params.get("height", 32), params.get("width", 48), 3)
    exact = model.endswith("_diffusers") and params["guidance"] <= 1
    assert max_diff(ours, ref) <= (0 if exact else TOLERANCE)
    assert float((ours != ref).mean()) <= MAX_DIFFERING
    assert ours.std() > 1.0  # frames of noise, not a flat fill
    assert int(abs(ours[0] - ours[-1]).max()) > 0  # the frames differ from one another
