"""FLUX.2 as a family: its node, files, request and capabilities (torch-free).

`bfl/flux-2` renders text to image with FLUX.2 klein (4B or 9B, step-distilled or base) or
FLUX.2 dev (guidance-distilled: guidance is the transformer's input, no negative prompt), the
variant told from the files (`variants.py`), or edits up to three reference images wired in. Its
transformer takes one batched tensor with one set of positions, so requests of one size and one
set of reference sizes share a forward. klein's Qwen3 text encoder is the file Z-Image reads
(klein 4B): loaded once for both; dev reads a Mistral (`build.py`, its torch side).

Its files serve the primitive vocabulary too (`load/*`, `encode/text`, `sample`, `vae/*`): a
text encoder loaded as type `flux2` is read FLUX.2's way; `sample` runs ComfyUI's denoise,
start latents, noise masks and KSamplerAdvanced windows on its 128-channel latents. Its cfg
is klein base's guidance (1: none); a distilled klein and dev take cfg 1 only, dev embedding
ComfyUI's default guidance (`guidance_for_cfg`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from inline_core.contract.capabilities import Capabilities
from inline_core.contract.comfy_recipe import ComfyRecipe
from inline_core.contract.family import Family, Lowered, Stack
from inline_core.contract.files import StackRules
from inline_core.contract.sources import Sources
from inline_core.contract.submit import Submit
from inline_core.device.split import ModelParallelSupport, ParallelSpec
from inline_core.diffusion.adapters.stack import stack_info
from inline_core.downloads.targets import Downloads
from inline_core.errors import InvalidRequest
from inline_core.families.flow_split import SPLIT_ENGINES, SPLIT_METHODS
from inline_core.families.flux2.comfy import RECIPE
from inline_core.families.flux2.descriptor import (
    EXTRA_HINT,
    FLUX2_DESCRIPTOR,
    NODE_TYPE,
    REFERENCES,
)
from inline_core.families.flux2.download import DOWNLOADS
from inline_core.families.flux2.files import RULES
from inline_core.families.flux2.lora_naming import FLUX2_LORAS
from inline_core.families.flux2.request import Flux2Request, new_request, reference_refusal
from inline_core.families.flux2.split import sequence_refusal, support_for
from inline_core.families.flux2.transformer import config_of
from inline_core.families.flux2.variants import EMBEDDED_DEFAULT, Flux2Variant, variant_of
from inline_core.families.nodes.inputs import image_input, prompt_text, wired_loras
from inline_core.families.nodes.sampling import (
    guidance_param,
    refuse_cfg_pp,
    sampling_request,
)
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.models.source import Source


class Flux2Family(Family):
    name = "flux-2"
    title = "FLUX.2"
    requires = ("torch", "diffusers", "transformers", "safetensors")
    install_hint = EXTRA_HINT
    builder = "inline_core.families.flux2.build:BUILDER"
    comfy_text_encoder_types = ("flux2",)  # how ComfyUI's CLIPLoader loads klein's Qwen3
    runs_step_windows = True  # its sample runs KSamplerAdvanced's windows
    runs_model_shift = runs_cfg_pp = True  # the shared flow pipeline's: a request's shift, CFG++
    kit = "inline_core.families.flux2.kit_command:main"
    download = "inline_core.families.flux2.download:main"
    loras = FLUX2_LORAS
    capabilities = Capabilities(
        batching="shapes",  # one batched tensor and one set of positions per forward
        # Qwen3 overflows float16 (as Z-Image's, whose loaded copy it shares); FLUX.2 is bf16.
        fp16_overflow=frozenset({"text_encoder", "denoiser"}),
        step_cache=frozenset({"dbcache"}),  # per request, its single-stream blocks (step_cache.py)
        split_methods=SPLIT_METHODS,
        split_engines=SPLIT_ENGINES,
        primitives=True,
    )

    def comfy_recipe(self) -> ComfyRecipe:
        return RECIPE

    def nodes(self) -> tuple[NodeDescriptor, ...]:
        return (FLUX2_DESCRIPTOR,)

    def rules(self) -> StackRules:
        return RULES

    def downloads(self) -> Downloads:
        return DOWNLOADS

    def lower(
        self,
        node_type: str,
        params: Mapping[str, Any],
        inputs: Mapping[str, Any],
        node_id: str,
        sources: Sources,
    ) -> Lowered:
        if node_type != NODE_TYPE:
            raise InvalidRequest(f"FLUX.2 has no node {node_type!r}", node_id=node_id)
        kind = _variant(sources, node_id)
        sampling = sampling_request(params, kind.defaults())
        prompt = prompt_text(inputs.get("prompt"), node_id)
        request: dict[str, Any] = {
            "prompt": prompt,
            **sampling,
            "guided": kind.guided,
            "embedded_guidance": kind.embedded_guidance,
        }
        take_params = {**sampling, "model_variant": kind.title}
        references = [image_input(inputs, port, node_id) for port in REFERENCES]
        for port, image in zip(REFERENCES, references, strict=True):
            if image is not None:
                request[port] = image
        take_params["references"] = sum(image is not None for image in references)
        loras = wired_loras(inputs, self.name, self.title, node_id)
        if loras:
            request["loras"] = loras
            take_params["loras"] = stack_info(loras)
        return Lowered(request, take_params)

    def check(self, submit: Submit) -> None:
        super().check(submit)  # its LoRAs
        if submit.node_type != NODE_TYPE or submit.sources is None:
            return
        kind = _variant(submit.sources, submit.node_id)
        guidance = guidance_param(submit.params, kind.defaults())
        # A distilled klein runs no negative; dev's guidance is a transformer input.
        unguided = "step-distilled" if kind.distilled else "guidance-distilled"
        guides = guidance > 1 if kind.guided else unguided
        sampler = submit.params.get("sampler")
        refuse_cfg_pp(sampler, guides, kind.title, submit.node_id, guided_from="above 1")
        wired = [port for port in REFERENCES if port in submit.wired]
        for port in wired:
            size = submit.sizes.get(port)
            if size is not None and (why := reference_refusal(port, *size)):
                raise InvalidRequest(why, node_id=submit.node_id)

    def new_request(
        self, stack: Stack, sources: Sources, model_key: Hashable, **kwargs: Any
    ) -> Flux2Request:
        transformer = sources.get("transformer")
        kind = _read_variant(transformer)
        return new_request(model_key, kind, **kwargs)

    def guidance_for_cfg(self, cfg: float, transformer: Source | None = None) -> float:
        """klein base guides as ComfyUI's cfg counts (`uncond + cfg * (cond - uncond)`); a
        step-distilled klein and dev run no classifier-free guidance, so only cfg 1, dev then
        embedding ComfyUI's default guidance (what a workflow without FluxGuidance renders)."""
        kind = _read_variant(transformer)
        if kind is None or kind.guided:
            return cfg
        if cfg != 1:
            why = "step-distilled" if kind.distilled else "guidance-distilled"
            raise InvalidRequest(
                f"{kind.title} is {why} and runs no classifier-free guidance: set cfg to 1"
                + (
                    f" (it embeds guidance {EMBEDDED_DEFAULT:g}, ComfyUI's default)"
                    if kind.embedded_guidance
                    else ""
                )
            )
        return EMBEDDED_DEFAULT if kind.embedded_guidance else cfg

    def embedded_guidance(self, guidance: float, transformer: Source | None = None) -> float:
        """dev embeds the conditioning's guidance (ComfyUI's FluxGuidance); klein has no
        guidance embedder, so a guidance set for it is refused naming it."""
        kind = _read_variant(transformer)
        if kind is not None and not kind.embedded_guidance:
            raise InvalidRequest(
                f"{kind.title} has no guidance embedder: the conditioning's guidance "
                f"{guidance:g} (conditioning/guidance, ComfyUI's FluxGuidance) has nothing to "
                "set; remove it"
            )
        return guidance

    def denoiser_fit(self, transformer: Any) -> tuple[int, int] | None:
        config = config_of(transformer)
        width = None if config is None else config.get("joint_attention_dim")
        channels = None if config is None else config.get("in_channels")
        if not isinstance(width, int) or not isinstance(channels, int):
            return None
        return width, channels

    def split_support(self, transformer: Source | None) -> ModelParallelSupport:
        return support_for(transformer)

    def unsplittable(
        self,
        node_type: str,
        params: Mapping[str, Any],
        split: ParallelSpec,
        sources: Sources | None,
        images: Mapping[str, tuple[int, int] | None] | None = None,
    ) -> str | None:
        """A render whose image tokens, its reference images' included, the split's ranks cannot
        share evenly. A reference whose size is known only at run is checked on the ranks
        (`Flux2DenoisePipeline.prepare_encode`): the sum is not known here."""
        if node_type != NODE_TYPE:
            return None
        wired = [size for port, size in (images or {}).items() if port in REFERENCES]
        references = [size for size in wired if size is not None]
        if len(references) < len(wired):
            return None  # a size known only at run: the ranks check the sum
        return sequence_refusal(params, split, references)


def _read_variant(transformer: Source | None) -> Flux2Variant | None:
    """The variant of a transformer's files (None: none, or unreadable)."""
    return None if transformer is None else variant_of(config_of(transformer), transformer)


def _variant(sources: Sources, node_id: str) -> Flux2Variant:
    """The variant of the node's transformer (an unreadable file is refused)."""
    transformer = sources.get("transformer")
    kind = _read_variant(transformer)
    if kind is None:
        raise InvalidRequest("the FLUX.2 diffusion model cannot be read", node_id=node_id)
    return kind
