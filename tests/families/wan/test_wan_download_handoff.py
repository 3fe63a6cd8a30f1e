"""Wan's catalog hand-off, end to end: with an empty models folder `alibaba/wan` is refused
(`model_missing`); its requirements name each piece (the diffusion model, VAE, UMT5 and its
tokenizer) with the hub sources of Wan's download table; posting those sources' bodies downloads
the kit's tiny models from a local hub (served under the real repos' names and paths through
`HF_ENDPOINT`), and the same graph then renders. Both layouts: ComfyUI's split files with the
tokenizer from a diffusers repo's `tokenizer/` folder, and a whole diffusers folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from test_wan_server import submit, wan_graph

from inline_core.families.wan.descriptor import NODE_TYPE
from inline_core.families.wan.download import COMFY_21, TOKENIZER_REPO
from inline_core.families.wan.kit import WanKit
from inline_core.server.app import create_app
from tests.downloads.download_support import download_done, hub_config, without_hub_token
from tests.downloads.fake_hub import FakeHub

DIFFUSERS_REPO = "Wan-AI/Wan2.1-T2V-1.3B-Diffusers"
PIECES = ["diffusion_model", "vae", "text_encoder", "tokenizer"]


@pytest.fixture
def hub(wan_kit: WanKit, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    without_hub_token(monkeypatch, tmp_path / "hf-home")  # no account is ever involved
    started = FakeHub().start()
    kit = wan_kit
    assert kit.diffusion_file and kit.vae_file and kit.text_encoder_file and kit.diffusers_dir
    started.add_repo(
        COMFY_21,
        {
            "split_files/diffusion_models/wan2.1_t2v_1.3B_fp16.safetensors": kit.diffusion_file,
            "split_files/vae/wan_2.1_vae.safetensors": kit.vae_file,
            "split_files/text_encoders/umt5_xxl_fp16.safetensors": kit.text_encoder_file,
        },
    )
    started.add_folder(TOKENIZER_REPO, kit.diffusers_dir)  # its tokenizer/ is the one taken
    started.add_folder(DIFFUSERS_REPO, kit.diffusers_dir)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def client(hub: FakeHub, tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(hub_config(tmp_path, hub.url, dtype="float32"))) as c:
        yield c


def requirements(client: TestClient) -> dict[str, Any]:
    body: dict[str, Any] = client.get(f"/v1/models/{NODE_TYPE}/requirements").json()
    assert body["family"] == "wan"
    return body


def graph() -> dict[str, Any]:
    return wan_graph(frames=5, steps=2, format="png")


def test_split_files_and_the_tokenizer_folder_turn_model_missing_into_a_take(
    client: TestClient, hub: FakeHub, tmp_path: Path
) -> None:
    refused = client.post("/v1/runs", json={"graph": graph(), "target": "w"})
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "model_missing"

    needs = requirements(client)
    assert needs["ready"] is False
    pieces = {p["role"]: p for p in needs["requirements"]}
    assert list(pieces) == PIECES and not any(p["present"] for p in pieces.values())
    expected = pieces["diffusion_model"]["expected"]
    assert "diffusion_models/wan2.1_t2v_1.3B_fp16.safetensors" in expected
    assert "diffusion_models/Wan2.2-TI2V-5B-Diffusers" in expected
    assert pieces["tokenizer"]["expected"][0] == "text_encoders/umt5-xxl-tokenizer"
    firsts = {role: piece["sources"][0] for role, piece in pieces.items()}
    assert [s["name"] for s in firsts.values()] == [
        "model-t2v-1.3b",
        "vae",
        "text_encoder",
        "tokenizer",
    ]
    assert all(s["layout"] == "comfy" and s["hubError"] is None for s in firsts.values())
    served = hub.repos[COMFY_21].files
    assert firsts["diffusion_model"]["bytes"] == next(
        f.size for p, f in served.items() if "diffusion_models/" in p
    )
    tokenizer_bytes = sum(
        f.size for p, f in hub.repos[TOKENIZER_REPO].files.items() if p.startswith("tokenizer/")
    )
    assert firsts["tokenizer"]["bytes"] == tokenizer_bytes
    unserved = next(s for s in pieces["vae"]["sources"] if s["name"] == "vae-2.2")
    assert unserved["hubError"] is not None  # a repo this hub lacks is reported, not raised

    for source in firsts.values():
        download_done(client, source)

    needs = requirements(client)
    assert needs["ready"] is True, needs
    tokenizer = next(p for p in needs["requirements"] if p["role"] == "tokenizer")
    assert tokenizer["satisfiedBy"] == {
        "category": "text_encoders",
        "name": "umt5-xxl-tokenizer",
        "subfolder": "tokenizer",
        "path": str(tmp_path / "models" / "text_encoders" / "umt5-xxl-tokenizer"),
    }
    state = submit(client, graph())
    assert state["status"] == "done", state
    [take] = state["takes"]
    assert take["kind"] == "video" and take["params"]["model"] == "wan2.1_t2v_1.3B_fp16.safetensors"


def test_the_diffusers_folder_alone_turns_model_missing_into_a_take(client: TestClient) -> None:
    model = requirements(client)["requirements"][0]
    source = next(s for s in model["sources"] if s["name"] == "diffusers-t2v-1.3b")
    assert source["layout"] == "diffusers" and set(source["provides"]) == set(PIECES)
    download_done(client, source)

    needs = requirements(client)
    assert needs["ready"] is True
    assert {p["satisfiedBy"]["name"] for p in needs["requirements"]} == {
        "Wan2.1-T2V-1.3B-Diffusers"
    }
    state = submit(client, graph())
    assert state["status"] == "done", state
    assert state["takes"][0]["params"]["model"] == "Wan2.1-T2V-1.3B-Diffusers"
