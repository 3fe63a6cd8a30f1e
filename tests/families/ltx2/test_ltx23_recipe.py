"""LTX-2.3 told from LTX-2.0 by its files (`stack_version.py`: its transformer's
timestep-modulated cross-attention), each stack rendering its own official ComfyUI template's
two-stage recipe where the params leave it (`versions.py`), the take saying which ran.

2.3's recipe (`video_ltx2_3_t2v.json`): the first pass on the 8 distilled sigmas, the refining
pass on 0.85, 0.725, 0.4219, both euler and unguided. Parity on the tiny 2.3 stack against
diffusers' classes chained the same way (`test_ltx2_upscale.py`'s chain, its tolerances). An
upsampler made for LTX-2.0 is refused on the 2.3 stack, naming both versions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ltx2_harness import PROMPT, ltx2_rig, max_diff, node_params, render, take_audio, take_frames
from test_ltx2_upscale import AUDIO_TOLERANCE, RENDER, TOLERANCE, diffusers_chain

from inline_core.diffusion.libs import diffusers, module
from inline_core.errors import InvalidRequest
from inline_core.families.ltx2.descriptor import NODE_TYPE
from inline_core.families.ltx2.kit import FOLDER, LTX2Kit, build_upsampler
from inline_core.families.ltx2.kit_ltx23 import FOLDER as FOLDER_23
from inline_core.families.ltx2.kit_ltx23 import write_ltx23_kit
from inline_core.families.ltx2.kit_single_file import write_upsampler_file
from inline_core.families.ltx2.manual_sigmas import parse_sigmas
from inline_core.families.ltx2.stack_version import stack_version
from inline_core.families.ltx2.versions import DISTILLED_SIGMAS, LTX2, LTX23, VERSIONS
from inline_core.sampling.loop import StepLoopSampler

LEFT_TO_THE_MODEL: dict[str, Any] = {"upscale": True, "steps": None}  # sampler, guidances unset


LTX20_UPSAMPLER = "ltx-2-spatial-upscaler-x2-tiny.safetensors"  # made as LTX-2.0's


@pytest.fixture(scope="module")
def ltx23_kit(tmp_path_factory: pytest.TempPathFactory) -> LTX2Kit:
    """The tiny 2.3 stack, its own upsampler in its folder, and an LTX-2.0 upsampler file."""
    kit = write_ltx23_kit(tmp_path_factory.mktemp("ltx23") / "models")
    write_upsampler_file(build_upsampler(), kit.root / "latent_upscale_models" / LTX20_UPSAMPLER)
    return kit


def took(kit: LTX2Kit, loop: StepLoopSampler, folder: str, **params: Any) -> dict[str, Any]:
    """The take's params a render of `params` on the kit's stack would carry (lowered alone)."""
    rig = ltx2_rig(kit.root, loop)
    asked = node_params(model=folder, **{**LEFT_TO_THE_MODEL, **params})
    lowered = rig.family.lower(NODE_TYPE, asked, {"prompt": PROMPT}, "l", rig.sources(folder))
    return lowered.take_params


def test_each_stack_is_read_as_its_own_version(
    ltx2_kit: LTX2Kit, ltx23_kit: LTX2Kit, ltx2_sampler: StepLoopSampler
) -> None:
    for kit, folder, version in ((ltx2_kit, FOLDER, LTX2), (ltx23_kit, FOLDER_23, LTX23)):
        transformer = ltx2_rig(kit.root, ltx2_sampler).sources(folder).get("transformer")
        assert stack_version(transformer, None) == version


def test_each_version_fills_what_the_params_leave_with_its_own_template(
    ltx2_kit: LTX2Kit, ltx23_kit: LTX2Kit, ltx2_sampler: StepLoopSampler
) -> None:
    ltx20 = took(ltx2_kit, ltx2_sampler, FOLDER)
    ltx23 = took(ltx23_kit, ltx2_sampler, FOLDER_23)
    assert (ltx20["model_version"], ltx23["model_version"]) == (LTX2, LTX23)
    assert (ltx20["steps"], ltx20["guidance"], ltx20["audio_guidance"]) == (20, 4.0, 4.0)
    assert ltx20["refine_sigmas"] == "0.909375, 0.725, 0.421875, 0"  # test_ltx20_recipe.py
    assert (ltx23["sampler"], ltx23["refine_sampler"]) == ("euler", "euler")
    assert (ltx23["steps"], ltx23["guidance"], ltx23["audio_guidance"]) == (8, 1.0, 1.0)
    assert ltx23["refine_sigmas"] == "0.85, 0.725, 0.4219, 0"
    given = took(
        ltx23_kit, ltx2_sampler, FOLDER_23, sampler="euler_ancestral", refine_sigmas="0.9, 0.5, 0"
    )
    assert (given["sampler"], given["refine_sampler"]) == ("euler_ancestral", "euler")
    assert given["refine_sigmas"] == "0.9, 0.5, 0"


def test_ltx23_two_stage_render_on_its_template_equals_diffusers_chained_classes(
    ltx23_kit: LTX2Kit, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    import torch

    folder = str(ltx23_kit.diffusers_dir)
    pipe: Any = diffusers().LTX2Pipeline.from_pretrained(
        folder, dtype=torch.float32, local_files_only=True
    )
    pipe.set_progress_bar_config(disable=True)
    upsampler: Any = module("diffusers.pipelines.ltx2.latent_upsampler").LTX2LatentUpsamplerModel
    upsampler = upsampler.from_pretrained(f"{folder}/latent_upsampler", local_files_only=True)
    rig = ltx2_rig(ltx23_kit.root, ltx2_sampler)
    params = {k: v for k, v in RENDER.items() if k not in ("prompt", "guidance")}
    result = render(rig, tmp_path, model=FOLDER_23, **{**params, **LEFT_TO_THE_MODEL})
    frames, sound = take_frames(result), take_audio(result)
    recipe = VERSIONS[LTX23]
    sigmas = list(parse_sigmas(DISTILLED_SIGMAS, "test"))
    first: dict[str, Any] = {"sigmas": sigmas, "guidance_scale": 1.0, "audio_guidance_scale": 1.0}
    want, want_sound = diffusers_chain(
        pipe, upsampler.eval(), None, first=first, refine_sigmas=recipe.refine_sigmas
    )
    assert frames.shape == want.shape == (5, 64, 64, 3)
    assert max_diff(frames, want) <= TOLERANCE
    assert frames.std() > 1.0
    reference_16 = np.round(np.clip(want_sound, -1, 1) * 32767.0) / 32767.0
    assert float(np.abs(sound.samples - reference_16).max()) <= AUDIO_TOLERANCE
    ran = result.takes[0].params
    assert (ran["model_version"], ran["sampler"], ran["steps"]) == (LTX23, "euler", 8)


def test_an_ltx20_upsampler_on_the_ltx23_stack_is_a_422_naming_both_versions(
    ltx23_kit: LTX2Kit, ltx2_sampler: StepLoopSampler
) -> None:
    rig = ltx2_rig(ltx23_kit.root, ltx2_sampler)
    params = node_params(model=FOLDER_23, upscale_model=LTX20_UPSAMPLER, **LEFT_TO_THE_MODEL)
    with pytest.raises(InvalidRequest) as caught:
        rig.check("l", params)
    said = caught.value.message
    assert str(ltx23_kit.root / "latent_upscale_models" / LTX20_UPSAMPLER) in said
    assert "made for LTX-2.0" in said and "this model is LTX-2.3" in said
