"""A workflow for a family that serves no low-level vocabulary, collapsed onto its own node.

ComfyUI's Wan templates (Wan 2.1 text-to-video, Wan 2.2 5B text/image-to-video) are one chain,
read back from their output: SaveVideo <- CreateVideo (fps) or SaveAnimatedWEBP (fps) <- VAEDecode
<- KSampler (seed, steps, cfg) <- ModelSamplingSD3 (shift) <- UNETLoader (the model), two
CLIPTextEncode prompts, and a latent: EmptyHunyuanLatentVideo or Wan22ImageToVideoLatent (width,
height, length; its optional start image is the first frame). That chain is the node's params and
inputs by name: `prompt` and `image` in; `negative_prompt`, `width`, `height`, `frames`, `fps`,
`steps`, `guidance` (ComfyUI's cfg counts as diffusers' guidance scale does), `shift`, `seed`,
`model`, `format`. LoraLoaderModelOnly and LoraLoader nodes on the model's way become `input/lora`
nodes on the node's `loras` input, in the workflow's order (LoraLoader's text-encoder half is
listed as a change to the picture). The CLIPLoader's and VAELoader's files become the node's
`text_encoder` and `vae`, and the UNETLoader's its `model`: a file not here stays named, so
the graph is refused at submit (`model_missing`) until the import's models map it.
What it renders otherwise than the workflow (another sampler or scheduler, a denoise below 1, a
batch, WebP) is said in the warnings. Wan 2.2 A14B's two KSamplerAdvanced stages are read in
`two_stage.py`, Wan 2.1's CLIP-vision image-to-video chain (`WanImageToVideo`) in `wan_i2v.py`.
"""

from __future__ import annotations

from typing import Any

from inline_core.graph.descriptor import NodeDescriptor
from inline_core.importer import two_stage, wan_i2v
from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.mapping import Mapper
from inline_core.importer.recognise import UnsupportedFamily
from inline_core.importer.values import Port, describe
from inline_core.importer.workflow import ComfyNode, Link, node_sort_key

SINKS = {"SaveVideo": "video", "SaveAnimatedWEBP": "images"}  # output node: its frames input
LATENTS = ("EmptyHunyuanLatentVideo", "Wan22ImageToVideoLatent", wan_i2v.LATENT)
SAMPLERS = ("uni_pc", "uni_pc_bh2")  # what the node samples with: UniPC
# The loaders whose file becomes one of the node's pickers: (ComfyUI class, its widget, our
# param, our category).
PART_LOADERS = {
    "VAELoader": ("vae_name", "vae", "vae"),
    "CLIPLoader": ("clip_name", "text_encoder", "text_encoders"),
}
LORA_LOADERS = ("LoraLoaderModelOnly", "LoraLoader")


class Collapse:
    """Reads one output's chain into one node of `descriptor`, through `mapper`'s bookkeeping."""

    def __init__(
        self, mapper: Mapper, family: str, descriptor: NodeDescriptor, refusal: str
    ) -> None:
        self.mapper = mapper
        self.family = family
        self.descriptor = descriptor
        self.refusal = refusal  # why a workflow that saves no video is refused
        self.nodes = mapper.workflow.nodes
        self.read: set[str] = set()
        self.loras: list[Port] = []  # the `input/lora` nodes of the model's way, in order
        self.parts: dict[str, tuple[ComfyNode, str]] = {}  # param -> (its loader, the file)

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

    def expect(self, node: ComfyNode, *types: str) -> None:
        if node.class_type not in types:
            raise UnsupportedNode(
                f"{describe(node)} is not one of {', '.join(types)}: only ComfyUI's "
                f"{self.descriptor.title} template chain imports onto {self.descriptor.type}"
            )

    def prompt(self, sampler: ComfyNode, name: str) -> str:
        node = self.source(sampler, name)
        assert node is not None
        node = wan_i2v.through(self, node, name)
        if node.class_type == "ConditioningZeroOut":
            return ""
        self.expect(node, "CLIPTextEncode")
        clip = self.source(node, "clip", optional=True)
        if clip is not None:  # a LoRA's: read on its way, through to its own loader
            self.part(self.through_loras(clip, "clip"))
        return self.mapper.text(node, "text")

    def through_loras(self, node: ComfyNode, name: str) -> ComfyNode:
        """The loader behind a chain of LoraLoaders on their `name` input."""
        while node.class_type in LORA_LOADERS:
            found = self.source(node, name, optional=True)
            if found is None:
                return node
            node = found
        return node

    def part(self, loader: ComfyNode) -> None:
        """A VAELoader's or CLIPLoader's file, the node's `vae` or `text_encoder`: the workflow's
        choice, rendered with or refused at submit (`model_missing`), never another file."""
        found = PART_LOADERS.get(loader.class_type)
        if found is None:
            self.expect(loader, *PART_LOADERS)
            return
        widget, param, _category = found
        wanted = self.mapper.text(loader, widget)
        earlier = self.parts.get(param)
        if earlier is not None and earlier[1] != wanted:
            raise UnsupportedNode(
                f"{describe(loader)} loads {wanted!r}, and {describe(earlier[0])} "
                f"{earlier[1]!r}: {self.descriptor.type} renders with one {param}"
            )
        self.parts.setdefault(param, (loader, wanted))

    def part_params(self, node_id: str) -> dict[str, str]:
        """The node's `vae` and `text_encoder`, as the catalog names the workflow's files."""
        out: dict[str, str] = {}
        for param, (loader, wanted) in self.parts.items():
            category = PART_LOADERS[loader.class_type][2]
            out[param] = self.mapper.model_file(node_id, category, wanted, describe(loader))
        return out

    def run(self) -> str:
        m = self.mapper
        ordered = sorted(self.nodes.values(), key=lambda n: node_sort_key(n.id))
        sink = next((n for n in ordered if n.class_type in SINKS), None)
        if sink is None:
            raise UnsupportedFamily(self.refusal)
        self.read.add(sink.id)
        params: dict[str, Any] = {"format": "mp4", "fps": None}
        frames = self.source(sink, SINKS[sink.class_type])
        assert frames is not None
        if sink.class_type == "SaveAnimatedWEBP":
            params["format"] = "png"
            params["fps"] = m.whole(sink, "fps", 16)
            m.warn(f"{describe(sink)}: WebP is not offered; the take is a lossless animated PNG")
        else:
            self.expect(frames, "CreateVideo")
            params["fps"] = m.whole(frames, "fps", 16)
            frames = self.source(frames, "images")
            assert frames is not None
        self.expect(frames, "VAEDecode", "VAEDecodeTiled")
        vae = self.source(frames, "vae", optional=True)
        if vae is not None:
            self.part(vae)
        sampler = self.source(frames, "samples")
        assert sampler is not None
        self.expect(sampler, "KSampler", two_stage.ADVANCED)
        sampling = two_stage.read(self, sampler)
        first, node_id, where = sampling.first, f"c{sampler.id}", describe(sampler)
        params.update(
            seed=sampling.seed,
            steps=sampling.steps,
            guidance=sampling.guidance,
            guidance_2=sampling.guidance_2,
            switch_step=sampling.switch_step,
            negative_prompt=self.prompt(first, "negative"),
        )
        self.sampling_notes(first)
        prompt = m.text_source(f"{node_id}_prompt", self.prompt(first, "positive"), where)
        params.update(self.model(sampling, node_id))
        image = self.latent(first, params)
        params.update(self.part_params(node_id))
        inputs = {"prompt": prompt, "image": image, "loras": tuple(self.loras)}
        m.add(node_id, self.descriptor.type, params, inputs, where)
        for node in ordered:
            if node.id not in self.read and node.id not in m.skipped and not m.used(node.id):
                m.skip(node, "not on the chain to the saved video")
        return node_id

    def sampling_notes(self, sampler: ComfyNode) -> None:
        """What the node samples otherwise than `sampler`: each listed as changing the picture."""
        m = self.mapper
        name = m.text(sampler, "sampler_name", "uni_pc")
        if name not in SAMPLERS:
            m.substituted(
                sampler,
                f"sampler {name!r} is not offered; {self.descriptor.type} samples with UniPC",
            )
        schedule = m.text(sampler, "scheduler", "simple")
        if schedule != "simple":
            m.substituted(
                sampler,
                f"scheduler {schedule!r} is not offered; the model's flow schedule is used",
            )
        denoise = m.number(sampler, "denoise", 1.0)
        if denoise < 1.0:
            m.substituted(sampler, f"denoise {denoise:g} is not offered; the whole schedule runs")

    def model_way(self, sampler: ComfyNode) -> tuple[float | None, list[ComfyNode], ComfyNode]:
        """A sampler's model chain: its shift, its LoRA loaders (the first applied first) and
        its UNETLoader."""
        shift: float | None = None
        node = self.source(sampler, "model")
        assert node is not None
        adapters: list[ComfyNode] = []
        while node.class_type == "ModelSamplingSD3" or node.class_type in LORA_LOADERS:
            if node.class_type == "ModelSamplingSD3":
                shift = self.mapper.number(node, "shift", 0.0) or None
            else:
                adapters.append(node)
            node = self.source(node, "model")
            assert node is not None
        self.expect(node, "UNETLoader")
        return shift, adapters[::-1], node

    def model(self, sampling: two_stage.Sampling, node_id: str) -> dict[str, Any]:
        m = self.mapper
        shift, adapters, node = self.model_way(sampling.first)
        pair = sampling.last is not None  # the first stage's LoRAs adapt the high-noise expert
        self.loras = [self.lora(n, "high" if pair else None) for n in adapters]
        if sampling.last is not None:  # the low-noise stage: its own shift and LoRAs
            shift_2, adapters_2, low = self.model_way(sampling.last)
            if low.id == node.id or m.text(low, "unet_name") == m.text(node, "unet_name"):
                raise UnsupportedNode(
                    f"{describe(sampling.last)}: both stages sample {describe(node)}'s model; two "
                    "stages import only as Wan 2.2 A14B's two experts, each on its own "
                    "UNETLoader (the high-noise file first)"
                )
            two_stage.shifts_note(self, sampling.last, shift, shift_2)
            m.skip(low, "the node finds the high-noise model's low-noise sibling beside it itself")
            self.loras += [self.lora(n, "low") for n in adapters_2]
        # The workflow's file: not here, the graph names it still and is refused at submit
        # (`model_missing`) until the import's models map it; the node never picks one itself.
        wanted, where = m.text(node, "unet_name"), describe(node)
        return {"shift": shift, "model": m.model_file(node_id, "diffusion_models", wanted, where)}

    def lora(self, node: ComfyNode, expert: str | None = None) -> Port:
        """One LoRA loader of the model's way as an `input/lora` node (`expert`: the stage's
        model of a pair, high or low; None: both)."""
        m = self.mapper
        m.lora_clip_half(node)
        return m.loader(
            f"c{node.id}",
            "input/lora",
            m.text(node, "lora_name"),
            describe(node),
            param="name",
            params={"strength": m.number(node, "strength_model", 1.0), "expert": expert},
        )

    def latent(self, sampler: ComfyNode, params: dict[str, Any]) -> Port | None:
        """The latent's size into `params`; the start image's port, if it has one."""
        m = self.mapper
        node = self.source(sampler, "latent_image")
        assert node is not None
        self.expect(node, *LATENTS)
        params.update(
            width=m.whole(node, "width", 832),
            height=m.whole(node, "height", 480),
            frames=m.whole(node, "length", 81),
        )
        if m.whole(node, "batch_size", 1) != 1:
            m.warn(f"{describe(node)}: a batch of videos is not offered; one video renders")
        vae = self.source(node, "vae", optional=True)
        if vae is not None:
            self.part(vae)
        start = self.source(node, "start_image", optional=True)
        if node.class_type == wan_i2v.LATENT:
            wan_i2v.read_clip_vision(self, node, start)
        if start is None:
            return None
        self.expect(start, "LoadImage")
        value = m.load_image(start, 0)
        return None if value is None else value.port
