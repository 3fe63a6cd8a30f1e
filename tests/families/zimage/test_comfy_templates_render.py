"""The official ComfyUI templates the importer maps (`tests/importer/test_comfy_import_templates`
checks every one): through the HTTP API, each renders with the tiny models. The template's model
file is not the kit's, so the import lists the catalog's candidates and the test maps onto one, as
a user would; sizes and steps are cut down for a CPU render."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from inline_core.config import Config
from inline_core.families.zimage.kit import KitPaths
from inline_core.server.app import create_app
from tests.families.import_harness import finished, upload_png
from tests.importer.comfy_templates import templates

Json = dict[str, Any]


@pytest.fixture(scope="module")
def client(kit: KitPaths, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    data = tmp_path_factory.mktemp("templates") / "data"
    config = Config(models_dir=kit.root, data_dir=data, profile="cpu")
    with TestClient(create_app(config)) as c:
        yield c


def small(graph: Json, asset: str) -> Json:
    for node in graph["nodes"]:
        params = node["params"]
        if node["type"] == "latent/empty":
            params.update(width=64, height=64, batch=1)
        elif node["type"] == "sample":
            params["steps"] = min(int(params["steps"]), 2)
        elif node["type"] == "input/image":
            params["asset"] = {"ref": "asset", "id": asset}
    return graph


def test_every_mapped_template_renders_with_the_tiny_models(client: TestClient) -> None:
    asset = upload_png(client, Image.new("RGB", (64, 64), (120, 60, 30)))
    rendered: list[str] = []
    for name, workflow in templates():
        first = client.post("/v1/import/comfy", json=workflow)
        if first.status_code != 200:
            assert first.status_code == 422, (name, first.text)
            continue
        body = first.json()
        family = cast(dict[str, Any] | None, body["family"])
        if family is not None and family["name"] != "z-image":
            # Another family's own node, on its own kit: its import tests render those
            # (tests/families/{wan,sdxl}/test_*_import.py, tests/server/test_qwen_image_import.py).
            continue
        unmatched = [m for m in body["unmatchedModels"] if m["using"] is None]
        models = {m["file"]: m["candidates"][0] for m in unmatched if m["file"]}
        if models:
            answer = client.post("/v1/import/comfy", json={"workflow": workflow, "models": models})
            assert answer.status_code == 200, (name, answer.text)
            body = answer.json()
        graph = small(body["graph"], asset)
        # A loader whose file the workflow computes has no name to map: set it by its node id.
        named = {m["nodeId"]: m["candidates"][0] for m in unmatched if not m["file"]}
        for node in graph["nodes"]:
            if node["id"] in named:
                node["params"]["file"] = named[node["id"]]
        response = client.post("/v1/runs", json={"graph": graph, "target": body["target"]})
        assert response.status_code == 201, (name, response.text)
        state = finished(client, response.json()["runId"])
        assert state["status"] == "done", (name, state)
        [take] = state["takes"]
        with Image.open(io.BytesIO(client.get(take["uri"]).content)) as png:
            assert png.size[0] > 0
        rendered.append(name)
    print(f"\nrendered {len(rendered)} templates: {', '.join(rendered)}")
    assert "image_z_image_turbo.json" in rendered
