"""LoRAs through the HTTP API: an imported ComfyUI workflow with LoraLoaderModelOnly renders the
pixels of the direct graph (the Z-Image node fed by `input/lora` nodes); a change of strength
re-runs the sampler and not the encode; health counts the fused and per-row forwards; a bad LoRA
is a 422 at submit with the error envelope."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from comfy_zimage import zimage_api
from fastapi.testclient import TestClient
from primitive_graphs import MODEL, primitive_graph
from test_primitives_comfy import imported, run, serve, take_pixels
from zimage_harness import max_diff

from inline_core.diffusion.libs import save_safetensors
from inline_core.families.zimage.descriptor import NODE_TYPE
from inline_core.families.zimage.kit import KitPaths

Json = dict[str, Any]


@pytest.fixture
def client(kit: KitPaths, tmp_path: Path) -> Iterator[TestClient]:
    with serve(kit.root, tmp_path / "data") as c:
        yield c


def with_lora_loaders(workflow: Json, loras: list[tuple[str, float]]) -> Json:
    """`workflow` with a chain of LoraLoaderModelOnly nodes between the model and the sampler."""
    model = workflow["3"]["inputs"]["model"]
    for i, (name, strength) in enumerate(loras):
        node_id = str(30 + i)
        workflow[node_id] = {
            "class_type": "LoraLoaderModelOnly",
            "inputs": {"lora_name": name, "strength_model": strength, "model": model},
        }
        model = [node_id, 0]
    workflow["3"]["inputs"]["model"] = model
    return workflow


def node_graph(prompt: str, loras: list[tuple[str, float]], **params: Any) -> Json:
    """The Z-Image node with one `input/lora` node per LoRA on its `loras` input."""
    nodes: list[Json] = [{"id": "p", "type": "input/text", "params": {"text": prompt}}]
    edges: list[Json] = []
    for i, (name, strength) in enumerate(loras):
        nodes.append(
            {"id": f"l{i}", "type": "input/lora", "params": {"name": name, "strength": strength}}
        )
        edges.append({"from": f"l{i}", "output": "lora"})
    inputs: Json = {"prompt": {"from": "p", "output": "text"}}
    if edges:
        inputs["loras"] = edges
    nodes.append(
        {"id": "z", "type": NODE_TYPE, "params": {"model": MODEL, **params}, "inputs": inputs}
    )
    return {"schemaVersion": 1, "nodes": nodes}


def test_imported_lora_loaders_render_the_direct_graphs_pixels(
    client: TestClient, kit: KitPaths
) -> None:
    stack = [(kit.loras["a"].name, 0.8), (kit.loras["b"].name, 0.5)]
    body = imported(client, with_lora_loaders(zimage_api("a red fox", seed=42), stack))
    assert body["skipped"] == [] and body["changesPicture"] == [], body
    loras = [n for n in body["graph"]["nodes"] if n["type"] == "load/lora"]
    assert [(n["params"]["name"], n["params"]["strength"]) for n in loras] == stack
    state = run(client, body["graph"], body["target"])
    ours = take_pixels(client, state)
    [take] = state["takes"]
    assert take["params"]["loras"] == [{"name": n, "strength": s} for n, s in stack]

    direct = node_graph("a red fox", stack, width=64, height=64, steps=8, guidance=0.0, seed=42)
    assert max_diff(ours, take_pixels(client, run(client, direct, "z"))) == 0
    plain = node_graph("a red fox", [], width=64, height=64, steps=8, guidance=0.0, seed=42)
    assert max_diff(ours, take_pixels(client, run(client, plain, "z"))) > 10

    # Another strength: the LoRA node, the sampler and the decoder run again, the encode is cached.
    graph = body["graph"]
    for node in graph["nodes"]:
        if node["id"] == "c31":
            node["params"]["strength"] = 1.5
    again = run(client, graph, body["target"])
    states = {node_id: node["state"] for node_id, node in again["nodes"].items()}
    assert states["c6"] == "cached" and states["c16"] == "cached" and states["c30"] == "cached"
    assert states["c31"] == "done" and states["c3"] == "done" and states["c8"] == "done"
    assert max_diff(take_pixels(client, again), ours) > 0

    # Health says how the forwards applied their LoRAs: each render's stack held every row, so
    # after its first forward it ran on a fused copy (the CPU profile may fuse).
    adapters = client.get("/v1/health").json()["adapters"]
    assert adapters["mode"] == "fuse-held" and "fused copy" in adapters["reason"]
    assert adapters["fuses"] >= 2 and adapters["fusedForwards"] > adapters["perRowForwards"] > 0
    assert adapters["lastDecision"]["fuse"] is True


def test_lora_loaders_text_encoder_half_is_listed_as_dropped(
    client: TestClient, kit: KitPaths
) -> None:
    workflow = zimage_api("a red fox", seed=42)
    workflow["30"] = {
        "class_type": "LoraLoader",
        "inputs": {
            "lora_name": kit.loras["a"].name,
            "strength_model": 1.0,
            "strength_clip": 1.0,
            "model": workflow["3"]["inputs"]["model"],
            "clip": workflow["6"]["inputs"]["clip"],
        },
    }
    workflow["3"]["inputs"]["model"] = ["30", 0]
    workflow["6"]["inputs"]["clip"] = ["30", 1]
    body = imported(client, workflow)
    [change] = body["changesPicture"]
    assert change["classType"] == "LoraLoader" and "strength_clip" in change["reason"]
    assert any(n["type"] == "load/lora" for n in body["graph"]["nodes"])
    run(client, body["graph"], body["target"])


def submit(client: TestClient, graph: Json, target: str = "z") -> Any:
    return client.post("/v1/runs", json={"graph": graph, "target": target})


def test_bad_loras_are_422_at_submit_with_the_envelope(kit: KitPaths, tmp_path: Path) -> None:
    flux = kit.root / "loras" / "flux_style_test.safetensors"  # there before the server scans
    module = "transformer.transformer_blocks.0.attn.to_q"
    save_safetensors(
        {
            f"{module}.lora_A.weight": torch.zeros(2, 8),
            f"{module}.lora_B.weight": torch.zeros(8, 2),
        },
        flux,
    )
    unread = kit.root / "loras" / "unread_style_test.safetensors"  # layers no family has
    save_safetensors(
        {
            "transformer.unheard_of_blocks.0.proj.lora_A.weight": torch.zeros(2, 8),
            "transformer.unheard_of_blocks.0.proj.lora_B.weight": torch.zeros(8, 2),
        },
        unread,
    )
    wan = kit.root / "loras" / "wan_style_test.safetensors"  # a Wan LoRA: another family's
    save_safetensors(
        {
            "diffusion_model.blocks.0.self_attn.q.lora_A.weight": torch.zeros(2, 8),
            "diffusion_model.blocks.0.self_attn.q.lora_B.weight": torch.zeros(8, 2),
        },
        wan,
    )
    try:
        with serve(kit.root, tmp_path / "data") as client:
            check_refusals(client, kit, flux.name, unread.name)
            check_another_family(client, wan.name)
    finally:
        flux.unlink()
        unread.unlink()
        wan.unlink()


def check_another_family(client: TestClient, wan: str) -> None:
    """A Wan LoRA is refused at submit on the Z-Image node and on load/lora over a Z-Image
    model, naming the file and both families."""
    params = {"width": 64, "height": 64, "steps": 2, "seed": 1}
    on_node = submit(client, node_graph("x", [(wan, 1.0)], **params))
    assert on_node.status_code == 422, on_node.text
    assert wan in on_node.json()["error"]["message"]
    assert "LoRA for wan, not Z-Image" in on_node.json()["error"]["message"]
    graph = primitive_graph("x")
    graph["nodes"].append(
        {
            "id": "lora",
            "type": "load/lora",
            "params": {"name": wan, "strength": 1.0},
            "inputs": {"model": {"from": "model", "output": "model"}},
        }
    )
    sample = next(n for n in graph["nodes"] if n["type"] == "sample")
    sample["inputs"]["model"] = {"from": "lora", "output": "model"}
    primitive = submit(client, graph, "decode")
    assert primitive.status_code == 422, primitive.text
    error = primitive.json()["error"]
    assert error["nodeId"] == "lora" and wan in error["message"]
    assert "LoRA for wan" in error["message"] and "z-image" in error["message"]
    assert client.get("/v1/runs").json()["runs"] == []  # nothing was queued


def check_refusals(client: TestClient, kit: KitPaths, flux: str, unknown_naming: str) -> None:
    params = {"width": 64, "height": 64, "steps": 2, "seed": 1}
    unknown = submit(client, node_graph("x", [("nope.safetensors", 1.0)], **params))
    assert unknown.status_code == 422
    assert "nope.safetensors" in unknown.json()["error"]["message"]

    strong = submit(client, node_graph("x", [(kit.loras["a"].name, 50.0)], **params))
    assert strong.status_code == 422
    assert strong.json()["error"]["nodeId"] == "l0"

    other = submit(client, node_graph("x", [(flux, 1.0)], **params))
    assert other.status_code == 422
    error = other.json()["error"]
    # FLUX.2 reads this naming: its LoRA is refused on the Z-Image node, naming both families.
    assert error["nodeId"] == "z"
    assert error["message"] == f"loras/{flux} is a LoRA for flux-2, not Z-Image"
    unread = submit(client, node_graph("x", [(unknown_naming, 1.0)], **params))
    assert unread.status_code == 422
    error = unread.json()["error"]
    assert error["nodeId"] == "l0"  # layers no family has: refused on its own node
    assert unknown_naming in error["message"]
    assert "another model" in error["message"] and "Z-Image LoRA" in error["message"]
    assert client.get("/v1/runs").json()["runs"] == []  # nothing was queued
