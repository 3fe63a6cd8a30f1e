"""A workflow for a family that serves no low-level vocabulary, collapsed onto its own node.

The family's recipe (`contract.comfy_recipe.OwnNode`) says what of ComfyUI's template chain goes
where; this reads the chain back from its output: a sink (SaveVideo through CreateVideo, say) <-
VAEDecode <- KSampler (seed, steps, cfg) <- the model's way (ModelSampling* and the like, whose
widgets become params; LoRA loaders; the UNETLoader, the node's `model`), two CLIPTextEncode
prompts (through the classes the recipe passes conditioning through), and a latent class (its
widgets the node's size params; its start image the node's image input). LoraLoaderModelOnly and
LoraLoader nodes on the model's way become `input/lora` nodes on the node's `loras` input, in
the workflow's order (LoraLoader's text-encoder half is listed as a change to the picture). The
recipe's part loaders' files (VAELoader, CLIPLoader) become the node's pickers, and the
UNETLoader's its model: a file not here stays named, so the graph is refused at submit
(`model_missing`) until the import's models map it. What it renders otherwise than the workflow
(another sampler or scheduler, a denoise below 1, a batch) is said in the warnings.

What data does not reach, a family's recipe names a subclass of `Collapse` for (its `reader`):
Wan's two KSamplerAdvanced stages and its CLIP-vision chain (`families/wan/comfy_reader.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from inline_core.contract.comfy_recipe import OwnNode
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.images import load_image
from inline_core.importer.loaders import lora_clip_half
from inline_core.importer.mapper import Mapper
from inline_core.importer.recognise import UnsupportedFamily
from inline_core.importer.samplers import exact_name
from inline_core.importer.values import Port, describe
from inline_core.importer.workflow import ComfyNode, Link, node_sort_key

LORA_LOADERS = ("LoraLoaderModelOnly", "LoraLoader")


@dataclass(frozen=True)
class Sampling:
    """What the node samples: from one KSampler (or a family's reader's stages)."""

    first: ComfyNode  # the sampler whose prompts, latent and model are read
    last: ComfyNode | None  # a last stage on another model (None: one sampler)
    seed: int
    steps: int
    guidance: float
    extra: dict[str, Any] = field(default_factory=dict[str, Any])  # more of the node's params


class Collapse:
    """Reads one output's chain into one node of `descriptor`, through `mapper`'s bookkeeping,
    as the family's `recipe` says."""

    SAMPLERS: ClassVar[tuple[str, ...]] = ("KSampler",)  # the sampler classes it reads
    # The classes that load the model: (the widget naming its file, the file's category).
    MODEL_LOADERS: ClassVar[dict[str, tuple[str, str]]] = {
        "UNETLoader": ("unet_name", "diffusion_models")
    }

    def __init__(
        self, mapper: Mapper, family: str, descriptor: NodeDescriptor, refusal: str, recipe: OwnNode
    ) -> None:
        self.mapper = mapper
        self.family = family
        self.descriptor = descriptor
        self.refusal = refusal  # why a workflow that ends at none of the sinks is refused
        self.recipe = recipe
        self.nodes = mapper.workflow.nodes
        self.read: set[str] = set()
        self.loras: list[Port] = []  # the `input/lora` nodes of the model's way, in order
        self.parts: dict[str, tuple[ComfyNode, str]] = {}  # param -> (its loader, the file)
        self.images: dict[str, tuple[str, Port]] = {}  # our input -> (its LoadImage, its port)

    # -- reading the chain ---------------------------------------------------------------------

    def source(self, node: ComfyNode, name: str, *, optional: bool = False) -> ComfyNode | None:
        """The node on `node`'s input `name` (marked read); refuses a chain it cannot render."""
        raw = node.inputs.get(name)
        found = self.nodes.get(raw.node) if isinstance(raw, Link) else None
        if found is None:
            if not optional:
                raise UnsupportedNode(
                    f"{describe(node)}: its {name!r} input is not connected to a node Inline "
                    f"Core can read into {self.descriptor.type}"
                )
            return None
        self.read.add(found.id)
        return found

    def required(self, node: ComfyNode, name: str) -> ComfyNode:
        found = self.source(node, name)
        assert found is not None  # `source` refuses a missing required input
        return found

    def expect(self, node: ComfyNode, *types: str) -> None:
        if node.class_type not in types:
            raise UnsupportedNode(
                f"{describe(node)} is not one of {', '.join(types)}: only ComfyUI's "
                f"{self.descriptor.title} template chain imports onto {self.descriptor.type}"
            )

    def through(self, node: ComfyNode, name: str) -> ComfyNode:
        """A prompt's node, through the classes that pass its conditioning on (the recipe's)."""
        while node.class_type in self.recipe.conditioning_through:
            node = self.required(node, name)
        return node

    def prompt(self, sampler: ComfyNode, name: str) -> str:
        """The text of the sampler's prompt `name`; the positive one's images, read."""
        node = self.through(self.required(sampler, name), name)
        if node.class_type == "ConditioningZeroOut":
            return ""
        self.expect(node, *self.recipe.encoders)
        encoder = self.recipe.encoders[node.class_type]
        clip = self.source(node, encoder.clip, optional=True)
        if clip is not None:  # a LoRA's: read on its way, through to its own loader
            self.part(self.through_loras(clip, encoder.clip))
        vae = self.source(node, "vae", optional=True)
        if vae is not None and encoder.images:
            self.part(vae)
        for comfy, ours in encoder.images.items():
            image = self.source(node, comfy, optional=True)
            earlier = self.images.get(ours)
            if image is None or (earlier is not None and earlier[0] == image.id):
                continue
            if earlier is not None or name != "positive":
                raise UnsupportedNode(
                    f"{describe(node)}: its {comfy!r} is another image than the positive "
                    f"prompt's; {self.descriptor.type} reads one image as its {ours!r}"
                )
            self.expect(image, "LoadImage")
            value = load_image(self.mapper, image, 0)
            if value is not None and value.port is not None:
                self.images[ours] = (image.id, value.port)
        return self.mapper.text(node, encoder.text)

    def through_loras(self, node: ComfyNode, name: str) -> ComfyNode:
        """The loader behind a chain of LoraLoaders on their `name` input."""
        while node.class_type in LORA_LOADERS:
            found = self.source(node, name, optional=True)
            if found is None:
                return node
            node = found
        return node

    def part(self, loader: ComfyNode) -> None:
        """A part loader's file (a VAELoader's, a CLIPLoader's), one of the node's pickers: the
        workflow's choice, rendered with or refused at submit (`model_missing`), never another."""
        found = self.recipe.parts.get(loader.class_type)
        if found is None:
            self.expect(loader, *self.recipe.parts)
            return
        wanted = self.mapper.text(loader, found.widget)
        earlier = self.parts.get(found.param)
        if earlier is not None and earlier[1] != wanted:
            raise UnsupportedNode(
                f"{describe(loader)} loads {wanted!r}, and {describe(earlier[0])} "
                f"{earlier[1]!r}: {self.descriptor.type} renders with one {found.param}"
            )
        self.parts.setdefault(found.param, (loader, wanted))

    def part_params(self, node_id: str) -> dict[str, str]:
        """The node's part pickers, as the catalog names the workflow's files."""
        out: dict[str, str] = {}
        for param, (loader, wanted) in self.parts.items():
            category = self.recipe.parts[loader.class_type].category
            out[param] = self.mapper.model_file(node_id, category, wanted, describe(loader))
        return out

    # -- the whole chain -----------------------------------------------------------------------

    def run(self) -> str:
        m, names = self.mapper, self.recipe.names
        ordered = sorted(self.nodes.values(), key=lambda n: node_sort_key(n.id))
        sink = next((n for n in ordered if n.class_type in self.recipe.sinks), None)
        if sink is None:
            raise UnsupportedFamily(self.refusal)
        self.read.add(sink.id)
        params: dict[str, Any] = {}
        frames = self.sink(sink, params)
        self.expect(frames, "VAEDecode", "VAEDecodeTiled")
        vae = self.source(frames, "vae", optional=True)
        if vae is not None:
            self.part(vae)
        sampler = self.required(frames, "samples")
        self.expect(sampler, *self.SAMPLERS)
        sampling = self.sampling(sampler)
        first, node_id, where = sampling.first, f"c{sampler.id}", describe(sampler)
        positive = self.prompt(first, "positive")  # first: its images are the node's
        params.update(
            {
                names.seed: sampling.seed,
                names.steps: sampling.steps,
                names.guidance: sampling.guidance,
                **sampling.extra,
            }
        )
        self.negative(first, params)
        self.sampling_notes(first)
        prompt = m.text_source(f"{node_id}_prompt", positive, where)
        params.update(self.model(sampling, node_id))
        image = self.latent(first, params)
        params.update(self.part_params(node_id))
        inputs = {names.prompt: prompt, names.image: image, names.loras: tuple(self.loras)}
        inputs.update({ours: port for ours, (_node, port) in self.images.items()})
        m.add(node_id, self.descriptor.type, params, inputs, where)
        for node in ordered:
            if node.id not in self.read and node.id not in m.skipped and not m.used(node.id):
                m.skip(node, f"not on the chain to {describe(sink)}")
        return node_id

    def negative(self, sampler: ComfyNode, params: dict[str, Any]) -> None:
        """The negative prompt into `params`; a node that takes none (it guides against the
        empty prompt) refuses one with text rather than drop it."""
        text = self.prompt(sampler, "negative")
        name = self.recipe.names.negative_prompt
        if name is not None:
            params[name] = text
        elif text.strip():
            raise UnsupportedNode(
                f"{describe(sampler)}: its negative prompt {text[:60]!r} is not offered; "
                f"{self.descriptor.type} guides against the empty prompt (clear the text)"
            )

    def sink(self, sink: ComfyNode, params: dict[str, Any]) -> ComfyNode:
        """The sink's params (its own widgets', a node between it and the decoder's, fixed
        ones) into `params`; the node its frames come from."""
        m = self.mapper
        spec = self.recipe.sinks[sink.class_type]
        params.update(spec.fixed)
        for widget, param in spec.params.items():
            params[param] = m.literal(sink, widget)
        if spec.note is not None:
            m.warn(f"{describe(sink)}: {spec.note}")
        frames = self.required(sink, spec.frames)
        if spec.through is not None:
            self.expect(frames, spec.through)
            for widget, param in spec.through_params.items():
                params[param] = m.literal(frames, widget)
            frames = self.required(frames, spec.through_frames)
        return frames

    def sampling(self, sampler: ComfyNode) -> Sampling:
        """What `sampler` samples (a family's reader reads more sampler classes)."""
        m, defaults = self.mapper, self.recipe.sampler_defaults
        return Sampling(
            sampler,
            None,
            m.whole(sampler, "seed", int(defaults.get("seed", 0))),
            m.whole(sampler, "steps", int(defaults.get("steps", 20))),
            m.number(sampler, "cfg", defaults.get("cfg", 1.0)),
        )

    def sampling_notes(self, sampler: ComfyNode) -> None:
        """What the node samples otherwise than `sampler`: each listed as changing the picture.
        A sampler the node does not offer is refused, naming the closest: none is swapped in."""
        m, offered = self.mapper, self.recipe.samplers
        exact_name("sampler", m.text(sampler, "sampler_name", "euler"), offered, describe(sampler))
        schedule = m.text(sampler, "scheduler", "simple")
        if schedule != "simple":
            m.substituted(
                sampler,
                f"scheduler {schedule!r} is not offered; the model's flow schedule is used",
            )
        denoise = m.number(sampler, "denoise", 1.0)
        if denoise < 1.0:
            m.substituted(sampler, f"denoise {denoise:g} is not offered; the whole schedule runs")

    def model_way(self, sampler: ComfyNode) -> tuple[dict[str, Any], list[ComfyNode], ComfyNode]:
        """A sampler's model chain: the params its model nodes set (the one nearest the sampler
        wins, as in ComfyUI), its LoRA loaders (the first applied first) and its UNETLoader."""
        values: dict[str, Any] = {}
        node = self.required(sampler, "model")
        adapters: list[ComfyNode] = []
        model_nodes = self.recipe.model_nodes
        while node.class_type in model_nodes or node.class_type in LORA_LOADERS:
            if node.class_type in LORA_LOADERS:
                adapters.append(node)
            else:
                for widget, param in model_nodes[node.class_type].items():
                    if param not in values and self.mapper.literal(node, widget) is not None:
                        values[param] = self.mapper.number(node, widget, 0.0)
            node = self.required(node, "model")
        self.expect(node, *self.MODEL_LOADERS)
        return values, adapters[::-1], node

    def model(self, sampling: Sampling, node_id: str) -> dict[str, Any]:
        """The model's way into params (the model, what its model nodes set) and `loras`."""
        values, adapters, node = self.model_way(sampling.first)
        self.loras = [self.lora(n) for n in adapters]
        return {**values, self.recipe.names.model: self.model_file(node, node_id)}

    def model_file(self, loader: ComfyNode, node_id: str) -> str:
        """The UNETLoader's file: not here, the graph names it still and is refused at submit
        (`model_missing`) until the import's models map it; the node never picks one itself."""
        m = self.mapper
        widget, category = self.MODEL_LOADERS[loader.class_type]
        return m.model_file(node_id, category, m.text(loader, widget), describe(loader))

    def lora(self, node: ComfyNode, expert: str | None = None) -> Port:
        """One LoRA loader of the model's way as an `input/lora` node (`expert`: the stage's
        model of a pair, high or low; None: both)."""
        m = self.mapper
        lora_clip_half(m, node)
        return m.loader(
            f"c{node.id}",
            "input/lora",
            m.text(node, "lora_name"),
            describe(node),
            param="name",
            params={"strength": m.number(node, "strength_model", 1.0), "expert": expert},
        )

    def latent(self, sampler: ComfyNode, params: dict[str, Any]) -> Port | None:
        """The latent's params into `params`; the start image's port, if it has one."""
        m = self.mapper
        node = self.required(sampler, "latent_image")
        self.expect(node, *self.recipe.latents)
        spec = self.recipe.latents[node.class_type]
        for widget, param in spec.params.items():
            params[param] = m.whole(node, widget, spec.defaults.get(widget, 0))
        if m.whole(node, "batch_size", 1) != 1:
            m.warn(f"{describe(node)}: a batch is not offered; one renders")
        vae = self.source(node, "vae", optional=True)
        if vae is not None:
            self.part(vae)
        start = None if spec.image is None else self.source(node, spec.image, optional=True)
        self.latent_inputs(node, start)
        if start is None:
            return None
        self.expect(start, "LoadImage")
        value = load_image(m, start, 0)
        return None if value is None else value.port

    def latent_inputs(self, latent: ComfyNode, start: ComfyNode | None) -> None:
        """The latent node's other inputs, read (none by default; a reader's hook)."""
