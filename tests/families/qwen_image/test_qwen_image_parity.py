"""Pixel parity: a take rendered through the node runner and the batched sampler equals what
diffusers' own QwenImagePipeline and QwenImageEditPlusPipeline render for the same inputs, seed
and steps on the CPU, from the kit's ComfyUI files and its diffusers folders alike (Edit 2509 and
Edit 2511)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from qwen_harness import (
    EDIT_2511_FOLDER,
    EDIT_2511_MODEL,
    EDIT_FOLDER,
    EDIT_MODEL,
    TEXT_FOLDER,
    TEXT_MODEL,
    max_diff,
    qwen_rig,
    reference_image,
    render,
    small_references,
    source_image,
    take_pixels,
)

from inline_core.families.qwen_image.kit import KitPaths
from inline_core.families.standalone import FamilyRig
from inline_core.sampling.loop import StepLoopSampler

# A guided forward runs the positive and negative prompts as two rows of one forward, padded to
# the longer under a mask (diffusers runs two forwards): float ordering may move a level.
TOLERANCE = 1

TEXT_CASES = [
    pytest.param({"width": 64, "height": 64, "steps": 3, "guidance": 1.0}, id="square-nocfg"),
    pytest.param(
        {"width": 96, "height": 48, "steps": 3, "guidance": 4.0, "negative_prompt": "blurry"},
        id="wide-cfg",
    ),
    pytest.param({"width": 48, "height": 80, "steps": 2, "guidance": 2.5}, id="tall-cfg-empty"),
]


@pytest.fixture(scope="module")
def rig(qwen_kit: KitPaths, qwen_sampler: StepLoopSampler) -> Iterator[FamilyRig]:
    made = qwen_rig(qwen_kit.root, qwen_sampler)
    yield made
    made.close()


@pytest.mark.parametrize("model", [TEXT_MODEL, TEXT_FOLDER], ids=["comfy", "diffusers"])
@pytest.mark.parametrize("params", TEXT_CASES)
def test_text_to_image_matches_diffusers(
    rig: FamilyRig, text_reference: Any, tmp_path: Path, params: dict[str, Any], model: str
) -> None:
    ours = take_pixels(render(rig, tmp_path, model=model, **params))
    assert ours.shape == (params["height"], params["width"], 3)
    assert max_diff(ours, reference_image(text_reference, **params)) <= TOLERANCE
    assert ours.std() > 1.0  # a real picture of noise, not a flat fill


EDIT_CASES = [
    pytest.param(1, {"width": 48, "height": 64, "steps": 2, "guidance": 1.0}, id="one-nocfg"),
    pytest.param(
        2,
        {"width": 64, "height": 48, "steps": 2, "guidance": 3.0, "negative_prompt": "dark"},
        id="two-cfg",
    ),
]


# Each edit model in both layouts, and diffusers' pipeline over that model's folder. Edit 2511's
# file is in Comfy-Org's layout: diffusers' names and ComfyUI's `__index_timestep_zero__` marker.
EDIT_MODELS = [
    pytest.param(EDIT_MODEL, "edit_reference", id="2509-comfy"),
    pytest.param(EDIT_FOLDER, "edit_reference", id="2509-diffusers"),
    pytest.param(EDIT_2511_MODEL, "edit_2511_reference", id="2511-comfy"),
    pytest.param(EDIT_2511_FOLDER, "edit_2511_reference", id="2511-diffusers"),
]


@pytest.mark.parametrize(("model", "reference"), EDIT_MODELS)
@pytest.mark.parametrize(("count", "params"), EDIT_CASES)
def test_edit_matches_diffusers(
    rig: FamilyRig,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    count: int,
    params: dict[str, Any],
    model: str,
    reference: str,
) -> None:
    edit_reference: Any = request.getfixturevalue(reference)
    small_references(monkeypatch)
    images = [source_image(40, 56, seed=1), source_image(72, 40, seed=2)][:count]
    prompt = "make the sky green"
    ours = take_pixels(render(rig, tmp_path, prompt, model=model, images=images, **params))
    ref = reference_image(edit_reference, prompt, images=images, **params)
    assert max_diff(ours, ref) <= TOLERANCE
    assert ours.std() > 1.0


def test_references_change_the_edit(
    rig: FamilyRig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small_references(monkeypatch)
    first = [source_image(48, 48, seed=3)]
    base = take_pixels(render(rig, tmp_path, model=EDIT_MODEL, images=first))
    again = take_pixels(render(rig, tmp_path, model=EDIT_MODEL, images=first))
    other = take_pixels(render(rig, tmp_path, model=EDIT_MODEL, images=[source_image(48, 48, 4)]))
    assert max_diff(base, again) == 0
    assert max_diff(base, other) > 0
