"""A Z-Image request as it crosses into the worker group: plain params plus raw blobs (torch-free).

Only what a request is made of travels (prompt, size, steps, guidance, seed, sampler and schedule,
img2img source and strength); every rank rebuilds the state with its own pipeline's `request()`,
so prompt encoding, noise and schedule are computed there exactly as in process. The source image
travels as raw pixels, not PNG, so it arrives bit for bit. A request that carries tensors (encoded
prompts, starting latents) is refused: those are the low-level nodes', which render in process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PIL import Image

from inline_core.errors import InvalidRequest
from inline_core.parallel.protocol import Json
from inline_core.parallel.remote import RemoteRequest, pack_image, unpack_image

if TYPE_CHECKING:
    from inline_core.models.zimage.pipeline import ZImageRequest

IMAGE_BLOB = "image"


def request_to_remote(state: ZImageRequest) -> RemoteRequest:
    """The request's inputs; a state already prepared or stepped cannot be sent."""
    if state.schedule is not None or state.step_index:
        raise ValueError("only a request that has not started can be sent to the worker group")
    if state.start is not None or state.positive is not None or state.negative is not None:
        raise InvalidRequest(
            "a render from encoded prompts or starting latents cannot be split across ranks"
        )
    params: dict[str, Json] = {
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
        meta, data = pack_image(state.image)
        params[IMAGE_BLOB] = meta
        blobs[IMAGE_BLOB] = data
    return RemoteRequest(params, blobs)


def request_kwargs(request: RemoteRequest) -> dict[str, Any]:
    """Keyword arguments for `ZImageStepPipeline.request` rebuilding the sent request."""
    p = request.params
    image: Image.Image | None = None
    meta = p.get(IMAGE_BLOB)
    if isinstance(meta, dict):
        image = unpack_image(meta, request.blobs[IMAGE_BLOB])
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
    }


def _int(value: Json) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, got {value!r}")
    return int(value)


def _float(value: Json) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a number, got {value!r}")
    return float(value)
