"""Map flat ComfyUI nodes onto Inline Core's node vocabulary, working back from the image outputs.

Each ComfyUI output slot that something downstream needs is mapped once (memoised), so shared
loaders stay shared and our node list comes out in dependency order. Our ids derive from ComfyUI's:
node 9 becomes `c9`, and a node that maps to two of ours adds a suffix (`c6_text` + `c6`).
A node we cannot map is reported in `skipped`; when it has an input of the type its consumer
needs, that input is passed straight through (what ComfyUI does for a bypassed node), and a
warning says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, cast

from inline_core.errors import InvalidRequest
from inline_core.graph.descriptor import SEED_MAX, NodeDescriptor, ParamWidget
from inline_core.graph.runner import CatalogView
from inline_core.graph.schema import Edge, Graph, Node, PortKind
from inline_core.importer import controls, inpaint
from inline_core.importer.dropped import Change, UnsupportedNode, change_reason, refusal
from inline_core.importer.facts import ModelFacts
from inline_core.importer.model_files import match_model_file
from inline_core.importer.samplers import exact_name
from inline_core.importer.values import COMFY_KINDS, Port, Value, describe
from inline_core.importer.widgets import CONSTANT_TYPES, INPUT_NAMES_BY_TYPE, OUTPUT_TYPES
from inline_core.importer.workflow import ComfyNode, Link, Skipped, Workflow, node_sort_key

SAVE_IMAGE = "SaveImage"
# Our nodes that take a model and hand on the same model, adapted.
MODEL_WRAPPERS = ("load/lora", "load/controlnet")
PREVIEW_IMAGE = "PreviewImage"
DECODERS = ("VAEDecode", "VAEDecodeTiled")
UNUSED = "not connected to an image output"  # why a node nothing needs is skipped


@dataclass
class _Draft:
    id: str
    type: str
    params: dict[str, Any]
    inputs: dict[str, tuple[Port, ...]]  # an input's edges, in order (a `loras` input has many)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


Handler = Callable[["Mapper", ComfyNode, int], Value | None]


@dataclass
class Mapper:
    workflow: Workflow
    catalog: CatalogView
    descriptors: Mapping[str, NodeDescriptor]
    assets: Mapping[str, str]
    facts: ModelFacts | None = None
    # ComfyUI class -> a served node that declares it stands in for it (e.g. a pack's node).
    declared: Mapping[str, NodeDescriptor] = field(default_factory=dict[str, NodeDescriptor])
    # The caller's explicit model-name mapping: a workflow's file -> the catalog's.
    renamed: Mapping[str, str] = field(default_factory=dict[str, str])
    # The served family the workflow was recognised as (`recognise.py`): its files listed first.
    family: str | None = None
    drafts: dict[str, _Draft] = field(default_factory=dict[str, _Draft])
    changes: dict[str, Change] = field(default_factory=dict[str, Change])
    # Loaders whose file is not in the catalog, with the catalog's candidates.
    unmatched: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    passed_images: list[str] = field(default_factory=list[str])
    warnings: list[str] = field(default_factory=list[str])
    skipped: dict[str, Skipped] = field(default_factory=dict[str, Skipped])
    _memo: dict[tuple[str, int, PortKind], Value | None] = field(
        default_factory=dict[tuple[str, int, PortKind], Value | None]
    )
    _active: set[tuple[str, int]] = field(default_factory=set[tuple[str, int]])
    _used: set[str] = field(default_factory=set[str])

    HANDLERS: ClassVar[dict[str, Handler]] = {}

    def __post_init__(self) -> None:
        for item in self.workflow.skipped:
            self.skipped[item.node_id] = item

    # -- bookkeeping ----------------------------------------------------------------------

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def skip(self, node: ComfyNode, reason: str) -> None:
        if node.id not in self.skipped:
            self.skipped[node.id] = Skipped(node.id, node.class_type, reason)

    def used(self, node_id: str) -> bool:
        """Whether a node's value was read (a constant node a widget follows)."""
        return node_id in self._used

    def mark_used(self, node_id: str) -> None:
        """A node read directly, not through a link's value (a loader a patch names)."""
        self._used.add(node_id)

    def output_name(self, node_type: str) -> str:
        return self.descriptors[node_type].outputs[0].name

    def add(
        self,
        node_id: str,
        node_type: str,
        params: Mapping[str, Any],
        inputs: Mapping[str, Port | tuple[Port, ...] | None],
        where: str,
    ) -> Port:
        """Add one of our nodes (once: a second call with the same id returns the first)."""
        if node_id not in self.drafts:
            fitted = {
                name: self.fit(node_type, name, value, where)
                for name, value in params.items()
                if value is not None
            }
            wired = {
                name: (port,) if isinstance(port, Port) else port
                for name, port in inputs.items()
                if port
            }
            self.drafts[node_id] = _Draft(node_id, node_type, fitted, wired)
        return Port(node_id, self.output_name(node_type))

    def fit(self, node_type: str, name: str, value: Any, where: str) -> Any:
        """Bring a ComfyUI value into the range our param allows, saying what changed."""
        spec = self.descriptors[node_type].param(name)
        if spec is None:
            return value
        if spec.widget == ParamWidget.SEED and isinstance(value, int):
            if 0 <= value <= SEED_MAX:
                return value
            folded = value % (SEED_MAX + 1)
            self.warn(f"{where}: seed {value} is outside 0..{SEED_MAX}; using {folded}")
            return folded
        if spec.widget == ParamWidget.NUMBER and _is_number(value):
            number = float(value)
            if spec.minimum is not None:
                number = max(number, spec.minimum)
            if spec.maximum is not None:
                number = min(number, spec.maximum)
            fitted: int | float = number
            if spec.integer:
                step = int(spec.step) if spec.step and float(spec.step).is_integer() else 1
                base = int(spec.minimum) if spec.minimum is not None else 0
                fitted = base + step * math.floor((number - base) / step + 0.5)
                if spec.maximum is not None and fitted > spec.maximum:
                    fitted -= step
            if not math.isclose(fitted, float(value)):
                self.warn(
                    f"{where}: {name} {value!r} is outside what {node_type} takes; using {fitted!r}"
                )
            return fitted
        if spec.max_length is not None and isinstance(value, str) and len(value) > spec.max_length:
            self.warn(f"{where}: {name} was cut to {spec.max_length} characters")
            return value[: spec.max_length]
        return value

    # -- reading ComfyUI inputs -----------------------------------------------------------

    def literal(self, node: ComfyNode, name: str) -> Any:
        """A widget value, following a link to a constant node (PrimitiveInt and the like)."""
        value = node.inputs.get(name)
        seen: set[str] = set()
        while isinstance(value, Link):
            source = self.workflow.nodes.get(value.node)
            if source is None or source.id in seen or source.class_type not in CONSTANT_TYPES:
                shown = describe(source) if source is not None else f"node {value.node}"
                self.warn(
                    f"{describe(node)}: {name} comes from {shown}, whose value cannot be "
                    "known before it runs; using the default"
                )
                return None
            seen.add(source.id)
            self._used.add(source.id)
            value = source.inputs.get("value")
        return value

    def number(self, node: ComfyNode, name: str, default: float) -> float:
        value = self.literal(node, name)
        if value is None:
            return default
        if not _is_number(value):
            self.warn(f"{describe(node)}: {name} {value!r} is not a number; using {default:g}")
            return default
        return float(value)

    def whole(self, node: ComfyNode, name: str, default: int) -> int:
        value = self.literal(node, name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value  # never through a float: seeds go up to 2**64 - 1
        if isinstance(value, float) and math.isfinite(value):
            return round(value)
        if value is not None:
            self.warn(f"{describe(node)}: {name} {value!r} is not a number; using {default}")
        return default

    def text(self, node: ComfyNode, name: str, default: str = "") -> str:
        value = self.literal(node, name)
        if value is None:
            return default
        if not isinstance(value, str):
            return str(value)
        return value

    def link_kind(self, link: Link, input_name: str) -> PortKind | None:
        """The kind of value on a link: from the source's output types, or the input's name."""
        source = self.workflow.nodes.get(link.node)
        if source is not None:
            types = source.output_types or OUTPUT_TYPES.get(source.class_type)
            if types and link.slot < len(types) and types[link.slot] in COMFY_KINDS:
                return COMFY_KINDS[types[link.slot]]
        for type_name, names in INPUT_NAMES_BY_TYPE.items():
            if input_name in names:
                return COMFY_KINDS[type_name]
        return None

    # -- following values ------------------------------------------------------------------

    def input_value(
        self, node: ComfyNode, name: str, kind: PortKind, *, optional: bool = False
    ) -> Value | None:
        raw = node.inputs.get(name)
        if isinstance(raw, Link):
            return self.value(raw, kind, node, name)
        if not optional:
            self.warn(f"{describe(node)}: input {name!r} is not connected in the workflow")
        return None

    def value(self, link: Link, kind: PortKind, consumer: ComfyNode, name: str) -> Value | None:
        source = self.workflow.nodes.get(link.node)
        if source is None:
            self.warn(
                f"{describe(consumer)}: input {name!r} comes from node {link.node}, "
                "which was left out of the workflow; it stays unconnected"
            )
            return None
        key = (source.id, link.slot, kind)
        if key in self._memo:
            return self._memo[key]
        if (source.id, link.slot) in self._active:
            self.warn(f"{describe(source)}: its output feeds back into itself; the loop was cut")
            return None
        self._active.add((source.id, link.slot))
        self._used.add(source.id)
        try:
            handler = self.HANDLERS.get(source.class_type)
            stand_in = self.declared.get(source.class_type)
            if handler is None and stand_in is None:
                refused = refusal(source.class_type, describe(source))
                if refused is not None:
                    raise UnsupportedNode(refused)
                reason = f"unknown node type {source.class_type!r}: Inline Core has no equivalent"
                result = self.pass_through(source, kind, reason)
            else:
                result = (
                    handler(self, source, link.slot)
                    if handler is not None
                    else self.stand_in(source, link.slot, cast(NodeDescriptor, stand_in))
                )
                if result is not None and result.kind != kind:
                    self.warn(
                        f"{describe(consumer)}: input {name!r} expects {kind.value}, but "
                        f"{describe(source)} gives {result.kind.value}; left unconnected"
                    )
                    result = None
        finally:
            self._active.discard((source.id, link.slot))
        self._memo[key] = result
        return result

    def pass_through(self, node: ComfyNode, kind: PortKind, reason: str) -> Value | None:
        """Skip `node`, handing on its first input of `kind` (as ComfyUI's bypass does)."""
        for name, raw in node.inputs.items():
            if isinstance(raw, Link) and self.link_kind(raw, name) == kind:
                passed = self.value(raw, kind, node, name)
                if passed is not None:
                    self.skip(node, f"{reason}; its {name!r} input was passed straight through")
                    change = Change(node.id, node.class_type, change_reason(node.class_type))
                    if node.id not in self.changes:
                        self.changes[node.id] = change
                        self.warn(change.warning())
                    if kind == PortKind.IMAGE:
                        self.passed_images.append(describe(node))
                    return passed
        self.skip(node, reason)
        return None

    def substituted(self, node: ComfyNode, reason: str) -> None:
        """`node` is carried over, but renders otherwise than in ComfyUI (`reason`): listed
        under `changesPicture`, and said in the warnings."""
        earlier = self.changes.get(node.id)
        if earlier is not None and (earlier.dropped or reason in earlier.reason):
            return
        change = Change(node.id, node.class_type, reason, dropped=False)
        self.changes[node.id] = change
        self.warn(change.warning())
        if earlier is not None:  # one entry a node: its reasons together
            self.changes[node.id] = replace(change, reason=f"{earlier.reason}; {reason}")

    def drop_for(self, node: ComfyNode, name: str, kind: PortKind, reason: str) -> Value | None:
        """Skip `node`, handing on its input `name` of `kind`, listed as a change: `reason`."""
        passed = self.input_value(node, name, kind)
        if passed is None:
            return None
        self.skip(node, f"{reason}; its {name!r} input was passed straight through")
        if node.id not in self.changes:
            self.changes[node.id] = Change(node.id, node.class_type, reason)
            self.warn(self.changes[node.id].warning())
        return passed

    # -- loaders --------------------------------------------------------------------------

    def loader(
        self,
        node_id: str,
        node_type: str,
        wanted: str,
        where: str,
        *,
        bundled: bool = False,
        param: str = "file",
        params: Mapping[str, Any] | None = None,
        inputs: Mapping[str, Port | None] | None = None,
    ) -> Port:
        """A loader of `wanted` from its category (its picker `param`, beside `params` and
        `inputs`). `bundled`: one part of a checkpoint, which a mapping of the checkpoint's name
        onto the catalog's diffusion model does not name."""
        spec = self.descriptors[node_type].param(param)
        others, wired = dict(params or {}), dict(inputs or {})
        category = spec.options_from if spec is not None and spec.options_from else ""
        chosen = self.model_file(node_id, category, wanted, where, bundled=bundled)
        return self.add(node_id, node_type, {param: chosen, **others}, wired, where)

    def model_file(
        self, node_id: str, category: str, wanted: str, where: str, *, bundled: bool = False
    ) -> str:
        """The catalog's file in `category` for the workflow's `wanted`: the caller's mapping,
        or the nearest match (recorded in `unmatched` when it is not the file itself)."""
        chosen = self.renamed.get(wanted)
        if chosen is not None and not (bundled and chosen not in self.catalog.options(category)):
            if chosen not in self.catalog.options(category):
                raise InvalidRequest(
                    f"{where}: the import's models map {wanted!r} onto {chosen!r}, which is not "
                    f"in {category}/ (it holds {self.listing(category)})"
                )
            self.warn(f"{where}: model {wanted!r} is {category}/{chosen!r}, as the import maps it")
            return chosen
        match = match_model_file(self.catalog, category, wanted)
        listed = self.catalog.options(category)
        if bundled and not match.found and len(listed) == 1:
            # A checkpoint's own VAE or text encoder cannot load from it here: its folder's only
            # file stands in, said and listed (`using`), as the checkpoint's mapping was asked.
            match = replace(
                match,
                name=listed[0],
                note=f"the checkpoint {wanted!r} bundles its {category} part, which loads from "
                f"{category}/ here; using the only one there, {listed[0]!r}",
            )
        if match.note is not None:
            self.warn(f"{where}: {match.note}")
        if not match.found and node_id not in self.drafts:
            self.unmatched.append(
                {
                    "nodeId": node_id,
                    "comfyNode": where,
                    "file": wanted,
                    "category": category,
                    "using": match.name if match.name in self.catalog.options(category) else None,
                    "candidates": self.candidates(category),
                }
            )
        return match.name

    def candidates(self, category: str) -> list[str]:
        """Every file of `category`, the workflow's family's first (then the others: a file
        the server cannot tell the family of may still be the one)."""
        listed = self.catalog.options(category)
        facts, family = self.facts, self.family
        if facts is None or family is None:
            return listed
        ours = [n for n in listed if facts.family_of(category, n) == family]
        return ours + [n for n in listed if n not in ours]

    def chosen_file(self, node_type: str, param: str, wanted: str) -> str:
        """The catalog's file a loader of `wanted` (`node_type`'s picker `param`) picks, as
        `model_file` picks it, without recording anything."""
        spec = self.descriptors[node_type].param(param)
        category = spec.options_from if spec is not None and spec.options_from else ""
        chosen = self.renamed.get(wanted)
        if chosen is not None and chosen in self.catalog.options(category):
            return chosen
        return match_model_file(self.catalog, category, wanted).name

    def listing(self, category: str) -> str:
        listed = self.catalog.options(category)
        if not listed:
            return "nothing"
        return ", ".join(repr(n) for n in listed[:8]) + (", ..." if len(listed) > 8 else "")

    def unet_loader(self, node: ComfyNode, slot: int) -> Value | None:
        dtype = self.literal(node, "weight_dtype")
        if dtype not in (None, "default"):
            self.warn(
                f"{describe(node)}: weight_dtype {dtype!r} is not carried over; the device "
                "policy chooses the precision here"
            )
        name = self.text(node, "unet_name")
        port = self.loader(f"c{node.id}", "load/diffusion-model", name, describe(node))
        return Value(PortKind.MODEL, port, node.id)

    def checkpoint_loader(self, node: ComfyNode, slot: int) -> Value | None:
        name = self.text(node, "ckpt_name")
        where = describe(node)
        self.warn(
            f"{where}: a checkpoint bundles model, text encoder and VAE in one file; "
            "Inline Core loads each from its own folder (diffusion_models/, "
            "text_encoders/, vae/), matched by the checkpoint's name"
        )
        parts = (
            (f"c{node.id}", "load/diffusion-model", PortKind.MODEL),
            (f"c{node.id}_text_encoder", "load/text-encoder", PortKind.TEXT_ENCODER),
            (f"c{node.id}_vae", "load/vae", PortKind.VAE),
        )
        if slot >= len(parts):
            return None
        node_id, node_type, kind = parts[slot]
        port = self.loader(node_id, node_type, name, where, bundled=slot > 0)
        return Value(kind, port, node.id)

    def clip_loader(self, node: ComfyNode, slot: int) -> Value | None:
        name = self.text(node, "clip_name")
        port = self.loader(f"c{node.id}", "load/text-encoder", name, describe(node))
        return Value(PortKind.TEXT_ENCODER, port, node.id)

    def dual_clip_loader(self, node: ComfyNode, slot: int) -> Value | None:
        names = [self.text(node, "clip_name1"), self.text(node, "clip_name2")]
        spec = self.descriptors["load/text-encoder"].param("file")
        category = spec.options_from if spec is not None and spec.options_from else ""
        found = [
            n
            for n in names
            if n in self.renamed or match_model_file(self.catalog, category, n).found
        ]
        chosen = found[0] if found else names[0]
        dropped = [n for n in names if n != chosen]
        if dropped:
            self.warn(
                f"{describe(node)}: a graph here takes one text encoder; using {chosen!r} "
                f"and leaving out {dropped[0]!r}"
            )
        port = self.loader(f"c{node.id}", "load/text-encoder", chosen, describe(node))
        return Value(PortKind.TEXT_ENCODER, port, node.id)

    def vae_loader(self, node: ComfyNode, slot: int) -> Value | None:
        name = self.text(node, "vae_name")
        port = self.loader(f"c{node.id}", "load/vae", name, describe(node))
        return Value(PortKind.VAE, port, node.id)

    def lora_loader(self, node: ComfyNode, slot: int) -> Value | None:
        """LoraLoaderModelOnly, and LoraLoader's model half: a `load/lora` on the model's way.
        LoraLoader's text-encoder half is not applied here: its CLIP output is the encoder it
        took, listed as a change to the picture unless its strength_clip is 0."""
        where = describe(node)
        if slot == 1:
            encoder = self.input_value(node, "clip", PortKind.TEXT_ENCODER)
            self.lora_clip_half(node)
            return encoder
        model = self.input_value(node, "model", PortKind.MODEL)
        if model is None or model.port is None:
            return None
        strength = self.number(node, "strength_model", 1.0)
        port = self.loader(
            f"c{node.id}",
            "load/lora",
            self.text(node, "lora_name"),
            where,
            param="name",
            params={"strength": strength},
            inputs={"model": model.port},
        )
        return replace(model, port=port)

    def lora_clip_half(self, node: ComfyNode) -> None:
        """LoraLoader's text-encoder half, not applied: a change to the picture unless its
        strength_clip is 0."""
        if node.class_type != "LoraLoader" or node.id in self.changes:
            return
        if self.number(node, "strength_clip", 1.0) != 0:
            reason = "the LoRA's text-encoder half (strength_clip) is not applied here"
            self.changes[node.id] = Change(node.id, node.class_type, reason)
            self.warn(self.changes[node.id].warning())

    # -- text and conditioning ------------------------------------------------------------

    def text_source(self, node_id: str, text: str, where: str) -> Port:
        return self.add(node_id, "input/text", {"text": text}, {}, where)

    def primitive_string(self, node: ComfyNode, slot: int) -> Value | None:
        port = self.text_source(f"c{node.id}", self.text(node, "value"), describe(node))
        return Value(PortKind.TEXT, port, node.id)

    def clip_text_encode(self, node: ComfyNode, slot: int) -> Value | None:
        where = describe(node)
        encoder = self.input_value(node, "clip", PortKind.TEXT_ENCODER)
        raw_text = node.inputs.get("text")
        prompt: Port | None
        if isinstance(raw_text, Link):
            wired = self.value(raw_text, PortKind.TEXT, node, "text")
            prompt = wired.port if wired is not None else None
            if prompt is None:
                self.warn(
                    f"{where}: its text comes from a node that was skipped; the prompt is empty"
                )
                prompt = self.text_source(f"c{node.id}_text", "", where)
        else:
            text = raw_text if isinstance(raw_text, str) else ""
            prompt = self.text_source(f"c{node.id}_text", text, where)
        encoder_port = encoder.port if encoder is not None else None
        port = self.add(
            f"c{node.id}",
            "encode/text",
            {},
            {"text_encoder": encoder_port, "prompt": prompt},
            where,
        )
        return Value(PortKind.CONDITIONING, port, node.id, encoder=encoder_port)

    def conditioning_zero_out(self, node: ComfyNode, slot: int) -> Value | None:
        # Mapped where it is used: `sample` drops a zeroed negative when there is no guidance.
        return Value(PortKind.CONDITIONING, None, node.id)

    def empty_prompt(self, zeroed: Value, encoder: Port | None, where: str) -> Port:
        text = self.text_source(f"c{zeroed.origin}_text", "", where)
        return self.add(
            f"c{zeroed.origin}", "encode/text", {}, {"text_encoder": encoder, "prompt": text}, where
        )

    # -- latents, sampling, decoding --------------------------------------------------------

    def empty_latent(self, node: ComfyNode, slot: int) -> Value | None:
        side = 1024 if node.class_type == "EmptySD3LatentImage" else 512
        params = {
            "width": self.whole(node, "width", side),
            "height": self.whole(node, "height", side),
            "batch": self.whole(node, "batch_size", 1),
        }
        port = self.add(f"c{node.id}", "latent/empty", params, {}, describe(node))
        return Value(PortKind.LATENT, port, node.id)

    def model_sampling(self, node: ComfyNode, slot: int) -> Value | None:
        model = self.input_value(node, "model", PortKind.MODEL)
        if model is None:
            return None
        default = 1.73 if node.class_type == "ModelSamplingAuraFlow" else 3.0  # ComfyUI's
        return replace(model, shift=self.number(node, "shift", default), shift_node=node)

    def shift_not_carried(self, model: Value, where: str) -> None:
        """`sample` runs a model at its own flow shift, so a ModelSampling node that sets another
        one changes what ComfyUI would render: say so, unless it is the model's own."""
        shift = model.shift
        if shift is None:
            return
        own = self.model_shift(model)
        if own is not None and math.isclose(shift, own):
            return
        known = f" ({own:g} for this model)" if own is not None else ""
        reason = (
            f"the model's sampling shift {shift:g} is not carried over; `sample` uses the "
            f"model's own flow shift{known}"
        )
        if model.shift_node is not None:
            self.substituted(model.shift_node, reason)
        else:
            self.warn(f"{where}: {reason}")

    def model_shift(self, model: Value) -> float | None:
        """The flow shift of the diffusion model a `model` value was loaded from, as the model
        families this server runs know it."""
        draft = None if model.port is None else self.drafts.get(model.port.node)
        while draft is not None and draft.type in MODEL_WRAPPERS:  # the model it adapts
            draft = self.drafts.get(draft.inputs["model"][0].node)
        if self.facts is None or draft is None or draft.type != "load/diffusion-model":
            return None
        return self.facts.flow_shift(str(draft.params.get("file", "")))

    def ksampler(self, node: ComfyNode, slot: int) -> Value | None:
        return self.sample(node, seed_name="seed", denoise=self.number(node, "denoise", 1.0))

    def ksampler_advanced(self, node: ComfyNode, slot: int) -> Value | None:
        steps = self.whole(node, "steps", 20)
        start = self.whole(node, "start_at_step", 0)
        end = self.whole(node, "end_at_step", 10000)
        # No pass-through here: handing on the unsampled latent would decode to nothing useful.
        if self.text(node, "add_noise", "enable") == "disable":
            self.skip(node, "it samples without adding noise, which `sample` cannot do")
            return None
        if start > 0 or end < steps:
            self.skip(
                node,
                f"it runs steps {start}..{min(end, steps)} of {steps}; `sample` runs "
                "a whole schedule",
            )
            return None
        return self.sample(node, seed_name="noise_seed", denoise=1.0)

    def sample(self, node: ComfyNode, *, seed_name: str, denoise: float) -> Value | None:
        where = describe(node)
        model = self.input_value(node, "model", PortKind.MODEL)
        positive = self.input_value(node, "positive", PortKind.CONDITIONING)
        negative = self.input_value(node, "negative", PortKind.CONDITIONING, optional=True)
        latent = self.input_value(node, "latent_image", PortKind.LATENT)
        descriptor = self.descriptors["sample"]
        cfg = float(self.fit("sample", "cfg", self.number(node, "cfg", 8.0), where))
        params: dict[str, Any] = {
            "steps": self.whole(node, "steps", 20),
            "cfg": cfg,
            "sampler": self.select(node, "sampler_name", "sampler", "euler"),
            "scheduler": self.select(node, "scheduler", "scheduler", "simple"),
            "seed": self.whole(node, seed_name, 0),
            "denoise": denoise,
        }
        if model is not None and model.shift is not None:
            if descriptor.param("shift") is not None:
                params["shift"] = model.shift
            else:
                self.shift_not_carried(model, where)
        encoder = positive.encoder if positive is not None else None
        positive_port = positive.port if positive is not None else None
        if positive is not None and positive_port is None:
            self.warn(f"{where}: a zeroed positive conditioning became an empty prompt")
            positive_port = self.empty_prompt(positive, encoder, where)
        negative_port = negative.port if negative is not None else None
        if negative is not None and negative_port is None and cfg > 1.0:
            # With guidance, ComfyUI contrasts against zeros; an empty prompt is our nearest.
            self.warn(
                f"{where}: the zeroed negative (ConditioningZeroOut) became an empty "
                f"negative prompt, as cfg {cfg:g} uses guidance"
            )
            negative_port = self.empty_prompt(negative, encoder, where)
        # cfg 1 means no guidance: a zeroed negative is never used, so it is left off.
        port = self.add(
            f"c{node.id}",
            "sample",
            params,
            {
                "model": model.port if model is not None else None,
                "positive": positive_port,
                "negative": negative_port,
                "latent": latent.port if latent is not None else None,
            },
            where,
        )
        return Value(PortKind.LATENT, port, node.id)

    def select(self, node: ComfyNode, comfy_name: str, param: str, fallback: str) -> str:
        """The node's `param` for the workflow's `comfy_name`: the same name, or a 422."""
        spec = self.descriptors["sample"].param(param)
        default = spec.default if spec is not None and isinstance(spec.default, str) else fallback
        wanted = self.text(node, comfy_name, default)
        allowed = list(spec.options) if spec is not None else []
        return exact_name(param, wanted, allowed, describe(node))

    def vae_decode(self, node: ComfyNode, slot: int) -> Value | None:
        where = describe(node)
        if node.class_type != "VAEDecode":
            self.warn(f"{where}: decoded as a plain VAEDecode; the device policy decides tiling")
        latent = self.input_value(node, "samples", PortKind.LATENT)
        vae = self.input_value(node, "vae", PortKind.VAE)
        port = self.add(
            f"c{node.id}",
            "vae/decode",
            {},
            {"vae": vae.port if vae else None, "latent": latent.port if latent else None},
            where,
        )
        return Value(PortKind.IMAGE, port, node.id)

    def vae_encode(self, node: ComfyNode, slot: int) -> Value | None:
        vae = self.input_value(node, "vae", PortKind.VAE)
        image = self.input_value(node, "pixels", PortKind.IMAGE)
        port = self.add(
            f"c{node.id}",
            "vae/encode",
            {},
            {"vae": vae.port if vae else None, "image": image.port if image else None},
            describe(node),
        )
        return Value(PortKind.LATENT, port, node.id)

    def load_image(self, node: ComfyNode, slot: int) -> Value | None:
        """LoadImage: its IMAGE an `input/image`, its MASK an `input/mask` (`inpaint.py`)."""
        if slot == 1:
            return inpaint.image_alpha(self, node)
        port = self.add(
            f"c{node.id}", "input/image", {"asset": self.image_asset(node)}, {}, describe(node)
        )
        return Value(PortKind.IMAGE, port, node.id)

    def image_asset(self, node: ComfyNode) -> dict[str, str]:
        """The asset param for a loader's `image` file (empty, with a warning, when it is not
        an uploaded asset here)."""
        name = self.text(node, "image")
        asset = self.asset_for(name)
        if asset is None:
            self.warn(
                f"{describe(node)}: image {name!r} is not an uploaded asset here; upload it "
                "(POST /v1/assets) and set this node's asset"
            )
            asset = ""
        return {"ref": "asset", "id": asset}

    def asset_for(self, name: str) -> str | None:
        # ComfyUI annotates names from its other folders: "x.png [output]".
        bare = name.rsplit(" [", 1)[0] if name.endswith("]") else name
        for candidate in (name, bare, bare.replace("\\", "/").rsplit("/", 1)[-1]):
            if candidate in self.assets:
                return self.assets[candidate]
        if bare.startswith("sha256-"):  # already one of our asset ids
            return bare
        return None

    # -- nodes that declare the ComfyUI class they stand in for -----------------------------

    def stand_in(self, node: ComfyNode, slot: int, descriptor: NodeDescriptor) -> Value | None:
        """Map `node` onto the served node declaring its class: links onto ports and widget
        values onto params, by name (or as the declaration renames them), outputs by slot."""
        where = describe(node)
        if slot >= len(descriptor.outputs):
            self.warn(f"{where}: output {slot} has no equivalent on {descriptor.type}")
            return None
        declared = cast(Mapping[str, Any], descriptor.extra["comfy"])
        ours_to_comfy = {
            ours: comfy
            for key in ("inputs", "params")
            for comfy, ours in cast(Mapping[str, str], declared.get(key, {})).items()
        }
        inputs: dict[str, Port | None] = {}
        for port in descriptor.inputs:
            value = self.input_value(
                node, ours_to_comfy.get(port.name, port.name), port.kind, optional=port.optional
            )
            inputs[port.name] = value.port if value is not None else None
        params = {
            spec.name: self.literal(node, ours_to_comfy.get(spec.name, spec.name))
            for spec in descriptor.params
        }
        self.add(f"c{node.id}", descriptor.type, params, inputs, where)
        output = descriptor.outputs[slot]
        return Value(output.kind, Port(f"c{node.id}", output.name), node.id)

    # -- the whole workflow ---------------------------------------------------------------

    def run(self) -> str | None:
        """Map everything that feeds an image output; return the target node id, if any."""
        nodes = sorted(self.workflow.nodes.values(), key=lambda n: node_sort_key(n.id))
        sinks = [n for n in nodes if n.class_type == SAVE_IMAGE]
        sinks += [n for n in nodes if n.class_type == PREVIEW_IMAGE]
        targets: list[tuple[ComfyNode, str]] = []
        for sink in sinks:
            self._used.add(sink.id)
            image = self.input_value(sink, "images", PortKind.IMAGE)
            if image is not None and image.port is not None:
                targets.append((sink, image.port.node))
        if sinks and targets and targets[0][0] is not sinks[0]:
            self.warn(
                f"{describe(sinks[0])} could not be mapped; the target is the image "
                f"{describe(targets[0][0])} shows"
            )
        if not sinks:
            for decoder in (n for n in nodes if n.class_type in DECODERS):
                image = self.value(Link(decoder.id, 0), PortKind.IMAGE, decoder, "images")
                if image is not None and image.port is not None:
                    self.warn(
                        "the workflow has no SaveImage or PreviewImage node; the target "
                        f"is the image of {describe(decoder)}"
                    )
                    targets.append((decoder, image.port.node))
                    break
        for node in nodes:
            if node.id in self._used or node.id in self.skipped:
                continue
            known = node.class_type in self.HANDLERS or node.class_type in self.declared
            if known or node.class_type in (SAVE_IMAGE, PREVIEW_IMAGE):
                self.skip(node, UNUSED)
            elif node.class_type in CONSTANT_TYPES:
                self.skip(node, "its value is not used by any mapped node")
            else:
                self.skip(
                    node, f"unknown node type {node.class_type!r}: Inline Core has no equivalent"
                )
        return targets[0][1] if targets else None

    def graph(self) -> Graph:
        return Graph(
            nodes=tuple(
                Node(
                    id=d.id,
                    type=d.type,
                    params=d.params,
                    inputs={
                        k: tuple(Edge(p.node, p.output) for p in ports)
                        for k, ports in d.inputs.items()
                    },
                    list_inputs=frozenset(k for k, ports in d.inputs.items() if len(ports) > 1),
                )
                for d in self.drafts.values()
            )
        )

    def skipped_list(self) -> list[Skipped]:
        return sorted(self.skipped.values(), key=lambda s: node_sort_key(s.node_id))


Mapper.HANDLERS = {
    "CheckpointLoaderSimple": Mapper.checkpoint_loader,
    "UNETLoader": Mapper.unet_loader,
    "CLIPLoader": Mapper.clip_loader,
    "DualCLIPLoader": Mapper.dual_clip_loader,
    "VAELoader": Mapper.vae_loader,
    "LoraLoaderModelOnly": Mapper.lora_loader,
    "LoraLoader": Mapper.lora_loader,
    **controls.HANDLERS,
    **inpaint.HANDLERS,
    "CLIPTextEncode": Mapper.clip_text_encode,
    "ConditioningZeroOut": Mapper.conditioning_zero_out,
    "EmptyLatentImage": Mapper.empty_latent,
    "EmptySD3LatentImage": Mapper.empty_latent,
    "ModelSamplingAuraFlow": Mapper.model_sampling,
    "ModelSamplingSD3": Mapper.model_sampling,
    "KSampler": Mapper.ksampler,
    "KSamplerAdvanced": Mapper.ksampler_advanced,
    "VAEDecode": Mapper.vae_decode,
    "VAEDecodeTiled": Mapper.vae_decode,
    "VAEEncode": Mapper.vae_encode,
    "LoadImage": Mapper.load_image,
    "PrimitiveString": Mapper.primitive_string,
    "PrimitiveStringMultiline": Mapper.primitive_string,
}
