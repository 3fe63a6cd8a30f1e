"""A primitive graph renders what the `alibaba/z-image-turbo` node renders, to the last pixel; its
other samplers, schedules and batches render what diffusers' ZImagePipeline renders with them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from primitive_graphs import MODEL, Rig, make_rig, primitive_graph, take_pixels
from zimage_harness import max_diff, pixels, render
from zimage_harness import take_pixels as node_take_pixels

from inline_core.diffusion.flow.samplers import model_sigmas
from inline_core.families.zimage.kit import KitPaths
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 3  # as the node's own parity tests: float ordering may move a channel by a level


@pytest.fixture
def rig(kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path) -> Rig:
    return make_rig(kit.root, sampler, tmp_path)


NODE_CASES = [
    pytest.param({"width": 64, "height": 64, "steps": 4, "guidance": 0.0}, id="nocfg"),
    pytest.param(
        {"width": 96, "height": 64, "steps": 5, "guidance": 3.0, "negative_prompt": "blurry"},
        id="cfg-negative",
    ),
    pytest.param({"width": 64, "height": 80, "steps": 3, "guidance": 2.5}, id="cfg-empty-negative"),
    # The node's own sampler and schedule, as `sample`'s (whose parity with diffusers' schedulers
    # the tests below pin): a multistep sampler on Karras sigmas, an SDE one drawing seeded noise,
    # and CFG++ where the node guides.
    pytest.param(
        {"width": 64, "height": 64, "steps": 4, "guidance": 0.0}
        | {"sampler": "dpmpp_2m", "schedule": "karras"},
        id="dpmpp_2m-karras",
    ),
    pytest.param(
        {"width": 64, "height": 64, "steps": 4, "guidance": 0.0}
        | {"sampler": "euler_ancestral", "schedule": "beta"},
        id="euler_ancestral-beta",
    ),
    pytest.param(
        {"width": 64, "height": 64, "steps": 3, "guidance": 2.0}
        | {"sampler": "euler_cfg_pp", "schedule": "simple"},
        id="euler_cfg_pp",
    ),
]


@pytest.mark.parametrize("params", NODE_CASES)
def test_the_equivalent_graph_renders_the_nodes_pixels(rig: Rig, params: dict[str, Any]) -> None:
    """sampler euler + scheduler simple (the model's own flow shift), cfg = guidance + 1."""
    prompt = "a lighthouse at dusk"
    rendered = render(rig.runner, rig.takes_dir, prompt, model=MODEL, seed=5, **params)
    node = node_take_pixels(rendered)
    guided = params["guidance"] > 0
    graph = primitive_graph(
        prompt,
        width=params["width"],
        height=params["height"],
        steps=params["steps"],
        seed=5,
        cfg=params["guidance"] + 1.0,  # Z-Image's guidance g is ComfyUI's cfg g + 1
        negative=params.get("negative_prompt", "") if guided else None,
        sampler=params.get("sampler", "euler"),
        scheduler=params.get("schedule", "simple"),
    )
    [take] = rig.run(graph)[0].takes
    assert max_diff(take_pixels(take), node) == 0
    if "sampler" in params:  # the choice reached the render: euler/simple draws another picture
        plain = {k: v for k, v in params.items() if k not in ("sampler", "schedule")}
        euler = render(rig.runner, rig.takes_dir, prompt, model=MODEL, seed=5, **plain)
        assert max_diff(node_take_pixels(euler), node) > 0


def reference(pipe: Any, scheduler: Any, prompt: str, **kwargs: Any) -> list[Any]:
    """diffusers' ZImagePipeline over the kit's components with another scheduler."""
    from diffusers import ZImagePipeline  # pyright: ignore[reportPrivateImportUsage]

    swapped: Any = ZImagePipeline(**{**pipe.components, "scheduler": scheduler})
    swapped.set_progress_bar_config(disable=True)
    return list(swapped(prompt=prompt, **kwargs).images)


@pytest.mark.parametrize("schedule", ["karras", "exponential", "beta"])
def test_a_library_schedule_renders_what_diffusers_euler_renders_over_its_sigmas(
    rig: Rig, reference_pipe: Any, schedule: str
) -> None:
    """ComfyUI's schedules span the model's whole shifted sigma table; diffusers' Euler, unshifted,
    walks the same sigmas."""
    from diffusers.schedulers.scheduling_flow_match_euler_discrete import (
        FlowMatchEulerDiscreteScheduler,
    )

    config = reference_pipe.scheduler.config
    sigmas = model_sigmas(config, 4, 0.0, schedule)
    scheduler = FlowMatchEulerDiscreteScheduler.from_config(  # pyright: ignore[reportUnknownMemberType]
        config, shift=1.0, use_dynamic_shifting=False
    )
    [ref] = reference(
        reference_pipe,
        scheduler,
        "a fox",
        width=64,
        height=64,
        num_inference_steps=4,
        sigmas=sigmas[:-1],
        guidance_scale=0.0,
        generator=torch.Generator("cpu").manual_seed(9),
    )
    [take] = rig.run(primitive_graph("a fox", steps=4, seed=9, scheduler=schedule))[0].takes
    assert max_diff(take_pixels(take), pixels(ref)) <= TOLERANCE


def test_named_unipc_is_comfyuis_not_diffusers_flow_unipc(rig: Rig, reference_pipe: Any) -> None:
    """`uni_pc_bh2` is ComfyUI's (order 3, a flow model read as an epsilon one, fed sigma x 1000,
    its last step ending at sigma 0.001), checked against ComfyUI's algorithm on a toy model
    (`tests/diffusion/test_sigma_unipc_comfy.py`); diffusers' flow UniPC (order 2, on the flow
    log-SNR, integer timesteps), which it rendered before, is a different picture."""
    from diffusers.schedulers.scheduling_unipc_multistep import UniPCMultistepScheduler

    shift = float(reference_pipe.scheduler.config.shift)
    scheduler = UniPCMultistepScheduler(
        prediction_type="flow_prediction", use_flow_sigmas=True, flow_shift=shift, solver_type="bh2"
    )
    steps = 5
    [ref] = reference(
        reference_pipe,
        scheduler,
        "a fox",
        width=64,
        height=64,
        num_inference_steps=steps,
        # ZImagePipeline's own sigmas, as an array (UniPC cannot shift a list).
        sigmas=np.linspace(1.0, 1 / steps, steps, dtype=np.float32),
        guidance_scale=2.0,
        negative_prompt="dark",
        generator=torch.Generator("cpu").manual_seed(4),
    )
    graph = primitive_graph(
        "a fox", steps=steps, seed=4, sampler="uni_pc_bh2", cfg=3.0, negative="dark"
    )
    [take] = rig.run(graph)[0].takes
    assert max_diff(take_pixels(take), pixels(ref)) > TOLERANCE


def test_a_latent_batch_matches_diffusers_images_per_prompt(rig: Rig, reference_pipe: Any) -> None:
    refs = reference_pipe(
        prompt="two foxes",
        width=64,
        height=64,
        num_inference_steps=3,
        guidance_scale=0.0,
        num_images_per_prompt=2,
        generator=torch.Generator("cpu").manual_seed(21),
    ).images
    takes = rig.run(primitive_graph("two foxes", steps=3, seed=21, batch=2))[0].takes
    assert len(takes) == 2
    for take, ref in zip(takes, refs, strict=True):
        assert max_diff(take_pixels(take), pixels(ref)) <= TOLERANCE
