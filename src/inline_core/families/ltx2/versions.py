"""What each LTX-2 version renders where a request leaves it to the model (torch-free; read at
submit): one table, a row per version, each row's two-stage recipe its official ComfyUI
template's (Comfy-Org/workflow_templates).

One pass, every version (no template renders one): diffusers' `LTX2Pipeline` defaults (40
steps on its own schedule, euler, guidance 4 for the video and 7 for the soundtrack).

Two stages (`upscale`), from the templates in the installed `comfyui-workflow-templates-json`
0.1.123 (`comfyui_workflow_templates_json/templates/`):
- LTX-2.0, `video_ltx2_t2v.json` and `video_ltx2_i2v.json` (their "Text to Video (LTX 2.0)"
  subgraph): the first pass on LTXVScheduler at 20 steps and its published shifts (2.05,
  0.95, stretched to 0.1: the node's own schedule) under CFGGuider at 4 (both streams);
  LTXVLatentUpsampler; the refining pass on ManualSigmas "0.909375, 0.725, 0.421875, 0.0"
  (diffusers' `STAGE_2_DISTILLED_SIGMA_VALUES`) under CFGGuider at 1 (unguided). The two
  templates differ in their KSamplerSelects only: text to video euler_ancestral on both passes,
  image to video euler first and gradient_estimation refining. Their distilled LoRA at 1 on the
  refining pass is the request's to give (`loras`).
- LTX-2.3 (told from 2.0 by its transformer's files, `stack_version.py`),
  `video_ltx2_3_t2v.json` and `video_ltx2_3_i2v.json`: the first pass on ManualSigmas of
  diffusers' `DISTILLED_SIGMA_VALUES` with euler under CFGGuider at 1 (unguided);
  LTXVLatentUpsampler; the refining pass on ManualSigmas "0.85, 0.7250, 0.4219, 0.0" with
  euler, unguided. Its distilled LoRA at 0.5 on both passes is the request's to give (`loras`),
  as every LoRA.
- LTX-2.5, `video_ltx2_5_t2v.json` and `video_ltx2_5_i2v.json`: the first pass on ManualSigmas
  "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0" (diffusers'
  `DISTILLED_SIGMA_VALUES`) with euler_ancestral under LTXVDualCFGGuider at 1 and 1 (unguided,
  both streams); LTXVLatentUpsampler; the refining pass on ManualSigmas "0.85, 0.7250, 0.4219,
  0.0" with euler_ancestral, unguided, renoised from the first pass's latents to 0.85.

A param the request gives overrides its row: `sigmas` (or `steps`) the first pass's levels,
`sampler`, `guidance`, `audio_guidance`, `refine_sigmas`, `refine_sampler`. A row is its text to
video template's; `IMAGE_TO_VIDEO` holds where an image-to-video template differs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from inline_core.families.ltx2.request import REFINE_SIGMAS

# diffusers' LTX2Pipeline's own: the one-pass defaults of every version.
ONE_PASS: dict[str, Any] = {"steps": 40, "sampler": "euler", "guidance": 4.0, "audio_guidance": 7.0}
# diffusers' DISTILLED_SIGMA_VALUES, as ComfyUI's distilled templates write them.
DISTILLED_SIGMAS = "1.0, 0.99375, 0.9875, 0.98125, 0.975, 0.909375, 0.725, 0.421875, 0.0"
LTX2, LTX23, LTX25 = "ltx-2", "ltx-2.3", "ltx-2.5"


@dataclass(frozen=True)
class TwoStage:
    """A version's two-stage recipe: what `upscale` renders where the request names none of it."""

    first_sigmas: str  # the first pass's levels, as ManualSigmas writes them ("": `steps`)
    steps: int | None  # without first_sigmas, the first pass's on the node's own schedule
    sampler: str  # the first pass's ("": the one-pass default)
    guidance: float | None  # both streams' on the first pass (None: the one-pass defaults)
    refine_sigmas: tuple[float, ...]  # the refining pass's levels before the final 0
    refine_sampler: str  # the refining pass's ("": the first pass's sampler)


VERSIONS: dict[str, TwoStage] = {
    LTX2: TwoStage("", 20, "euler_ancestral", 4.0, REFINE_SIGMAS, "euler_ancestral"),
    LTX23: TwoStage(DISTILLED_SIGMAS, None, "euler", 1.0, (0.85, 0.725, 0.4219), "euler"),
    LTX25: TwoStage(
        DISTILLED_SIGMAS, None, "euler_ancestral", 1.0, (0.85, 0.725, 0.4219), "euler_ancestral"
    ),
}
# Where a version's image-to-video template differs from its text-to-video one.
IMAGE_TO_VIDEO: dict[str, TwoStage] = {
    LTX2: replace(VERSIONS[LTX2], sampler="euler", refine_sampler="gradient_estimation"),
}


def recipe(version: str, image: bool) -> TwoStage:
    """The version's two-stage recipe, its image-to-video template's with a first frame."""
    return IMAGE_TO_VIDEO.get(version, VERSIONS[version]) if image else VERSIONS[version]


def first_pass(params: Mapping[str, Any], version: str, image: bool = False) -> dict[str, Any]:
    """`steps`, `sampler`, `guidance`, `audio_guidance` and `sigmas` as the render runs them:
    the request's where it gives them, else its version's two-stage recipe with `upscale` (its
    image-to-video template's with a first frame, `image`), else the one-pass defaults."""
    row = recipe(version, image) if params.get("upscale") else None
    own: dict[str, Any] = {}
    if row is not None:
        own = {"sampler": row.sampler or None, "sigmas": row.first_sigmas or None}
        own["steps"] = row.steps
        own["guidance"] = own["audio_guidance"] = row.guidance
    given_levels = params.get("sigmas") or params.get("steps") is not None
    resolved = {
        name: next(v for v in (params.get(name), own.get(name), default) if v not in (None, ""))
        for name, default in ONE_PASS.items()
    }
    resolved["sigmas"] = params.get("sigmas") or ("" if given_levels else own.get("sigmas") or "")
    return resolved


def refining_pass(params: Mapping[str, Any], version: str, image: bool = False) -> tuple[str, str]:
    """The refining pass's sigmas (ManualSigmas' text) and sampler ("": the first pass's)."""
    row = recipe(version, image)
    sigmas = str(params.get("refine_sigmas") or sigmas_text(row.refine_sigmas))
    return sigmas, str(params.get("refine_sampler") or row.refine_sampler)


def sigmas_text(levels: tuple[float, ...]) -> str:
    return ", ".join(f"{v:g}" for v in (*levels, 0.0))
