"""FLUX.2 klein through the primitives: `load -> encode/text -> sample -> vae/decode` renders the
`bfl/flux-2` node's pixels (and so Flux2KleinPipeline's, which the node's parity tests pin); img2img
with ComfyUI's denoise renders what Flux2KleinPipeline's own loop renders from the same start over
the tail of the same schedule (diffusers has no FLUX.2 img2img pipeline: its inpaint one adds the
image as a reference); KSamplerAdvanced windows chain into the whole render; a noise mask keeps
its black part of the latents; an empty latent decodes at the family's own latent shape. A
step-distilled klein and dev run no classifier-free guidance: cfg 1 only (dev then embeds
ComfyUI's default 3.5, as a workflow without FluxGuidance renders), another a 422 at submit."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import torch
from flux2_graphs import BASE, DISTILLED, Graph, GraphRig, edge, graph_rig
from flux2_harness import (
    make_rig,
    max_diff,
    picture,
    pixels,
    reference_kwargs,
    render,
    take_pixels,
)
from PIL import Image, ImageDraw

from inline_core.contract.handles import LatentHandle
from inline_core.diffusion.flow.steps import denoise_window
from inline_core.diffusion.libs import diffusers
from inline_core.errors import InvalidRequest
from inline_core.families.flux2.kit import Flux2Kit
from inline_core.families.flux2.kit_dev import Flux2DevKit
from inline_core.families.flux2.pipeline import empirical_mu
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 1  # float ordering may move a channel by a level; never more
STEPS, PROMPT = 3, "a red fox in the snow"


@pytest.fixture
def rig(flux2_kit: Flux2Kit, sampler: StepLoopSampler, tmp_path: Path) -> GraphRig:
    return graph_rig(make_rig(flux2_kit.root, sampler), tmp_path)


def sampled(rig: GraphRig, graph: Graph, target: str) -> torch.Tensor:
    handle = rig.run(graph, target).outputs["latent"]
    assert isinstance(handle, LatentHandle) and handle.samples is not None
    return cast(torch.Tensor, handle.samples[0].value).float()


@pytest.mark.parametrize(
    ("model", "cfg", "negative"), [(DISTILLED, 1.0, None), (BASE, 4.0, "")], ids=["klein", "base"]
)
def test_the_graph_renders_the_nodes_pixels(
    rig: GraphRig, tmp_path: Path, model: str, cfg: float, negative: str | None
) -> None:
    """cfg is klein base's guidance (the empty prompt as negative, as the node guides)."""
    graph = Graph(model)
    latent = graph.add("latent", "latent/empty", {"width": 64, "height": 64, "batch": 1})
    graph.decode(
        graph.sample("sample", edge(latent, "latent"), PROMPT, negative, steps=STEPS, cfg=cfg)
    )
    node = render(rig.rig, tmp_path, PROMPT, model=model, steps=STEPS, guidance=cfg)
    assert max_diff(rig.decoded(graph), take_pixels(node)) <= TOLERANCE


def test_img2img_with_denoise_renders_diffusers_loop_over_the_schedules_tail(
    rig: GraphRig, klein_pipe: Any
) -> None:
    denoise = 0.6
    image = picture(64, 64, seed=3)
    graph = Graph()
    photo = graph.add("photo", "input/image", {"asset": rig.media.add("photo.png", image)})
    encode = graph.add("encode", "vae/encode", vae=edge("vae", "vae"), image=edge(photo, "image"))
    out = graph.sample("sample", edge(encode, "latent"), PROMPT, steps=STEPS, denoise=denoise)
    graph.decode(out)
    ours = rig.decoded(graph)

    # By hand: the image encoded as the pipeline encodes (the posterior's mode, patchified,
    # normalised by the batch norm), noised to the first sigma of the tail of a steps / denoise
    # schedule, then the pipeline's own loop over that tail at the whole schedule's shift.
    pipe = klein_pipe
    total, first = denoise_window(STEPS, denoise)
    tail = np.linspace(1.0, 1 / total, total)[first:]
    scheduler: Any = diffusers().FlowMatchEulerDiscreteScheduler.from_config(pipe.scheduler.config)
    scheduler.set_timesteps(sigmas=tail, mu=empirical_mu(16, total))
    sigma = float(scheduler.sigmas[0])
    pixels_in = pipe.image_processor.preprocess(image, height=64, width=64)
    with torch.inference_mode():
        raw = pipe.vae.encode(pixels_in).latent_dist.mode()
        start = pipe._patchify_latents(raw)
        mean = pipe.vae.bn.running_mean.view(1, -1, 1, 1)
        std = torch.sqrt(pipe.vae.bn.running_var.view(1, -1, 1, 1) + pipe.vae.config.batch_norm_eps)
        start = (start - mean) / std
    noise = torch.randn(start.shape, generator=torch.Generator("cpu").manual_seed(7))
    kwargs = reference_kwargs(total, 1.0)
    del kwargs["generator"]
    ref = pipe(
        prompt=PROMPT, sigmas=list(tail), latents=sigma * noise + (1 - sigma) * start, **kwargs
    ).images[0]
    assert max_diff(ours, pixels(ref)) <= TOLERANCE
    assert max_diff(ours, pixels(image)) > 10  # it did repaint


def test_windows_chained_render_the_whole_schedule(rig: GraphRig) -> None:
    """KSamplerAdvanced 0..2 handing on its leftover noise, then 2..end without adding any,
    renders the whole 4-step render."""
    whole = Graph()
    latent = whole.add("latent", "latent/empty", {"width": 64, "height": 64, "batch": 1})
    whole.decode(whole.sample("sample", edge(latent, "latent"), PROMPT, steps=4))
    chained = Graph()
    latent = chained.add("latent", "latent/empty", {"width": 64, "height": 64, "batch": 1})
    first = chained.sample(
        "first", edge(latent, "latent"), PROMPT, steps=4, end_step=2, leftover_noise=True
    )
    second = chained.sample("second", first, PROMPT, steps=4, start_step=2, add_noise=False)
    chained.decode(second)
    assert max_diff(rig.decoded(chained), rig.decoded(whole)) <= TOLERANCE


def test_a_noise_mask_keeps_its_black_part_of_the_latents(rig: GraphRig) -> None:
    mask = Image.new("L", (64, 64), 0)
    ImageDraw.Draw(mask).rectangle((0, 0, 31, 63), fill=255)  # the left half repaints
    graph = Graph()
    photo = graph.add("photo", "input/image", {"asset": rig.media.add("p.png", picture(64, 64))})
    masking = {"asset": rig.media.add("m.png", mask), "channel": "red", "invert": False}
    graph.add("mask", "input/mask", masking)
    encode = graph.add("encode", "vae/encode", vae=edge("vae", "vae"), image=edge(photo, "image"))
    masked = graph.add(
        "masked", "latent/noise-mask", latent=edge(encode, "latent"), mask=edge("mask", "mask")
    )
    graph.sample("sample", edge(masked, "latent"), PROMPT, steps=STEPS)
    start, out = sampled(rig, graph, "encode"), sampled(rig, graph, "sample")
    assert out.shape == start.shape == (1, 128, 4, 4)
    assert torch.allclose(out[..., 2:], start[..., 2:], atol=1e-5)  # kept: the right half
    assert (out[..., :2] - start[..., :2]).abs().max() > 0.1  # repainted: the left half


def test_an_empty_latent_decodes_at_the_familys_latent_shape(rig: GraphRig) -> None:
    graph = Graph()
    latent = graph.add("latent", "latent/empty", {"width": 96, "height": 64, "batch": 2})
    graph.decode(edge(latent, "latent"))
    takes = rig.run(graph).takes
    assert len(takes) == 2
    with Image.open(takes[0].path) as png:
        assert png.size == (96, 64)


def test_a_distilled_klein_refuses_cfg_at_submit(rig: GraphRig) -> None:
    graph = Graph()
    latent = graph.add("latent", "latent/empty", {"width": 64, "height": 64, "batch": 1})
    graph.decode(graph.sample("sample", edge(latent, "latent"), PROMPT, "", steps=STEPS, cfg=4.0))
    with pytest.raises(InvalidRequest, match="step-distilled .* set cfg to 1"):
        rig.validate(graph)


def test_dev_embeds_comfyuis_default_guidance_and_refuses_cfg(
    flux2_dev_kit: Flux2DevKit, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    dev = graph_rig(make_rig(flux2_dev_kit.root, sampler), tmp_path)
    model, encoder = "flux2_dev_tiny.safetensors", "mistral_3_small_flux2_tiny.safetensors"

    def graph(cfg: float, negative: str | None = None) -> Graph:
        out = Graph(model, encoder=encoder)
        latent = out.add("latent", "latent/empty", {"width": 64, "height": 64, "batch": 1})
        out.decode(out.sample("s", edge(latent, "latent"), PROMPT, negative, steps=STEPS, cfg=cfg))
        return out

    node = render(dev.rig, tmp_path, PROMPT, model=model, steps=STEPS, guidance=3.5)
    assert max_diff(dev.decoded(graph(1.0)), take_pixels(node)) <= TOLERANCE
    with pytest.raises(InvalidRequest, match="guidance-distilled .* embeds guidance 3.5"):
        dev.validate(graph(4.0, ""))


def test_a_distilled_klein_behind_a_lora_refuses_cfg_at_submit(rig: GraphRig) -> None:
    """`load/lora` hands `sample` the LoRA's handle: the model's file still says its cfg."""
    graph = Graph()
    graph.add(
        "lora",
        "load/lora",
        {"name": "flux2_klein_tiny_lora_a.safetensors", "strength": 1.0},
        model=edge("model", "model"),
    )
    latent = graph.add("latent", "latent/empty", {"width": 64, "height": 64, "batch": 1})
    graph.decode(graph.sample("sample", edge(latent, "latent"), PROMPT, "", steps=STEPS, cfg=4.0))
    sample = next(node for node in graph.nodes if node["id"] == "sample")
    sample["inputs"]["model"] = edge("lora", "model")
    with pytest.raises(InvalidRequest, match="step-distilled .* set cfg to 1"):
        rig.validate(graph)


@pytest.mark.parametrize(("start", "end"), [(3, 10000), (2, 2)], ids=["past-steps", "empty"])
def test_a_window_that_holds_no_step_is_refused_at_submit(
    rig: GraphRig, start: int, end: int
) -> None:
    """The request would refuse it as the run starts: the params say it already."""
    graph = Graph()
    latent = graph.add("latent", "latent/empty", {"width": 64, "height": 64, "batch": 1})
    graph.decode(
        graph.sample(
            "sample", edge(latent, "latent"), PROMPT, steps=STEPS, start_step=start, end_step=end
        )
    )
    with pytest.raises(InvalidRequest, match="hold no step to run: start_step must be below"):
        rig.validate(graph)
