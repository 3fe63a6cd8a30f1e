"""The variant is told from the model's file and gives the params a direct caller leaves null:
the 5B's size, frames, fps and flow shift (a single file brings no scheduler config; a diffusers
folder's own config keeps its shift), Wan 2.1's for a 2.1 model. The node's descriptor has
defaults of its own (Wan 2.1's size, length and rate), which every variant renders."""

from __future__ import annotations

from typing import Any

import pytest
from wan_harness import first_frame_image, submit_check, wan_rig

from inline_core.families.wan.descriptor import NODE_TYPE, WAN_DESCRIPTOR
from inline_core.families.wan.kit import WanKit
from inline_core.sampling.loop import StepLoopSampler

SHAPE = ("width", "height", "frames", "fps")
DEFAULTS = {p.name: p.default for p in WAN_DESCRIPTOR.params}
EMPTY = {**DEFAULTS, **dict.fromkeys(SHAPE)}


MODELS = (
    "wan2.2_ti2v_tiny_fp32.safetensors",
    "wan2.1_t2v_tiny_fp32.safetensors",
    "wan2.2_t2v_high_noise_tiny_fp32.safetensors",
    "wan2.2_i2v_low_noise_tiny_fp32.safetensors",
    "wan2.1_i2v_tiny_fp32.safetensors",
)


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("wan2.2_ti2v_tiny_fp32.safetensors", (1280, 704, 121, 24, 5.0)),
        ("wan2.2_ti2v_tiny_diffusers", (1280, 704, 121, 24, None)),  # its scheduler's shift
        ("wan2.1_t2v_tiny_fp32.safetensors", (832, 480, 81, 16, 3.0)),
        ("wan2.1_t2v_tiny_diffusers", (832, 480, 81, 16, None)),
        ("wan2.2_t2v_high_noise_tiny_fp32.safetensors", (1280, 720, 81, 16, 12.0)),  # A14B
        ("wan2.2_t2v_a14b_tiny_diffusers", (1280, 720, 81, 16, None)),
        ("wan2.2_i2v_low_noise_tiny_fp32.safetensors", (1280, 720, 81, 16, 5.0)),
        ("wan2.1_i2v_tiny_fp32.safetensors", (832, 480, 81, 16, 3.0)),
    ],
)
def test_null_params_take_the_models_own(
    wan_kit: WanKit, wan_sampler: StepLoopSampler, model: str, expected: tuple[Any, ...]
) -> None:
    family = wan_rig(wan_kit.root, wan_sampler).family
    params = {**EMPTY, "model": model, "seed": 3}
    inputs: dict[str, Any] = {"prompt": "a fox"}
    if "i2v" in model:  # image-to-video only
        inputs["image"] = first_frame_image(32, 32)
    sources = family.resolve(NODE_TYPE, params).require("w")
    lowered = family.lower(NODE_TYPE, params, inputs, "w", sources)
    request = lowered.request
    got = tuple(request[k] for k in ("width", "height", "frames", "fps", "shift"))
    assert got == expected
    assert lowered.take_params["width"] == expected[0]  # the take records what was rendered


@pytest.mark.parametrize("model", MODELS)
def test_the_descriptor_defaults_render_on_every_variant(
    wan_kit: WanKit, wan_sampler: StepLoopSampler, model: str
) -> None:
    """A graph that leaves the size, frames and fps out gets the descriptor's own numbers
    (Wan 2.1's 480p, 81 frames at 16 fps), and every variant takes them at submit."""
    assert tuple(DEFAULTS[k] for k in SHAPE) == (832, 480, 81, 16)
    family = wan_rig(wan_kit.root, wan_sampler).family
    params = {**DEFAULTS, "model": model, "seed": 3}
    submit_check(family, params, {"prompt", "image"} if "i2v" in model else {"prompt"})
    inputs: dict[str, Any] = {"prompt": "a fox"}
    if "i2v" in model:
        inputs["image"] = first_frame_image(32, 32)
    sources = family.resolve(NODE_TYPE, params).require("w")
    request = family.lower(NODE_TYPE, params, inputs, "w", sources).request
    assert tuple(request[k] for k in SHAPE) == (832, 480, 81, 16)


def test_set_params_win_over_the_models_own(wan_kit: WanKit, wan_sampler: StepLoopSampler) -> None:
    family = wan_rig(wan_kit.root, wan_sampler).family
    params = {**EMPTY, "model": "wan2.2_ti2v_tiny_fp32.safetensors", "seed": 3}
    params.update(width=640, height=352, frames=49, fps=12, shift=8.0)
    sources = family.resolve(NODE_TYPE, params).require("w")
    request = family.lower(NODE_TYPE, params, {"prompt": "a fox"}, "w", sources).request
    assert (request["width"], request["height"], request["frames"]) == (640, 352, 49)
    assert (request["fps"], request["shift"]) == (12, 8.0)


def test_the_default_model_renders_from_a_prompt_alone(
    wan_kit: WanKit, wan_sampler: StepLoopSampler
) -> None:
    """With no model param, the first model in the catalog that needs no image (the kit's
    `wan2.1_i2v_*` sort first and need one)."""
    family = wan_rig(wan_kit.root, wan_sampler).family
    assert family.model_param(NODE_TYPE, {}) == "wan2.1_t2v_tiny_diffusers"
    assert family.model_param(NODE_TYPE, {"model": "x"}) == "x"
