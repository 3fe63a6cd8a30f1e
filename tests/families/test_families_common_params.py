"""The negative prompt and the LoRA port every family's node declares alike
(`contract/common_params.py`), as the node catalog shows them."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from inline_core.config import Config
from inline_core.server.app import create_app

# Family nodes with a negative prompt, and those of them that take LoRAs.
NEGATIVE = {
    "alibaba/wan",
    "krea/krea-2",
    "alibaba/qwen-image",
    "skywork/skyreels-v2",
    "stability/sd15",
    "stability/sdxl",
    "alibaba/z-image-turbo",
}
LORAS = NEGATIVE - {"skywork/skyreels-v2", "stability/sd15"}


def test_every_family_node_shows_one_negative_prompt_limit_and_lora_port(tmp_path: Path) -> None:
    config = Config(models_dir=tmp_path / "models", data_dir=tmp_path / "data", profile="cpu")
    with TestClient(create_app(config)) as client:
        nodes = {n["type"]: n for n in client.get("/v1/models").json()["models"]}
    assert NEGATIVE <= set(nodes)
    for node_type in NEGATIVE:
        params = {p["name"]: p for p in nodes[node_type]["params"]}
        assert params["negative_prompt"] == {
            "name": "negative_prompt",
            "widget": "textarea",
            "label": "Negative prompt",
            "default": "",
            "required": False,
            "maxLength": 20_000,
        }, node_type
    for node_type in LORAS:
        ports = {p["name"]: p for p in nodes[node_type]["inputs"]}
        assert ports["loras"] == {
            "name": "loras",
            "kind": "lora",
            "optional": True,
            "multiple": True,
            "label": "LoRAs",
        }, node_type
