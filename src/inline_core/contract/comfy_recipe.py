"""A family's ComfyUI recipe: what of ComfyUI's workflows maps onto its nodes (torch-free data).

The importer names no family: each family that imports ComfyUI workflows returns one
`ComfyRecipe` from `Family.comfy_recipe()`, and the importer reads every served family's.

- `handlers`: ComfyUI classes mapped onto the low-level vocabulary in the family's own code (e.g.
  Z-Image's control patches onto `load/controlnet`), a "package.module:attribute" naming a
  mapping of class -> handler (`importer.mapper.Handler`), imported when a workflow is mapped.
- `own_node`: how ComfyUI's template chain collapses onto the family's own high-level node, for a
  family whose workflows do not map onto the low-level vocabulary (Wan's `alibaba/wan`): mostly
  data (`OwnNode`), with `OwnNode.reader` naming code for what data does not reach.
- `sigma_sources`: ComfyUI sigmas classes only its workflows use (FLUX.2's `Flux2Scheduler`)
  read onto `sample`'s params for `SamplerCustom`/`SamplerCustomAdvanced`, a
  "package.module:attribute" naming a mapping of class -> reader
  (`importer.mapper.SigmaSource`).
- `text_encoders`: which ComfyUI CLIP loaders (`DualCLIPLoader`, `TripleCLIPLoader`, a
  `CLIPLoader` `type`) load the family's text encoders, and the loader node of its own that
  takes them all (`TextEncoders`).
- `classes`: ComfyUI classes only its workflows use that the importer does not know yet (their
  widget order, for the UI format, their outputs' types by slot, and their inputs' ComfyUI specs,
  which ComfyUI's API (`/object_info`, `/prompt`) serves and checks prompts by).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from inline_core.contract.comfy_specs import Spec


class RecipeError(RuntimeError):
    """A family's recipe names code or nodes that are not there or not what they must be: the
    family's bug, said naming the family."""


@dataclass(frozen=True)
class ComfyClass:
    """A ComfyUI node class: its widgets in the order the UI format stores their values, its
    outputs' types by slot (MODEL, CONDITIONING, ...), and its inputs as ComfyUI declares them
    (`comfy_specs.py`: links and widgets). A class given no input specs is still served by the
    API, untyped: only the importer checks its inputs."""

    widgets: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    required: Mapping[str, Spec] = field(default_factory=dict[str, Spec])
    optional: Mapping[str, Spec] = field(default_factory=dict[str, Spec])
    category: str = ""
    python_module: str = "nodes"
    display_name: str | None = None

    def __post_init__(self) -> None:
        declared = {**self.required, **self.optional}
        if declared:
            missing = [w for w in self.widgets if w not in declared]
            if missing:
                raise ValueError(f"ComfyClass widgets {missing} have no input spec")

    @property
    def typed(self) -> bool:
        return bool(self.required or self.optional)


@dataclass(frozen=True)
class PartLoader:
    """A loader whose file becomes one of the node's pickers: its widget naming the file, our
    param and the param's model category."""

    widget: str
    param: str
    category: str


@dataclass(frozen=True)
class Latent:
    """A latent class the chain starts from: its widgets -> our params (with ComfyUI's defaults),
    and the input that carries a start or reference image (onto the node's image input)."""

    params: Mapping[str, str]
    defaults: Mapping[str, int] = field(default_factory=dict[str, int])
    image: str | None = None


@dataclass(frozen=True)
class Sink:
    """An output class the chain ends at: the input its frames or images come in on, and params
    from its own widgets (widget -> param) and fixed ones (e.g. the take's format)."""

    frames: str
    params: Mapping[str, str] = field(default_factory=dict[str, str])
    fixed: Mapping[str, object] = field(default_factory=dict[str, object])
    # A node between the sink and the decoder whose widgets become params (CreateVideo's fps).
    through: str | None = None
    through_frames: str = "images"
    through_params: Mapping[str, str] = field(default_factory=dict[str, str])
    note: str | None = None  # said in the warnings when the workflow saves through it


# ComfyUI's video templates' sink: SaveVideo <- CreateVideo (its fps), an MP4 take.
SAVE_VIDEO = Sink(
    "video", fixed={"format": "mp4"}, through="CreateVideo", through_params={"fps": "fps"}
)


@dataclass(frozen=True)
class Encoder:
    """A class a prompt is encoded by: its text widget and text-encoder input, and its image
    inputs -> the node's image inputs (a reference image an edit model reads with the prompt,
    e.g. TextEncodeQwenImageEditPlus's `image1`). The positive prompt's images are read; the
    negative's must be the same nodes or none."""

    text: str = "text"
    clip: str = "clip"
    images: Mapping[str, str] = field(default_factory=dict[str, str])


def default_encoders() -> dict[str, Encoder]:
    """CLIPTextEncode: its `text`, its `clip`."""
    return {"CLIPTextEncode": Encoder()}


def default_parts() -> dict[str, PartLoader]:
    """The part loaders of most templates: a VAELoader and a CLIPLoader."""
    return {
        "VAELoader": PartLoader("vae_name", "vae", "vae"),
        "CLIPLoader": PartLoader("clip_name", "text_encoder", "text_encoders"),
    }


def default_model_nodes() -> dict[str, Mapping[str, str]]:
    """ModelSamplingSD3's shift, the node's `shift`."""
    return {"ModelSamplingSD3": {"shift": "shift"}}


@dataclass(frozen=True)
class NodeNames:
    """Our node's params and inputs the chain's common values go to."""

    seed: str = "seed"
    steps: str = "steps"
    guidance: str = "guidance"  # ComfyUI's cfg, as the node counts it
    negative_prompt: str | None = "negative_prompt"  # None: the node guides against ""
    model: str = "model"
    prompt: str = "prompt"  # an input: the positive prompt's `input/text`
    image: str = "image"  # an input: the latent's start image (None on the latent: none)
    loras: str = "loras"  # an input: the model's way's LoRAs as `input/lora` nodes


@dataclass(frozen=True)
class OwnNode:
    """How ComfyUI's template chain (sink <- decode <- sampler <- model's way, prompts, latent)
    collapses onto the family's node `node`."""

    node: str
    sinks: Mapping[str, Sink]
    latents: Mapping[str, Latent]
    # The sampler names the node samples with: another is refused, naming the closest.
    samplers: tuple[str, ...] = ()
    # The sampler's defaults where the workflow leaves a widget out (seed, steps, cfg).
    sampler_defaults: Mapping[str, float] = field(default_factory=dict[str, float])
    # Classes on the model's way whose widgets become params (widget -> param).
    model_nodes: Mapping[str, Mapping[str, str]] = field(default_factory=default_model_nodes)
    # Classes a prompt's conditioning passes through on its way to the sampler.
    conditioning_through: tuple[str, ...] = ()
    # Classes a prompt is encoded by (CLIPTextEncode; an edit model's encoder with images).
    encoders: Mapping[str, Encoder] = field(default_factory=default_encoders)
    parts: Mapping[str, PartLoader] = field(default_factory=default_parts)
    names: NodeNames = NodeNames()
    # "package.module:attribute": a subclass of `importer.own_node.Collapse` for what data does
    # not reach (Wan's two-stage sampling, its CLIP-vision chain); None: the data alone.
    reader: str | None = None


@dataclass(frozen=True)
class TextEncoders:
    """The text encoders one ComfyUI CLIP loader of one `type` loads for the family (FLUX.1's
    `DualCLIPLoader` type `flux`: a CLIP-L and a T5), onto one of the family's loader nodes:
    `node`, and the param each of the loader's files goes to, in the loader's order
    (`clip_name1`, `clip_name2`, ...). Each param is a model picker of `node`."""

    node: str
    params: tuple[str, ...]


# (ComfyUI loader class, its `type` value): DualCLIPLoader/TripleCLIPLoader/CLIPLoader.
EncoderKey = tuple[str, str]


@dataclass(frozen=True)
class ComfyRecipe:
    own_node: OwnNode | None = None
    handlers: str | None = None  # "package.module:attribute": {ComfyUI class: handler}
    sigma_sources: str | None = None  # "package.module:attribute": {sigmas class: reader}
    classes: Mapping[str, ComfyClass] = field(default_factory=dict[str, ComfyClass])
    # The multi-encoder loads the family takes; a CLIP loader it does not list is refused.
    text_encoders: Mapping[EncoderKey, TextEncoders] = field(
        default_factory=dict[EncoderKey, TextEncoders]
    )
