"""SD 1.5 through the HTTP API: ComfyUI's plain SD 1.5 default graph (CheckpointLoaderSimple on an
SD 1.5 checkpoint, told by its keys) imports as one `stability/sd15` node that renders what the
node written by hand renders, a mapped `v1-5-pruned-emaonly` included without a warning; a
LoraLoader (the node takes none) is refused naming it."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image
from test_sdxl_import import default_graph

from inline_core.families.sdxl.kit_sd15 import SD15Kit
from inline_core.families.sdxl.sd15 import NODE_TYPE
from tests.families.import_harness import import_comfy, takes_of, target_of
from tests.server.server_support import cpu_client, prompt_graph

CHECKPOINT = "sd15_tiny.safetensors"


@pytest.fixture
def sd15_client(sd15_kit: SD15Kit, tmp_path: Path) -> Iterator[TestClient]:
    with cpu_client(sd15_kit.root, tmp_path / "data") as client:
        yield client


def _pixels(client: TestClient, graph: dict[str, Any], target: str) -> Any:
    (take,) = takes_of(client, [(graph, target)])
    with Image.open(io.BytesIO(client.get(take["uri"]).content)) as image:
        return np.asarray(image.convert("RGB")).astype(np.int16)


def by_hand() -> dict[str, Any]:
    params = {"model": CHECKPOINT, "negative_prompt": "blurry", "width": 72, "height": 64,
              "steps": 3, "guidance": 5.5, "seed": 9, "sampler": "dpmpp_2m",
              "schedule": "karras"}  # fmt: skip
    return prompt_graph(NODE_TYPE, "w", params, "a (lighthouse:1.2) at dusk")


OFFICIAL = "v1-5-pruned-emaonly.safetensors"


@pytest.mark.parametrize(
    ("workflow_file", "models"),
    [(CHECKPOINT, {}), (OFFICIAL, {OFFICIAL: CHECKPOINT})],
    ids=["by-keys", "mapped"],
)
def test_the_sd15_default_graph_renders_what_the_node_by_hand_renders(
    sd15_client: TestClient, workflow_file: str, models: dict[str, str]
) -> None:
    response = import_comfy(sd15_client, default_graph(workflow_file), models)
    assert response.status_code == 200, response.text
    body = response.json()
    target, _nodes = target_of(body)
    assert target["type"] == NODE_TYPE
    expected = {"model": CHECKPOINT, "width": 72, "height": 64, "steps": 3, "guidance": 5.5,
                "sampler": "dpmpp_2m", "schedule": "karras", "seed": 9}  # fmt: skip
    assert {k: target["params"][k] for k in expected} == expected
    assert body["changesPicture"] == []
    assert not any("built for" in w for w in body["warnings"]), body["warnings"]
    imported = _pixels(sd15_client, body["graph"], body["target"])
    assert np.array_equal(imported, _pixels(sd15_client, by_hand(), "w"))


def test_a_lora_loader_is_refused_naming_it(sd15_client: TestClient) -> None:
    workflow = default_graph(CHECKPOINT)
    inputs = {"lora_name": "x.safetensors", "strength_model": 1.0, "strength_clip": 1.0,
              "model": ["4", 0], "clip": ["4", 1]}  # fmt: skip
    workflow["10"] = {"class_type": "LoraLoader", "inputs": inputs}
    workflow["3"]["inputs"]["model"] = ["10", 0]
    response = import_comfy(sd15_client, workflow, {})
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert "LoraLoader 10" in message and "takes no LoRAs" in message
