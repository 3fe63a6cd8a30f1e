"""What of LTX-2's ComfyUI templates the recipe's data does not reach (`comfy.py`'s reader):
the audio and video latents side by side (LTXVConcatAVLatent, LTXVSeparateAVLatent), LTXVScheduler
as the node's schedule, the size measured from an image (EmptyImage, ImageScaleBy, GetImageSize),
the first frame (LTXVImgToVideoInplace), the loaders that all read the one all-in-one file, and
the frame rates the chain states three times, the Gemma 3 file (LTXAVTextEncoderLoader's,
the node's `text_encoder`, checked to be one this server reads), and the official two-stage upscale
(LTXVLatentUpsampler and a refining sampler, its LoRAs on the refining pass, its sampler the
node's `refine_sampler`, its ManualSigmas the node's `refine_sigmas`) as the node's `upscale`,
from text or from a first frame; a first
sampler on ManualSigmas (the distilled template's) as the node's `sigmas`. What
renders otherwise than in ComfyUI is listed as changing the picture; what the node cannot render
is refused naming it."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, ClassVar

from inline_core.contract.lora_stacks import BOTH, HIGH, LOW
from inline_core.families.ltx2.comfy import (
    AUDIO_LATENT,
    AUDIO_VAE_LOADER,
    CONCAT,
    CONDITIONING,
    CROP_GUIDES,
    IMAGE_IN_PLACE,
    PREPROCESS,
    SCHEDULER,
    SEPARATE,
    TEXT_ENCODER_LOADER,
    UPSAMPLER,
    UPSCALE_LOADER,
    VIDEO_LATENT,
)
from inline_core.families.ltx2.descriptor import UPSCALE_CATEGORY
from inline_core.families.ltx2.files import encoder_problem
from inline_core.families.ltx2.manual_sigmas import parse_sigmas
from inline_core.graph.sampler_names import SAMPLERS as NODE_SAMPLERS
from inline_core.importer.custom_collapse import ADVANCED, CustomCollapse
from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.images import load_image
from inline_core.importer.own_node import Sampling
from inline_core.importer.samplers import exact_name
from inline_core.importer.values import Port, describe
from inline_core.importer.workflow import ComfyNode, Link

CHECKPOINT = "CheckpointLoaderSimple"
# LTXVScheduler's published shifts: there, its sigmas are LTX2Pipeline's (the node's "simple").
PUBLISHED = {"max_shift": 2.05, "base_shift": 0.95, "stretch": True, "terminal": 0.1}
MANUAL = "ManualSigmas"  # the refining sampler's sigmas
LATENT_PIXELS = 32  # LTX-2's video latent's pixels a side: ComfyUI floors a size to them
IMAGE_RESIZERS = ("ResizeImageMaskNode", "ImageScale", "ImageScaleBy")
ENCODERS = "text_encoders"
GEMMA_4 = re.compile(r"gemma[-_ ]?4", re.IGNORECASE)  # LTX-2.5's text encoder's files
CLIP_LOADER, LTXV_CLIP_TYPE = "CLIPLoader", "ltxv"  # how LTX-2.5's templates load Gemma 4


class LTX2Collapse(CustomCollapse):
    refining_id = ""  # the refining sampler's node id, once read
    first_sigmas = ""  # the first sampler's ManualSigmas, if any: the node's `sigmas`
    SAMPLERS: ClassVar[tuple[str, ...]] = (SEPARATE,)
    SCHEDULERS: ClassVar[tuple[str, ...]] = (SCHEDULER, MANUAL)
    MODEL_LOADERS: ClassVar[dict[str, tuple[str, str]]] = {CHECKPOINT: ("ckpt_name", "checkpoints")}

    def sampling(self, sampler: ComfyNode) -> Sampling:
        """The sampler behind the decoded latents (through LTXVSeparateAVLatent): one stage, or
        the official two: the first sampler, LTXVLatentUpsampler on its video latents, and a
        refining sampler on ManualSigmas (the node's `upscale`). Its cfg guides both streams."""
        advanced = self.required(sampler, "av_latent")
        self.expect(advanced, ADVANCED)
        upsampler = self._upsampler(advanced)
        if upsampler is None:
            found = self.node_names(advanced, super().sampling(advanced))
        else:
            first = self._first_stage(upsampler)
            found = self.node_names(first, super().sampling(first))
            found = replace(found, last=self.as_refining(advanced, found))
            found.extra.update(upscale=True, upscale_model=self._upsampler_file(upsampler))
        if self.first_sigmas:
            found.extra["sigmas"] = self.first_sigmas
        found.extra["audio_guidance"] = found.guidance
        return found

    def _upsampler(self, advanced: ComfyNode) -> ComfyNode | None:
        latent = self.required(advanced, "latent_image")
        self.expect(latent, CONCAT)
        video = self.required(latent, "video_latent")
        while video.class_type == IMAGE_IN_PLACE:  # the first frame, put on the latents
            self.mapper.substituted(
                video,
                "the refining pass keeps the upsampled first frame clean (diffusers' chain), "
                "not the image encoded again at the full size",
            )
            video = self.required(video, "latent")
        return video if video.class_type == UPSAMPLER else None

    def _first_stage(self, upsampler: ComfyNode) -> ComfyNode:
        """The first sampler: the one whose video latents the upsampler takes (through
        LTXVCropGuides and LTXVSeparateAVLatent)."""
        latents = self.required(upsampler, "samples")
        if latents.class_type == CROP_GUIDES:
            latents = self.required(latents, "latent")
        self.expect(latents, SEPARATE)
        first = self.required(latents, "av_latent")
        self.expect(first, ADVANCED)
        return first

    def _upsampler_file(self, upsampler: ComfyNode) -> str:
        loader = self.required(upsampler, "upscale_model")
        self.expect(loader, UPSCALE_LOADER)
        vae = self.source(upsampler, "vae", optional=True)
        if vae is not None:
            self.part(vae)
        m = self.mapper
        wanted = m.text(loader, "model_name")
        return m.model_file(f"c{upsampler.id}", UPSCALE_CATEGORY, wanted, describe(loader))

    def as_refining(self, advanced: ComfyNode, first: Sampling) -> ComfyNode:
        """The refining sampler, checked to be the node's refining pass: ManualSigmas (the
        node's `refine_sigmas`), cfg 1; its sampler the node's `refine_sampler`; its seed is
        the node's."""
        m = self.mapper
        self.refining_id = advanced.id
        stage = self.as_ksampler(advanced)
        sigmas = self.required(advanced, "sigmas")
        self.expect(sigmas, MANUAL)
        # Written out, whatever the version's own are (versions.py): the template's, kept.
        first.extra["refine_sigmas"] = m.text(sigmas, "sigmas")
        parse_sigmas(first.extra["refine_sigmas"], describe(sigmas), "refine_sigmas")
        if m.number(stage, "cfg", 1.0) != 1.0:
            raise UnsupportedNode(
                f"{describe(advanced)}: its cfg {m.number(stage, 'cfg', 1.0):g} is not offered; "
                f"{self.descriptor.type}'s refining pass is unguided (cfg 1)"
            )
        wanted = m.text(stage, "sampler_name", "euler")
        # Written out too: an empty one is the version's, not necessarily the first's.
        first.extra["refine_sampler"] = exact_name(
            "sampler", wanted, NODE_SAMPLERS, describe(advanced)
        )
        if m.whole(stage, "seed", first.seed) != first.seed:
            m.substituted(
                advanced,
                "its noise seed is not the first's: the refining pass draws "
                "its noise from the node's seed",
            )
        return stage

    def model(self, sampling: Sampling, node_id: str) -> dict[str, Any]:
        """The model's way; with the refining sampler, each LoRA on the pass whose model it
        adapts (`input/lora`'s expert: `high` the first, `low` the refining, `both` both)."""
        if sampling.last is None:
            return super().model(sampling, node_id)
        values, adapters, node = self.model_way(sampling.first)
        _values, refining, _node = self.model_way(sampling.last)
        ids = [n.id for n in adapters]
        refine_ids = [n.id for n in refining]
        self.loras = [self.lora(n, BOTH if n.id in refine_ids else HIGH) for n in adapters]
        self.loras += [self.lora(n, LOW) for n in refining if n.id not in ids]
        return {**values, self.recipe.names.model: self.model_file(node, node_id)}

    def schedule(self, sigmas: ComfyNode, sampler: ComfyNode) -> dict[str, Any]:
        """LTXVScheduler at its published shifts is the node's own schedule; other shifts are
        refused naming the widget."""
        m = self.mapper
        if sigmas.class_type == MANUAL:
            if sampler.id != self.refining_id:  # the first pass on its own levels
                self.first_sigmas = m.text(sigmas, "sigmas")
                levels = parse_sigmas(self.first_sigmas, describe(sigmas))
                return {"steps": len(levels), "scheduler": "simple", "denoise": 1.0}
            levels = parse_sigmas(m.text(sigmas, "sigmas"), describe(sigmas), "refine_sigmas")
            return {"steps": len(levels), "scheduler": "simple", "denoise": 1.0}
        self.source(sigmas, "latent", optional=True)  # the latent it is sized by: the sampler's
        for widget, value in PUBLISHED.items():
            got = m.literal(sigmas, widget)
            same = got is None or (
                bool(got) == value if isinstance(value, bool) else abs(float(got) - value) < 1e-9
            )
            if not same:
                raise UnsupportedNode(
                    f"{describe(sigmas)}: {widget} {got!r} is not offered; "
                    f"{self.descriptor.type} schedules at LTX-2's own {widget} {value!r}"
                )
        return {"steps": sigmas.inputs.get("steps"), "scheduler": "simple", "denoise": 1.0}

    def sampling_notes(self, sampler: ComfyNode) -> None:
        self.denoise_note(sampler)

    def part(self, loader: ComfyNode) -> None:
        """The loaders on the chain read the one all-in-one file (the model's), but for
        LTXAVTextEncoderLoader's Gemma 3 file: the node's `text_encoder` (a Gemma 4 name,
        LTX-2.5's, is refused naming it)."""
        if loader.class_type == TEXT_ENCODER_LOADER:
            self._same_file(loader, "ckpt_name")
            self._refuse_gemma_4(loader, self.mapper.text(loader, "text_encoder"))
            super().part(loader)
            return
        if loader.class_type == CLIP_LOADER:  # LTX-2.5's templates load Gemma 4 with it
            wanted = self.mapper.text(loader, "clip_name")
            self._refuse_gemma_4(loader, wanted)
            if self.mapper.text(loader, "type") == LTXV_CLIP_TYPE:
                raise UnsupportedNode(
                    f"{describe(loader)}: a CLIPLoader of type {LTXV_CLIP_TYPE!r} ({wanted!r}) "
                    f"is LTX-2.5's layout; {self.descriptor.type} reads LTX-2.0/2.3's Gemma 3 "
                    f"through {TEXT_ENCODER_LOADER}, and LTX-2.5 from its diffusers folder"
                )
        self.expect(loader, CHECKPOINT, AUDIO_VAE_LOADER)
        self._same_file(loader, "ckpt_name")

    def part_params(self, node_id: str) -> dict[str, str]:
        """The Gemma 3 file as the catalog names it; one here that this server cannot read as
        Gemma 3 is refused naming it (one not here is `unmatched`, the import's models map
        it)."""
        params = super().part_params(node_id)
        name = params.get("text_encoder")
        catalog = self.mapper.catalog
        if name is None or name not in catalog.options(ENCODERS):
            return params
        problem = encoder_problem(catalog.path(ENCODERS, name))
        if problem is not None:
            loader = describe(self.parts["text_encoder"][0])
            raise UnsupportedNode(
                f"{loader}: the text encoder {ENCODERS}/{name} cannot be read: {problem}"
            )
        return params

    def _refuse_gemma_4(self, loader: ComfyNode, wanted: str) -> None:
        """ComfyUI's LTX-2.5 files are not read here: the 422 says what the render needs."""
        if GEMMA_4.search(wanted):
            raise UnsupportedNode(
                f"{describe(loader)}: {wanted!r} is Gemma 4, LTX-2.5's text encoder: "
                f"{self.descriptor.type} renders LTX-2.0 and 2.3 from ComfyUI's files (Gemma 3), "
                "and LTX-2.5 only from its diffusers folder in diffusion_models (text_encoder/ "
                "Gemma 4, diffusion_decoder/ its diffusion video decoder): ComfyUI's LTX-2.5 "
                "files (its templates' transformer, Gemma 4 with projection and audio VAE) are "
                "not read: their int8 'convrot' layers are, their layout is not (comfy_ltx25.py; "
                "its video VAE file is, in vae/, beside that folder); map the workflow's model "
                "to that folder "
                "(`inline-core download --family ltx2 ltx-2.5` fetches it)"
            )

    def _same_file(self, loader: ComfyNode, widget: str) -> None:
        wanted = self.mapper.text(loader, widget)
        model = next((n for n in self.nodes.values() if n.class_type == CHECKPOINT), None)
        if model is not None and self.mapper.text(model, "ckpt_name") != wanted:
            raise UnsupportedNode(
                f"{describe(loader)} reads {wanted!r}, another file than the model's: "
                f"{self.descriptor.type} renders every part from its one all-in-one file"
            )

    def sink(self, sink: ComfyNode, params: dict[str, Any]) -> ComfyNode:
        frames = super().sink(sink, params)
        create = self.required(sink, "video")
        audio = self.source(create, "audio", optional=True)
        if audio is not None:
            self.expect(audio, "LTXVAudioVAEDecode")
            self.part(self.required(audio, "audio_vae"))
            self.required(audio, "samples")
        return frames

    def latent(self, sampler: ComfyNode, params: dict[str, Any]) -> Port | None:
        """The video latent's size and length, the audio latent's length and rate checked
        against them, and the first frame (LTXVImgToVideoInplace's image), if any."""
        m = self.mapper
        concat = self.required(sampler, "latent_image")
        video = self.required(concat, "video_latent")
        start: ComfyNode | None = None
        if video.class_type == IMAGE_IN_PLACE:
            start = self._first_frame(video)
            video = self.required(video, "latent")
        self.expect(video, VIDEO_LATENT)
        params["width"] = self._size(video, "width", 768)
        params["height"] = self._size(video, "height", 512)
        if params.get("upscale"):
            for name in ("width", "height"):  # the upsampled latents' size, twice the first's
                params[name] = 2 * (params[name] - params[name] % LATENT_PIXELS)
        params["frames"] = m.whole(video, "length", 97)
        if m.whole(video, "batch_size", 1) != 1:
            m.warn(f"{describe(video)}: a batch is not offered; one renders")
        audio = self.required(concat, "audio_latent")
        self.expect(audio, AUDIO_LATENT)
        self.part(self.required(audio, "audio_vae"))
        if m.whole(audio, "frames_number", params["frames"]) != params["frames"]:
            m.substituted(audio, "its frame count is not the video's: the sound lasts as it does")
        self._same_rate(audio, params)
        if start is None:
            return None
        value = load_image(m, start, 0)
        return None if value is None else value.port

    def _same_rate(self, audio: ComfyNode, params: dict[str, Any]) -> None:
        fps = params.get("fps")
        rates = [(audio, self.mapper.number(audio, "frame_rate", 25.0))]
        rates += [
            (n, self.mapper.number(n, "frame_rate", 25.0))
            for n in self.nodes.values()
            if n.class_type == CONDITIONING and n.id in self.read
        ]
        for node, rate in rates:
            if fps is not None and abs(rate - float(fps)) > 1e-6:
                self.mapper.substituted(
                    node, f"its frame rate {rate:g} is not the video's {fps}: it renders at {fps}"
                )

    def _first_frame(self, node: ComfyNode) -> ComfyNode:
        m = self.mapper
        if m.number(node, "strength", 1.0) != 1.0 or bool(m.literal(node, "bypass")):
            m.substituted(node, "the first frame is kept clean (strength 1, not bypassed)")
        vae = self.source(node, "vae", optional=True)
        if vae is not None:
            self.part(vae)
        image = self.required(node, "image")
        if image.class_type == PREPROCESS:
            image = self.required(image, "image")
        while image.class_type in IMAGE_RESIZERS:
            m.substituted(image, "not applied: the first frame is stretched to width x height")
            # ComfyUI's ResizeImageMaskNode takes its image on `input`.
            image = self.required(image, "input" if "input" in image.inputs else "image")
        self.expect(image, "LoadImage")
        return image

    def _size(self, node: ComfyNode, name: str, default: int) -> int:
        """A size widget: a literal, or GetImageSize of an image whose size is known before it
        runs (EmptyImage, scaled by ImageScaleBy)."""
        raw = node.inputs.get(name)
        source = self.nodes.get(raw.node) if isinstance(raw, Link) else None
        if source is None or source.class_type != "GetImageSize" or not isinstance(raw, Link):
            return self.mapper.whole(node, name, default)
        self.read.add(source.id)
        width, height = self._image_size(self.required(source, "image"))
        if raw.slot not in (0, 1):
            raise UnsupportedNode(f"{describe(node)}: its {name} is not an image's width or height")
        return (width, height)[raw.slot]

    def _image_size(self, node: ComfyNode) -> tuple[int, int]:
        m = self.mapper
        if node.class_type == "EmptyImage":
            return m.whole(node, "width", 512), m.whole(node, "height", 512)
        if node.class_type == "ImageScaleBy":
            width, height = self._image_size(self.required(node, "image"))
            scale = m.number(node, "scale_by", 1.0)
            return round(width * scale), round(height * scale)
        raise UnsupportedNode(
            f"{describe(node)}: the size it gives is not known before it runs; set the "
            "latent's width and height"
        )
