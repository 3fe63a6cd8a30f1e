"""Shared helpers for the Wan tests: render through the real node runner and step loop."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from inline_core.config import Config
from inline_core.families.standalone import FamilyRig, family_rig
from inline_core.families.wan import WanFamily
from inline_core.families.wan.descriptor import WAN_DESCRIPTOR
from inline_core.graph.runner import NodeCall, NodeResult
from inline_core.runtime.context import ExecutionContext
from inline_core.runtime.file_store import FileTakeStore
from inline_core.runtime.progress import RunEvent
from inline_core.runtime.video import decode_apng
from inline_core.sampling.job import BatchedSampler

Pixels = npt.NDArray[np.int16]
_run_ids = itertools.count()
PROMPT = "a paper boat on a rainy street"
# A render small enough for the CPU tests: 3 latent frames of 4x6 latents.
SMALL: dict[str, Any] = {"width": 48, "height": 32, "frames": 9, "steps": 3, "seed": 11}


def wan_rig(models_dir: Path, sampler: BatchedSampler, **overrides: Any) -> FamilyRig:
    settings: dict[str, Any] = {"profile": "cpu", "dtype": "float32", **overrides}
    config = Config(models_dir=models_dir, **settings)
    return family_rig(WanFamily, models_dir, sampler, config=config)


def node_params(**overrides: Any) -> dict[str, Any]:
    params: dict[str, Any] = {p.name: p.default for p in WAN_DESCRIPTOR.params}
    params.update(SMALL, format="png")
    params.update(overrides)
    return params


def render(
    rig: FamilyRig,
    takes_dir: Path,
    prompt: str = PROMPT,
    *,
    on_event: Callable[[RunEvent], None] | None = None,
    **params: Any,
) -> NodeResult:
    def events(event: RunEvent) -> None:
        if on_event is not None:
            on_event(event)

    ctx = ExecutionContext(
        run_id=f"run{next(_run_ids)}", takes=FileTakeStore(takes_dir), events=events
    )
    call = NodeCall(ctx=ctx, node_id="w", params=node_params(**params), inputs={"prompt": prompt})
    return rig.run(call)


def take_frames(result: NodeResult) -> Pixels:
    (take,) = result.takes
    return decode_apng(Path(take.path).read_bytes()).astype(np.int16)


def reference_kwargs(params: Mapping[str, Any]) -> dict[str, Any]:
    """WanPipeline arguments for the same render as `node_params(**params)`."""
    import torch

    p = node_params(**params)
    return {
        "width": p["width"],
        "height": p["height"],
        "num_frames": p["frames"],
        "num_inference_steps": p["steps"],
        "guidance_scale": p["guidance"],
        "negative_prompt": p["negative_prompt"] or None,
        "generator": torch.Generator("cpu").manual_seed(p["seed"]),
        "output_type": "np",
    }


def reference_frames(pipe: Any, prompt: str = PROMPT, **params: Any) -> Pixels:
    """diffusers' frames for the same render, rounded to uint8 as its PIL output rounds them."""
    video = pipe(prompt=prompt, **reference_kwargs(params)).frames[0]
    return (np.asarray(video) * 255).round().astype(np.uint8).astype(np.int16)


def max_diff(a: Pixels, b: Pixels) -> int:
    assert a.shape == b.shape, (a.shape, b.shape)
    return int(np.abs(a - b).max())
