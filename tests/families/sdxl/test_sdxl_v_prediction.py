"""v-prediction on SDXL, as ComfyUI's ModelSamplingDiscrete sets it (`sampling: v_prediction`,
`zsnr`) or a checkpoint says it (`v_pred`, `ztsnr` marker keys): the node's `prediction` and
`zsnr` render what diffusers' EulerDiscreteScheduler renders with `prediction_type=
"v_prediction"` (and `rescale_betas_zero_snr`), the markers render what the params render, and
the import maps the node one to one."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sdxl_harness import max_diff, reference_pixels, render, sdxl_rig, take_pixels
from test_sdxl_import import default_graph
from test_sdxl_parity import _latents_scale  # pyright: ignore[reportPrivateUsage]

from inline_core.diffusion.libs import diffusers, load_safetensors, save_safetensors
from inline_core.families.sdxl.kit import SDXLKit
from inline_core.sampling.loop import StepLoopSampler
from tests.families.import_harness import import_comfy, target_of
from tests.server.server_support import prompt_graph

TOLERANCE = 2  # levels of 255, as the parity tests: CFG rows batched as two
EULER: dict[str, Any] = {"sampler": "euler", "schedule": "ddim_uniform"}


def _v_euler(pipe: Any, zsnr: bool) -> Any:
    config = {
        **pipe.scheduler.config,
        "prediction_type": "v_prediction",
        "rescale_betas_zero_snr": zsnr,
    }
    return diffusers().EulerDiscreteScheduler.from_config(config)


@pytest.mark.parametrize("zsnr", [False, True], ids=["v", "v-zsnr"])
def test_model_sampling_discrete_matches_diffusers_v_prediction(
    sdxl_kit: SDXLKit,
    sdxl_sampler: StepLoopSampler,
    sdxl_reference: Any,
    tmp_path: Path,
    zsnr: bool,
) -> None:
    """The epsilon checkpoint sampled as a v model: ComfyUI's ModelSamplingDiscrete. Euler's
    "leading" spacing never reaches the last training timestep, where ComfyUI's and diffusers'
    zero-SNR tables differ (4.9e-8 and 2^-24 for the last alpha bar)."""
    rig = sdxl_rig(sdxl_kit.root, sdxl_sampler)
    ours = take_pixels(render(rig, tmp_path, prediction="v_prediction", zsnr=zsnr, **EULER))
    scheduler = _v_euler(sdxl_reference, zsnr)
    ref = reference_pixels(
        sdxl_reference, scheduler, latents_scale=_latents_scale(scheduler, {}), **EULER
    )
    assert max_diff(ours, ref) <= TOLERANCE
    eps = take_pixels(render(rig, tmp_path, **EULER))
    assert max_diff(ours, eps) > TOLERANCE  # the prediction type was read otherwise


def _marked(kit: SDXLKit, models: Path, markers: tuple[str, ...]) -> str:
    """The kit's models in `models`, with its checkpoint also saved carrying `markers`."""
    import torch

    assert kit.checkpoint is not None
    shutil.copytree(kit.root, models, ignore=shutil.ignore_patterns("*diffusers*"))
    state = load_safetensors(kit.checkpoint)
    name = "marked_" + "_".join(markers) + ".safetensors"
    save_safetensors(
        {**state, **{k: torch.zeros(0) for k in markers}}, models / "checkpoints" / name
    )
    return name


def test_a_ztsnr_checkpoint_renders_as_v_prediction_with_zsnr(
    sdxl_kit: SDXLKit, sdxl_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    models = tmp_path / "models"
    marked = _marked(sdxl_kit, models, ("v_pred", "ztsnr"))
    rig = sdxl_rig(models, sdxl_sampler)
    own = take_pixels(render(rig, tmp_path, model=marked, **EULER))
    params: dict[str, Any] = {"prediction": "v_prediction", "zsnr": True, **EULER}
    set_here = take_pixels(render(rig, tmp_path, model=sdxl_kit.checkpoint_name, **params))
    assert max_diff(own, set_here) == 0
    # ModelSamplingDiscrete's eps on it renders it as epsilon, as in ComfyUI.
    as_eps = take_pixels(render(rig, tmp_path, model=marked, prediction="eps", **EULER))
    plain = take_pixels(render(rig, tmp_path, model=sdxl_kit.checkpoint_name, **EULER))
    assert max_diff(as_eps, plain) == 0 and max_diff(own, plain) > TOLERANCE


def _with_model_sampling(checkpoint: str, sampling: str, zsnr: bool) -> dict[str, Any]:
    graph = default_graph(checkpoint)
    graph["10"] = {
        "class_type": "ModelSamplingDiscrete",
        "inputs": {"sampling": sampling, "zsnr": zsnr, "model": ["4", 0]},
    }
    graph["3"]["inputs"]["model"] = ["10", 0]
    return graph


def test_model_sampling_discrete_imports_onto_the_nodes_prediction(
    client: TestClient, sdxl_kit: SDXLKit
) -> None:
    name = sdxl_kit.checkpoint_name
    response = import_comfy(client, _with_model_sampling(name, "v_prediction", True))
    assert response.status_code == 200, response.text
    body = response.json()
    target, _nodes = target_of(body)
    assert target["type"] == "stability/sdxl"
    assert (target["params"]["prediction"], target["params"]["zsnr"]) == ("v_prediction", True)
    assert body["changesPicture"] == []
    refused = import_comfy(client, _with_model_sampling(name, "lcm", False))
    assert refused.status_code == 422, refused.text
    assert "sampling 'lcm' is not offered" in refused.json()["error"]["message"]


def test_zsnr_without_a_prediction_is_refused_at_submit(
    client: TestClient, sdxl_kit: SDXLKit
) -> None:
    params: dict[str, Any] = {"model": sdxl_kit.checkpoint_name, "zsnr": True, "steps": 2}
    graph = prompt_graph("stability/sdxl", "x", {"width": 64, "height": 64, **params}, "a fox")
    response = client.post("/v1/runs", json={"graph": graph, "target": "x"})
    assert response.status_code == 422, response.text
    assert "pick eps or v_prediction too" in response.json()["error"]["message"]
