"""FLUX.2 dev through the HTTP API (in process): a prompt graph renders on the tiny dev kit."""

from __future__ import annotations

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


def test_dev_renders_from_its_diffusers_folder(kit: Flux2DevKit, tmp_path: Path) -> None:
    with cpu_client(kit.root, tmp_path / "data") as client:
        response = client.post("/v1/runs", json={"graph": graph(model=FOLDER), "target": "f"})
        assert response.status_code == 201, response.text
        run = finished(client, str(response.json()["runId"]))
        assert run["status"] == "done", run
