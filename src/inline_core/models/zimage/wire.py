"""A Z-Image request as it crosses into the worker group: plain params plus raw blobs (torch-free).

Only what a request is made of travels (prompt, size, steps, guidance, seed, sampler and schedule,
img2img source and strength, and for the `sample` primitive its encoded prompts and starting
latents); every rank rebuilds the state with its own pipeline's `request()`, so prompt encoding,
noise and schedule are computed there exactly as in process. Images travel as raw pixels, not PNG,
and tensors as their raw bytes with dtype and shape, so everything arrives bit for bit.

`output` says what the ranks send back: the decoded image (the `alibaba/z-image-turbo` node), or
the final latents (the `sample` primitive, which decodes with its own `vae/decode`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, cast

from PIL import Image

from inline_core.components.interfaces import Conditioning, Latents
from inline_core.parallel.protocol import Json
from inline_core.parallel.remote import (
    RemoteRequest,
    pack_image,
    pack_tensor,
    unpack_image,
    unpack_tensor,
)

if TYPE_CHECKING:
    from inline_core.models.zimage.pipeline import ZImageRequest

Output = Literal["image", "latents"]
OUTPUTS: tuple[Output, ...] = ("image", "latents")
IMAGE_BLOB = "image"
CONDITIONING_BLOBS = ("positive", "negative")
START_BLOB = "start"


def request_to_remote(state: ZImageRequest, output: Output = "image") -> RemoteRequest:
    """The request's inputs; a state already prepared or stepped cannot be sent."""
    if state.schedule is not None or state.step_index:
        raise ValueError("only a request that has not started can be sent to the worker group")
    params: dict[str, Json] = {
        "output": output,
        "prompt": state.prompt,
        "negativePrompt": state.negative_prompt,
        "width": state.width,
        "height": state.height,
        "steps": state.steps,
        "guidance": state.guidance,
        "seed": state.seed,
        "strength": state.strength,
        "cfgTruncation": state.cfg_truncation,
        "cfgNormalization": state.cfg_normalization,
        "sampler": state.sampler,
        "sigmaSchedule": state.sigma_schedule,
        "denoise": state.denoise,
        "batchSize": state.batch_size,
        "batchIndex": state.batch_index,
    }
    blobs: dict[str, bytes] = {}
    if state.image is not None:
        params[IMAGE_BLOB], blobs[IMAGE_BLOB] = pack_image(state.image)
    encoded = (state.positive, state.negative)
    for name, conditioning in zip(CONDITIONING_BLOBS, encoded, strict=True):
        if conditioning is not None:
            meta, blobs[name] = pack_tensor(conditioning.value)
            params[name] = {**meta, "tokens": conditioning.tokens}
    if state.start is not None:
        meta, blobs[START_BLOB] = pack_tensor(state.start.value)
        params[START_BLOB] = {**meta, "latentShape": list(state.start.shape)}
    return RemoteRequest(params, blobs)


def request_output(request: RemoteRequest) -> Output:
    """What the ranks send back for this request."""
    output = request.params.get("output", "image")
    if output not in OUTPUTS:
        raise ValueError(f"unknown request output {output!r}; outputs: {', '.join(OUTPUTS)}")
    return output


def request_kwargs(request: RemoteRequest) -> dict[str, Any]:
    """Keyword arguments for `ZImageStepPipeline.request` rebuilding the sent request."""
    p, blobs = request.params, request.blobs
    image: Image.Image | None = None
    meta = p.get(IMAGE_BLOB)
    if isinstance(meta, dict):
        image = unpack_image(meta, blobs[IMAGE_BLOB])
    conditioning: dict[str, Conditioning | None] = {}
    for name in CONDITIONING_BLOBS:
        meta = p.get(name)
        conditioning[name] = (
            Conditioning(unpack_tensor(meta, blobs[name]), _int(meta["tokens"]))
            if isinstance(meta, dict)
            else None
        )
    start: Latents | None = None
    meta = p.get(START_BLOB)
    if isinstance(meta, dict):
        shape = tuple(_int(n) for n in cast(list[Json], meta["latentShape"]))
        start = Latents(unpack_tensor(meta, blobs[START_BLOB]), shape)
    return {
        "prompt": str(p["prompt"]),
        "negative_prompt": str(p.get("negativePrompt") or ""),
        "width": _int(p["width"]),
        "height": _int(p["height"]),
        "steps": _int(p["steps"]),
        "guidance": _float(p["guidance"]),
        "seed": _int(p["seed"]),
        "strength": _float(p.get("strength", 0.6)),
        "cfg_truncation": _float(p.get("cfgTruncation", 1.0)),
        "cfg_normalization": _float(p.get("cfgNormalization", 0.0)),
        "sampler": str(p.get("sampler") or "euler"),
        "sigma_schedule": str(p.get("sigmaSchedule") or "simple"),
        "denoise": _float(p.get("denoise", 1.0)),
        "batch_size": _int(p.get("batchSize", 1)),
        "batch_index": _int(p.get("batchIndex", 0)),
        "image": image,
        "positive": conditioning["positive"],
        "negative": conditioning["negative"],
        "start": start,
    }


def _int(value: Json) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, got {value!r}")
    return int(value)


def _float(value: Json) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, got {value!r}")
    return float(value)
