"""Wan LoRAs through the HTTP API: `input/lora` nodes on the `alibaba/wan` node's `loras` input
render what the node renders with that stack directly, the take records the stack, and a LoRA of
another model or of no known naming is a 422 at submit naming the file and what was expected."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from fastapi.testclient import TestClient
from test_wan_server import submit, wan_graph
from wan_harness import max_diff, render, take_frames, wan_rig

from inline_core.diffusion.libs import save_safetensors
from inline_core.families.wan.kit import WanKit
from inline_core.runtime.video import decode_apng
from inline_core.sampling.loop import StepLoopSampler
from tests.families.zimage.lora_harness import Stack, picks

Json = dict[str, Any]


def with_loras(graph: Json, stack: list[tuple[str, float]]) -> Json:
    """`graph` with one `input/lora` node per LoRA on the Wan node's `loras` input."""
    node = graph["nodes"][-1]
    for i, (name, strength) in enumerate(stack):
        graph["nodes"].insert(
            0, {"id": f"l{i}", "type": "input/lora", "params": {"name": name, "strength": strength}}
        )
    node["inputs"]["loras"] = [{"from": f"l{i}", "output": "lora"} for i in range(len(stack))]
    return graph


def frames_of(client: TestClient, state: Json) -> Any:
    assert state["status"] == "done", state
    (take,) = state["takes"]
    return decode_apng(client.get(take["uri"]).content).astype("int16")


def test_a_wan_node_with_loras_renders_the_stack(
    client: TestClient, wan_kit: WanKit, wan_sampler: StepLoopSampler, tmp_path: Path
) -> None:
    stack: Stack = [("a-comfy", 0.8), ("b", 1.5)]
    named = [(wan_kit.loras[key].name, strength) for key, strength in stack]
    state = submit(client, with_loras(wan_graph(format="png"), named))
    ours = frames_of(client, state)
    (take,) = state["takes"]
    assert take["params"]["loras"] == [{"name": n, "strength": s} for n, s in named]

    rig = wan_rig(wan_kit.root, wan_sampler)
    direct = take_frames(
        render(rig, tmp_path, loras=picks(rig, wan_kit, stack), format="png", frames=9, steps=3)
    )
    assert max_diff(ours, direct) == 0
    plain = frames_of(client, submit(client, wan_graph(format="png")))
    assert max_diff(ours, plain) > 10


def test_bad_wan_loras_are_422_at_submit(wan_kit: WanKit, tmp_path: Path) -> None:
    from inline_core.config import Config
    from inline_core.server.app import create_app

    folder = wan_kit.root / "loras"
    zimage = folder / "zimage_style_test.safetensors"  # there before the server scans
    unknown = folder / "sdxl_style_test.safetensors"
    pair = {"lora_A.weight": torch.zeros(2, 8), "lora_B.weight": torch.zeros(8, 2)}
    save_safetensors(
        {f"transformer.layers.0.attention.to_q.{k}": v for k, v in pair.items()}, zimage
    )
    save_safetensors({f"lora_te1_text_model_fc1.{k}": v for k, v in pair.items()}, unknown)
    config = Config(
        models_dir=wan_kit.root, data_dir=tmp_path / "data", profile="cpu", dtype="float32"
    )
    try:
        with TestClient(create_app(config)) as client:
            for name, expected in (
                (zimage.name, "is a LoRA for z-image, not Wan"),
                (unknown.name, "a Wan LoRA in one of the namings"),
                ("missing.safetensors", "missing.safetensors"),
            ):
                graph = with_loras(wan_graph(format="png"), [(name, 1.0)])
                response = client.post("/v1/runs", json={"graph": graph, "target": "w"})
                assert response.status_code == 422, response.text
                error = response.json()["error"]
                assert name in error["message"] and expected in error["message"], error
            assert client.get("/v1/runs").json()["runs"] == []  # nothing was queued
    finally:
        zimage.unlink()
        unknown.unlink()
