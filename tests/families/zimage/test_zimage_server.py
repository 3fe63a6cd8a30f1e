"""End to end through the HTTP API: a prompt graph renders a PNG take with the pixels diffusers
renders, img2img from an uploaded asset, missing models refused with 422, cancel, no reload."""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from PIL import Image
from zimage_harness import max_diff, pixels

from inline_core.config import Config
from inline_core.engine.runtime import ModelRuntime
from inline_core.families.zimage.descriptor import NODE_TYPE
from inline_core.families.zimage.kit import KitPaths
from inline_core.server.app import create_app
from inline_core.server.bootstrap import Services
from tests.server.server_support import cpu_client

FINISHED = ("done", "error", "cancelled")


def zimage_graph(prompt: str, image_asset: str | None = None, **params: Any) -> dict[str, Any]:
    node: dict[str, Any] = {
        "id": "z",
        "type": NODE_TYPE,
        "params": {"width": 64, "height": 64, "steps": 3, **params},
        "inputs": {"prompt": {"from": "p", "output": "text"}},
    }
    nodes: list[dict[str, Any]] = [
        {"id": "p", "type": "input/text", "params": {"text": prompt}},
        node,
    ]
    if image_asset is not None:
        nodes.append(
            {
                "id": "i",
                "type": "input/image",
                "params": {"asset": {"ref": "asset", "id": image_asset}},
            }
        )
        node["inputs"]["image"] = {"from": "i", "output": "image"}
    return {"schemaVersion": 1, "nodes": nodes}


def submit(client: TestClient, graph: dict[str, Any]) -> str:
    response = client.post("/v1/runs", json={"graph": graph, "target": "z"})
    assert response.status_code == 201, response.text
    return str(response.json()["runId"])


def finished(state: dict[str, Any]) -> bool:
    return state["status"] in FINISHED


def wait(
    client: TestClient,
    run_id: str,
    until: Callable[[dict[str, Any]], bool] = finished,
    timeout: float = 60.0,
) -> dict[str, Any]:
    """Poll the run until `until(state)`; a liveness bound, not a timing test."""
    deadline = time.monotonic() + timeout
    while True:
        state: dict[str, Any] = client.get(f"/v1/runs/{run_id}").json()
        if until(state):
            return state
        assert time.monotonic() < deadline, f"run {run_id} stuck: {state}"
        time.sleep(0.01)


@pytest.fixture
def client(kit: KitPaths, tmp_path: Path) -> Iterator[TestClient]:
    with cpu_client(kit.root, tmp_path / "data") as c:
        yield c


def model_runtime(client: TestClient) -> ModelRuntime:
    services = cast(Services, cast(Any, client.app).state.services)
    assert services.registry.runner(NODE_TYPE) is not None and services.runtime is not None
    return services.runtime


def take_image(client: TestClient, take: dict[str, Any]) -> Image.Image:
    data = client.get(take["uri"]).content
    assert data.startswith(b"\x89PNG")
    return Image.open(io.BytesIO(data)).convert("RGB")


def test_a_cpu_server_does_its_model_work_on_the_step_loops_thread(client: TestClient) -> None:
    # One thread computes (diffusion/threads.py): the encode, the denoise and the decode of a
    # render all run on the loop, and so does any node's own model work handed to `compute`.
    run_id = submit(client, zimage_graph("a harbour at night", seed=7))
    assert wait(client, run_id)["status"] == "done"
    runtime = model_runtime(client)
    assert runtime.compute(lambda: threading.current_thread().name) == "inline-step-loop"
    assert runtime.compute(torch.get_num_threads) == torch.get_num_threads()  # all of them


def test_prompt_graph_renders_the_diffusers_pixels(client: TestClient, reference_pipe: Any) -> None:
    run_id = submit(client, zimage_graph("a harbour at night", guidance=2.0, seed=-1))
    state = wait(client, run_id)
    assert state["status"] == "done", state
    [take] = state["takes"]
    seed = take["params"]["seed"]
    assert isinstance(seed, int) and seed >= 0  # resolved at submit, recorded on the take
    ours = take_image(client, take)
    ref = reference_pipe(
        prompt="a harbour at night",
        width=64,
        height=64,
        num_inference_steps=3,
        guidance_scale=2.0,
        generator=torch.Generator("cpu").manual_seed(seed),
    ).images[0]
    assert max_diff(pixels(ours), pixels(ref)) <= 3
    # A second render (another seed, img2img from the first take's image) loads nothing.
    loads = model_runtime(client).stats()["loads"]
    again = wait(client, submit(client, zimage_graph("a harbour at dawn", seed=5)))
    assert again["status"] == "done" and model_runtime(client).stats()["loads"] == loads


def test_img2img_from_an_uploaded_asset(client: TestClient) -> None:
    rng = np.random.default_rng(1)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)).save(buf, format="PNG")
    upload = client.post(
        "/v1/assets", content=buf.getvalue(), headers={"content-type": "image/png"}
    )
    assert upload.status_code in (200, 201), upload.text
    graph = zimage_graph("a cat", image_asset=upload.json()["id"], steps=4, strength=0.5, seed=3)
    state = wait(client, submit(client, graph))
    assert state["status"] == "done", state
    [take] = state["takes"]
    assert take["params"]["img2img"] is True and take["params"]["strength"] == 0.5
    assert take_image(client, take).size == (64, 64)


def test_a_take_graph_names_the_model_auto_picked_and_renders_the_same(
    client: TestClient,
) -> None:
    state = wait(client, submit(client, zimage_graph("a fox", steps=2, seed=11)))
    assert state["status"] == "done", state
    [take] = state["takes"]
    data = client.get(take["uri"]).content
    with Image.open(io.BytesIO(data)) as png:
        graph = json.loads(png.info["inline:graph"])
        first = pixels(png)
    [node] = [n for n in graph["nodes"] if n["id"] == "z"]
    assert node["params"]["model"] == take["params"]["model"]
    assert node["params"]["model"].endswith(".safetensors")
    # Re-submitting the take's own graph renders the same picture.
    again = wait(client, submit(client, graph))
    assert again["status"] == "done", again
    [retake] = again["takes"]
    with Image.open(io.BytesIO(client.get(retake["uri"]).content)) as png:
        assert max_diff(pixels(png), first) == 0


def test_a_strength_that_leaves_no_step_is_refused_at_submit(client: TestClient) -> None:
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (10, 20, 30)).save(buf, format="PNG")
    upload = client.post(
        "/v1/assets", content=buf.getvalue(), headers={"content-type": "image/png"}
    )
    asset = upload.json()["id"]
    graph = zimage_graph("a cat", image_asset=asset, steps=4, strength=0.0)
    response = client.post("/v1/runs", json={"graph": graph, "target": "z"})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request" and error["nodeId"] == "z"
    assert "strength 0 with an image wired leaves no step to run" in error["message"]
    # Without an image, strength is not used: the same params render.
    state = wait(client, submit(client, zimage_graph("a cat", steps=2, strength=0.0)))
    assert state["status"] == "done", state


def test_a_sampler_the_node_cannot_run_is_refused_at_submit(client: TestClient) -> None:
    """CFG++ needs the unconditional prediction that only guidance above 0 makes; a name outside
    the list is refused by the param's own check. Neither stores a run."""
    unguided = zimage_graph("a cat", steps=2, sampler="euler_cfg_pp", guidance=0.0)
    response = client.post("/v1/runs", json={"graph": unguided, "target": "z"})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["nodeId"] == "z" and "euler_cfg_pp" in error["message"], error
    unknown = zimage_graph("a cat", steps=2, sampler="euler_a")
    response = client.post("/v1/runs", json={"graph": unknown, "target": "z"})
    assert response.status_code == 422 and "euler_a" in response.text, response.text
    assert client.get("/v1/runs").json()["runs"] == []


def node_step(state: dict[str, Any]) -> int:
    node = cast(dict[str, Any], state["nodes"].get("z") or {})
    return int(node.get("step") or 0)


def test_cancel_mid_denoise(client: TestClient) -> None:
    run_id = submit(client, zimage_graph("a long render", steps=100, seed=1))
    wait(client, run_id, lambda state: node_step(state) >= 1)
    # Mid-denoise, the run is in progress for the residency: its parts are kept for every load.
    assert model_runtime(client).renders_in_progress() == {run_id}
    assert client.delete(f"/v1/runs/{run_id}").status_code == 200
    state = wait(client, run_id)
    assert state["status"] == "cancelled" and state["takes"] == []
    assert node_step(state) < 100
    # Whatever ended it, it is no longer in progress (the status is written after the scope).
    assert model_runtime(client).renders_in_progress() == frozenset()


def test_missing_models_are_refused_at_submit(tmp_path: Path) -> None:
    config = Config(
        models_dir=tmp_path / "models", data_dir=tmp_path / "data", profile="cpu", dtype="float32"
    )
    with TestClient(create_app(config)) as client:
        response = client.post("/v1/runs", json={"graph": zimage_graph("x"), "target": "z"})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "model_missing" and error["nodeId"] == "z"
    for what in ("diffusion model", "vae", "text encoder"):
        assert what in error["message"]
