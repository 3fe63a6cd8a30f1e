"""Which model family a ComfyUI workflow is built for, from its loader nodes' file names, the
type its text encoder loads as, and node classes only one family uses.

A workflow is mapped only onto a family this server runs (asked through `ModelFacts`, which
never names one); one built for another family is refused (422 `unsupported_model_family`)
naming the family, the nodes that show it and what to do, never imported into another family.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from inline_core.diffusion.files.checkpoint import key_outline, model_keys
from inline_core.errors import InvalidRequest
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.graph.runner import CatalogView
from inline_core.importer.facts import ModelFacts
from inline_core.importer.known_families import (
    known_by_class,
    known_by_file,
    known_by_keys,
    known_by_text_encoder,
    most_specific_first,
)
from inline_core.importer.workflow import ComfyNode, Workflow, node_sort_key

# ComfyUI loaders of a diffusion model (a checkpoint bundles one), by the widget naming it.
MODEL_LOADERS = {
    "UNETLoader": "unet_name",
    "UnetLoaderGGUF": "unet_name",
    "CheckpointLoaderSimple": "ckpt_name",
    "CheckpointLoader": "ckpt_name",
    "ImageOnlyCheckpointLoader": "ckpt_name",
    "unCLIPCheckpointLoader": "ckpt_name",
}
# The catalog folder a loader's file is in (the rest: diffusion_models/).
CHECKPOINT_LOADERS = frozenset(name for name in MODEL_LOADERS if "Checkpoint" in name)
TEXT_ENCODER_LOADERS = ("CLIPLoader", "DualCLIPLoader", "TripleCLIPLoader", "QuadrupleCLIPLoader")
# Text encoder types that many families share: they tell nothing.
GENERIC_TYPES = frozenset({"", "default", "stable_diffusion"})
SHOWN = 4


class UnsupportedFamily(InvalidRequest):
    code = "unsupported_model_family"


@dataclass(frozen=True)
class Recognition:
    family: str | None  # the served family it maps onto; None: the workflow loads no model
    title: str | None = None
    # Said plainly in the answer: the caller's mapping put a workflow built for another family
    # onto this one, so the picture is not the one the workflow makes.
    warnings: tuple[str, ...] = ()
    # The family's own node the workflow collapses onto (`ModelFacts.own_node`); None: it maps
    # onto the low-level vocabulary.
    own_node: NodeDescriptor | None = None
    # With `own_node`: why the workflow is refused when it is not that node's template chain.
    refusal: str = ""
    # With `own_node`: the family serves the low-level vocabulary too, so a chain that does not
    # collapse onto its node exactly maps onto that instead.
    primitives: bool = False


@dataclass
class _Evidence:
    served: dict[str, list[str]] = field(default_factory=dict[str, list[str]])
    foreign: dict[str, list[str]] = field(default_factory=dict[str, list[str]])
    unknown_models: list[str] = field(default_factory=list[str])
    # Checkpoints in the catalog that no family here takes by their keys, nor a known one.
    unread: list[str] = field(default_factory=list[str])
    mapped: list[str] = field(default_factory=list[str])  # by the caller's explicit mapping
    modelled: set[str] = field(default_factory=set[str])  # served families a model file shows
    models: int = 0


def _where(node: ComfyNode) -> str:
    return f"{node.class_type} {node.id}"


def _widget(node: ComfyNode, name: str) -> str:
    value = node.inputs.get(name)
    return value if isinstance(value, str) else ""


def recognise(
    workflow: Workflow,
    facts: ModelFacts | None,
    catalog: CatalogView,
    renamed: Mapping[str, str] | None = None,
) -> Recognition:
    """The served family `workflow` is for; raises `UnsupportedFamily` when it is for another
    (or for none this server can tell). `renamed` is the caller's explicit model-name mapping:
    a model file it maps onto a served family's decides, whatever else the workflow shows."""
    served = facts.family_names() if facts is not None else []
    every = dict(served)
    # The families a workflow can be mapped onto: the ones messages offer.
    titles = {n: t for n, t in served if facts is not None and facts.importable(n)}
    evidence = _Evidence()
    nodes = sorted(workflow.nodes.values(), key=lambda n: node_sort_key(n.id))
    _check_mapped(nodes, catalog, dict(renamed or {}))
    for node in nodes:
        _read_model(node, facts, served, dict(renamed or {}), evidence, catalog)
        _read_text_encoder(node, facts, served, evidence)
    if not evidence.models:  # no model file: a class only one family uses still tells
        shown: dict[str, list[str]] = {}
        for node in nodes:
            known = known_by_class(node.class_type)
            if known is not None:
                shown.setdefault(known.title, []).append(_where(node))
        # The most specific family first (Kijai's diffusion-forcing sampler among his Wan nodes).
        evidence.foreign.update((title, shown[title]) for title in most_specific_first(shown))
    if evidence.foreign:
        # A family that runs only its own node is not told by its text encoder's type alone
        # when a model file shows another (ComfyUI loads ERNIE-Image's as "flux2", as FLUX.2's).
        for name in [n for n in evidence.served if n not in titles and n not in evidence.modelled]:
            del evidence.served[name]
    # A model file tells more than a text encoder's type, which families share (ComfyUI loads
    # UMT5 as "wan" for Wan and for SkyReels-V2 alike): the families a file shows come first.
    evidence.served = dict(
        sorted(evidence.served.items(), key=lambda i: i[0] not in evidence.modelled)
    )
    for name, where in evidence.served.items():
        if name not in titles:
            own = facts.own_node(name) if facts is not None else None
            message = _runs_only_its_nodes(every[name], where, titles, own)
            if own is None:
                raise UnsupportedFamily(message)
            return Recognition(name, every[name], own_node=own, refusal=message)
    if evidence.mapped and evidence.served:
        name = next(iter(evidence.served))
        notes = tuple(
            f"changes the picture: this workflow is built for {title} ({_shown(where)}); the "
            f"import's models put it onto {titles[name]}, so it renders what {titles[name]} "
            "makes of it, not what the workflow makes"
            for title, where in evidence.foreign.items()
        )
        return _importable(name, titles[name], facts, notes)
    if evidence.foreign:
        title, where = next(iter(evidence.foreign.items()))
        raise UnsupportedFamily(_foreign_message(title, where, every, catalog, facts))
    if evidence.served:
        name = next(iter(evidence.served))
        return _importable(name, titles[name], facts)
    if evidence.unread:
        raise UnsupportedFamily(_unread_message(evidence.unread, every))
    if evidence.unknown_models:
        raise UnsupportedFamily(_unknown_message(evidence.unknown_models, every, catalog, facts))
    return Recognition(None)


def _importable(
    name: str, title: str, facts: ModelFacts | None, warnings: tuple[str, ...] = ()
) -> Recognition:
    """A family the low-level vocabulary serves; with its own node, its template chain
    collapses onto that node first."""
    own = facts.own_node(name) if facts is not None else None
    return Recognition(name, title, warnings, own_node=own, primitives=own is not None)


def _check_mapped(nodes: list[ComfyNode], catalog: CatalogView, renamed: dict[str, str]) -> None:
    """A model file the caller maps must be the catalog's: said before anything else."""
    for node in nodes:
        widget = MODEL_LOADERS.get(node.class_type)
        wanted = _widget(node, widget) if widget is not None else ""
        chosen = renamed.get(wanted)
        folders = _categories(node)
        listed = [name for category in folders for name in catalog.options(category)]
        if chosen is not None and chosen not in listed:
            shown = ", ".join(repr(n) for n in listed[:8]) or "nothing"
            where = " or ".join(f"{category}/" for category in folders)
            raise InvalidRequest(
                f"{_where(node)}: the import's models map {wanted!r} onto {chosen!r}, which is "
                f"not in {where} (it holds {shown})"
            )


def _categories(node: ComfyNode) -> tuple[str, ...]:
    """The catalog folders a model loader's file may be in: a checkpoint loader's in
    checkpoints/ (recognised by its diffusion model's keys), or mapped onto a diffusion model."""
    if node.class_type in CHECKPOINT_LOADERS:
        return ("checkpoints", "diffusion_models")
    return ("diffusion_models",)


def _shown(where: list[str]) -> str:
    return "; ".join(where[:SHOWN]) + ("; ..." if len(where) > SHOWN else "")


def served_models(catalog: CatalogView, facts: ModelFacts | None) -> list[str]:
    """The catalog's diffusion models a family this server runs takes: the candidates a caller
    may map a workflow's model file onto."""
    if facts is None:
        return []
    return [
        name
        for name in catalog.options("diffusion_models")
        if facts.family_of("diffusion_models", name) is not None
    ]


def _mapping_hint(catalog: CatalogView, facts: ModelFacts | None) -> str:
    candidates = served_models(catalog, facts)
    shown = ", ".join(repr(n) for n in candidates[:8]) if candidates else "none is installed"
    return (
        "; to render it with one of this server's models anyway, map the workflow's file onto "
        'one in the import\'s "models" ({"<workflow file>": "<catalog file>"}; inline-core '
        f"import-comfy --model WORKFLOW_FILE=CATALOG_FILE): diffusion_models/ here: {shown}"
    )


def _read_model(
    node: ComfyNode,
    facts: ModelFacts | None,
    served: list[tuple[str, str]],
    renamed: dict[str, str],
    evidence: _Evidence,
    catalog: CatalogView,
) -> None:
    widget = MODEL_LOADERS.get(node.class_type)
    if widget is None:
        return
    wanted = _widget(node, widget)
    if not wanted:
        return
    evidence.models += 1
    shown = f"{_where(node)} {wanted!r}"
    file_name = renamed.get(wanted, wanted)
    owner = None
    if facts is not None:
        found = (facts.family_of(category, file_name) for category in _categories(node))
        owner = next((name for name in found if name is not None), None)
    if owner is None and _by_keys(node, file_name, catalog, shown, evidence):
        return  # its keys tell, whatever its name says
    if owner is None and facts is not None:
        owner = next((n for n, _t in served if facts.names_model(n, file_name)), None)
    known = known_by_file(wanted)
    if owner is not None:
        evidence.served.setdefault(owner, []).append(shown)
        evidence.modelled.add(owner)
        if wanted in renamed:
            evidence.mapped.append(shown)
            owner_title = dict(served).get(owner, "").casefold()
            if known is not None and known.title.casefold() != owner_title:
                # said plainly: the picture is not the workflow's
                evidence.foreign.setdefault(known.title, []).append(shown)
        return
    if known is not None:
        evidence.foreign.setdefault(known.title, []).append(shown)
    else:
        evidence.unknown_models.append(shown)


def _by_keys(
    node: ComfyNode, file_name: str, catalog: CatalogView, shown: str, evidence: _Evidence
) -> bool:
    """A checkpoint in the catalog that no family here takes: what its keys show (a known
    family's model, or their outline). False when it is not there or its header is unreadable."""
    listed = catalog.options("checkpoints")
    if node.class_type not in CHECKPOINT_LOADERS or file_name not in listed:
        return False
    keys = model_keys(catalog.path("checkpoints", file_name))
    if keys is None:
        return False
    known = known_by_keys(keys)
    look = known.keys_look if known is not None else key_outline(keys)
    said = f"{shown}: checkpoints/{file_name}'s keys look like {look}"
    if known is not None:
        evidence.foreign.setdefault(known.title, []).append(said)
    else:
        evidence.unread.append(said)
    return True


def _read_text_encoder(
    node: ComfyNode, facts: ModelFacts | None, served: list[tuple[str, str]], evidence: _Evidence
) -> None:
    if node.class_type not in TEXT_ENCODER_LOADERS:
        return
    kind = _widget(node, "type").strip().lower()
    if kind in GENERIC_TYPES:
        return
    shown = f"{_where(node)} type {kind!r}"
    if facts is not None:
        for name, _title in served:
            if kind in facts.text_encoder_types(name):
                evidence.served.setdefault(name, []).append(shown)
                return
    known = known_by_text_encoder(kind)
    title = known.title if known is not None else f"the model family ComfyUI calls {kind!r}"
    evidence.foreign.setdefault(title, []).append(shown)


def _runs_here(titles: Mapping[str, str]) -> str:
    """Every family this server runs (its own nodes, or the low-level vocabulary too)."""
    return ", ".join(sorted(titles.values())) if titles else "none (no model family is installed)"


def _foreign_message(
    title: str,
    where: list[str],
    titles: Mapping[str, str],
    catalog: CatalogView,
    facts: ModelFacts | None,
) -> str:
    served = next((t for t in titles.values() if t.casefold() == title.casefold()), None)
    if served is not None:  # a family this server runs, through what it cannot run
        return (
            f"this workflow is built for {served} ({_shown(where)}) through what this server "
            f"cannot run for it (a ComfyUI cloud API node, or a model file or node {served} "
            f"here does not take); this server runs {served}: import ComfyUI's local {served} "
            f"templates (a model loader, KSampler, VAEDecode), or build the graph with "
            f"{served}'s node (see /v1/models). The model families it runs: {_runs_here(titles)}"
            + _mapping_hint(catalog, facts)  # a model file not here: map it onto one that is
        )
    return (
        f"this workflow is built for {title} ({_shown(where)}), which this server cannot run; "
        f"the model families it runs: {_runs_here(titles)}. Inline Core has no {title} family "
        "yet: one comes as a family package installed into the server's environment (then "
        "listed in /v1/health); until then, import a workflow built for a family listed here"
        + _mapping_hint(catalog, facts)
    )


def _runs_only_its_nodes(
    title: str, where: list[str], titles: Mapping[str, str], own: NodeDescriptor | None
) -> str:
    if own is not None:
        return (
            f"this workflow is built for {title} ({_shown(where)}): this server runs {title} "
            f"through its own node only, and a {title} workflow imports as one {own.type} node "
            "from ComfyUI's template chain (a model loader, two prompts, a video latent, "
            "KSampler, VAEDecode, then SaveVideo or SaveAnimatedWEBP), which this one is not; "
            f"build the graph with {own.type} (see /v1/models)"
        )
    return (
        f"this workflow is built for {title} ({_shown(where)}): this server runs {title} "
        "through its own node only, and a ComfyUI workflow is mapped onto the low-level nodes "
        f"(load/*, encode/text, sample, vae/*), which {title} does not serve yet; build the graph "
        f"with {title}'s node (see /v1/models), or import a workflow for a family that maps: "
        f"{_runs_here(titles)}"
    )


def _unknown_message(
    where: list[str], titles: Mapping[str, str], catalog: CatalogView, facts: ModelFacts | None
) -> str:
    return (
        f"cannot tell which model family this workflow is built for: {_shown(where)} is not a "
        "file in models/diffusion_models/ and its name is no model of the families this server "
        f"runs ({_runs_here(titles)}). Put the file there, or name the catalog's file for it"
        + _mapping_hint(catalog, facts)
    )


def _unread_message(where: list[str], titles: Mapping[str, str]) -> str:
    return (
        f"no model family this server runs takes this workflow's checkpoint ({_shown(where)}): "
        f"it is no model of {_runs_here(titles)}. Import a workflow whose checkpoint is one of "
        "theirs (see /v1/models)"
    )
