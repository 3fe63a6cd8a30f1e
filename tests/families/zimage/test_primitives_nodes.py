"""Each low-level primitive, run for real on the tiny kit through the registry and the executor."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import torch
from PIL import Image
from primitive_graphs import (
    ENCODER,
    MODEL,
    VAE,
    Json,
    Rig,
    edge,
    make_rig,
    primitive_graph,
    take_pixels,
)
from zimage_harness import max_diff, pixels, render

from inline_core.contract.handles import (
    ConditioningHandle,
    LatentHandle,
    ModelHandle,
    TextEncoderHandle,
    VAEHandle,
)
from inline_core.diffusion.flow.samplers import SAMPLERS, SCHEDULES
from inline_core.diffusion.libs import save_safetensors
from inline_core.errors import InvalidGraph, InvalidRequest, ModelMissing
from inline_core.families.nodes.register import PRIMITIVE_TYPES
from inline_core.families.zimage import ZImageFamily
from inline_core.families.zimage.kit import KitPaths
from inline_core.graph.primitives import FLOW_SAMPLERS, FLOW_SCHEDULES, SAMPLE
from inline_core.graph.sampler_names import CFG_PP_SAMPLERS
from inline_core.graph.schema import parse_graph
from inline_core.graph.validate import validate_graph
from inline_core.runtime.progress import Progress
from inline_core.sampling.loop import StepLoopSampler


@pytest.fixture
def rig(kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path) -> Rig:
    return make_rig(kit.root, sampler, tmp_path)


def output(rig: Rig, graph: Json, target: str, port: str) -> Any:
    result, _events = rig.run(graph, target)
    return result.outputs[port]


def test_every_primitive_has_a_runner(rig: Rig) -> None:
    for node_type in PRIMITIVE_TYPES:
        assert rig.registry.runner(node_type) is not None, node_type
        assert rig.registry.descriptor(node_type).unavailable_reason is None


def test_loaders_output_handles_and_share_the_nodes_resident_components(
    rig: Rig, kit: KitPaths
) -> None:
    graph = primitive_graph("x")
    model = output(rig, graph, "model", "model")
    vae = output(rig, graph, "vae", "vae")
    encoder = output(rig, graph, "encoder", "text_encoder")
    assert isinstance(model, ModelHandle) and model.name == MODEL
    assert model.transformer.path == kit.diffusion_file and model.scheduler is None
    assert isinstance(vae, VAEHandle) and vae.source.path == kit.vae_file
    assert isinstance(encoder, TextEncoderHandle) and encoder.encoder.path == kit.text_encoder_dir
    stats = rig.runner.stats()
    assert stats["loads"] == 5  # transformer, scheduler config, VAE, text encoder, tokenizer
    # The Z-Image node on the same files finds every component resident: nothing loads again.
    render(rig.runner, rig.takes_dir, model=MODEL)
    assert rig.runner.stats()["loads"] == stats["loads"]


def fake_weights(path: Path, shapes: dict[str, tuple[int, ...]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    save_safetensors({k: torch.zeros(s) for k, s in shapes.items()}, path)


def test_loaders_refuse_other_model_families_at_submit(
    sampler: StepLoopSampler, tmp_path: Path
) -> None:
    root = tmp_path / "models"
    fake_weights(
        root / "diffusion_models" / "sd15.safetensors",
        {"model.diffusion_model.input_blocks.0.0.weight": (8, 4, 3, 3)},
    )
    fake_weights(  # an SD VAE: LDM naming like FLUX's, but 4 latent channels
        root / "vae" / "sd_vae.safetensors",
        {
            "encoder.conv_in.weight": (8, 3, 3, 3),
            "encoder.down.0.block.0.conv1.weight": (8, 8, 3, 3),
            "encoder.conv_out.weight": (8, 8, 3, 3),
            "decoder.conv_out.weight": (3, 8, 3, 3),
        },
    )
    fake_weights(
        root / "text_encoders" / "clip_l.safetensors",
        {"text_model.embeddings.token_embedding.weight": (16, 8)},
    )
    rig = make_rig(root, sampler, tmp_path)
    cases = [
        ("load/diffusion-model", "sd15.safetensors", "not a Z-Image diffusion model"),
        ("load/vae", "sd_vae.safetensors", "not a 16-channel FLUX VAE"),
        ("load/text-encoder", "clip_l.safetensors", "not a Qwen3 text encoder"),
    ]
    for node_type, name, why in cases:
        graph = parse_graph({"nodes": [{"id": "n", "type": node_type, "params": {"file": name}}]})
        with pytest.raises(ModelMissing) as caught:
            validate_graph(graph, "n", rig.registry, rig.catalog)
        assert caught.value.node_id == "n" and why in caught.value.message


def test_encode_text_gives_the_node_pipelines_conditioning(rig: Rig) -> None:
    conditioning = output(rig, primitive_graph("a lighthouse"), "positive", "conditioning")
    assert isinstance(conditioning, ConditioningHandle)
    assert conditioning.width == 32 and conditioning.encoder == ENCODER
    pipeline = rig.runner.pipeline(MODEL)
    expected = pipeline.text_encoder.encode("a lighthouse")
    assert torch.equal(conditioning.conditioning.value, expected.value)


def test_empty_latent_holds_sizes_only(rig: Rig) -> None:
    latent = output(rig, primitive_graph("x", width=96, height=64, batch=3), "latent", "latent")
    assert isinstance(latent, LatentHandle) and latent.empty
    assert (latent.width, latent.height, latent.batch) == (96, 64, 3)


def test_sample_offers_the_flow_samplers_it_implements() -> None:
    assert set(FLOW_SAMPLERS) == set(SAMPLERS + CFG_PP_SAMPLERS)
    assert set(FLOW_SCHEDULES) == set(SCHEDULES)
    sampler_param = SAMPLE.param("sampler")
    assert sampler_param is not None and sampler_param.options == FLOW_SAMPLERS


def test_an_unsupported_sampler_is_refused_at_submit_listing_the_allowed_ones(rig: Rig) -> None:
    graph = parse_graph(primitive_graph("x", sampler="seeds_2"))
    with pytest.raises(InvalidGraph) as caught:
        validate_graph(graph, "decode", rig.registry, rig.catalog, rng=random.Random(0))
    assert caught.value.node_id == "sample"
    assert "'seeds_2'" in caught.value.message
    for name in FLOW_SAMPLERS[:5]:  # the message lists the first dozen
        assert repr(name) in caught.value.message


def step_counts(events: list[Any]) -> set[int]:
    """The step counts the `sample` node reported."""
    return {
        e.step_count
        for e in events
        if isinstance(e, Progress) and e.node_id == "sample" and e.step_count is not None
    }


TWO_CALLS_A_STEP = {
    "heun",
    "dpm_2",
    "dpm_2_ancestral",
    "dpmpp_2s_ancestral",
    "dpmpp_sde",
    "dpmpp_sde_gpu",
}
# Every sampler on the default schedule, every schedule with the default sampler, and a few mixed.
SAMPLE_CASES = [
    *((name, "simple") for name in SAMPLERS),  # CFG++ ones guide: test_sample_cfg_pp
    *(("euler", name) for name in FLOW_SCHEDULES if name != "simple"),
    ("dpmpp_2m_sde", "karras"),
    ("er_sde", "beta"),
    ("dpmpp_sde", "kl_optimal"),
]


@pytest.mark.parametrize(("sampler_name", "scheduler"), SAMPLE_CASES)
def test_sample_renders_with_every_sampler_and_schedule(
    rig: Rig, sampler_name: str, scheduler: str
) -> None:
    # 4 steps: at 3, DPM-Solver++ 2M drops to first order on its last two steps (diffusers'
    # `lower_order_final` below 15 steps), which is Euler exactly, so it could not be told apart.
    graph = primitive_graph("a fox", steps=4, sampler=sampler_name, scheduler=scheduler)
    result, events = rig.run(graph)
    [take] = result.takes
    image = take_pixels(take)
    assert image.shape == (64, 64, 3) and image.std() > 1.0
    assert take.params["sampler"] == sampler_name and take.params["scheduler"] == scheduler
    # A two-stage sampler calls the model twice a step but once on the last (down to sigma 0).
    assert step_counts(events) == {7 if sampler_name in TWO_CALLS_A_STEP else 4}
    if (sampler_name, scheduler) != ("euler", "simple"):
        baseline = take_pixels(rig.run(primitive_graph("a fox", steps=4))[0].takes[0])
        # ComfyUI's `ddim` is its Euler sampler.
        assert (max_diff(image, baseline) == 0) == (sampler_name == "ddim")


def test_cfg_above_one_needs_a_negative(rig: Rig) -> None:
    with pytest.raises(InvalidRequest) as caught:
        rig.run(primitive_graph("x", cfg=3.0))
    assert caught.value.node_id == "sample" and "negative" in caught.value.message


def test_a_latent_batch_decodes_to_a_take_per_item(rig: Rig) -> None:
    result, _events = rig.run(primitive_graph("a fox", batch=2, seed=11))
    first, second = result.takes
    assert [t.params["batch_index"] for t in (first, second)] == [0, 1]
    assert first.params["seed"] == second.params["seed"] == 11
    assert max_diff(take_pixels(first), take_pixels(second)) > 0
    assert isinstance(result.outputs["image"], Image.Image)


def image_graph(asset: str, *, denoise: float) -> Json:
    graph = primitive_graph("a fox", steps=4, denoise=denoise)
    nodes = cast(list[Json], graph["nodes"])
    nodes += [
        {"id": "image", "type": "input/image", "params": {"asset": {"ref": "asset", "id": asset}}},
        {
            "id": "encode",
            "type": "vae/encode",
            "inputs": {"vae": edge("vae", "vae"), "image": edge("image", "image")},
        },
    ]
    sample = next(n for n in nodes if n["id"] == "sample")
    sample["inputs"]["latent"] = edge("encode", "latent")
    return graph


def test_vae_encode_crops_to_sixteen_and_starts_a_partial_denoise(rig: Rig) -> None:
    rng = np.random.default_rng(3)
    source = Image.fromarray(rng.integers(0, 256, (70, 90, 3), dtype=np.uint8))
    source.save(rig.media.root / "src.png")
    latent = output(rig, image_graph("src.png", denoise=0.3), "encode", "latent")
    assert isinstance(latent, LatentHandle) and (latent.width, latent.height) == (80, 64)
    assert latent.samples is not None and latent.samples[0].shape == (1, 16, 8, 10)
    again = output(rig, image_graph("src.png", denoise=0.3), "encode", "latent")
    assert again is latent  # served from the node cache (deterministic: the posterior's mode)
    cropped = pixels(source.crop((5, 3, 85, 67)))
    light = take_pixels(rig.run(image_graph("src.png", denoise=0.3))[0].takes[0])
    full = take_pixels(rig.run(image_graph("src.png", denoise=1.0))[0].takes[0])
    assert light.shape == cropped.shape
    # A light denoise keeps more of the source than a full one, which keeps none of it.
    assert np.abs(light - cropped).mean() < np.abs(full - cropped).mean()


def test_vae_decode_of_an_empty_latent_is_an_image(rig: Rig) -> None:
    graph = primitive_graph("x", width=80, height=64)
    decode = next(n for n in cast(list[Json], graph["nodes"]) if n["id"] == "decode")
    decode["inputs"]["latent"] = edge("latent", "latent")
    [take] = rig.run(graph)[0].takes
    assert take_pixels(take).shape == (64, 80, 3) and take.params["vae"] == VAE


def test_without_the_runtime_primitives_are_listed_but_refused(
    monkeypatch: pytest.MonkeyPatch, kit: KitPaths, sampler: StepLoopSampler, tmp_path: Path
) -> None:
    monkeypatch.setattr(ZImageFamily, "requires", ("torch", "inline_core_not_installed_mod"))
    rig = make_rig(kit.root, sampler, tmp_path)
    for node_type in PRIMITIVE_TYPES:
        reason = rig.registry.descriptor(node_type).unavailable_reason
        assert reason is not None and "inline_core_not_installed_mod" in reason
        assert rig.registry.runner(node_type) is None
    with pytest.raises(ModelMissing) as caught:
        validate_graph(parse_graph(primitive_graph("x")), "decode", rig.registry, rig.catalog)
    assert "pip install 'inline-core[diffusers]'" in caught.value.message
