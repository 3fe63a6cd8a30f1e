"""FLUX.2 klein through the HTTP API (in process): a prompt graph renders, a server that rendered
Z-Image and then klein on the same Qwen3 file shows it shared in health's residency, reference
images that cannot be used and missing pieces are 422s at submit naming them, and the
requirements route offers the real files to download."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from inline_core.config import Config
from inline_core.families.flux2.descriptor import NODE_TYPE
from inline_core.families.flux2.kit import Flux2Kit, build_kit
from inline_core.families.zimage.descriptor import NODE_TYPE as ZIMAGE_NODE
from inline_core.families.zimage.kit import build_kit as build_zimage_kit
from inline_core.server.app import create_app
from tests.families.import_harness import finished, upload_png
from tests.server.server_support import cpu_client, prompt_graph

ENCODER = "flux2_tiny_qwen3"
RENDER: dict[str, Any] = {"width": 64, "height": 64, "steps": 2, "seed": 5}


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Flux2Kit:
    root = tmp_path_factory.mktemp("flux2_server") / "models"
    made = build_kit(root, layouts=("comfy",))
    build_zimage_kit(root, layouts=("comfy",))
    return made


def graph(
    node_type: str, node: str, refs: dict[str, str] | None = None, **params: Any
) -> dict[str, Any]:
    return prompt_graph(node_type, node, {**RENDER, **params}, "a fox", refs)


def upload(client: TestClient, width: int, height: int) -> str:
    rng = np.random.default_rng(width * height)
    image = Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))
    return upload_png(client, image)


def finish(client: TestClient, body: dict[str, Any], target: str) -> dict[str, Any]:
    response = client.post("/v1/runs", json={"graph": body, "target": target})
    assert response.status_code == 201, response.text
    return finished(client, str(response.json()["runId"]))


def refused(client: TestClient, body: dict[str, Any], target: str) -> dict[str, Any]:
    response = client.post("/v1/runs", json={"graph": body, "target": target})
    assert response.status_code == 422, response.text
    return dict(response.json()["error"])


def test_klein_after_zimage_shares_the_qwen3(kit: Flux2Kit, tmp_path: Path) -> None:
    with cpu_client(kit.root, tmp_path / "data") as client:
        z = graph(ZIMAGE_NODE, "z", model="zimage_tiny.safetensors", text_encoder=ENCODER)
        assert finish(client, z, "z")["status"] == "done"
        ref = upload(client, 96, 64)
        f = graph(
            NODE_TYPE,
            "f",
            {"image": ref},
            model="flux2_klein_tiny.safetensors",
            text_encoder=ENCODER,
        )
        state = finish(client, f, "f")
        assert state["status"] == "done", state
        residency = client.get("/v1/health").json()["models"]["residency"]
        shared = {(s["part"], tuple(s["families"])) for s in residency["shared"]}
        assert ("text_encoder", ("flux-2", "z-image")) in shared


def test_bad_references_and_missing_pieces_are_refused(kit: Flux2Kit, tmp_path: Path) -> None:
    with cpu_client(kit.root, tmp_path / "data") as client:
        small = upload(client, 48, 64)
        error = refused(client, graph(NODE_TYPE, "f", {"image2": small}), "f")
        assert error["nodeId"] == "f" and "image2" in error["message"] and "64" in error["message"]
        error = refused(client, graph(NODE_TYPE, "f", vae="absent_vae.safetensors"), "f")
        assert error["code"] == "model_missing" and "absent_vae.safetensors" in error["message"]
    alone = tmp_path / "alone"
    (alone / "diffusion_models").mkdir(parents=True)
    assert kit.diffusion_file is not None
    shutil.copy(kit.diffusion_file, alone / "diffusion_models")
    config = Config(models_dir=alone, data_dir=tmp_path / "data2", profile="cpu", dtype="float32")
    with TestClient(create_app(config)) as client:
        error = refused(client, graph(NODE_TYPE, "f"), "f")
        assert error["code"] == "model_missing", error
        assert "flux2-vae.safetensors" in error["message"] and "qwen_3_4b" in error["message"]
        needs = client.get(f"/v1/models/{NODE_TYPE}/requirements").json()
        assert needs["family"] == "flux-2" and not needs["ready"]
        expected = {e for r in needs["requirements"] for e in r["expected"]}
        assert "vae/flux2-vae.safetensors" in expected
        assert "text_encoders/qwen_3_4b.safetensors" in expected


def test_a_shift_and_a_mu_together_are_refused_at_submit(kit: Flux2Kit, tmp_path: Path) -> None:
    with cpu_client(kit.root, tmp_path / "data") as client:
        body = graph(NODE_TYPE, "f", model="flux2_klein_tiny.safetensors", shift=3.0, mu=1.0)
        error = refused(client, body, "f")
        assert error["nodeId"] == "f" and "two shifts of one schedule" in error["message"]


def test_a_dev_file_is_not_rendered_as_klein(kit: Flux2Kit, tmp_path: Path) -> None:
    """A FLUX.2 file with a guidance embedder is dev: diffusers' single-file loader calls every
    FLUX.2 file dev, ours tells them apart, and dev is not read by klein's Qwen3 beside it: its
    Mistral is missing, named with where it goes."""
    from inline_core.diffusion.libs import load_safetensors, save_safetensors

    assert kit.diffusion_file is not None
    weights = dict(load_safetensors(kit.diffusion_file, "cpu"))
    inner = weights["img_in.weight"].shape[0]
    weights["guidance_in.in_layer.weight"] = weights["time_in.in_layer.weight"].clone()
    weights["guidance_in.out_layer.weight"] = weights["time_in.out_layer.weight"].clone()
    assert weights["guidance_in.out_layer.weight"].shape[0] == inner
    dev = kit.root / "diffusion_models" / "flux2_dev_tiny.safetensors"
    save_safetensors(weights, dev)
    try:
        config = Config(
            models_dir=kit.root, data_dir=tmp_path / "data", profile="cpu", dtype="float32"
        )
        with TestClient(create_app(config)) as client:
            body = graph(NODE_TYPE, "f", model=dev.name)
            error = refused(client, body, "f")
            assert error["code"] == "model_missing", error
            assert "mistral_3_small_flux2_bf16.safetensors" in error["message"]
            assert "text_encoders" in error["message"]
    finally:
        dev.unlink()
