"""Chroma as a family: its node, files, request and capabilities (torch-free).

Chroma is a FLUX-style flow transformer conditioned on T5 alone (with the prompt's attention mask),
decoded by the FLUX VAE, guided with true classifier-free guidance. Its transformer takes one
batched tensor, so requests of one latent shape share a forward. This family reads diffusers
folders only: a pipeline folder, a T5 encoder folder, an `AutoencoderKL` folder or file.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from inline_core.contract.capabilities import Capabilities
from inline_core.contract.comfy_recipe import ComfyRecipe
from inline_core.contract.family import Family, Lowered, Stack
from inline_core.contract.files import ModelRule, PartRule, StackRules, TokenizerRule, read_json
from inline_core.contract.sources import Sources
from inline_core.device.split import ModelParallelSupport
from inline_core.diffusion.files.shapes import Shapes, read_shapes
from inline_core.diffusion.formats import ldm_vae
from inline_core.errors import InvalidRequest
from inline_core.graph.descriptor import NodeDescriptor, ParamSpec, ParamWidget, PortSpec
from inline_core.graph.schema import PortKind
from inline_core.models.catalog import CatalogEntry
from inline_core.models.source import Source
from tiny_chroma.comfy import RECIPE
from tiny_chroma.request import ChromaRequest, new_request

NODE_TYPE = "test/chroma"
TRANSFORMER_CLASS = "ChromaTransformer2DModel"
SPLIT_METHODS = frozenset({"ulysses"})  # its mask is laid out for Ulysses (pipeline.py)


def _size(name: str) -> ParamSpec:
    return ParamSpec(name, ParamWidget.NUMBER, 512, minimum=64, maximum=2048, step=16, integer=True)


DESCRIPTOR = NodeDescriptor(
    type=NODE_TYPE,
    title="Chroma (test family)",
    category="image/generate",
    icon="sparkles",
    source="inline-tiny-chroma",
    output_kind="image",
    inputs=(PortSpec("prompt", PortKind.TEXT),),
    outputs=(PortSpec("image", PortKind.IMAGE),),
    params=(
        ParamSpec("negative_prompt", ParamWidget.TEXTAREA, default=""),
        _size("width"),
        _size("height"),
        ParamSpec("steps", ParamWidget.NUMBER, default=20, minimum=1, maximum=100, integer=True),
        ParamSpec("guidance", ParamWidget.NUMBER, default=3.0, minimum=1.0, maximum=20.0),
        ParamSpec("seed", ParamWidget.SEED, default=-1),
        ParamSpec("model", ParamWidget.SELECT, default=None, options_from="diffusion_models"),
    ),
)


def _no_single_files(_shapes: Shapes) -> bool:
    return False  # this family reads diffusers folders only


def _vae_score(entry: CatalogEntry, _transformer: Source | None) -> int | None:
    """A 16-channel `AutoencoderKL` (the FLUX VAE), as a diffusers folder or an LDM file."""
    if entry.is_folder:
        config = read_json(entry.path / "config.json")
        if config is None or config.get("latent_channels") != ldm_vae.FLUX_LATENT_CHANNELS:
            return None
        return 0
    shapes = read_shapes(entry.path)
    if shapes is None or not ldm_vae.is_ldm_vae(shapes):
        return None
    return 0 if ldm_vae.latent_channels(shapes) == ldm_vae.FLUX_LATENT_CHANNELS else None


def _t5_score(entry: CatalogEntry, transformer: Source | None) -> int | None:
    """A T5 encoder folder as wide as the transformer's text input."""
    config = read_json(entry.path / "config.json") if entry.is_folder else None
    if config is None or config.get("model_type") != "t5":
        return None
    wanted = _config_value(transformer, "joint_attention_dim")
    return None if wanted is not None and config.get("d_model") != wanted else 0


def _config_value(transformer: Source | None, key: str) -> int | None:
    config = None if transformer is None else read_json(transformer.location / "config.json")
    value = None if config is None else config.get(key)
    return value if isinstance(value, int) else None


RULES = StackRules(
    title="Chroma",
    family="chroma",
    model=ModelRule(
        title="Chroma diffusion model",
        override="INLINE_CHROMA_MODEL",
        pipeline_prefix="Chroma",
        transformer_class=TRANSFORMER_CLASS,
        recognize=_no_single_files,
        name=None,
        hint="put a diffusers Chroma folder in {root}/diffusion_models",
    ),
    parts=(
        PartRule(
            part="vae",
            label="vae",
            title="16-channel FLUX VAE (the one Chroma decodes with)",
            category="vae",
            subfolder="vae",
            override=None,
            score=_vae_score,
            hint="put the FLUX VAE in {root}/vae",
        ),
        PartRule(
            part="text_encoder",
            label="text encoder",
            title="T5 encoder folder (the one Chroma is conditioned on)",
            category="text_encoders",
            subfolder="text_encoder",
            override=None,
            score=_t5_score,
            hint="put a T5 encoder folder with its tokenizer in {root}/text_encoders",
        ),
    ),
    tokenizer=TokenizerRule(
        part="text_encoder", fallback=lambda: None, hint="use a T5 folder that has its tokenizer"
    ),
)


class ChromaFamily(Family):
    name = "chroma"
    title = "Chroma"
    requires = ("torch", "diffusers", "transformers")
    install_hint = "install inline-core's diffusers extra (torch, diffusers, transformers)"
    builder = "tiny_chroma.build:BUILDER"
    kit = "tiny_chroma.kit:main"
    comfy_text_encoder_types = ("chroma",)  # how ComfyUI's CLIPLoader loads T5 for Chroma
    runs_model_shift = runs_cfg_pp = True  # as every family on the shared flow pipeline
    capabilities = Capabilities(
        batching="shapes",
        split_methods=SPLIT_METHODS,
        split_engines=frozenset({"cache-dit"}),
        primitives=True,
    )

    def nodes(self) -> tuple[NodeDescriptor, ...]:
        return (DESCRIPTOR,)

    def comfy_recipe(self) -> ComfyRecipe:
        return RECIPE

    def rules(self) -> StackRules:
        return RULES

    def lower(
        self,
        node_type: str,
        params: Mapping[str, Any],
        inputs: Mapping[str, Any],
        node_id: str,
        sources: Sources,
    ) -> Lowered:
        prompt = inputs.get("prompt")
        if not isinstance(prompt, str):
            raise InvalidRequest("the prompt input must be text", node_id=node_id)
        request: dict[str, Any] = {
            "prompt": prompt,
            "negative_prompt": str(params.get("negative_prompt") or ""),
            "width": int(params["width"]),
            "height": int(params["height"]),
            "steps": int(params["steps"]),
            "guidance": float(params["guidance"]),
            "seed": int(params["seed"]),
        }
        return Lowered(request, dict(request))

    def new_request(
        self, stack: Stack, sources: Sources, model_key: Hashable, **kwargs: Any
    ) -> ChromaRequest:
        return new_request(model_key, **kwargs)

    def split_support(self, transformer: Source | None) -> ModelParallelSupport:
        heads = _config_value(transformer, "num_attention_heads")
        return ModelParallelSupport(family=self.name, methods=SPLIT_METHODS, heads=heads)

    def denoiser_fit(self, transformer: Source) -> tuple[int, int] | None:
        width = _config_value(transformer, "joint_attention_dim")
        packed = _config_value(transformer, "in_channels")
        return None if width is None or packed is None else (width, packed // 4)

    def flow_shift(self, scheduler: Source | None) -> float | None:
        config = (
            None if scheduler is None else read_json(scheduler.location / "scheduler_config.json")
        )
        shift = None if config is None else config.get("shift")
        return float(shift) if isinstance(shift, int | float) else None
