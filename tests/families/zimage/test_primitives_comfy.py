"""ComfyUI workflows through the HTTP API: `POST /v1/import/comfy`, then `POST /v1/runs` with what
it answered, renders the `alibaba/z-image-turbo` node's pixels; a workflow for a model family this
server cannot run gets a clear refusal; garbage is a 422."""

from __future__ import annotations

import io
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import torch
from comfy_zimage import SD_CHECKPOINT, sd_txt2img_api, zimage_api, zimage_ui
from fastapi.testclient import TestClient
from PIL import Image
from primitive_graphs import MODEL
from zimage_harness import Pixels, max_diff, pixels

from inline_core.config import Config
from inline_core.diffusion.libs import save_safetensors
from inline_core.families.zimage.descriptor import NODE_TYPE
from inline_core.families.zimage.kit import KitPaths
from inline_core.server.app import create_app

Json = dict[str, Any]


def serve(models: Path, data: Path) -> TestClient:
    return TestClient(
        create_app(Config(models_dir=models, data_dir=data, profile="cpu", dtype="float32"))
    )


@pytest.fixture
def client(kit: KitPaths, tmp_path: Path) -> Iterator[TestClient]:
    with serve(kit.root, tmp_path / "data") as c:
        yield c


def imported(client: TestClient, workflow: Json) -> Json:
    response = client.post("/v1/import/comfy", json=workflow)
    assert response.status_code == 200, response.text
    body = cast(Json, response.json())
    assert set(body) == {
        "graph",
        "target",
        "family",
        "changesPicture",
        "unmatchedModels",
        "skipped",
        "warnings",
    }
    return body


def run(client: TestClient, graph: Json, target: str) -> Json:
    state = finished(client, graph, target)
    assert state["status"] == "done", state
    return state


def finished(client: TestClient, graph: Json, target: str) -> Json:
    """The run's state once it ended, however it ended."""
    response = client.post("/v1/runs", json={"graph": graph, "target": target})
    assert response.status_code == 201, response.text
    run_id = response.json()["runId"]
    deadline = time.monotonic() + 60  # a liveness bound, not a timing test
    while True:
        state = cast(Json, client.get(f"/v1/runs/{run_id}").json())
        if state["status"] in ("done", "error", "cancelled"):
            return state
        assert time.monotonic() < deadline, state
        time.sleep(0.01)


def take_pixels(client: TestClient, state: Json) -> Pixels:
    [take] = state["takes"]
    data = client.get(take["uri"]).content
    with Image.open(io.BytesIO(data)) as png:
        return pixels(png)


def node_render(client: TestClient, prompt: str, **params: Any) -> Pixels:
    graph = {
        "schemaVersion": 1,
        "nodes": [
            {"id": "p", "type": "input/text", "params": {"text": prompt}},
            {
                "id": "z",
                "type": NODE_TYPE,
                "params": {"model": MODEL, **params},
                "inputs": {"prompt": {"from": "p", "output": "text"}},
            },
        ],
    }
    return take_pixels(client, run(client, graph, "z"))


def with_seed(graph: Json, seed: int) -> Json:
    for node in graph["nodes"]:
        if node["type"] == "sample":
            node["params"]["seed"] = seed
    return graph


def test_an_imported_api_workflow_renders_the_node_pixels_and_caches(client: TestClient) -> None:
    body = imported(client, zimage_api("a red fox in snow", seed=42))
    assert body["skipped"] == [] and body["warnings"] == []
    state = run(client, body["graph"], body["target"])
    ours = take_pixels(client, state)
    node = node_render(
        client, "a red fox in snow", width=64, height=64, steps=8, guidance=0.0, seed=42
    )
    assert max_diff(ours, node) == 0
    [take] = state["takes"]
    assert take["params"]["seed"] == 42 and take["params"]["sampler"] == "euler"

    # Another seed: only the sampler and the decoder run again; the rest is served from cache.
    again = run(client, with_seed(body["graph"], 43), body["target"])
    states = {node_id: node["state"] for node_id, node in again["nodes"].items()}
    assert states == {
        "c16": "cached",  # load/diffusion-model
        "c18": "cached",  # load/text-encoder
        "c17": "cached",  # load/vae
        "c6_text": "cached",
        "c6": "cached",  # encode/text
        "c13": "cached",  # latent/empty
        "c3": "done",  # sample
        "c8": "done",  # vae/decode
    }
    assert max_diff(take_pixels(client, again), ours) > 0


def test_an_imported_ui_workflow_with_guidance_renders_the_node_pixels(client: TestClient) -> None:
    body = imported(client, zimage_ui("a harbour at night", seed=5, steps=4, cfg=3.5))
    # ComfyUI contrasts cfg against a zeroed negative; here that is an empty negative prompt.
    assert any("empty negative prompt" in w for w in body["warnings"]), body["warnings"]
    ours = take_pixels(client, run(client, body["graph"], body["target"]))
    node = node_render(
        client,
        "a harbour at night",
        width=64,
        height=64,
        steps=4,
        guidance=2.5,  # cfg 3.5 in ComfyUI's count
        negative_prompt="",
        seed=5,
    )
    assert max_diff(ours, node) == 0


def test_a_stable_diffusion_workflow_is_refused_naming_its_family(
    kit: KitPaths, tmp_path: Path
) -> None:
    """The checkpoint is there, but it is no model a family here takes: the import says so
    (naming the family, the node and what to do), and a graph naming it is refused at submit."""
    assert kit.diffusion_file and kit.vae_file and kit.text_encoder_dir
    models = tmp_path / "models"
    for category, source in (
        ("diffusion_models", kit.diffusion_file),
        ("vae", kit.vae_file),
    ):
        (models / category).mkdir(parents=True)
        shutil.copy(source, models / category / source.name)
    shutil.copytree(kit.text_encoder_dir, models / "text_encoders" / kit.text_encoder_dir.name)
    save_safetensors(
        {"model.diffusion_model.input_blocks.0.0.weight": torch.zeros(8, 4, 3, 3)},
        models / "diffusion_models" / SD_CHECKPOINT,
    )
    with serve(models, tmp_path / "data") as client:
        refused = client.post("/v1/import/comfy", json=sd_txt2img_api())
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert error["code"] == "unsupported_model_family"
        assert "built for Stable Diffusion 1.5 (CheckpointLoaderSimple 4" in error["message"]
        # SD 1.5 runs here (`stability/sd15`), but through no file this server takes.
        runs = error["message"].split("The model families it runs: ", 1)[1]
        families = client.get("/v1/health").json()["models"]["families"]
        assert runs.startswith(", ".join(sorted(f["title"] for f in families if f["available"])))
        assert "this server runs Stable Diffusion 1.5" in error["message"]
        # Mapped onto the checkpoint itself, it is still not a model this server runs.
        mapped = {"workflow": sd_txt2img_api(), "models": {SD_CHECKPOINT: SD_CHECKPOINT}}
        again = client.post("/v1/import/comfy", json=mapped)
        assert again.json()["error"]["code"] == "unsupported_model_family"
        # A graph naming it anyway is refused at submit, as not a Z-Image model.
        body = imported(client, zimage_api("a cat", seed=1))
        for node in body["graph"]["nodes"]:
            if node["type"] == "load/diffusion-model":
                node["params"]["file"] = SD_CHECKPOINT
        response = client.post("/v1/runs", json={"graph": body["graph"], "target": body["target"]})
        # The high-level node refuses it at submit the same way, not mid-run.
        high = {
            "schemaVersion": 1,
            "nodes": [
                {"id": "p", "type": "input/text", "params": {"text": "a cat"}},
                {
                    "id": "z",
                    "type": NODE_TYPE,
                    "params": {"model": SD_CHECKPOINT, "width": 64, "height": 64},
                    "inputs": {"prompt": {"from": "p", "output": "text"}},
                },
            ],
        }
        node = client.post("/v1/runs", json={"graph": high, "target": "z"})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "model_missing" and error["nodeId"] == "c16"
    assert SD_CHECKPOINT in error["message"] and "not a Z-Image" in error["message"]
    assert node.status_code == 422, node.text
    error = node.json()["error"]
    assert error["code"] == "model_missing" and error["nodeId"] == "z"
    assert SD_CHECKPOINT in error["message"] and "not a Z-Image" in error["message"]


def test_a_workflow_for_another_family_maps_onto_ours_when_asked(client: TestClient) -> None:
    """The caller maps the checkpoint onto the catalog's model: the import names the change."""
    refused = client.post("/v1/import/comfy", json=sd_txt2img_api())
    assert refused.status_code == 422 and SD_CHECKPOINT in refused.json()["error"]["message"]
    workflow = sd_txt2img_api()
    workflow["5"]["inputs"].update(width=64, height=64)
    workflow["3"]["inputs"].update(steps=2)
    body = imported(client, {"workflow": workflow, "models": {SD_CHECKPOINT: MODEL}})
    assert body["family"] == {"name": "z-image", "title": "Z-Image"}
    assert any(
        w.startswith("changes the picture: this workflow is built for Stable Diffusion 1.5")
        for w in body["warnings"]
    ), body["warnings"]
    run(client, body["graph"], body["target"])


@pytest.mark.parametrize(
    "content",
    [b"not json", b"[1, 2]", b'{"nodes": 5}', b'{"1": {"inputs": {}}}', b"{}"],
    ids=["not-json", "array", "bad-nodes", "no-class-type", "empty"],
)
def test_the_import_route_answers_garbage_with_a_422(client: TestClient, content: bytes) -> None:
    response = client.post(
        "/v1/import/comfy", content=content, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request" and error["message"]
