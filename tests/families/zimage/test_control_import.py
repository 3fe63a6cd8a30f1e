"""An imported ComfyUI control workflow (ModelPatchLoader + QwenImageDiffsynthControlnet) renders
the pixels of the direct graph (the Z-Image node with a control image and model). Inpainting
through a control's mask: `test_inpaint_import.py`."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from comfy_zimage import zimage_api
from control_harness import UNION, edges
from fastapi.testclient import TestClient
from test_control_server import graph, upload
from test_primitives_comfy import run, serve, take_pixels
from zimage_harness import max_diff

from inline_core.families.zimage.kit import KitPaths

Json = dict[str, Any]
SEED, STRENGTH = 42, 0.8


@pytest.fixture
def client(kit: KitPaths, tmp_path: Path) -> Iterator[TestClient]:
    with serve(kit.root, tmp_path / "data") as c:
        yield c


def with_control(workflow: Json, strength: float) -> Json:
    """`workflow` with a Z-Image control patch between its model and its sampler."""
    out = copy.deepcopy(workflow)
    out["40"] = {"class_type": "ModelPatchLoader", "inputs": {"name": UNION}}
    out["41"] = {"class_type": "LoadImage", "inputs": {"image": "edges.png", "upload": "image"}}
    inputs: Json = {
        "model": out["3"]["inputs"]["model"],
        "model_patch": ["40", 0],
        "vae": out["8"]["inputs"]["vae"],
        "image": ["41", 0],
        "strength": strength,
    }
    out["42"] = {"class_type": "QwenImageDiffsynthControlnet", "inputs": inputs}
    out["3"]["inputs"]["model"] = ["42", 0]
    return out


def import_response(client: TestClient, workflow: Json, assets: dict[str, str]) -> Any:
    return client.post("/v1/import/comfy", json={"workflow": workflow, "assets": assets})


def test_an_imported_control_workflow_renders_the_direct_graphs_pixels(
    client: TestClient,
) -> None:
    control = upload(client, edges())
    workflow = with_control(zimage_api("a red fox", seed=SEED), STRENGTH)
    response = import_response(client, workflow, {"edges.png": control["id"]})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["skipped"] == [] and body["changesPicture"] == [], body
    [patch] = [n for n in body["graph"]["nodes"] if n["type"] == "load/controlnet"]
    assert patch["params"] == {"name": UNION, "strength": STRENGTH}
    assert set(patch["inputs"]) == {"model", "vae", "image"}
    state = run(client, body["graph"], body["target"])
    ours = take_pixels(client, state)
    [take] = state["takes"]
    assert take["params"]["controlnet"] == UNION
    assert take["params"]["control_strength"] == STRENGTH

    params = {"steps": 8, "seed": SEED, "controlnet": UNION, "control_strength": STRENGTH}
    direct = graph(client, {"control_image": edges()}, **params)
    for node in direct["nodes"]:
        if node["id"] == "p":
            node["params"]["text"] = "a red fox"
    assert max_diff(ours, take_pixels(client, run(client, direct, "z"))) == 0
    plain = run(client, body["graph"] | {"nodes": _without_control(body["graph"])}, body["target"])
    assert max_diff(ours, take_pixels(client, plain)) > 10


def _without_control(graph: Json) -> list[Json]:
    """The graph's nodes with the sampler's model taken from before the control node."""
    nodes = [copy.deepcopy(n) for n in graph["nodes"] if n["type"] != "load/controlnet"]
    [patch] = [n for n in graph["nodes"] if n["type"] == "load/controlnet"]
    for node in nodes:
        if node["type"] == "sample":
            node["inputs"]["model"] = patch["inputs"]["model"]
    return nodes
