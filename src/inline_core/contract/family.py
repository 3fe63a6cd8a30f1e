"""The family contract: what a model family tells the server (torch-free).

A family is a small package: this class's subclass (descriptors, file rules, capabilities), and
a torch side named by dotted paths and imported on the first render: its builder (how its
components load and assemble into a step pipeline on a placement), its kit recipe (tiny
random-weight models for tests and demos) and its download targets. Families are found through the
`inline_core.families` entry point group (`contract/discovery.py`); the built-in one is
registered the same way. Everything else (residency, the step loop, the worker group, the
low-level node vocabulary, the importer) is shared and names no family.
"""

from __future__ import annotations

import importlib.util
from abc import ABC, abstractmethod
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from inline_core.contract.capabilities import Capabilities
from inline_core.contract.files import StackResolver, StackRules
from inline_core.contract.lora_stacks import lora_stack
from inline_core.contract.sources import Resolution, Sources
from inline_core.contract.submit import Submit
from inline_core.device.split import ModelParallelSupport, ParallelSpec
from inline_core.diffusion.adapters.naming import LoraNamings
from inline_core.downloads.targets import Downloads
from inline_core.errors import InvalidRequest
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.models.catalog import Catalog
from inline_core.models.source import Source

# Which pipeline of a stack: a high-level node's whole stack (prompt to output), or the denoiser
# alone (the `sample` primitive: encoded prompts in, latents out).
Stack = Literal["node", "denoiser"]


@dataclass(frozen=True)
class Lowered:
    """A high-level node's render, lowered: the pipeline's request arguments and what the take
    records (the resolver adds the model that was used)."""

    request: dict[str, Any]
    take_params: dict[str, Any] = field(default_factory=dict[str, Any])


class Family(ABC):
    """One model family. Subclasses set the class attributes and implement `nodes`, `rules`,
    `lower` and `new_request`; the rest has defaults that fit a family without a split or a kit.
    What only some families do (control models, their inpainting, a ComfyUI recipe) is an
    optional protocol a family implements by defining its methods (`contract/supports.py`)."""

    name: ClassVar[str]  # "z-image": how handles, rank specs and health name it
    title: ClassVar[str]  # "Z-Image"
    requires: ClassVar[tuple[str, ...]]  # top-level modules its torch side imports
    install_hint: ClassVar[str]  # what to install when they are missing
    builder: ClassVar[str]  # "package.module:attribute": its `FamilyBuilder` (torch side)
    capabilities: ClassVar[Capabilities]
    # How ComfyUI workflows built for it load its text encoder (CLIPLoader's `type`, e.g.
    # "lumina2"): with its model rule's file name, how the importer recognises them.
    comfy_text_encoder_types: ClassVar[tuple[str, ...]] = ()
    # Whether its `sample` runs a window of its schedule (ComfyUI's KSamplerAdvanced:
    # start_step/end_step, add_noise, leftover_noise); a window it cannot run is refused.
    runs_step_windows: ClassVar[bool] = False
    # Whether its `sample` runs at a shift the request sets (`diffusion/sigma/shift.py`: ComfyUI's
    # ModelSampling* nodes) and hands a CFG++ sampler the unconditional prediction; a shift or a
    # `_cfg_pp` sampler it cannot run is refused.
    runs_model_shift: ClassVar[bool] = False
    runs_cfg_pp: ClassVar[bool] = False
    kit: ClassVar[str | None] = None  # "package.module:main" behind `inline-core kit`
    # "package.module:main" behind `inline-core download` (usually `download_command(table)`)
    download: ClassVar[str | None] = None
    # The LoRA namings its files come in and the layers they may adapt (None: it takes none).
    loras: ClassVar[LoraNamings | None] = None
    # The family `inline-core kit` and `download` use without `--family` (one built-in family).
    tools_default: ClassVar[bool] = False

    def __init__(self, catalog: Catalog, env: Mapping[str, str]) -> None:
        self.catalog = catalog
        self.env = env  # the INLINE_* settings, for the family's own variables
        self.files = StackResolver(self.rules(), catalog, env)

    # -- what the graph sees ---------------------------------------------------------------------

    @abstractmethod
    def nodes(self) -> tuple[NodeDescriptor, ...]:
        """The high-level nodes it serves (e.g. `alibaba/z-image-turbo`)."""

    @abstractmethod
    def lower(
        self,
        node_type: str,
        params: Mapping[str, Any],
        inputs: Mapping[str, Any],
        node_id: str,
        sources: Sources,
    ) -> Lowered:
        """One of its nodes' params and inputs as a pipeline request (raises `InvalidRequest`),
        over `sources`, the files its submit check resolved."""

    @abstractmethod
    def new_request(
        self, stack: Stack, sources: Sources, model_key: Hashable, **kwargs: Any
    ) -> Any:
        """A request state for `stack` over `sources`, checked against what the files say (sizes
        the VAE and patches allow, a strength that leaves a step to run): torch-free, so the server
        can check a request it sends to the worker group. The pipelines' `request()` use it too."""

    def denoiser_fit(self, transformer: Source) -> tuple[int, int] | None:
        """(caption width, latent channels) the transformer takes, read from its files, so the
        `sample` primitive refuses another model's conditioning or latents with a message; None
        when not known."""
        return None

    def flow_shift(self, scheduler: Source | None) -> float | None:
        """The flow shift its models sample at, from a diffusers folder's scheduler config or the
        family's own default (None: not a shifted flow model)."""
        return None

    def guidance_for_cfg(self, cfg: float, transformer: Source | None = None) -> float:
        """The family's guidance scale for ComfyUI's `cfg` (the `sample` primitive's count), for
        the model `transformer` (None: unknown); an `InvalidRequest` for a cfg it cannot run."""
        return cfg

    def embedded_guidance(self, guidance: float, transformer: Source | None = None) -> float:
        """The guidance a conditioning sets for the model to embed (ComfyUI's FluxGuidance:
        `conditioning/guidance`), for the model `transformer` (None: unknown); an
        `InvalidRequest` naming it for a model that embeds none."""
        raise InvalidRequest(
            f"{self.title}'s models embed no guidance: the conditioning's guidance {guidance:g} "
            "(conditioning/guidance, ComfyUI's FluxGuidance) has nothing to set; remove it"
        )

    def model_param(self, node_type: str, params: Mapping[str, Any]) -> str | None:
        """The diffusion model a node picked (None: the first of this family in the catalog)."""
        value = params.get("model")
        return str(value) if value else None

    # -- files -------------------------------------------------------------------------------------

    @abstractmethod
    def rules(self) -> StackRules:
        """How its files are recognised (see `contract/files.py`)."""

    def names_model(self, file_name: str) -> bool:
        """Whether a model file name (e.g. a ComfyUI workflow's UNETLoader's) reads as one of
        this family's models, by its model rule's name pattern."""
        pattern = self.rules().model.name
        return pattern is not None and pattern.search(file_name) is not None

    def check(self, submit: Submit) -> None:
        """Refuse at submit, in one call, a node that cannot render (raise an `InlineError`):
        params that do not fit the inputs wired or the files resolved, images wired in whose
        sizes cannot work together, a LoRA stack on its `loras` input that cannot render on its
        model. By default a LoRA of another family, or one that picks an expert of a two-model
        stack, is refused."""
        lora_stack(submit.loras, self.name, self.title, submit.node_id)

    def params_identity(self, node_type: str, params: Mapping[str, Any]) -> str:
        """The identity of files a node's params pick beyond its model stack (e.g. a control
        model), for its cache key: a file replaced under the same name re-runs the node."""
        return ""

    def unsplittable(
        self,
        node_type: str,
        params: Mapping[str, Any],
        split: ParallelSpec,
        sources: Sources | None,
        images: Mapping[str, tuple[int, int] | None] | None = None,
    ) -> str | None:
        """Why a render of `node_type` with `params` (the family's node over `sources`, or a
        primitive such as `load/controlnet`, without) cannot run under `split`, the split this
        server runs its model with, for a 422 at submit (e.g. a control model, or a token
        sequence its ranks cannot share evenly); None (the default): it can. `images`: the
        node's inputs wired in, each with its image's (width, height) where known at submit
        (None: not an image, or one known only at run)."""
        return None

    def resolve(self, node_type: str, params: Mapping[str, Any]) -> Resolution:
        """Which files a node's render uses (torch-free; runs at submit)."""
        picks = self.files.picks_of(params)  # a `vae` or `text_encoder` the node names
        return self.files.resolve(self.model_param(node_type, params), picks)

    def downloads(self) -> Downloads | None:
        """What it can download: targets (hub repos and files, ComfyUI's split files and the
        diffusers layout), the stack parts each provides, presets. The one table behind the
        requirements route's sources and `inline-core download` (None: nothing to download)."""
        return None

    # -- what it supports ------------------------------------------------------------------------

    def split_support(self, transformer: Source | None) -> ModelParallelSupport | None:
        """How this transformer can be split across ranks (None: it cannot)."""
        return None

    def missing_runtime(self) -> list[str]:
        """The modules its torch side needs that this install lacks (found without importing)."""
        return [name for name in self.requires if importlib.util.find_spec(name) is None]

    def describe(self) -> dict[str, object]:
        return {"name": self.name, "title": self.title, **self.capabilities.to_json()}
