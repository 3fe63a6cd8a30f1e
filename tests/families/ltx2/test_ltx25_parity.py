"""LTX-2.5 parity: a take from the tiny LTX-2.5 folder (Gemma 4, the diffusion video decoder)
equals diffusers' own render of it: `LTX2Pipeline(output_type="latent")` then
`LTX2VideoDiffusionDecodePipeline(denormalize=False)` drawing from the same generator, the
soundtrack `LTX2Pipeline`'s own. Tolerances as for LTX-2.0 (`test_ltx2_parity.py`).
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
from ltx2_harness import (
    Pixels,
    first_frame_image,
    ltx2_rig,
    max_diff,
    pipeline_decodes,
    reference_output,
    render,
    take_audio,
    take_frames,
    uint8_frames,
)
from PIL import Image
from test_ltx2_parity import (
    CASES,
    assert_frames_match,
    assert_sound_matches,
    assert_text_to_video_matches,
)
from test_ltx2_server import ltx2_graph

from inline_core.families.ltx2.kit import LTX2Kit
from inline_core.families.ltx2.kit_ltx25 import FOLDER
from inline_core.runtime.video import Audio
from inline_core.sampling.loop import StepLoopSampler
from tests.families.import_harness import finished


def reference_ltx25(
    pipes: tuple[Any, Any], image: Image.Image | None = None, **params: Any
) -> tuple[Pixels, Audio, Pixels]:
    """diffusers' frames and soundtrack, and the frames its convolutional VAE would decode."""
    import torch

    pipe, decode = pipes
    generator = torch.Generator("cpu").manual_seed(int(params.get("seed", 7)))
    latents = reference_output(
        pipe, image=image, output_type="latent", generator=generator, **params
    )
    video = decode(latents.frames, generator=generator, output_type="np", denormalize=False)
    vae_frames, sound = pipeline_decodes(pipe, latents.frames, latents.audio)
    return uint8_frames(video.frames[0]), sound, vae_frames


@pytest.mark.parametrize("params", CASES)
def test_ltx25_text_to_video_matches_diffusers(
    ltx25_kit: LTX2Kit,
    ltx2_sampler: StepLoopSampler,
    ltx25_reference: tuple[Any, Any],
    tmp_path: Path,
    params: dict[str, Any],
) -> None:
    rig = ltx2_rig(ltx25_kit.root, ltx2_sampler)
    result = render(rig, tmp_path, model=FOLDER, **params)
    ours, sound = take_frames(result), take_audio(result)
    ref, ref_sound, vae_frames = reference_ltx25(ltx25_reference, **params)
    assert_text_to_video_matches(ours, sound, ref, ref_sound)
    assert max_diff(ours, vae_frames) > 10  # the diffusion decoder decoded it, not the VAE


def test_ltx25_image_to_video_matches_diffusers(
    ltx25_kit: LTX2Kit,
    ltx2_sampler: StepLoopSampler,
    ltx25_reference: tuple[Any, Any],
    tmp_path: Path,
) -> None:
    """From a first frame (re-compressed at LTX-2.5's conditioning CRF, 18 for Gemma 4): as
    `LTX2ImageToVideoPipeline(output_type="latent")` then the diffusion decode."""
    image = first_frame_image(32, 32, seed=3)
    rig = ltx2_rig(ltx25_kit.root, ltx2_sampler)
    result = render(rig, tmp_path, image=image, model=FOLDER)
    ours, sound = take_frames(result), take_audio(result)
    ref, ref_sound, _ = reference_ltx25(ltx25_reference, image=image)
    assert_frames_match(ours, ref)
    assert_sound_matches(sound, ref_sound)


def test_ltx25_decoder_draws_from_the_seed(
    ltx25_kit: LTX2Kit, ltx2_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    """The decoder's noise is the render's: the same seed renders the same frames, another
    seed others."""
    rig = ltx2_rig(ltx25_kit.root, ltx2_sampler)
    first = take_frames(render(rig, tmp_path / "a", model=FOLDER))
    again = take_frames(render(rig, tmp_path / "b", model=FOLDER))
    other = take_frames(render(rig, tmp_path / "c", model=FOLDER, seed=8))
    assert np.array_equal(first, again)
    assert max_diff(first, other) > 10


@pytest.fixture
def ltx25_client(ltx25_kit: LTX2Kit, tmp_path: Path) -> Iterator[Any]:
    from tests.server.server_support import cpu_client

    with cpu_client(ltx25_kit.root, tmp_path / "data") as c:
        yield c


def test_ltx25_renders_an_mp4_with_its_soundtrack_over_http(ltx25_client: Any) -> None:
    response = ltx25_client.post(
        "/v1/runs", json={"graph": ltx2_graph(model=FOLDER), "target": "l"}
    )
    assert response.status_code == 201, response.text
    state = finished(ltx25_client, str(response.json()["runId"]), seconds=180)
    assert state["status"] == "done", state
    video, sound = state["takes"]
    assert (video["kind"], sound["kind"]) == ("video", "audio")
    assert video["frames"] == 9 and video["sampleRate"] == sound["sampleRate"] == 16000
    data = ltx25_client.get(video["uri"]).content
    with av.open(io.BytesIO(data), "r") as container:
        assert container.streams.video[0].codec_context.name == "h264"
        assert container.streams.audio[0].codec_context.name == "aac"
        assert sum(1 for _ in container.decode(video=0)) == 9


def test_ltx25_folder_of_diffusers_dfr_class_is_served(ltx25_kit: LTX2Kit, tmp_path: Path) -> None:
    """A folder whose model_index names LTX2DFRPipeline (the class diffusers loads LTX-2.5's
    with) is an LTX-2 model, told as 2.5 by its Gemma 4: checked as one (here, `upscale`
    without a latent upsampler beside it is model_missing naming what it needs)."""
    from tests.server.server_support import cpu_client

    root = tmp_path / "models"
    folder = root / "diffusion_models" / "dfr-folder"
    shutil.copytree(ltx25_kit.diffusers_dir, folder)
    index = json.loads((folder / "model_index.json").read_text())
    (folder / "model_index.json").write_text(
        json.dumps({**index, "_class_name": "LTX2DFRPipeline"})
    )
    with cpu_client(root, tmp_path / "data") as client:
        graph = ltx2_graph(model="dfr-folder", upscale=True)
        response = client.post("/v1/runs", json={"graph": graph, "target": "l"})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "model_missing"
    assert "param 'upscale' needs LTX-2's latent upsampler" in error["message"]


def test_ltx25_with_another_gemma_4_is_model_missing_naming_it(
    ltx25_kit: LTX2Kit, tmp_path: Path
) -> None:
    """Gemma 4 as the prompt enhancer's class (model_type gemma4) is not LTX-2.5's encoder."""
    from tests.server.server_support import cpu_client

    root = tmp_path / "models"
    folder = root / "diffusion_models" / "other-gemma"
    shutil.copytree(ltx25_kit.diffusers_dir, folder)
    config_path = folder / "text_encoder" / "config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "model_type": "gemma4"}))
    with cpu_client(root, tmp_path / "data") as client:
        graph = ltx2_graph(model="other-gemma")
        response = client.post("/v1/runs", json={"graph": graph, "target": "l"})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "model_missing" and "'gemma4'" in error["message"]
