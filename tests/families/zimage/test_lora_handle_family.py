"""The family a model handle belongs to travels with it: a LoRA wired through `load/lora` into a
Z-Image `sample` is read with Z-Image's namings (the model's family), so a kohya-named file renders
what the same LoRA in the diffusers naming renders, with both families served."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from primitive_graphs import edge, primitive_graph
from test_primitives_comfy import run, serve, take_pixels
from zimage_harness import max_diff

from inline_core.families.zimage.kit import KitPaths

Json = dict[str, Any]


@pytest.fixture
def client(kit: KitPaths, tmp_path: Path) -> Iterator[TestClient]:
    with serve(kit.root, tmp_path / "data") as c:
        yield c


def with_load_lora(graph: Json, name: str, strength: float) -> Json:
    """`graph` with a `load/lora` between its model loader and its `sample`."""
    graph["nodes"].insert(
        2,
        {
            "id": "lora",
            "type": "load/lora",
            "params": {"name": name, "strength": strength},
            "inputs": {"model": edge("model", "model")},
        },
    )
    [sample] = [n for n in graph["nodes"] if n["id"] == "sample"]
    sample["inputs"]["model"] = edge("lora", "model")
    return graph


def test_a_kohya_lora_through_load_lora_renders_as_its_diffusers_twin(
    client: TestClient, kit: KitPaths
) -> None:
    def render(key: str) -> Any:
        graph = with_load_lora(primitive_graph("a lighthouse"), kit.loras[key].name, 1.0)
        return take_pixels(client, run(client, graph, "decode"))

    plain = take_pixels(client, run(client, primitive_graph("a lighthouse"), "decode"))
    kohya, diffusers = render("a-kohya"), render("a")
    assert max_diff(kohya, diffusers) == 0
    assert max_diff(kohya, plain) > 10  # the LoRA changed the picture
