"""ComfyUI's API serves the classes a family's recipe adds, with no edit outside the family: the
`tiny_chroma` test family (installed from its own distribution) adds `T5TokenizerOptions`;
`/object_info` lists it with ComfyUI's input specs, `/prompt` checks a prompt against them, and
accepts and renders ComfyUI's Chroma template through it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from comfy_support import until_done
from fastapi.testclient import TestClient

from inline_core.config import Config
from inline_core.contract.comfy_recipe import ComfyClass, ComfyRecipe, OwnNode, Sink
from inline_core.contract.comfy_specs import INT, LINK
from inline_core.importer.recipes import RecipeError
from inline_core.server.app import create_app
from inline_core.server.comfy.recipe_defs import served_defs
from tests.families.test_families_comfy_recipe import chroma_api

Json = dict[str, Any]
CLASS = "T5TokenizerOptions"


def chroma_prompt() -> Json:
    """ComfyUI's Chroma template with every input ComfyUI requires."""
    prompt = chroma_api()
    prompt["1"]["inputs"]["weight_dtype"] = "default"
    return prompt


@pytest.fixture(scope="module")
def chroma_client(
    installed: Path, two_families: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    data = tmp_path_factory.mktemp("comfyapi-chroma") / "data"
    config = Config(models_dir=two_families, data_dir=data, profile="cpu", dtype="float32")
    with TestClient(create_app(config)) as c:
        yield c


def test_object_info_lists_the_class_a_familys_recipe_adds(chroma_client: TestClient) -> None:
    info = cast(Json, chroma_client.get("/object_info").json())
    assert "KSampler" in info  # the importer's own classes still there
    node = info[CLASS]
    assert node["input"]["required"] == {
        "clip": ["CLIP"],
        "min_padding": ["INT", {"default": 0, "min": 0, "max": 10000, "step": 1}],
        "min_length": ["INT", {"default": 0, "min": 0, "max": 10000, "step": 1}],
    }
    assert node["input_order"] == {"required": ["clip", "min_padding", "min_length"]}
    assert (node["output"], node["output_name"]) == (["CLIP"], ["CLIP"])
    assert node["category"] == "model/conditioning"
    assert node["python_module"] == "comfy_extras.nodes_cond"
    assert chroma_client.get(f"/object_info/{CLASS}").json() == {CLASS: node}


def test_a_prompt_through_the_class_is_checked_by_its_specs(chroma_client: TestClient) -> None:
    prompt = chroma_prompt()
    prompt["3"]["inputs"]["min_padding"] = -1
    answer = chroma_client.post("/prompt", json={"prompt": prompt})
    assert answer.status_code == 400, answer.text
    errors = answer.json()["node_errors"]
    assert set(errors) == {"3"} and errors["3"]["class_type"] == CLASS
    assert [e["type"] for e in errors["3"]["errors"]] == ["value_smaller_than_min"]
    prompt = chroma_prompt()
    prompt["4"]["inputs"]["clip"] = ["1", 0]  # a MODEL where a CLIP goes: still checked
    prompt["3"]["inputs"]["clip"] = ["6", 0]  # a VAE into the recipe's class's CLIP input
    errors = chroma_client.post("/prompt", json={"prompt": prompt}).json()["node_errors"]
    assert errors["3"]["errors"][0]["type"] == "return_type_mismatch"
    assert errors["4"]["errors"][0]["type"] == "return_type_mismatch"


def test_a_prompt_through_the_class_is_accepted_and_renders(chroma_client: TestClient) -> None:
    with chroma_client.websocket_connect("/ws?clientId=chroma-1") as ws:
        ws.receive_json()  # the status it greets with
        answer = chroma_client.post(
            "/prompt", json={"prompt": chroma_prompt(), "client_id": "chroma-1"}
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["node_errors"] == {}
        got = until_done(ws, answer.json()["prompt_id"])
    assert "execution_success" in got.types(), got.messages
    (executed,) = got.of("executed")
    assert executed["node"] == "10"
    assert len(executed["output"]["images"]) == 1


class Facts:
    """Served families that are only their recipes (what `served_defs` asks of them)."""

    def __init__(self, recipes: dict[str, ComfyRecipe]) -> None:
        self.recipes = recipes

    def family_names(self) -> list[tuple[str, str]]:
        return [(name, name.title()) for name in self.recipes]

    def comfy_recipe(self, family: str) -> ComfyRecipe | None:
        return self.recipes[family]


def typed(minimum: int) -> ComfyClass:
    return ComfyClass(("n",), ("CLIP",), required={"clip": LINK("CLIP"), "n": INT(0, minimum, 9)})


def test_a_class_named_only_by_an_own_node_chain_is_served_untyped() -> None:
    own = OwnNode("a/node", sinks={"SaveFancy": Sink("images")}, latents={})
    defs = served_defs(cast(Any, Facts({"a": ComfyRecipe(own_node=own)})))
    assert defs["SaveFancy"].untyped and defs["SaveFancy"].required == {}
    assert "KSampler" in defs and not defs["KSampler"].untyped


def test_two_families_adding_one_class_must_declare_it_alike() -> None:
    same = {"a": ComfyRecipe(classes={"X": typed(0)}), "b": ComfyRecipe(classes={"X": typed(0)})}
    assert served_defs(cast(Any, Facts(same)))["X"].required["n"] == INT(0, 0, 9)
    untyped = {"a": ComfyRecipe(classes={"X": ComfyClass(("n",))}), "b": same["b"]}
    assert not served_defs(cast(Any, Facts(untyped)))["X"].untyped  # the typed one stands
    differ = {"a": same["a"], "b": ComfyRecipe(classes={"X": typed(1)})}
    with pytest.raises(RecipeError, match="'a' and 'b' add the ComfyUI class 'X'"):
        served_defs(cast(Any, Facts(differ)))


def test_a_class_whose_widgets_lack_specs_is_refused_by_the_contract() -> None:
    with pytest.raises(ValueError, match=r"widgets \['m'\] have no input spec"):
        ComfyClass(("n", "m"), required={"n": INT(0, 0, 9)})
