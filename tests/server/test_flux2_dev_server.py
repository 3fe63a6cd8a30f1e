"""FLUX.2 dev through the HTTP API (in process): a prompt graph renders on the tiny dev kit in
both layouts, and a stack missing its Mistral is a 422 `model_missing` naming it and where it
goes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from inline_core.families.flux2.descriptor import NODE_TYPE
from inline_core.families.flux2.kit_dev import Flux2DevKit, build_dev_kit
from tests.families.import_harness import finished
from tests.server.server_support import cpu_client, prompt_graph

RENDER: dict[str, Any] = {"width": 64, "height": 64, "steps": 2, "seed": 5}
FOLDER = "flux2_dev_tiny_diffusers"


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Flux2DevKit:
    return build_dev_kit(tmp_path_factory.mktemp("flux2_dev_server") / "models")


def graph(**params: Any) -> dict[str, Any]:
    return prompt_graph(NODE_TYPE, "f", {**RENDER, **params}, "a fox", None)


@pytest.mark.parametrize("model", [FOLDER, "flux2_dev_tiny.safetensors"])
def test_dev_renders_in_both_layouts(kit: Flux2DevKit, tmp_path: Path, model: str) -> None:
    with cpu_client(kit.root, tmp_path / "data") as client:
        response = client.post("/v1/runs", json={"graph": graph(model=model), "target": "f"})
        assert response.status_code == 201, response.text
        run = finished(client, str(response.json()["runId"]))
        assert run["status"] == "done", run


def test_a_missing_mistral_is_a_422_naming_it(kit: Flux2DevKit, tmp_path: Path) -> None:
    root = tmp_path / "models"
    shutil.copytree(kit.root, root, ignore=shutil.ignore_patterns("mistral_*", FOLDER))
    with cpu_client(root, tmp_path / "data") as client:
        body = graph(model="flux2_dev_tiny.safetensors")
        response = client.post("/v1/runs", json={"graph": body, "target": "f"})
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "model_missing", error
        assert "mistral_3_small_flux2_bf16.safetensors" in error["message"]
        assert str(root / "text_encoders") in error["message"]
