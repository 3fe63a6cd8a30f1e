"""What of LTX-2's ComfyUI templates the recipe's data does not reach (`comfy.py`'s reader):
the audio and video latents side by side (LTXVConcatAVLatent, LTXVSeparateAVLatent), LTXVScheduler
as the node's schedule, the size measured from an image (EmptyImage, ImageScaleBy, GetImageSize),
the first frame (LTXVImgToVideoInplace), the loaders that all read the one all-in-one file, and
the frame rates the chain states three times. The two-stage upscale (LTXVLatentUpsampler and the
second sampler) is refused naming it; what renders otherwise than in ComfyUI is listed as
changing the picture."""

from __future__ import annotations

from typing import Any, ClassVar

from inline_core.families.ltx2.comfy import (
    AUDIO_LATENT,
    AUDIO_VAE_LOADER,
    CONCAT,
    CONDITIONING,
    IMAGE_IN_PLACE,
    PREPROCESS,
    SCHEDULER,
    SEPARATE,
    TEXT_ENCODER_LOADER,
    UPSAMPLER,
    VIDEO_LATENT,
)
from inline_core.importer.custom_collapse import ADVANCED, CustomCollapse
from inline_core.importer.dropped import UnsupportedNode
from inline_core.importer.images import load_image
from inline_core.importer.own_node import Sampling
from inline_core.importer.values import Port, describe
from inline_core.importer.workflow import ComfyNode, Link

CHECKPOINT = "CheckpointLoaderSimple"
# LTXVScheduler's published shifts: there, its sigmas are LTX2Pipeline's (the node's "simple").
PUBLISHED = {"max_shift": 2.05, "base_shift": 0.95, "stretch": True, "terminal": 0.1}
IMAGE_RESIZERS = ("ResizeImageMaskNode", "ImageScale", "ImageScaleBy")


class LTX2Collapse(CustomCollapse):
    SAMPLERS: ClassVar[tuple[str, ...]] = (SEPARATE,)
    SCHEDULERS: ClassVar[tuple[str, ...]] = (SCHEDULER,)
    MODEL_LOADERS: ClassVar[dict[str, tuple[str, str]]] = {CHECKPOINT: ("ckpt_name", "checkpoints")}

    def sampling(self, sampler: ComfyNode) -> Sampling:
        """The sampler behind the decoded latents (through LTXVSeparateAVLatent), one stage:
        its cfg guides both streams."""
        advanced = self.required(sampler, "av_latent")
        self.expect(advanced, ADVANCED)
        self._one_stage(advanced)
        found = self.node_names(advanced, super().sampling(advanced))
        found.extra["audio_guidance"] = found.guidance
        return found

    def _one_stage(self, advanced: ComfyNode) -> None:
        latent = self.required(advanced, "latent_image")
        self.expect(latent, CONCAT)
        video = self.required(latent, "video_latent")
        while video.class_type == IMAGE_IN_PLACE:  # the first frame, put on the latents
            video = self.required(video, "latent")
        if video.class_type == UPSAMPLER:
            raise UnsupportedNode(
                f"{describe(video)}: the two-stage upscale (a latent upsampler and a second "
                f"sampler) is not offered; {self.descriptor.type} renders one stage (bypass the "
                "upscale and its sampler, and decode the first sampler's latents)"
            )

    def schedule(self, sigmas: ComfyNode, sampler: ComfyNode) -> dict[str, Any]:
        """LTXVScheduler at its published shifts is the node's own schedule; other shifts are
        refused naming the widget."""
        m = self.mapper
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
        """The loaders on the chain all read the one all-in-one file (the model's); its Gemma 3
        is read from a folder."""
        m = self.mapper
        if loader.class_type == TEXT_ENCODER_LOADER:
            m.warn(
                f"{describe(loader)}: the Gemma 3 text encoder is read from a folder in "
                f"text_encoders/ (its tokenizer inside), not from "
                f"{m.text(loader, 'text_encoder')!r}"
            )
            self._same_file(loader, "ckpt_name")
            return
        self.expect(loader, CHECKPOINT, AUDIO_VAE_LOADER)
        self._same_file(loader, "ckpt_name")

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
            image = self.required(image, "image")
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
