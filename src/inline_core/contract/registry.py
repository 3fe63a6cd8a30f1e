"""`Families`: the families this server runs, and those it could not load (torch-free).

Built once at start-up from discovery (`discovery.py`). The shared node runners look a family up
here by name (a handle on a `model` socket carries its family's name) or ask each family in turn
whether it takes a file.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence

from inline_core.contract.comfy_recipe import ComfyRecipe
from inline_core.contract.discovery import FamilyEntry, discover
from inline_core.contract.family import Family
from inline_core.contract.supports import comfy_recipe_of, supports_control_inpaint
from inline_core.errors import NotFound
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.models.catalog import Catalog

log = logging.getLogger(__name__)


class Families:
    def __init__(self, families: Sequence[Family], unavailable: Sequence[FamilyEntry] = ()) -> None:
        self._families = list(families)
        self.unavailable = list(unavailable)

    @classmethod
    def discovered(cls, catalog: Catalog, env: Mapping[str, str]) -> Families:
        """Every installed family, built over `catalog` with the server's settings."""
        available: list[Family] = []
        broken: list[FamilyEntry] = []
        names: set[str] = set()
        for entry in discover():
            if entry.family is None:
                broken.append(entry)
                continue
            if entry.family.name in names:  # two distributions claim one name: the first wins
                continue
            try:
                family = entry.family(catalog, env)
            except Exception as exc:  # a broken family never stops the server
                log.exception("model family %r could not be set up; skipped", entry.entry)
                broken.append(
                    FamilyEntry(entry.entry, entry.value, None, f"{type(exc).__name__}: {exc}")
                )
                continue
            names.add(family.name)
            available.append(family)
        return cls(available, broken)

    def __iter__(self) -> Iterator[Family]:
        return iter(self._families)

    def __len__(self) -> int:
        return len(self._families)

    def named(self, name: str) -> Family:
        for family in self._families:
            if family.name == name:
                return family
        raise LookupError(f"no model family {name!r} is registered")

    def serving(self, node_type: str) -> Family | None:
        """The family whose high-level node this is (None: a shared or other node)."""
        for family in self._families:
            if any(d.type == node_type for d in family.nodes()):
                return family
        return None

    def with_primitives(self) -> list[Family]:
        """Families whose files the low-level vocabulary serves, in discovery order."""
        return [f for f in self._families if f.capabilities.primitives]

    def flow_shift(self, model_file: str) -> float | None:
        """The flow shift `sample` runs `diffusion_models/<model_file>` at, as the family that
        takes the file knows it (the importer's `ModelFacts`)."""
        for family in self.with_primitives():
            try:
                entry = family.catalog.entry("diffusion_models", model_file)
            except NotFound:
                return None
            files = family.files.model_file(entry)
            if files is not None:
                return family.flow_shift(files[1])
        return None

    # -- what the importer asks (its `ModelFacts`) ---------------------------------------------

    def family_names(self) -> list[tuple[str, str]]:
        """(name, title) of every family this server runs."""
        return [(f.name, f.title) for f in self._families]

    def names_model(self, family: str, file_name: str) -> bool:
        return self.named(family).names_model(file_name)

    def importable(self, family: str) -> bool:
        return self.named(family).capabilities.primitives

    def own_node(self, family: str) -> NodeDescriptor | None:
        chosen = self.named(family)
        recipe = comfy_recipe_of(chosen)
        own = recipe.own_node if recipe is not None else None
        if own is None:
            return None
        return next((d for d in chosen.nodes() if d.type == own.node), None)

    def comfy_recipe(self, family: str) -> ComfyRecipe | None:
        return comfy_recipe_of(self.named(family))

    def text_encoder_types(self, family: str) -> tuple[str, ...]:
        """CLIPLoader's `type`s for the family, and those of the multi-encoder loaders its
        recipe takes (`ComfyRecipe.text_encoders`)."""
        chosen = self.named(family)
        recipe = comfy_recipe_of(chosen)
        loaded = [] if recipe is None else [kind for _cls, kind in recipe.text_encoders]
        return tuple(dict.fromkeys((*chosen.comfy_text_encoder_types, *loaded)))

    def family_of(self, category: str, file_name: str) -> str | None:
        """The first family that takes the catalog's `category/file_name`, from its files (a
        diffusion model by its weights, another part by the family's rule); None when none does."""
        return next((f.name for f in self._families if self._takes(f, category, file_name)), None)

    def takes(self, family: str, category: str, file_name: str) -> bool:
        """Whether the family named `family` takes `category/file_name` (several may)."""
        return any(f.name == family and self._takes(f, category, file_name) for f in self._families)

    @staticmethod
    def _takes(family: Family, category: str, file_name: str) -> bool:
        try:
            entry = family.catalog.entry(category, file_name)
        except NotFound:
            return False
        if category in ("diffusion_models", "checkpoints"):  # a checkpoint: its model's keys
            return family.files.recognizes_model(entry)
        return any(
            rule.category == category and rule.score(entry, None) is not None
            for rule in family.rules().parts
        )

    def control_inpaints(self, file_name: str) -> bool | None:
        """Whether `controlnet/<file_name>` takes an inpaint mask and an image to inpaint, as
        the family whose control model it is says; None when none takes it."""
        for family in self._families:
            if not supports_control_inpaint(family):
                continue
            found = family.control_inpaints(file_name)
            if found is not None:
                return found
        return None

    def models_missing(self, node_type: str) -> str | None:
        """Why a family's high-level node cannot render with the models on disk now (its files,
        resolved as a submit would with no model chosen); None when they are there or the node
        is no family's."""
        for family in self._families:
            if any(d.type == node_type for d in family.nodes()):
                resolution = family.resolve(node_type, {})
                if resolution.sources is not None and not resolution.missing:
                    return None
                lines = "; ".join(f"{m.component}: {m.hint}" for m in resolution.missing)
                return f"{family.title} is missing model files. {lines}"
        return None

    def picker_options(self, node_type: str, category: str) -> list[str] | None:
        """A family node's picker over `category`: only the family's diffusion models (a Z-Image
        node is not offered Wan's), and its other parts' files first, then the rest (a part's
        fit may depend on the model picked). None: not a family's node."""
        family = self.serving(node_type)
        if family is None:
            return None
        listed = family.catalog.options(category)
        if category == "diffusion_models":
            ours = {entry.name for entry in family.files.models()}
            return [name for name in listed if name in ours]
        ours_first = [name for name in listed if self._takes(family, category, name)]
        return ours_first + [name for name in listed if name not in ours_first]

    def describe(self) -> list[dict[str, object]]:
        """Each family for health: what it supports, and whether its torch side is installed."""
        listed: list[dict[str, object]] = []
        for family in self._families:
            missing = family.missing_runtime()
            listed.append(
                {
                    **family.describe(),
                    "available": not missing,
                    "reason": f"{', '.join(missing)} not installed; {family.install_hint}"
                    if missing
                    else None,
                }
            )
        for entry in self.unavailable:
            listed.append(entry.to_json())
        return listed
