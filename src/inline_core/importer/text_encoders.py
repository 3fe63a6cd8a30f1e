"""ComfyUI's CLIP loaders (`CLIPLoader`, `DualCLIPLoader`, `TripleCLIPLoader`) onto the text
encoders a family takes: the family's recipe (`ComfyRecipe.text_encoders`) says which loader and
`type` load its encoders and onto which of its loader nodes, every file kept. A single-file
CLIPLoader the recipe does not list is the low-level `load/text-encoder` (with its `type` where
the file has several readings); any other combination
is refused naming the loader, its files and type, and what the served families take: nothing
is silently dropped."""

from __future__ import annotations

from inline_core.contract.comfy_recipe import RecipeError, TextEncoders
from inline_core.errors import InvalidRequest
from inline_core.graph.schema import PortKind
from inline_core.importer.mapper import Mapper
from inline_core.importer.values import Port, Value, describe
from inline_core.importer.workflow import ComfyNode

FILES = {
    "CLIPLoader": ("clip_name",),
    "DualCLIPLoader": ("clip_name1", "clip_name2"),
    "TripleCLIPLoader": ("clip_name1", "clip_name2", "clip_name3"),
}
IMPLIED_TYPE = {"TripleCLIPLoader": "sd3"}  # ComfyUI's loads SD3's three encoders, no widget


def taken(m: Mapper) -> dict[tuple[str, str], list[tuple[str, TextEncoders]]]:
    """(loader class, type) -> the served families that take it, with how (the workflow's
    family alone when it was recognised)."""
    if m.facts is None:
        return {}
    found: dict[tuple[str, str], list[tuple[str, TextEncoders]]] = {}
    for name, _title in m.facts.family_names():
        recipe = m.facts.comfy_recipe(name)
        if recipe is None or (m.family is not None and name != m.family):
            continue
        for key, spec in recipe.text_encoders.items():
            found.setdefault(key, []).append((name, spec))
    return found


def clip_loader(m: Mapper, node: ComfyNode, slot: int) -> Value | None:
    names = [m.text(node, widget) for widget in FILES[node.class_type]]
    kind = IMPLIED_TYPE.get(node.class_type) or m.text(node, "type")
    where = describe(node)
    offered = taken(m)
    claims = offered.get((node.class_type, kind), [])
    if len(claims) == 1:
        family, spec = claims[0]
        return Value(PortKind.TEXT_ENCODER, _load(m, node, names, family, spec), node.id)
    if not claims and len(names) == 1:
        port = m.loader(
            f"c{node.id}", "load/text-encoder", names[0], where, params=_reading(m, kind, names[0])
        )
        return Value(PortKind.TEXT_ENCODER, port, node.id)
    files = ", ".join(repr(n) for n in names)
    if claims:
        both = " and ".join(repr(f) for f, _spec in claims)
        why = f"the model families {both} both take it: load the workflow's family only"
    else:
        listed = ", ".join(f"{c} type {t!r}" for c, t in sorted(offered)) or "none"
        who = f"model family {m.family!r}" if m.family else "no served model family"
        why = f"{who} takes no {node.class_type} of that type (the served take: {listed})"
    raise InvalidRequest(
        f"{where} loads {len(names)} text encoder(s) ({files}) as type {kind!r}; {why}. "
        "Inline Core does not leave an encoder out or swap it for another"
    )


def _reading(m: Mapper, kind: str, wanted: str) -> dict[str, str]:
    """The loader's `type` (whose reading of the file), kept where another family the
    low-level vocabulary serves takes the file too; elsewhere the file tells whose it is."""
    facts, family = m.facts, m.family
    if facts is None or family is None or kind not in facts.text_encoder_types(family):
        return {}
    file = m.renamed.get(wanted, wanted)
    others = [
        name
        for name, _title in facts.family_names()
        if name != family and facts.importable(name) and facts.takes(name, "text_encoders", file)
    ]
    return {"type": kind} if others else {}


def _load(m: Mapper, node: ComfyNode, names: list[str], family: str, spec: TextEncoders) -> Port:
    descriptor = m.descriptors.get(spec.node)
    if descriptor is None or len(spec.params) != len(names):
        raise RecipeError(
            f"model family {family!r}'s ComfyUI recipe loads {node.class_type} onto "
            f"{spec.node!r} with params {spec.params}: "
            + ("no such node is served" if descriptor is None else f"it has {len(names)} files")
        )
    if not descriptor.outputs or descriptor.outputs[0].kind is not PortKind.TEXT_ENCODER:
        raise RecipeError(
            f"model family {family!r}'s ComfyUI recipe loads text encoders onto {spec.node!r}, "
            "whose first output is not a text encoder"
        )
    where = describe(node)
    params: dict[str, str] = {}
    for param, wanted in zip(spec.params, names, strict=True):
        picker = descriptor.param(param)
        category = picker.options_from if picker is not None and picker.options_from else ""
        if not category:
            raise RecipeError(
                f"model family {family!r}'s ComfyUI recipe puts a text encoder file on "
                f"{spec.node!r}'s {param!r}, which is not a model picker"
            )
        params[param] = m.model_file(f"c{node.id}", category, wanted, where)
    return m.add(f"c{node.id}", spec.node, params, {}, where)
