"""What SDXL's and SD 1.5's nodes cannot render is a 422 at submit naming it, before a run
starts: a refiner with a mask (SDXL inpaints on the base alone), a LoRA or a textual-inversion
embedding on SD 1.5 (its node reads neither), and an SD 2.x checkpoint picked for SD 1.5 (told by
its keys: linear projections where SD 1.x has convolutions)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from PIL import Image
from sdxl_harness import sd15_like
from test_sdxl_server import RENDER, with_lora

from inline_core.families.sdxl.descriptor import NODE_TYPE
from inline_core.families.sdxl.kit import SDXLKit
from inline_core.families.sdxl.kit_sd15 import SD15Kit
from inline_core.families.sdxl.sd15 import NODE_TYPE as SD15
from tests.families.import_harness import upload_png
from tests.server.server_support import cpu_client, prompt_graph


@pytest.fixture
def models(sdxl_kit: SDXLKit, tmp_path: Path) -> Path:
    """The SDXL kit's models, an SD 2.x-like checkpoint beside them (`sd2.safetensors`)."""
    root = tmp_path / "models"
    sd15_like(sdxl_kit, root, "sd2.safetensors")
    return root


@pytest.fixture
def client(models: Path, tmp_path: Path) -> Iterator[TestClient]:
    with cpu_client(models, tmp_path / "data") as c:
        yield c


def _refused(client: TestClient, graph: dict[str, Any]) -> str:
    response = client.post("/v1/runs", json={"graph": graph, "target": "x"})
    assert response.status_code == 422, response.text
    return str(response.json()["error"]["message"])


def test_a_refiner_with_a_mask_is_refused(client: TestClient, sdxl_kit: SDXLKit) -> None:
    assert sdxl_kit.refiner is not None
    image = upload_png(client, Image.new("RGB", (64, 64), (90, 120, 200)))
    mask = upload_png(client, Image.new("L", (64, 64), 255).convert("RGB"))
    params = {**RENDER, "model": sdxl_kit.checkpoint_name, "refiner": sdxl_kit.refiner.name}
    graph = prompt_graph(NODE_TYPE, "x", params, "a boat", {"image": image, "mask": mask})
    assert "a refiner with a mask wired" in _refused(client, graph)


def test_a_lora_on_sd15_is_refused(client: TestClient, sdxl_kit: SDXLKit) -> None:
    graph = prompt_graph(SD15, "x", {**RENDER, "model": "sd2.safetensors"}, "a boat")
    message = _refused(client, with_lora(graph, name=sdxl_kit.loras["a"].name, strength=1.0))
    assert "unknown input 'loras' for stability/sd15" in message


@pytest.mark.parametrize("where", ["prompt", "negative_prompt"])
def test_an_embedding_on_sd15_is_refused(
    sd15_kit: SD15Kit, sdxl_kit: SDXLKit, tmp_path: Path, where: str
) -> None:
    assert sdxl_kit.embedding is not None
    models = tmp_path / "sd15_models"  # SD 1.5's kit, an embedding file beside it
    shutil.copytree(sd15_kit.root, models)
    (models / "embeddings").mkdir(exist_ok=True)
    shutil.copy(sdxl_kit.embedding, models / "embeddings" / sdxl_kit.embedding.name)
    name = sdxl_kit.embedding.name.removesuffix(".safetensors")
    words = f"a boat, embedding:{name}"
    if where == "prompt":
        graph = prompt_graph(SD15, "x", {**RENDER}, words)
    else:
        graph = prompt_graph(SD15, "x", {**RENDER, "negative_prompt": words}, "a boat")
    with cpu_client(models, tmp_path / "data") as client:
        # The same node without the embedding first: its check, kept, never hides a new text.
        clean = prompt_graph(SD15, "x", {**RENDER}, "a boat")
        assert client.post("/v1/runs", json={"graph": clean, "target": "x"}).status_code == 201
        message = _refused(client, graph)
    assert "textual-inversion embeddings" in message and name in message


def test_an_sd2_checkpoint_picked_for_sd15_is_refused_by_its_keys(client: TestClient) -> None:
    graph = prompt_graph(SD15, "x", {**RENDER, "model": "sd2.safetensors"}, "a boat")
    message = _refused(client, graph)
    assert "sd2.safetensors" in message and "Stable Diffusion 2.x UNet" in message
