"""The catalog hand-off, end to end: with an empty models folder the Z-Image node is refused
(`model_missing`); its requirements name what is missing and the hub sources for it; posting the
diffusers source's body downloads the kit's tiny models from a local hub (served under the real
repo's name through `HF_ENDPOINT`), and the same graph then renders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from inline_core.config import Config
from inline_core.families.zimage.descriptor import NODE_TYPE
from inline_core.families.zimage.download import COMFY_REPO, DIFFUSERS_REPO
from inline_core.families.zimage.kit import KitPaths
from inline_core.server.app import create_app
from tests.downloads.download_support import download_done, hub_config, without_hub_token
from tests.downloads.fake_hub import FakeHub
from tests.families.import_harness import finished
from tests.server.server_support import prompt_graph

GRAPH = prompt_graph(
    NODE_TYPE, "z", {"width": 64, "height": 64, "steps": 2, "seed": 3}, "a lighthouse"
)


@pytest.fixture
def hub(kit: KitPaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    without_hub_token(monkeypatch, tmp_path / "hf-home")  # no account is ever involved
    started = FakeHub().start()
    assert kit.diffusers_dir and kit.diffusion_file and kit.vae_file and kit.text_encoder_dir
    started.add_folder(DIFFUSERS_REPO, kit.diffusers_dir)
    started.add_repo(
        COMFY_REPO,
        {
            "split_files/diffusion_models/z_image_turbo_bf16.safetensors": kit.diffusion_file,
            "split_files/vae/ae.safetensors": kit.vae_file,
            "split_files/text_encoders/qwen_3_4b.safetensors": kit.text_encoder_dir
            / "model.safetensors",
        },
    )
    try:
        yield started
    finally:
        started.stop()


def test_model_missing_turns_into_a_render_after_the_download(hub: FakeHub, tmp_path: Path) -> None:
    with TestClient(create_app(hub_config(tmp_path, hub.url))) as client:
        refused = client.post("/v1/runs", json={"graph": GRAPH, "target": "z"})
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "model_missing"

        needs = client.get(f"/v1/models/{NODE_TYPE}/requirements").json()
        assert needs["family"] == "z-image" and needs["ready"] is False
        pieces = {p["role"]: p for p in needs["requirements"]}
        assert list(pieces) == ["diffusion_model", "vae", "text_encoder", "tokenizer"]
        assert not any(p["present"] for p in pieces.values())
        model = pieces["diffusion_model"]
        assert model["category"] == "diffusion_models" and model["hint"]
        assert model["expected"] == [
            "diffusion_models/z_image_turbo_bf16.safetensors",
            "diffusion_models/Z-Image-Turbo",
        ]
        split, diffusers = model["sources"]
        assert split["layout"] == "comfy" and split["repo"] == COMFY_REPO
        assert split["bytes"] == model["bytes"] == kit_size(hub, COMFY_REPO, "diffusion_models")
        assert diffusers["layout"] == "diffusers" and diffusers["repo"] == DIFFUSERS_REPO
        assert set(diffusers["provides"]) == set(pieces)
        assert diffusers["bytes"] == sum(f.size for f in hub.repos[DIFFUSERS_REPO].files.values())

        download_done(client, diffusers)

        needs = client.get(f"/v1/models/{NODE_TYPE}/requirements").json()
        assert needs["ready"] is True
        vae = next(p for p in needs["requirements"] if p["role"] == "vae")["satisfiedBy"]
        assert vae == {
            "category": "diffusion_models",
            "name": "Z-Image-Turbo",
            "subfolder": "vae",
            "path": str(tmp_path / "models" / "diffusion_models" / "Z-Image-Turbo"),
        }
        run = client.post("/v1/runs", json={"graph": GRAPH, "target": "z"})
        assert run.status_code == 201, run.text
        state = finished(client, str(run.json()["runId"]))
        assert state["status"] == "done", state
        assert len(state["takes"]) == 1


def kit_size(hub: FakeHub, repo: str, part: str) -> int:
    return next(f.size for p, f in hub.repos[repo].files.items() if f"/{part}/" in p)


def test_a_node_of_no_family_needs_nothing_and_an_unknown_one_is_404(tmp_path: Path) -> None:
    config = Config(models_dir=tmp_path / "models", data_dir=tmp_path / "data", profile="cpu")
    with TestClient(create_app(config)) as client:
        resize = client.get("/v1/models/image/resize/requirements")
        assert resize.status_code == 200 and resize.json()["requirements"] == []
        unknown = client.get("/v1/models/nope/nothing/requirements")
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
        assert client.get(f"/v1/models/{NODE_TYPE}").json()["type"] == NODE_TYPE
