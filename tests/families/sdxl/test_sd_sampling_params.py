"""SDXL's and SD 1.5's sampler and schedule params come from the shared builders
(`families/nodes/sampling.py`) with SDXL's own default schedule, `normal`: the node catalog shows
them as it did when the descriptor wrote them out, and a request left at the defaults samples on
`normal` too."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from inline_core.config import Config
from inline_core.families.sdxl import sd15
from inline_core.families.sdxl.descriptor import NODE_TYPE
from inline_core.families.sdxl.request import SDXLRequest
from inline_core.graph.sampler_names import GUIDED_SAMPLERS, SCHEDULES
from inline_core.server.app import create_app


@pytest.mark.parametrize("node_type", [NODE_TYPE, sd15.NODE_TYPE])
def test_the_catalog_shows_comfyuis_samplers_and_the_normal_schedule(
    node_type: str, tmp_path: Path
) -> None:
    config = Config(models_dir=tmp_path / "models", data_dir=tmp_path / "data", profile="cpu")
    with TestClient(create_app(config)) as client:
        response = client.get(f"/v1/models/{node_type}")
    assert response.status_code == 200
    params = {p["name"]: p for p in response.json()["params"]}
    assert params["sampler"] == {
        "name": "sampler",
        "widget": "select",
        "label": "Sampler",
        "default": "euler",
        "required": False,
        "options": list(GUIDED_SAMPLERS),
    }
    assert params["schedule"] == {
        "name": "schedule",
        "widget": "select",
        "label": "Schedule",
        "default": "normal",
        "required": False,
        "options": list(SCHEDULES),
    }


def test_a_request_left_at_its_defaults_samples_on_the_nodes_default_schedule() -> None:
    request = SDXLRequest(prompt="p", width=64, height=64, steps=2, guidance=4.0, seed=0)
    assert (request.sampler, request.schedule) == ("euler", "normal")
