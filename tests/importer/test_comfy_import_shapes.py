"""Garbage is a 422 with a clear message; odd but valid shapes import."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from comfy_harness import imported
from comfy_workflows import PROMPT, zimage_api, zimage_ui, zimage_ui_subgraph

from inline_core.errors import InvalidRequest
from inline_core.importer import import_request
from inline_core.models.catalog import Catalog


@pytest.mark.parametrize(
    ("workflow", "message"),
    [
        ([], "must be a JSON object"),
        ("KSampler", "must be a JSON object"),
        (42, "must be a JSON object"),
        (None, "must be a JSON object"),
        ({}, "no nodes"),
        ({"3": 5}, "not a node object"),
        ({"3": {"inputs": {}}}, "class_type"),
        ({"3": {"class_type": "KSampler", "inputs": [1, 2]}}, "'inputs' must be an object"),
        ({"prompt": {}}, "no nodes"),
        ({"nodes": "many"}, "'nodes' must be a list"),
        ({"nodes": [], "links": []}, "no nodes"),
        ({"nodes": [1, 2]}, "nodes[0] must be an object"),
        ({"nodes": [{"id": 1}]}, "needs a 'type'"),
        ({"nodes": [{"id": 1, "type": "VAEDecode"}], "links": "none"}, "'links' must be a list"),
        ({"nodes": [{"id": 1, "type": "VAEDecode"}], "links": [[1, 2]]}, "a link array needs"),
        ({"nodes": [{"id": 1, "type": "VAEDecode"}], "links": ["x"]}, "array or an object"),
        (
            {"nodes": [{"id": 1, "type": "VAEDecode"}], "links": [{"id": 1, "origin_id": 1}]},
            "origin and target",
        ),
        (
            {"nodes": [{"id": 1, "type": "X"}], "definitions": {"subgraphs": [{"name": "n"}]}},
            "with an 'id'",
        ),
    ],
)
def test_garbage_is_invalid_request(workflow: object, message: str, catalog: Catalog) -> None:
    with pytest.raises(InvalidRequest, match=message.replace("[", r"\[")) as caught:
        imported(workflow, catalog)
    assert caught.value.status == 422


def test_nothing_that_makes_an_image_is_invalid_request(catalog: Catalog) -> None:
    workflow = {
        "1": {"class_type": "Note", "inputs": {"text": "hello"}},
        "2": {"class_type": "MysterySampler", "inputs": {"steps": 4}},
    }
    with pytest.raises(InvalidRequest, match="nothing in the workflow makes an image"):
        imported(workflow, catalog)


def test_a_subgraph_that_contains_itself_is_invalid_request(catalog: Catalog) -> None:
    loop_id = "9a9a9a9a-0000-4000-8000-000000000000"
    inner: dict[str, Any] = {
        "id": 1,
        "type": loop_id,
        "mode": 0,
        "inputs": [],
        "outputs": [{"name": "IMAGE", "type": "IMAGE", "links": [1]}],
    }
    workflow = {
        "nodes": [
            dict(inner),
            {
                "id": 2,
                "type": "SaveImage",
                "mode": 0,
                "inputs": [{"name": "images", "type": "IMAGE", "link": 1}],
            },
        ],
        "links": [[1, 1, 0, 2, 0, "IMAGE"]],
        "definitions": {
            "subgraphs": [
                {
                    "id": loop_id,
                    "name": "loop",
                    "inputs": [],
                    "outputs": [{"name": "IMAGE", "type": "IMAGE"}],
                    "nodes": [dict(inner)],
                    "links": [
                        {
                            "id": 1,
                            "origin_id": 1,
                            "origin_slot": 0,
                            "target_id": -20,
                            "target_slot": 0,
                            "type": "IMAGE",
                        }
                    ],
                }
            ]
        },
        "version": 0.4,
    }
    with pytest.raises(InvalidRequest, match="nest deeper"):
        imported(workflow, catalog)


def test_nested_subgraphs_flatten_with_their_path(catalog: Catalog) -> None:
    base = zimage_ui_subgraph(prompt="nested", seed=77)
    wrapper_id = "3c3c3c3c-0000-4000-8000-000000000000"
    wrapper = {
        "id": wrapper_id,
        "name": "Everything",
        "inputs": [],
        "outputs": [],
        "nodes": base["nodes"],
        "links": [
            {
                "id": r[0],
                "origin_id": r[1],
                "origin_slot": r[2],
                "target_id": r[3],
                "target_slot": r[4],
                "type": r[5],
            }
            for r in base["links"]
        ],
    }
    workflow: dict[str, Any] = {
        "nodes": [{"id": 100, "type": wrapper_id, "mode": 0, "inputs": [], "outputs": []}],
        "links": [],
        "definitions": {"subgraphs": [*base["definitions"]["subgraphs"], wrapper]},
        "version": 0.4,
    }
    result = imported(workflow, catalog)
    assert result.target == "c100:57:8"
    nodes = {n.id: n for n in result.graph.nodes}
    assert nodes["c100:57:6_text"].params == {"text": "nested"}
    assert nodes["c100:57:5"].params["seed"] == 77
    assert nodes["c100:57:13"].params["width"] == 768


def test_a_muted_subgraph_is_left_out(catalog: Catalog) -> None:
    workflow = zimage_ui_subgraph()
    workflow["nodes"][0]["mode"] = 2
    with pytest.raises(InvalidRequest, match="nothing in the workflow makes an image"):
        imported(workflow, catalog)


def test_widget_values_as_an_object(catalog: Catalog) -> None:
    workflow = zimage_ui(seed=3)
    for node in workflow["nodes"]:
        if node["type"] == "EmptySD3LatentImage":
            node["widgets_values"] = {"width": 640, "height": 832, "batch_size": 1}
    result = imported(workflow, catalog)
    assert result.graph.node("c13").params == {"width": 640, "height": 832, "batch": 1}


def test_an_old_ksampler_without_the_seed_control_value(catalog: Catalog) -> None:
    workflow = zimage_ui(seed=3)
    for node in workflow["nodes"]:
        if node["type"] == "KSampler":
            node["widgets_values"] = [11, 6, 1.5, "euler", "simple", 1]
    params = imported(workflow, catalog).graph.node("c3").params
    assert (params["seed"], params["steps"], params["cfg"]) == (11, 6, 1.5)


def test_a_primitive_node_feeds_its_widget(catalog: Catalog) -> None:
    workflow = zimage_ui(seed=3)
    for node in workflow["nodes"]:
        if node["type"] == "KSampler":
            seed_input = next(i for i in node["inputs"] if i["name"] == "seed")
            seed_input["link"] = 99
    workflow["nodes"].append(
        {
            "id": 30,
            "type": "PrimitiveNode",
            "mode": 0,
            "outputs": [{"name": "INT", "type": "INT", "links": [99], "widget": {"name": "seed"}}],
            "properties": {"Run widget replace on values": False},
            "widgets_values": [123456, "fixed"],
        }
    )
    workflow["links"].append([99, 30, 0, 3, 4, "INT"])
    result = imported(workflow, catalog)
    assert result.graph.node("c3").params["seed"] == 123456
    assert result.skipped == []


def test_api_format_ids_from_a_subgraph_export(catalog: Catalog) -> None:
    prompt: dict[str, Any] = {
        f"57:{key}": {
            **node,
            "inputs": {
                name: [f"57:{v[0]}", v[1]] if isinstance(v, list) else v
                for name, v in node["inputs"].items()
            },
        }
        for key, node in copy.deepcopy(zimage_api()).items()
    }
    result = imported(prompt, catalog)
    # The same ids as the flattened UI subgraph gets.
    assert result.target == "c57:8"
    assert result.graph.node("c57:6_text").params["text"] == PROMPT


def test_import_request_carries_assets(catalog: Catalog) -> None:
    workflow = zimage_api()
    workflow["50"] = {"class_type": "LoadImage", "inputs": {"image": "cat.png"}}
    workflow["51"] = {"class_type": "VAEEncode", "inputs": {"pixels": ["50", 0], "vae": ["17", 0]}}
    workflow["3"]["inputs"]["latent_image"] = ["51", 0]
    body = {"workflow": workflow, "assets": {"cat.png": "sha256-0a1b"}}
    result = import_request(body, catalog)
    assert result.graph.node("c50").params == {"asset": {"ref": "asset", "id": "sha256-0a1b"}}
    # A bare workflow, and a wrapped UI one, are requests too.
    assert import_request(zimage_api(), catalog).target == "c8"
    assert import_request({"workflow": zimage_ui()}, catalog).target == "c8"
    with pytest.raises(InvalidRequest, match="'assets'"):
        import_request({"workflow": workflow, "assets": ["cat.png"]}, catalog)
    with pytest.raises(InvalidRequest, match="'assets'"):
        import_request({"workflow": workflow, "assets": {"cat.png": 5}}, catalog)
