"""The node classes ComfyUI's API serves: the importer's own (`node_defs.py`), and those the served
families' ComfyUI recipes add (`contract/comfy_recipe.py`), so a family's classes are listed by
`/object_info` and accepted by `/prompt` without an edit here.

A recipe class with input specs is served with them; one without (a class named only by the
family's own-node chain, or a `ComfyClass` that gives widgets and outputs alone) is served
untyped: listed, accepted, and checked by the importer alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from inline_core.contract.comfy_recipe import ComfyClass, ComfyRecipe, OwnNode
from inline_core.importer.facts import ModelFacts
from inline_core.importer.prompt_nodes import COMFY_NODE_TYPES
from inline_core.importer.recipes import RecipeError, Recipes
from inline_core.server.comfy.node_defs import NODE_DEFS, NodeDef

UNTYPED_NOTE = "Inputs not declared by the family's ComfyUI recipe: the importer checks them."


def class_def(family: str, spec: ComfyClass) -> NodeDef:
    return NodeDef(
        spec.category or f"families/{family}",
        dict(spec.required),
        tuple((kind, kind) for kind in spec.outputs),
        optional=dict(spec.optional),
        display_name=spec.display_name,
        description="" if spec.typed else UNTYPED_NOTE,
        python_module=spec.python_module,
        untyped=not spec.typed,
    )


def own_node_classes(own: OwnNode | None) -> set[str]:
    """The ComfyUI classes a family's own-node chain names."""
    if own is None:
        return set()
    return {
        *own.sinks,
        *(sink.through for sink in own.sinks.values() if sink.through is not None),
        *own.latents,
        *own.model_nodes,
        *own.conditioning_through,
        *own.encoders,
        *own.parts,
    }


def recipe_class_defs(family: str, recipe: ComfyRecipe) -> dict[str, NodeDef]:
    """The classes `recipe` adds to what the server defines."""
    found = {name: class_def(family, spec) for name, spec in recipe.classes.items()}
    for name in own_node_classes(recipe.own_node) - set(found):
        found[name] = class_def(family, ComfyClass())
    return {name: d for name, d in found.items() if name not in NODE_DEFS}


def served_defs(facts: ModelFacts | None) -> dict[str, NodeDef]:
    """Every class served: the importer's, then the recipes' (a class two families add must be
    declared the same by both; a typed declaration stands over an untyped one)."""
    defs = {name: NODE_DEFS[name] for name in COMFY_NODE_TYPES if name in NODE_DEFS}
    added: dict[str, tuple[str, NodeDef]] = {}
    for family, recipe in sorted(Recipes.served(facts).by_family.items()):
        for name, node in recipe_class_defs(family, recipe).items():
            _add(added, family, name, node)
    return {**defs, **{name: node for name, (_family, node) in added.items()}}


def _add(added: dict[str, tuple[str, NodeDef]], family: str, name: str, node: NodeDef) -> None:
    if name not in added or added[name][1].untyped:
        added[name] = (family, node)
        return
    first, known = added[name]
    if not node.untyped and _declared(node) != _declared(known):
        raise RecipeError(
            f"model families {first!r} and {family!r} add the ComfyUI class {name!r} with "
            "different inputs or outputs"
        )


def _declared(node: NodeDef) -> tuple[Mapping[str, object], Mapping[str, object], object]:
    return node.required, node.optional, node.outputs
