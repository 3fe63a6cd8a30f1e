"""Control and inpaint through the HTTP API: a control render through uploaded images, and bad
control models, control images and masks refused at submit with the error envelope (422),
queueing nothing."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from control_harness import UNION, UNION_21, edges, mask, source
from fastapi.testclient import TestClient
from PIL import Image
from primitive_graphs import MODEL
from test_primitives_comfy import run, serve, take_pixels
from zimage_harness import max_diff

from inline_core.families.zimage.descriptor import NODE_TYPE
from inline_core.families.zimage.kit import KitPaths
from tests.families.import_harness import upload_png
from tests.server.server_support import LiveServer, wait_finished

Json = dict[str, Any]
Http = TestClient | httpx.Client  # the ASGI app's client, or a real server's
PARAMS: Json = {"width": 64, "height": 64, "steps": 2, "seed": 5, "guidance": 0.0}
NOT_CONTROL = "not_a_control_model.safetensors"


@pytest.fixture
def client(kit: KitPaths, tmp_path: Path) -> Iterator[TestClient]:
    """A server whose controlnet/ also holds a LoRA file (a file of another kind)."""
    stray = kit.root / "controlnet" / NOT_CONTROL
    shutil.copy(kit.loras["a"], stray)
    try:
        with serve(kit.root, tmp_path / "data") as c:
            yield c
    finally:
        stray.unlink()


def upload(client: Http, image: Image.Image) -> Json:
    return {"ref": "asset", "id": upload_png(client, image)}


def graph(client: Http, images: dict[str, Image.Image], **params: Any) -> Json:
    """The Z-Image node with each of `images` uploaded and wired to the input of its name."""
    nodes: list[Json] = [{"id": "p", "type": "input/text", "params": {"text": "a fox"}}]
    inputs: Json = {"prompt": {"from": "p", "output": "text"}}
    for port, image in images.items():
        nodes.append(
            {"id": port, "type": "input/image", "params": {"asset": upload(client, image)}}
        )
        inputs[port] = {"from": port, "output": "image"}
    nodes.append(
        {
            "id": "z",
            "type": NODE_TYPE,
            "params": {"model": MODEL, **PARAMS, **params},
            "inputs": inputs,
        }
    )
    return {"schemaVersion": 1, "nodes": nodes}


def refused(client: Http, body: Json, *words: str) -> Json:
    response = client.post("/v1/runs", json={"graph": body, "target": "z"})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    for word in words:
        assert word in error["message"], error
    return error


def test_a_control_render_over_http(client: TestClient) -> None:
    plain = run(client, graph(client, {}), "z")
    controlled = run(
        client,
        graph(client, {"control_image": edges()}, controlnet=UNION, control_strength=0.9),
        "z",
    )
    [take] = controlled["takes"]
    assert take["params"]["controlnet"] == UNION and take["params"]["control_strength"] == 0.9
    assert max_diff(take_pixels(client, controlled), take_pixels(client, plain)) > 10
    inpainted = run(client, graph(client, {"image": source(), "mask": mask()}, strength=1.0), "z")
    [take] = inpainted["takes"]
    assert take["params"]["inpaint"] == "blend"


def test_bad_control_inputs_are_422_at_submit(client: TestClient) -> None:
    error = refused(
        client,
        graph(client, {"control_image": edges()}, controlnet=NOT_CONTROL),
        f"controlnet/{NOT_CONTROL}",
        "Z-Image Fun ControlNet Union",
    )
    assert error["nodeId"] == "z"
    refused(
        client, graph(client, {"control_image": edges()}, controlnet="nope.safetensors"), "nope"
    )
    refused(client, graph(client, {"control_image": edges()}), "no control model is picked")
    refused(client, graph(client, {}, controlnet=UNION), "needs a control image")
    refused(client, graph(client, {"mask": mask()}), "without the image it masks")
    refused(
        client,
        graph(client, {"mask": mask(), "control_image": edges()}, controlnet=UNION_21),
        "without the image it masks",
    )
    assert client.get("/v1/runs").json()["runs"] == []  # nothing was queued


def test_a_mask_of_another_size_is_refused_naming_both_sizes(client: TestClient) -> None:
    body = graph(client, {"image": source(), "mask": mask(48, 48)}, strength=1.0)
    refused(client, body, "48x48", "64x64")


def test_a_real_server_renders_a_control_request_and_refuses_a_bad_one(
    zimage_live: LiveServer,
) -> None:
    live = zimage_live  # the shared server (conftest.py)
    with httpx.Client(base_url=live.base, timeout=30) as http:
        refused(http, graph(http, {}, controlnet=UNION), "needs a control image")
        body = graph(http, {"control_image": edges()}, controlnet=UNION_21)
        response = http.post("/v1/runs", json={"graph": body, "target": "z"})
        assert response.status_code == 201, response.text
        state = wait_finished(live, response.json()["runId"])
    assert state["status"] == "done", state
    [take] = state["takes"]
    assert take["params"]["controlnet"] == UNION_21
