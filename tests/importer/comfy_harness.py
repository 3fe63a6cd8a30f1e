"""Real objects for the importer tests: a media folder, a stand-in runner, a graph checker."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from inline_core.contract.comfy_recipe import ComfyRecipe
from inline_core.contract.registry import Families
from inline_core.errors import NotFound
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.graph.registry import Registry
from inline_core.graph.runner import NodeCall, NodeResult, NodeRunner
from inline_core.graph.schema import parse_graph
from inline_core.graph.validate import ValidatedGraph, validate_graph
from inline_core.importer import ImportResult, import_comfy
from inline_core.importer.facts import ModelFacts
from inline_core.models.catalog import Catalog
from inline_core.takes import MediaRef

MODEL_FILES = {
    "diffusion_models": ["z_image_turbo_bf16.safetensors"],
    "text_encoders": ["qwen_3_4b.safetensors"],
    "vae": ["ae.safetensors"],
}


class FolderMedia:
    """A MediaResolver over files named by asset id in one folder."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def resolve(self, ref: MediaRef) -> Path:
        path = self.root / ref.id
        if not ref.id or not path.is_file():
            raise NotFound(f"no {ref.ref} {ref.id!r}")
        return path


class PrimitiveNotRunHere(NodeRunner):
    """Stands in where no primitive runner is registered, so validation can reach its end.
    These tests validate imported graphs; they never execute them."""

    def run(self, call: NodeCall) -> NodeResult:
        raise AssertionError(f"{call.node_id}: importer tests do not run primitives")


def imported(
    workflow: object, catalog: Catalog, *, families: Families | None = None, **kw: Any
) -> ImportResult:
    """`import_comfy` as the server calls it: with what the installed families know of the
    catalog's model files (e.g. a model's own flow shift). A test importing many workflows
    passes the `families` it discovered once over `catalog`, as the server does at start-up."""
    facts = Families.discovered(catalog, {}) if families is None else families
    return import_comfy(workflow, catalog, facts=facts, **kw)


class Checker:
    def __init__(self, registry: Registry, catalog: Catalog) -> None:
        self.registry = registry
        self.catalog = catalog

    def validate(self, result: ImportResult) -> ValidatedGraph:
        """The imported graph survives its JSON round trip and validates for its target."""
        body = result.to_json()
        assert set(body) == {
            "graph",
            "target",
            "family",
            "changesPicture",
            "unmatchedModels",
            "skipped",
            "warnings",
        }
        graph = parse_graph(body["graph"])
        assert graph.to_json() == body["graph"]
        return validate_graph(
            graph, body["target"], self.registry, self.catalog, rng=random.Random(0)
        )


class PassedOnFacts:
    """Every `ModelFacts` question passed on to the served families: a test subclasses it and
    answers the ones it changes (typed as the importer asks them, so the importer takes it)."""

    def __init__(self, families: ModelFacts) -> None:
        self.families = families

    def flow_shift(self, model_file: str) -> float | None:
        return self.families.flow_shift(model_file)

    def family_names(self) -> list[tuple[str, str]]:
        return self.families.family_names()

    def names_model(self, family: str, file_name: str) -> bool:
        return self.families.names_model(family, file_name)

    def importable(self, family: str) -> bool:
        return self.families.importable(family)

    def own_node(self, family: str) -> NodeDescriptor | None:
        return self.families.own_node(family)

    def comfy_recipe(self, family: str) -> ComfyRecipe | None:
        return self.families.comfy_recipe(family)

    def text_encoder_types(self, family: str) -> tuple[str, ...]:
        return self.families.text_encoder_types(family)

    def family_of(self, category: str, file_name: str) -> str | None:
        return self.families.family_of(category, file_name)

    def takes(self, family: str, category: str, file_name: str) -> bool:
        return self.families.takes(family, category, file_name)

    def control_inpaints(self, file_name: str) -> bool | None:
        return self.families.control_inpaints(file_name)
