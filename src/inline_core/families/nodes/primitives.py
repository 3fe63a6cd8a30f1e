"""`encode/text`, `latent/empty`, `latent/noise-mask`, `sample`, `vae/decode`, `vae/encode`,
`vae/encode-inpaint`, for every family (torch-free at import; the work is in `nodes/ops.py`,
imported on a node's first run).

Each runner works with the family its input handle names: a text encoder's family encodes, a
model's family samples, a VAE's family decodes. A conditioning is its encoder's family's reading
of the prompt (one Qwen3 file is read one way by Z-Image, another by FLUX.2): `sample` refuses
one read for another family, at submit where the graph shows it. Handles flow between them as
values; only `vae/decode` writes takes (one PNG per batch item, with the sampling settings and the
seed actually used in its params).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from PIL import Image

from inline_core.contract.family import Family
from inline_core.contract.handles import (
    ConditioningHandle,
    LatentHandle,
    LoraHandle,
    ModelHandle,
    TextEncoderHandle,
    VAEHandle,
)
from inline_core.contract.registry import Families
from inline_core.contract.settings import SampleSettings
from inline_core.diffusion.sigma.shift import ModelShift
from inline_core.engine.runtime import ModelRuntime
from inline_core.errors import InvalidRequest
from inline_core.families.nodes.controls import Picked
from inline_core.families.nodes.guidance import unwrapped
from inline_core.families.nodes.inputs import handle_input, optional_handle
from inline_core.graph.mask_nodes import mask_value
from inline_core.graph.runner import Needs, NodeCall, NodeResult, NodeRunner, SubmitFacts
from inline_core.graph.sampler_names import CFG_PP_SAMPLERS, cfg_pp_unguided
from inline_core.models.source import Source


class _FamilyRunner(NodeRunner):
    def __init__(self, families: Families, runtime: ModelRuntime) -> None:
        self.families = families
        self.runtime = runtime


class EncodeText(_FamilyRunner):
    # The encoder reads the prompt the ways the conditioning's consumers take it.
    needs_follow = {"text_encoder": "conditioning"}

    def check_node(
        self, node_id: str, params: Mapping[str, Any], facts: SubmitFacts
    ) -> object | None:
        # Its loader's handle, for the `sample` it feeds to check whose reading it is.
        handles = [
            h for h in facts.upstream.get("text_encoder", ()) if isinstance(h, TextEncoderHandle)
        ]
        super().check_node(node_id, params, facts)
        return handles[0] if handles else None

    def run(self, call: NodeCall) -> NodeResult:
        from inline_core.families.nodes import ops

        encoder = handle_input(call, "text_encoder", TextEncoderHandle)
        prompt = call.inputs.get("prompt")
        if not isinstance(prompt, str):
            raise InvalidRequest("the prompt input must be text", node_id=call.node_id)
        reporter = call.ctx.reporter(call.node_id)
        reporter.phase("encode")
        family = self.families.named(encoder.family)
        conditioning = ops.encode_text(self.runtime, family, encoder, prompt, call.ctx.run_id)
        readings = {  # an encoder loaded without a type: the other families' readings too
            other.family: ops.encode_text(
                self.runtime, self.families.named(other.family), other, prompt, call.ctx.run_id
            )
            for other in encoder.also
        }
        if readings:
            conditioning = dataclasses.replace(conditioning, readings=readings)
        reporter.phase("encode", 1.0)
        return NodeResult(outputs={"conditioning": conditioning})


class EmptyLatent(NodeRunner):
    """A batch of empty latents: sizes only (the noise is drawn by `sample`, from its seed)."""

    def run(self, call: NodeCall) -> NodeResult:
        params = call.params
        latent = LatentHandle(
            width=int(params["width"]), height=int(params["height"]), batch=int(params["batch"])
        )
        return NodeResult(outputs={"latent": latent})


class NoiseMask(NodeRunner):
    """The latent with a noise mask: `sample` repaints where it is white. With `crop`, a mask
    over the image a `vae/encode` latent was encoded from is cropped as the encode cropped the
    image; otherwise it is stretched over the latent."""

    def run(self, call: NodeCall) -> NodeResult:
        latent = handle_input(call, "latent", LatentHandle)
        mask = mask_value(call.inputs.get("mask"), "mask", call.node_id)
        on = latent.encoded_from if call.params.get("crop") else None
        masked = dataclasses.replace(latent, noise_mask=mask, noise_mask_on=on)
        return NodeResult(outputs={"latent": masked})


class Sample(_FamilyRunner):
    caches_steps = True  # its steps follow the run's `options.cache`
    samples_steps = True

    def check_node(
        self, node_id: str, params: Mapping[str, Any], facts: SubmitFacts
    ) -> object | None:
        # The model wired in names its family at submit (its loader's, a LoRA's or a control's
        # check says it): what that family cannot run is a 422 before the run starts.
        for handle in facts.upstream.get("model", ()):
            if isinstance(handle, ModelHandle | LoraHandle | Picked):
                family = self.families.named(handle.family)
                settings = SampleSettings.from_params(params)
                refuse_settings(family, settings, node_id)
                # The model's file tells its cfg (behind a `load/lora`, the model it adds to).
                model = handle if isinstance(handle, ModelHandle) else None
                if isinstance(handle, LoraHandle):
                    model = handle.model
                if model is not None:
                    try:
                        family.guidance_for_cfg(settings.cfg, model.transformer)
                    except InvalidRequest as exc:
                        raise InvalidRequest(exc.message, node_id=node_id) from None
                transformer = None if model is None else model.transformer
                for port in ("positive", "negative"):
                    self.check_conditioning(family, transformer, port, facts, node_id)
        return super().check_node(node_id, params, facts)

    def input_needs(
        self, params: Mapping[str, Any], facts: SubmitFacts, needs: Mapping[str, Needs]
    ) -> Mapping[str, Needs]:
        # Its conditionings as its model's family reads them. A model whose family no check
        # said at submit needs every reading, as an untyped encoder gives: `run` picks its own.
        families = frozenset(
            handle.family
            for handle in facts.upstream.get("model", ())
            if isinstance(handle, ModelHandle | LoraHandle | Picked)
        )
        if not families:
            return {}
        return {"positive": families, "negative": families}

    def check_conditioning(
        self,
        family: Family,
        transformer: Source | None,
        port: str,
        facts: SubmitFacts,
        node_id: str,
    ) -> None:
        """A 422 for a `port` conditioning the model cannot take: a guidance set on it that the
        model does not embed, or another family's reading of its encoder."""
        encoders, guidances = unwrapped(facts.upstream.get(port, ()))
        for guidance in guidances:
            try:
                family.embedded_guidance(guidance, transformer)
            except InvalidRequest as exc:
                raise InvalidRequest(exc.message, node_id=node_id) from None
        for encoder in encoders:
            if isinstance(encoder, TextEncoderHandle) and family.name not in encoder.readers:
                raise self.misread(family, encoder.readers, encoder.name, port, node_id)

    def misread(
        self, family: Family, readings: tuple[str, ...], encoder: str, port: str, node_id: str
    ) -> InvalidRequest:
        """The 422 for a `port` conditioning that holds only other families' readings of its
        encoder."""
        read_as = " and ".join(self.families.named(r).title for r in readings)
        types = family.comfy_text_encoder_types
        fix = f": load it with type {types[0]!r}" if types else ""
        return InvalidRequest(
            f"the {port} conditioning is text encoder {encoder!r} read as {read_as} reads it; "
            f"the model is {family.title}'s, which reads its text encoder its own way{fix}",
            node_id=node_id,
        )

    def run(self, call: NodeCall) -> NodeResult:
        model = handle_input(call, "model", ModelHandle)
        positive = handle_input(call, "positive", ConditioningHandle)
        negative = optional_handle(call, "negative", ConditioningHandle)
        latent = handle_input(call, "latent", LatentHandle)
        settings = SampleSettings.from_params(call.params)
        family = self.families.named(model.family)
        positive = self.reading(family, positive, "positive", call.node_id)
        if negative is not None:
            negative = self.reading(family, negative, "negative", call.node_id)
        if settings.guided and negative is None:
            raise InvalidRequest(
                f"cfg {settings.cfg:g} guides against a negative conditioning, and none is wired: "
                "connect one (an encoded empty prompt is what the high-level nodes use), or set "
                "cfg to 1 for no guidance",
                node_id=call.node_id,
            )
        refuse_settings(family, settings, call.node_id)
        if settings.denoise <= 0:
            # ComfyUI's answer to denoise 0: no step to take, the latent as it came.
            return NodeResult(outputs={"latent": latent})
        from inline_core.families.nodes import ops

        sampled = ops.sample(
            self.runtime,
            family,
            settings,
            model,
            positive,
            negative,
            latent,
            call.ctx,
            call.node_id,
        )
        return NodeResult(outputs={"latent": sampled})

    def reading(
        self, family: Family, conditioning: ConditioningHandle, port: str, node_id: str
    ) -> ConditioningHandle:
        """The prompt as the model's family reads it (else a 422)."""
        found = conditioning.read_for(family.name)
        if found is not None:
            return found
        readings = (conditioning.family, *conditioning.readings)
        raise self.misread(family, readings, conditioning.encoder, port, node_id)


def refuse_settings(family: Family, settings: SampleSettings, node_id: str) -> None:
    """A 422 naming what of `settings` the model's family cannot run."""
    if settings.windowed and not family.runs_step_windows:
        raise InvalidRequest(
            f"{family.title}'s sample runs its whole schedule from noise: it cannot run "
            "steps start_step..end_step, without added noise, or hand on leftover noise "
            "(ComfyUI's KSamplerAdvanced)",
            node_id=node_id,
        )
    last = min(settings.end_step, settings.steps)
    if settings.windowed and last - settings.start_step < 1:  # the request's own check, at submit
        raise InvalidRequest(
            f"steps {settings.start_step}..{last} of {settings.steps} hold no step to run: "
            "start_step must be below end_step and steps",
            node_id=node_id,
        )
    try:
        shift = ModelShift.of(settings.shift, settings.mu)
    except ValueError as exc:
        raise InvalidRequest(str(exc), node_id=node_id) from None
    if shift is not None and not family.runs_model_shift:
        raise InvalidRequest(
            f"{family.title} samples at its model's own shift: it cannot run {shift.describe()} "
            "(ComfyUI's ModelSamplingSD3/AuraFlow/Flux); leave shift and mu empty",
            node_id=node_id,
        )
    if settings.sampler in CFG_PP_SAMPLERS:
        if not family.runs_cfg_pp:
            raise InvalidRequest(
                f"{family.title}'s step hands on no unconditional prediction, so it cannot run "
                f"the CFG++ sampler {settings.sampler!r}; the closest it runs is "
                f"{settings.sampler.removesuffix('_cfg_pp')!r}",
                node_id=node_id,
            )
        if not settings.guided:
            raise InvalidRequest(cfg_pp_unguided(settings.sampler), node_id=node_id)


class VAEDecode(_FamilyRunner):
    def run(self, call: NodeCall) -> NodeResult:
        from inline_core.families.nodes import ops

        vae = handle_input(call, "vae", VAEHandle)
        latent = handle_input(call, "latent", LatentHandle)
        ctx, node_id = call.ctx, call.node_id
        reporter = ctx.reporter(node_id)
        reporter.phase("decode")
        images = ops.decode(self.runtime, self.families.named(vae.family), vae, latent, ctx.run_id)
        reporter.phase("save")
        params = dict(latent.info) | {"vae": vae.name}
        takes = tuple(
            ctx.save_image(
                node_id, image, params | ({"batch_index": i} if len(images) > 1 else {}), index=i
            )
            for i, image in enumerate(images)
        )
        reporter.phase("save", 1.0)
        # The `image` socket carries one image: the batch's first (every item is a take).
        return NodeResult(outputs={"image": images[0]}, takes=takes)


class VAEEncode(_FamilyRunner):
    def run(self, call: NodeCall) -> NodeResult:
        from inline_core.families.nodes import ops

        vae = handle_input(call, "vae", VAEHandle)
        image = _image(call)
        reporter = call.ctx.reporter(call.node_id)
        reporter.phase("encode")
        latent = ops.encode_image(
            self.runtime, self.families.named(vae.family), vae, image, call.ctx.run_id
        )
        reporter.phase("encode", 1.0)
        return NodeResult(outputs={"latent": latent})


class VAEEncodeInpaint(_FamilyRunner):
    """The image with its masked part mid-gray, encoded; its latent's noise mask, the mask grown
    by `grow` pixels."""

    def run(self, call: NodeCall) -> NodeResult:
        from inline_core.families.nodes import ops

        vae = handle_input(call, "vae", VAEHandle)
        image = _image(call)
        mask = mask_value(call.inputs.get("mask"), "mask", call.node_id)
        reporter = call.ctx.reporter(call.node_id)
        reporter.phase("encode")
        family = self.families.named(vae.family)
        grow = int(call.params["grow"])
        latent = ops.encode_for_inpaint(
            self.runtime, family, vae, image, mask, grow, call.ctx.run_id
        )
        reporter.phase("encode", 1.0)
        return NodeResult(outputs={"latent": latent})


def _image(call: NodeCall) -> Image.Image:
    image = call.inputs.get("image")
    if not isinstance(image, Image.Image):
        raise InvalidRequest("the image input must be an image", node_id=call.node_id)
    return image
