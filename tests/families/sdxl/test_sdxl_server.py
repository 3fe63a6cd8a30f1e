"""SDXL end to end through the HTTP API (ASGI): a prompt graph renders an image take with what
the node runner renders, bad params are refused at submit naming them, and missing pieces are
`model_missing` naming each and where it goes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image
from sdxl_harness import (
    PROMPT,
    kit_lora,
    render,
    sd15_like,
    sdxl_rig,
    take_pixels,
)

from inline_core.config import Config
from inline_core.families.sdxl.descriptor import NODE_TYPE
from inline_core.families.sdxl.kit import SDXLKit
from inline_core.sampling.loop import StepLoopSampler
from inline_core.server.app import create_app
from tests.families.import_harness import finished
from tests.server.server_support import cpu_client, prompt_graph

RENDER: dict[str, Any] = {"width": 64, "height": 64, "steps": 3, "seed": 5, "guidance": 4.0}


def sdxl_graph(prompt: str = PROMPT, **params: Any) -> dict[str, Any]:
    return prompt_graph(NODE_TYPE, "x", {**RENDER, **params}, prompt)


def test_a_graph_renders_the_node_runners_pixels(
    client: TestClient, sdxl_kit: SDXLKit, sdxl_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    params: dict[str, Any] = {
        "model": sdxl_kit.checkpoint_name,
        "sampler": "dpmpp_2m",
        "schedule": "karras",
    }
    response = client.post("/v1/runs", json={"graph": sdxl_graph(**params), "target": "x"})
    assert response.status_code == 201, response.text
    state = finished(client, str(response.json()["runId"]))
    assert state["status"] == "done", state
    (take,) = state["takes"]
    data = client.get(take["uri"])
    assert data.status_code == 200
    path = tmp_path / "take.png"
    path.write_bytes(data.content)
    with Image.open(path) as image:
        served = np.asarray(image.convert("RGB")).astype(np.int16)
    rig = sdxl_rig(sdxl_kit.root, sdxl_sampler)
    alone = take_pixels(render(rig, tmp_path / "alone", **RENDER, **params))
    assert served.shape == (64, 64, 3) and np.array_equal(served, alone)


@pytest.mark.parametrize(
    ("params", "names"),
    [
        ({"width": 60}, "width"),
        ({"sampler": "seeds_2"}, "sampler"),
        ({"schedule": "linear"}, "schedule"),
        ({"clip_skip": 0}, "clip_skip"),
        ({"model": "nope.safetensors"}, "model"),
    ],
    ids=["width-not-8", "unknown-sampler", "unknown-schedule", "clip-skip-0", "unknown-model"],
)
def test_bad_params_are_refused_at_submit(
    client: TestClient, params: dict[str, Any], names: str
) -> None:
    response = client.post("/v1/runs", json={"graph": sdxl_graph(**params), "target": "x"})
    assert response.status_code == 422, response.text
    assert names in response.json()["error"]["message"]


def submitted(models: Path, tmp_path: Path, graph: dict[str, Any]) -> Any:
    """`graph` submitted to a CPU server on `models`: its answer."""
    config = Config(models_dir=models, data_dir=tmp_path / "data", profile="cpu")
    with TestClient(create_app(config)) as client:
        return client.post("/v1/runs", json={"graph": graph, "target": "x"})


def test_a_checkpoint_without_its_tokenizer_is_model_missing_saying_where_it_goes(
    sdxl_kit: SDXLKit, tmp_path: Path
) -> None:
    assert sdxl_kit.checkpoint is not None
    models = tmp_path / "models"
    (models / "checkpoints").mkdir(parents=True)
    shutil.copy(sdxl_kit.checkpoint, models / "checkpoints")
    response = submitted(models, tmp_path, sdxl_graph())
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "model_missing" and error["nodeId"] == "x"
    assert "tokenizer" in error["message"] and "clip_tokenizer" in error["message"]


def test_no_sdxl_model_is_model_missing_naming_the_checkpoints_folder(tmp_path: Path) -> None:
    models = tmp_path / "models"
    (models / "checkpoints").mkdir(parents=True)
    config = Config(models_dir=models, data_dir=tmp_path / "data", profile="cpu")
    with TestClient(create_app(config)) as client:
        response = client.post("/v1/runs", json={"graph": sdxl_graph(), "target": "x"})
        node = client.get(f"/v1/models/{NODE_TYPE}").json()
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "model_missing"
    assert "SDXL" in error["message"] and str(models / "checkpoints") in error["message"]
    assert node["available"] is False


def test_a_picked_vae_that_is_not_sdxls_is_refused(
    sdxl_kit: SDXLKit, tmp_path: Path, client: TestClient
) -> None:
    odd = sdxl_kit.root / "vae" / "not_a_vae.safetensors"
    assert sdxl_kit.checkpoint is not None
    shutil.copy(sdxl_kit.checkpoint, odd)  # a whole checkpoint: not a VAE's own file
    try:
        response = client.post(
            "/v1/runs", json={"graph": sdxl_graph(vae="not_a_vae.safetensors"), "target": "x"}
        )
    finally:
        odd.unlink()
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "model_missing" and "not_a_vae.safetensors" in error["message"]


def test_a_diffusers_folder_alone_renders_with_the_model_left_empty(
    sdxl_kit: SDXLKit, tmp_path: Path
) -> None:
    """No checkpoint at all: the empty `model` finds the diffusers folder, and the run is
    claimed (it needs no file in checkpoints/)."""
    assert sdxl_kit.diffusers_dir is not None
    models = tmp_path / "models"
    shutil.copytree(sdxl_kit.diffusers_dir, models / "diffusion_models" / "sdxl_diffusers")
    with cpu_client(models, tmp_path / "data") as client:
        response = client.post("/v1/runs", json={"graph": sdxl_graph(), "target": "x"})
        assert response.status_code == 201, response.text
        state = finished(client, str(response.json()["runId"]))
    assert state["status"] == "done", state


def with_lora(graph: dict[str, Any], **params: Any) -> dict[str, Any]:
    """`graph` with one `input/lora` node on the SDXL node's `loras` input."""
    graph["nodes"].insert(0, {"id": "l", "type": "input/lora", "params": params})
    graph["nodes"][-1]["inputs"]["loras"] = [{"from": "l", "output": "lora"}]
    return graph


def test_a_kohya_lora_renders_at_its_two_strengths(
    client: TestClient, sdxl_kit: SDXLKit, sdxl_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    name = sdxl_kit.loras["a"].name
    graph = with_lora(
        sdxl_graph(model=sdxl_kit.checkpoint_name), name=name, strength=0.7, strength_clip=1.3
    )
    response = client.post("/v1/runs", json={"graph": graph, "target": "x"})
    assert response.status_code == 201, response.text
    state = finished(client, str(response.json()["runId"]))
    assert state["status"] == "done", state
    (take,) = state["takes"]
    assert take["params"]["loras"] == [{"name": name, "strength": 0.7, "strength_clip": 1.3}]
    path = tmp_path / "take.png"
    path.write_bytes(client.get(take["uri"]).content)
    with Image.open(path) as image:
        served = np.asarray(image.convert("RGB")).astype(np.int16)
    rig = sdxl_rig(sdxl_kit.root, sdxl_sampler)
    lora = kit_lora(rig, sdxl_kit.loras["a"], 0.7, 1.3)
    alone = take_pixels(
        render(rig, tmp_path / "alone", loras=[lora], model=sdxl_kit.checkpoint_name, **RENDER)
    )
    # Within a level: a fused copy of the stack (the adapter policy makes one as forwards
    # pass) rounds differently from per-row deltas.
    assert int(np.abs(served - alone).max()) <= 1


def test_a_locon_lora_is_refused_at_submit_naming_the_convolution(
    sdxl_kit: SDXLKit, tmp_path: Path
) -> None:
    import torch

    from inline_core.diffusion.libs import save_safetensors

    models = tmp_path / "models"
    shutil.copytree(sdxl_kit.root, models, ignore=shutil.ignore_patterns("*diffusers*"))
    layer = "lora_unet_input_blocks_1_0_in_layers_2"
    tensors = {f"{layer}.lora_down.weight": torch.zeros(4, 64, 3, 3)}
    tensors[f"{layer}.lora_up.weight"] = torch.zeros(64, 4, 1, 1)
    save_safetensors(tensors, models / "loras" / "locon.safetensors", {"format": "pt"})
    graph = with_lora(sdxl_graph(), name="locon.safetensors", strength=1.0)
    response = submitted(models, tmp_path, graph)
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert "input_blocks_1_0_in_layers_2" in message and "linear layers only" in message


def test_a_picked_checkpoint_of_another_family_is_refused_saying_what_its_keys_look_like(
    sdxl_kit: SDXLKit, tmp_path: Path
) -> None:
    """An SD 1.x checkpoint picked as the model, under a name that says nothing: a 422 at submit
    naming what its keys are, not "not found"."""
    models = tmp_path / "models"
    sd15_like(sdxl_kit, models, "my_mix_v3.safetensors")
    response = submitted(models, tmp_path, sdxl_graph(model="my_mix_v3.safetensors"))
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert "checkpoints/my_mix_v3.safetensors is not a SDXL diffusion model" in message
    assert "Stable Diffusion 1.x/2.x UNet" in message and "label_emb" in message


def test_a_refiner_checkpoint_picked_as_the_model_is_refused_naming_it(
    sdxl_kit: SDXLKit, tmp_path: Path
) -> None:
    """A refiner's keys (OpenCLIP-G alone, at `conditioner.embedders.0.`): a 422 at submit saying
    it is a refiner to pick as the refiner, not a missing text encoder."""
    assert sdxl_kit.refiner is not None
    name = sdxl_kit.refiner.name
    response = submitted(sdxl_kit.root, tmp_path, sdxl_graph(model=name))
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert f"{name} is an SDXL refiner checkpoint" in message
    assert "this one as its refiner" in message
