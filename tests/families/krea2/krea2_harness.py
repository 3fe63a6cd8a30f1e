"""Helpers of the Krea 2 tests: a rig on a kit's folder, and a `krea/krea-2` node rendered
through it to pixels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from inline_core.config import Config
from inline_core.families.krea2 import Krea2Family
from inline_core.families.krea2.descriptor import KREA2_DESCRIPTOR
from inline_core.families.krea2.kit import Krea2Kit
from inline_core.families.standalone import FamilyRig, family_rig
from inline_core.graph.runner import NodeCall
from inline_core.sampling.loop import StepLoopSampler
from tests.families.node_context import node_context


def rig(kit: Krea2Kit, sampler: StepLoopSampler) -> FamilyRig:
    config = Config(models_dir=kit.root, profile="cpu", dtype="float32")
    return family_rig(Krea2Family, kit.root, sampler, config=config)


def node_call(tmp: Path, prompt: str, loras: Any = None, **params: Any) -> NodeCall:
    defaults = {p.name: p.default for p in KREA2_DESCRIPTOR.params}
    ctx = node_context(tmp)
    inputs: dict[str, Any] = {"prompt": prompt}
    if loras:
        inputs["loras"] = loras
    return NodeCall(ctx=ctx, node_id="k", params={**defaults, **params}, inputs=inputs)


def to_pixels(path: Path | str) -> np.ndarray[Any, Any]:
    with Image.open(path) as png:
        return np.asarray(png.convert("RGB"), dtype=np.int16)


def render(r: FamilyRig, tmp: Path, prompt: str, **params: Any) -> np.ndarray[Any, Any]:
    (take,) = r.run(node_call(tmp, prompt, **params)).takes
    return to_pixels(take.path)
