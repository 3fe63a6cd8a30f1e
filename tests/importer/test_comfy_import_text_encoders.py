"""ComfyUI's multi-encoder loaders (`DualCLIPLoader`, `TripleCLIPLoader`) import onto the loader
node a family's recipe names, every file kept (`ComfyRecipe.text_encoders`); a combination no
served family takes is refused naming the loader, its files and type, and what is taken."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from comfy_harness import Checker, PassedOnFacts, PrimitiveNotRunHere
from comfy_workflows import with_nodes, zimage_api

from inline_core.contract.comfy_recipe import ComfyRecipe, RecipeError, TextEncoders
from inline_core.contract.registry import Families
from inline_core.errors import InvalidRequest
from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.registry import Registry
from inline_core.graph.schema import PortKind
from inline_core.importer import ImportResult, import_comfy
from inline_core.models.catalog import Catalog

LOADER = "test/text-encoders"
FILES = ("qwen_3_4b.safetensors", "clip_l.safetensors", "t5xxl_fp16.safetensors")


def loader_descriptor() -> NodeDescriptor:
    """A family's loader of three text encoders (the files go to its pickers)."""
    pickers = tuple(
        ParamSpec(name, ParamWidget.SELECT, default=None, options_from="text_encoders")
        for name in ("first", "second", "third")
    )
    return NodeDescriptor(
        LOADER,
        "Text encoders",
        "loaders",
        (PortSpec("text_encoder", PortKind.TEXT_ENCODER),),
        params=pickers,
    )


class ServedWith(PassedOnFacts):
    """The served families, Z-Image's recipe taking the multi-encoder loads `taken`."""

    def __init__(self, families: Families, taken: dict[tuple[str, str], TextEncoders]) -> None:
        super().__init__(families)
        self._taken = taken

    def comfy_recipe(self, family: str) -> ComfyRecipe | None:
        recipe = self.families.comfy_recipe(family)
        if family != "z-image" or recipe is None:
            return recipe
        return replace(recipe, text_encoders=self._taken)

    def text_encoder_types(self, family: str) -> tuple[str, ...]:
        found = self.families.text_encoder_types(family)
        return (*found, *(t for _c, t in self._taken)) if family == "z-image" else found


@pytest.fixture
def with_loader(registry: Registry) -> Registry:
    registry.register(loader_descriptor(), PrimitiveNotRunHere())
    return registry


@pytest.fixture
def three_encoders(models_root: Any) -> None:
    for name in FILES[1:]:
        (models_root / "text_encoders" / name).write_bytes(b"placeholder weights")


def loading(cls: str, kind: str | None, names: tuple[str, ...]) -> dict[str, Any]:
    inputs: dict[str, Any] = {f"clip_name{i + 1}": n for i, n in enumerate(names)}
    if kind is not None:
        inputs["type"] = kind
    return with_nodes(zimage_api(), **{"18": {"class_type": cls, "inputs": inputs}})


def imported(
    workflow: Any, catalog: Catalog, registry: Registry, taken: dict[tuple[str, str], TextEncoders]
) -> ImportResult:
    facts = ServedWith(Families.discovered(catalog, {}), taken)
    return import_comfy(workflow, catalog, registry=registry, facts=facts)


@pytest.mark.usefixtures("three_encoders")
def test_a_triple_clip_loader_keeps_every_encoder_on_the_familys_loader(
    catalog: Catalog, with_loader: Registry, checker: Checker
) -> None:
    taken = {("TripleCLIPLoader", "sd3"): TextEncoders(LOADER, ("first", "second", "third"))}
    result = imported(loading("TripleCLIPLoader", None, FILES), catalog, with_loader, taken)
    [node] = [n for n in result.graph.nodes if n.id == "c18"]
    assert node.type == LOADER
    assert node.params == dict(zip(("first", "second", "third"), FILES, strict=True))
    encodes = [n for n in result.graph.nodes if n.type == "encode/text"]
    assert encodes and {n.inputs["text_encoder"][0].source for n in encodes} == {"c18"}
    assert result.unmatched == [] and result.changes == []
    checker.registry = with_loader
    checker.validate(result)


@pytest.mark.usefixtures("three_encoders")
def test_a_dual_clip_loader_of_a_type_no_family_takes_is_refused_naming_why(
    catalog: Catalog, with_loader: Registry
) -> None:
    taken = {("DualCLIPLoader", "zimage_pair"): TextEncoders(LOADER, ("first", "second"))}
    # A type that names no family (the model file names Z-Image), which Z-Image does not take.
    workflow = loading("DualCLIPLoader", "stable_diffusion", FILES[:2])
    with pytest.raises(InvalidRequest) as refused:
        imported(workflow, catalog, with_loader, taken)
    message = refused.value.message
    assert "DualCLIPLoader 18 loads 2 text encoder(s)" in message
    assert "'qwen_3_4b.safetensors', 'clip_l.safetensors'" in message
    assert "type 'stable_diffusion'; model family 'z-image' takes no DualCLIPLoader" in message
    assert "the served take: DualCLIPLoader type 'zimage_pair'" in message  # what is taken instead
    assert "does not leave an encoder out" in message


@pytest.mark.usefixtures("three_encoders")
def test_without_a_recipe_a_dual_clip_loader_is_refused_not_cut_to_one(
    catalog: Catalog, with_loader: Registry
) -> None:
    workflow = loading("DualCLIPLoader", "lumina2", FILES[:2])
    with pytest.raises(InvalidRequest, match=r"loads 2 text encoder\(s\).*take: none"):
        imported(workflow, catalog, with_loader, {})


def test_a_recipe_whose_loader_takes_fewer_files_is_the_familys_bug(
    catalog: Catalog, with_loader: Registry
) -> None:
    taken = {("DualCLIPLoader", "lumina2"): TextEncoders(LOADER, ("first",))}
    with pytest.raises(RecipeError, match="'z-image'.*it has 2 files"):
        imported(loading("DualCLIPLoader", "lumina2", FILES[:2]), catalog, with_loader, taken)
