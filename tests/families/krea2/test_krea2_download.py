"""Krea 2's download table, end to end: its default is the three single files ComfyUI's Krea 2
templates load from Comfy-Org's repo; with an empty models folder `krea/krea-2` is refused
(`model_missing`), its requirements name each piece with those hub sources, and posting them
downloads the kit's tiny files from a local hub (served under the real repo's paths through
`HF_ENDPOINT`), after which the same graph renders as Turbo, told by the file's name."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from inline_core.families.krea2.descriptor import NODE_TYPE
from inline_core.families.krea2.download import COMFY_REPO, DOWNLOADS, plan
from inline_core.families.krea2.kit import Krea2Kit
from inline_core.server.app import create_app
from tests.downloads.download_support import download_done, hub_config, without_hub_token
from tests.downloads.fake_hub import FakeHub
from tests.families.import_harness import finished
from tests.server.server_support import prompt_graph

MODEL = "diffusion_models/krea2_turbo_fp8_scaled.safetensors"
ENCODER = "text_encoders/qwen3vl_4b_fp8_scaled.safetensors"
VAE = "vae/qwen_image_vae.safetensors"
GRAPH = prompt_graph(
    NODE_TYPE, "k", {"width": 64, "height": 64, "steps": 2, "seed": 3}, "a lighthouse"
)


def test_the_default_is_the_templates_three_files_each_in_its_folder(tmp_path: Path) -> None:
    todo = plan([], tmp_path)
    assert [name for name, _ in todo] == ["diffusion_model", "text_encoder", "vae"]
    assert [t.destination(tmp_path) for _, t in todo] == [
        tmp_path / "diffusion_models" / "krea2_turbo_fp8_scaled.safetensors",
        tmp_path / "text_encoders" / "qwen3vl_4b_fp8_scaled.safetensors",
        tmp_path / "vae" / "qwen_image_vae.safetensors",  # the file Qwen-Image decodes with
    ]
    assert {t.repo_id for t in DOWNLOADS.targets.values()} == {COMFY_REPO}
    with pytest.raises(ValueError, match="unknown download target"):
        DOWNLOADS.expand(["krea-3"])


@pytest.fixture
def hub(krea2_kit: Krea2Kit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    without_hub_token(monkeypatch, tmp_path / "hf-home")  # no account is ever involved
    started = FakeHub().start()
    kit = krea2_kit
    files = {MODEL: kit.transformer_file, ENCODER: kit.text_encoder_file, VAE: kit.vae_file}
    started.add_repo(COMFY_REPO, files)
    try:
        yield started
    finally:
        started.stop()


def test_model_missing_turns_into_a_turbo_render_after_the_downloads(
    hub: FakeHub, tmp_path: Path
) -> None:
    config = hub_config(tmp_path, hub.url, dtype="float32")
    with TestClient(create_app(config)) as client:
        refused = client.post("/v1/runs", json={"graph": GRAPH, "target": "k"})
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "model_missing"
        needs = client.get(f"/v1/models/{NODE_TYPE}/requirements").json()
        assert needs["family"] == "krea-2" and needs["ready"] is False
        pieces = {p["role"]: p for p in needs["requirements"]}
        assert {"diffusion_model", "vae", "text_encoder"} <= set(pieces)
        firsts = {
            role: pieces[role]["sources"][0] for role in ("diffusion_model", "text_encoder", "vae")
        }
        served = hub.repos[COMFY_REPO].files
        for role, path in (("diffusion_model", MODEL), ("text_encoder", ENCODER), ("vae", VAE)):
            source = firsts[role]
            assert (source["repo"], source["layout"], source["hubError"]) == (
                COMFY_REPO,
                "comfy",
                None,
            )
            assert source["bytes"] == served[path].size
            download_done(client, source)
        needs = client.get(f"/v1/models/{NODE_TYPE}/requirements").json()
        assert needs["ready"] is True, needs
        run = client.post("/v1/runs", json={"graph": GRAPH, "target": "k"})
        assert run.status_code == 201, run.text
        state = finished(client, str(run.json()["runId"]), seconds=300)
        assert state["status"] == "done", state
        (take,) = state["takes"]
        assert take["params"]["model_variant"] == "Krea 2 Turbo"
