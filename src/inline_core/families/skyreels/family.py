"""SkyReels-V2 diffusion forcing as a family: its node, files, request and capabilities
(torch-free).

`skywork/skyreels-v2` renders text to video with a SkyReels-V2 DF model (1.3B or 14B), chunk by
chunk for a video longer than `base_frames` (`chunks.py`): its step pipeline implements spec
003's chunk-boundary protocol, which the step loop calls at every boundary. Requests of one
window shape share a forward. Its VAE and text encoder are Wan's. Its torch side is `build.py`.
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
from inline_core.downloads.targets import Downloads
from inline_core.errors import InvalidRequest
from inline_core.families.nodes.inputs import image_input, prompt_text
from inline_core.families.nodes.video_params import check_encoders
from inline_core.families.skyreels import chunks
from inline_core.families.skyreels.comfy import RECIPE
from inline_core.families.skyreels.descriptor import (
    EXTRA_HINT,
    GUIDANCE_DEFAULT,
    NODE_TYPE,
    SKYREELS_DESCRIPTOR,
)
from inline_core.families.skyreels.download import DOWNLOADS
from inline_core.families.skyreels.files import RULES, flow_shift
from inline_core.families.skyreels.request import SkyReelsRequest, new_request, sampler_refusal
from inline_core.graph.descriptor import NodeDescriptor
from inline_core.models.source import Source
from inline_core.runtime.video import Video

REQUEST_PARAMS = (
    "width",
    "height",
    "frames",
    "fps",
    "steps",
    "guidance",
    "seed",
    "format",
    "base_frames",
    "overlap",
    "ar_step",
    "causal_block_size",
)
INTS = ("width", "height", "frames", "fps", "steps", "seed", "ar_step", "causal_block_size")


class SkyReelsFamily(Family):
    name = "skyreels"
    title = "SkyReels-V2"
    requires = ("torch", "diffusers", "transformers", "safetensors")
    install_hint = EXTRA_HINT
    builder = "inline_core.families.skyreels.build:BUILDER"
    kit = "inline_core.families.skyreels.kit:main"
    download = "inline_core.families.skyreels.download:main"
    capabilities = Capabilities(
        batching="shapes",  # one batched tensor per forward: one window shape per forward
        chunked_decode=True,
        fp16_overflow=frozenset({"text_encoder", "denoiser"}),  # as Wan's
    )

    def comfy_recipe(self) -> ComfyRecipe:
        return RECIPE

    def nodes(self) -> tuple[NodeDescriptor, ...]:
        return (SKYREELS_DESCRIPTOR,)

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
            raise InvalidRequest(f"SkyReels-V2 has no node {node_type!r}", node_id=node_id)
        request: dict[str, Any] = {
            "prompt": prompt_text(inputs.get("prompt"), node_id),
            "negative_prompt": str(params.get("negative_prompt") or ""),
            **{name: params.get(name) for name in REQUEST_PARAMS},
        }
        for name in INTS:
            request[name] = int(request[name])
        for name in ("base_frames", "overlap"):
            if request[name] is not None:
                request[name] = int(request[name])
        request["guidance"] = float(request["guidance"])
        request["sampler"] = str(params.get("sampler") or "")  # empty: the model's own
        request["sigma_schedule"] = str(params.get("schedule") or "")
        shift = params.get("shift")
        request["shift"] = None if shift is None else float(shift)
        take_params = {**request, "image_to_video": False, "extends_frames": 0}
        image = image_input(inputs, "image", node_id)
        if image is not None:  # the image itself is the run's input, not a take param
            request["image"] = image
            take_params["image_to_video"] = True
        extended = inputs.get("video")
        if extended is not None:
            if not isinstance(extended, Video):
                raise InvalidRequest("the video input must be a video", node_id=node_id)
            request["extend"] = extended.frames
            take_params["extends_frames"] = extended.frame_count
        return Lowered(request, take_params)

    def check(self, submit: Submit) -> None:
        if submit.node_type != NODE_TYPE:
            return
        params = submit.params
        frames = int(params.get("frames") or 0)
        if (frames - 1) % chunks.TEMPORAL_FACTOR:
            raise InvalidRequest(
                f"param 'frames' must be 4k+1 (1, 5, 9, ..., 97), got {frames}: the Wan VAE "
                "decodes the first frame alone and four frames per latent frame after it",
                node_id=submit.node_id,
            )
        base, overlap = params.get("base_frames"), params.get("overlap")
        why = chunks.refusal(
            frames,
            None if base is None else int(base),
            None if overlap is None else int(overlap),
            int(params.get("causal_block_size") or 1),
        )
        if why is not None:
            raise InvalidRequest(why, node_id=submit.node_id)
        for name in ("width", "height"):
            value = params.get(name)
            if value is not None and int(value) % 16:
                raise InvalidRequest(
                    f"param '{name}' must be a multiple of 16 (the VAE is 8x down, then 2x2 "
                    f"patches), got {value}",
                    node_id=submit.node_id,
                )
        guidance = params.get("guidance")
        why = sampler_refusal(
            str(params.get("sampler") or ""),
            str(params.get("schedule") or ""),
            GUIDANCE_DEFAULT if guidance is None else float(guidance),
        )
        if why is not None:
            raise InvalidRequest(why, node_id=submit.node_id)
        check_encoders(params, submit.node_id, "a lossless animated PNG")

    def new_request(
        self, stack: Stack, sources: Sources, model_key: Hashable, **kwargs: Any
    ) -> SkyReelsRequest:
        return new_request(model_key, **kwargs)

    def flow_shift(self, scheduler: Source | None) -> float | None:
        return flow_shift(scheduler)
