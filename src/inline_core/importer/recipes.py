"""The served families' ComfyUI recipes (`contract/comfy_recipe.py`), read for one import: the
handlers they name, the reader of a family's own node, and the ComfyUI classes they add.

A recipe names its code by "package.module:attribute" (as a family names its builder), imported
here when a workflow is mapped; what it names is checked, so a broken recipe is a clear error
naming the family, not a failure halfway through a mapping.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import cast

from inline_core.contract.comfy_recipe import ComfyRecipe, RecipeError
from inline_core.dotted import resolve_object
from inline_core.importer.facts import ModelFacts
from inline_core.importer.mapper import Handler, SigmaSource
from inline_core.importer.own_node import Collapse

__all__ = ["RecipeError", "Recipes", "reader", "recipe_handlers", "recipe_sigma_sources"]


def _attribute(family: str, path: str) -> object:
    try:
        return resolve_object(path)
    except (ImportError, AttributeError, ValueError) as exc:
        message = f"model family {family!r}'s ComfyUI recipe names {path!r}: {exc}"
        raise RecipeError(message) from exc


def _callables(family: str, path: str | None, what: str) -> dict[str, Callable[..., object]]:
    """The mapping of ComfyUI class -> callable the recipe's `what` names at `path` ({} for
    none)."""
    if path is None:
        return {}
    found = _attribute(family, path)
    if not isinstance(found, Mapping):
        raise RecipeError(
            f"model family {family!r}'s ComfyUI recipe's {what} {path!r} is not a mapping of "
            "ComfyUI class -> callable"
        )
    out: dict[str, Callable[..., object]] = {}
    for name, value in cast(Mapping[object, object], found).items():
        if not isinstance(name, str) or not callable(value):
            raise RecipeError(
                f"model family {family!r}'s ComfyUI recipe's {what} {path!r} maps {name!r} onto "
                f"{value!r}, not a ComfyUI class onto a callable"
            )
        out[name] = value
    return out


def recipe_handlers(family: str, recipe: ComfyRecipe) -> dict[str, Handler]:
    """The handlers `recipe` names ({} when it names none)."""
    found = _callables(family, recipe.handlers, "handlers")
    return {name: cast(Handler, handler) for name, handler in found.items()}


def recipe_sigma_sources(family: str, recipe: ComfyRecipe) -> dict[str, SigmaSource]:
    """The sigmas classes' readers `recipe` names ({} when it names none)."""
    found = _callables(family, recipe.sigma_sources, "sigma_sources")
    return {name: cast(SigmaSource, source) for name, source in found.items()}


def reader(family: str, recipe: ComfyRecipe) -> type[Collapse]:
    """The class that reads `family`'s own node's chain: its recipe's `reader`, or the data's."""
    path = recipe.own_node.reader if recipe.own_node is not None else None
    if path is None:
        return Collapse
    found = _attribute(family, path)
    if not isinstance(found, type) or not issubclass(found, Collapse):
        raise RecipeError(
            f"model family {family!r}'s ComfyUI recipe's reader {path!r} is not a subclass of "
            "inline_core.importer.own_node.Collapse"
        )
    return found


@dataclass(frozen=True)
class Recipes:
    """Every served family's recipe, by family name."""

    by_family: dict[str, ComfyRecipe] = field(default_factory=dict[str, ComfyRecipe])

    @classmethod
    def served(cls, facts: ModelFacts | None) -> Recipes:
        if facts is None:
            return cls()
        found = {name: facts.comfy_recipe(name) for name, _title in facts.family_names()}
        return cls({name: recipe for name, recipe in found.items() if recipe is not None})

    def handlers(self, family: str | None) -> tuple[dict[str, Handler], list[dict[str, Handler]]]:
        """`family`'s handlers, and every other family's."""
        own = self.by_family.get(family) if family is not None else None
        others = [recipe_handlers(n, r) for n, r in self.by_family.items() if n != family]
        return (recipe_handlers(family, own) if family and own else {}), others

    def sigma_sources(self) -> dict[str, SigmaSource]:
        """Every served family's sigmas classes' readers."""
        return {
            name: source
            for family, recipe in self.by_family.items()
            for name, source in recipe_sigma_sources(family, recipe).items()
        }

    def widget_orders(self) -> dict[str, tuple[str, ...]]:
        """The widget orders of the classes the recipes add (for the UI format)."""
        return {
            name: spec.widgets
            for recipe in self.by_family.values()
            for name, spec in recipe.classes.items()
        }

    def encoder_nodes(self) -> set[str]:
        """The loader nodes the recipes load several text encoders onto."""
        return {
            spec.node
            for recipe in self.by_family.values()
            for spec in recipe.text_encoders.values()
        }

    def output_types(self) -> dict[str, tuple[str, ...]]:
        return {
            name: spec.outputs
            for recipe in self.by_family.values()
            for name, spec in recipe.classes.items()
            if spec.outputs
        }
