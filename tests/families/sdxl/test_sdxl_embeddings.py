"""Textual-inversion embeddings in stability/sdxl prompts (`embedding:name`, ComfyUI's syntax,
from `models/embeddings/`): an SDXL embedding's `clip_l` and `clip_g` vectors stand for the word
in each encoder, rendering what diffusers renders after `load_textual_inversion` of each into its
encoder; a name not in embeddings/ is `model_missing` naming it, and a file without both tensors
is refused naming what it lacks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from sdxl_harness import max_diff, reference_pixels, render, sdxl_rig, take_pixels

from inline_core.diffusion.libs import load_safetensors, save_safetensors
from inline_core.errors import InvalidRequest, ModelMissing
from inline_core.families.sdxl.kit import SDXLKit
from inline_core.sampling.loop import StepLoopSampler

TOLERANCE = 2  # levels of 255, as the plain parity's
EULER: dict[str, Any] = {"sampler": "euler", "schedule": "ddim_uniform"}
TOKEN = "<kit-embedding>"


@pytest.fixture
def embedding_reference(sdxl_reference: Any, sdxl_kit: SDXLKit) -> Iterator[Any]:
    """The reference pipeline with the kit's embedding loaded into both encoders as `TOKEN`."""
    assert sdxl_kit.embedding is not None
    state = load_safetensors(sdxl_kit.embedding)
    pipe = sdxl_reference
    encoders = (("clip_l", pipe.text_encoder, pipe.tokenizer),)
    encoders += (("clip_g", pipe.text_encoder_2, pipe.tokenizer_2),)
    for key, encoder, tokenizer in encoders:
        pipe.load_textual_inversion(
            state[key], token=TOKEN, text_encoder=encoder, tokenizer=tokenizer
        )
    try:
        yield pipe
    finally:
        for _key, encoder, tokenizer in encoders:
            pipe.unload_textual_inversion(TOKEN, tokenizer=tokenizer, text_encoder=encoder)


def _euler(pipe: Any, steps: int) -> tuple[Any, float]:
    from diffusers import EulerDiscreteScheduler  # pyright: ignore[reportPrivateImportUsage]

    scheduler: Any = EulerDiscreteScheduler.from_config(pipe.scheduler.config)  # pyright: ignore
    scheduler.set_timesteps(steps)
    first = float(scheduler.sigmas[0])
    return scheduler, first / (1 + first * first) ** 0.5


def test_an_embedding_matches_load_textual_inversion(
    sdxl_kit: SDXLKit,
    sdxl_sampler: StepLoopSampler,
    embedding_reference: Any,
    tmp_path: Path,
) -> None:
    assert sdxl_kit.embedding is not None
    name = sdxl_kit.embedding.stem
    rig = sdxl_rig(sdxl_kit.root, sdxl_sampler)
    model = sdxl_kit.checkpoint_name
    prompt = f"a lighthouse embedding:{name} at dusk"
    ours = take_pixels(render(rig, tmp_path, prompt, model=model, **EULER))
    plain = take_pixels(render(rig, tmp_path, "a lighthouse at dusk", model=model, **EULER))
    scheduler, scale = _euler(embedding_reference, 4)
    ref = reference_pixels(
        embedding_reference,
        scheduler,
        f"a lighthouse {TOKEN} at dusk",
        latents_scale=scale,
        **EULER,
    )
    assert max_diff(ours, ref) <= TOLERANCE
    assert max_diff(ours, plain) > 8  # the embedding changes the picture


def test_an_embedding_not_in_embeddings_is_model_missing_naming_it(
    sdxl_kit: SDXLKit, sdxl_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    rig = sdxl_rig(sdxl_kit.root, sdxl_sampler)
    with pytest.raises(ModelMissing, match="embedding:nowhere") as raised:
        render(rig, tmp_path, "a (embedding:nowhere:1.2) kite", model=sdxl_kit.checkpoint_name)
    assert "embeddings" in raised.value.message


def test_an_embedding_without_both_encoders_vectors_is_refused(
    sdxl_kit: SDXLKit, sdxl_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    path = sdxl_kit.root / "embeddings" / "only_l.safetensors"
    save_safetensors({"clip_l": torch.zeros(1, 64)}, path, {"format": "pt"})
    try:
        rig = sdxl_rig(sdxl_kit.root, sdxl_sampler)
        with pytest.raises(InvalidRequest, match="only_l.*no clip_g"):
            render(rig, tmp_path, "embedding:only_l", model=sdxl_kit.checkpoint_name)
    finally:
        path.unlink()
