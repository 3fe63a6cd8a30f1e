"""Qwen-Image end to end through the HTTP API (ASGI): a text-to-image graph and an edit graph
render the pixels the node renders in process, and bad wirings, sizes and missing pieces are
refused at submit with 422s naming them."""

from __future__ import annotations

import io
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from inline_core.config import Config
from inline_core.families.qwen_image.descriptor import NODE_TYPE
from inline_core.families.qwen_image.kit import KitPaths, build_kit
from inline_core.server.app import create_app
from tests.families.import_harness import finished, upload_png
from tests.families.qwen_image.qwen_harness import (
    EDIT_MODEL,
    SMALL,
    TEXT_MODEL,
    max_diff,
    reference_image,
    reference_pipe,
    small_references,
)
from tests.server.server_support import cpu_client, prompt_graph

PROMPT = "a teapot on a windowsill"


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> KitPaths:
    return build_kit(tmp_path_factory.mktemp("qwen_server") / "models")


@pytest.fixture
def client(kit: KitPaths, tmp_path: Path) -> Iterator[TestClient]:
    with cpu_client(kit.root, tmp_path / "data") as c:
        yield c


def graph(images: dict[str, str] | None = None, **params: Any) -> dict[str, Any]:
    return prompt_graph(NODE_TYPE, "q", {**SMALL, **params}, PROMPT, images)


def rendered(client: TestClient, body: dict[str, Any]) -> npt.NDArray[np.int16]:
    response = client.post("/v1/runs", json={"graph": body, "target": "q"})
    assert response.status_code == 201, response.text
    state = finished(client, str(response.json()["runId"]))
    assert state["status"] == "done", state
    (take,) = state["takes"]
    data = client.get(take["uri"]).content
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).astype(np.int16)


def test_text_to_image_renders_what_diffusers_renders(client: TestClient, kit: KitPaths) -> None:
    params: dict[str, Any] = {"guidance": 3.0, "negative_prompt": "dull"}
    ours = rendered(client, graph(model=TEXT_MODEL, **params))
    pipe = reference_pipe("QwenImagePipeline", kit.diffusers_dir)
    assert max_diff(ours, reference_image(pipe, PROMPT, **params)) <= 1  # two rows, one forward


def test_an_edit_renders_from_its_uploaded_reference(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    small_references(monkeypatch)
    asset = upload_png(client, Image.new("RGB", (40, 56), (200, 80, 40)))
    ours = rendered(client, graph({"image": asset}, model=EDIT_MODEL))
    assert ours.shape == (64, 64, 3) and ours.std() > 1.0


@pytest.mark.parametrize(
    ("model", "ports", "params", "names"),
    [
        (TEXT_MODEL, ("image",), {}, "qwen_image_tiny.safetensors is a Qwen-Image text-to-image"),
        (TEXT_MODEL, ("image2",), {}, "takes no reference image"),
        (EDIT_MODEL, (), {}, "is a Qwen-Image-Edit model: wire the image"),
        (TEXT_MODEL, (), {"width": 72}, "param 'width' must be a multiple of 16"),
        (TEXT_MODEL, (), {"height": 100}, "param 'height' must be a multiple of 16"),
    ],
    ids=["image-on-t2i", "image2-on-t2i", "edit-without-image", "width", "height"],
)
def test_bad_wirings_and_sizes_are_refused_at_submit(
    client: TestClient, model: str, ports: tuple[str, ...], params: dict[str, Any], names: str
) -> None:
    images = {port: upload_png(client, Image.new("RGB", (32, 32))) for port in ports}
    body = graph(images, model=model, **params)
    response = client.post("/v1/runs", json={"graph": body, "target": "q"})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["nodeId"] == "q" and names in error["message"], error


def test_a_missing_vae_is_model_missing_naming_it_and_where_it_goes(
    kit: KitPaths, tmp_path: Path
) -> None:
    assert kit.model_file is not None and kit.text_encoder_file is not None
    models = tmp_path / "models"
    (models / "diffusion_models").mkdir(parents=True)
    (models / "text_encoders").mkdir()
    shutil.copy(kit.model_file, models / "diffusion_models")
    shutil.copy(kit.text_encoder_file, models / "text_encoders")
    config = Config(models_dir=models, data_dir=tmp_path / "data", profile="cpu")
    with TestClient(create_app(config)) as client:
        response = client.post("/v1/runs", json={"graph": graph(), "target": "q"})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "model_missing" and error["nodeId"] == "q"
    assert "vae" in error["message"] and str(models / "vae") in error["message"]
    assert "qwen_image_vae.safetensors" in error["message"]
    assert "tokenizer" in error["message"] and "qwen_2.5_vl_tokenizer" in error["message"]
