"""`/view`, `/upload/image` and `/upload/mask`: ComfyUI's file names onto our takes and assets.

An output file is a take, named `<take id><suffix>` (`type=output`); an input is an uploaded
asset, named `<asset id><suffix>` (`type=input`). A name is only ever looked up by its id, so no
name can reach outside the takes and assets folders; one with `..` or a leading `/` is refused
with 400 as ComfyUI refuses it. Uploads go through the asset store: the same size limit, the
same checks of the bytes, as `POST /v1/assets`.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, cast

from PIL import Image
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.types import Message

from inline_core.errors import InvalidRequest, NotFound, UnsupportedMedia
from inline_core.media import mime_for_suffix
from inline_core.server.assets import ASSET_ID, TAKE_ID, asset_row
from inline_core.server.bootstrap import Services
from inline_core.server.comfy.errors import BadPath
from inline_core.server.http_io import declared_length, read_body, whole_number
from inline_core.server.stores.records import Asset
from inline_core.sizes import human_size

SUFFIXES = {"image/png": ".png", "image/jpeg": ".jpg", "image/webp": ".webp"}
FORM_SLACK = 64 * 1024  # the multipart framing and fields around the file
PREVIEW_FORMATS = {"webp": ("WEBP", "image/webp"), "jpeg": ("JPEG", "image/jpeg")}


def annotated(name: str) -> tuple[str, str | None]:
    """`"x.png [output]"` -> ("x.png", "output"): ComfyUI's annotated file names."""
    for kind in ("input", "output", "temp"):
        suffix = f" [{kind}]"
        if name.endswith(suffix):
            return name[: -len(suffix)], kind
    return name, None


def checked_name(filename: str, subfolder: str) -> None:
    for part in (filename, subfolder):
        if part.startswith("/") or ".." in part or "\\" in part or "\0" in part:
            raise BadPath("a file name may not hold '..' or start with '/'")
    if not filename:
        raise InvalidRequest("'filename' is required")


def file_path(s: Services, filename: str, kind: str) -> Path:
    """The file ComfyUI's (filename, type) names here; NotFound for anything else."""
    stem = Path(filename).stem
    if kind == "output" and TAKE_ID.fullmatch(stem):
        path = s.media.take_path(stem)
        if path.name == filename:
            return path
    elif kind == "input" and ASSET_ID.fullmatch(stem):
        return s.assets.path(stem)
    raise NotFound(f"no {kind} file {filename!r}")


def asset_name(asset: Asset) -> str:
    return asset.id + SUFFIXES.get(asset.content_type, "")


def input_names(s: Services, limit: int = 500) -> list[str]:
    """Uploaded images, newest first, as LoadImage's picker lists them."""
    root = s.assets.root
    entries = [e for e in root.iterdir() if ASSET_ID.fullmatch(e.name) and e.is_file()]
    entries.sort(key=lambda e: e.stat().st_mtime, reverse=True)
    names: list[str] = []
    for entry in entries[:limit]:
        try:
            asset = s.assets.get(entry.name)
        except NotFound:
            continue
        if asset.content_type in SUFFIXES:
            names.append(asset_name(asset))
    return names


async def view(request: Request, s: Services) -> Response:
    query = request.query_params
    filename, kind = annotated(query.get("filename", ""))
    subfolder = query.get("subfolder", "")
    checked_name(filename, subfolder)
    kind = kind or query.get("type", "output") or "output"
    if subfolder:
        raise NotFound(f"no {kind} file {subfolder}/{filename}")
    path = await run_in_threadpool(file_path, s, filename, kind)
    preview = query.get("preview")
    channel = query.get("channel", "rgba")
    media = (
        mime_for_suffix(path.suffix) if kind == "output" else s.assets.get(path.name).content_type
    )
    if preview is None and channel == "rgba":
        return FileResponse(path, media_type=media, headers={"Cache-Control": "no-cache"})
    if not media.startswith("image/") or media == "image/apng":
        raise InvalidRequest("preview= and channel= apply to still images only")
    data, media = await run_in_threadpool(reencode, path, preview, channel)
    return Response(data, media_type=media)


def reencode(path: Path, preview: str | None, channel: str) -> tuple[bytes, str]:
    """ComfyUI's `preview=webp;90` and `channel=rgb|a` views of an image."""
    with Image.open(path) as opened:
        image = opened.convert("RGBA")
    if channel == "rgb":
        image = image.convert("RGB")
    elif channel == "a":
        alpha = image.getchannel("A")
        image = Image.merge("RGBA", (alpha, alpha, alpha, alpha))
    elif channel != "rgba":
        raise InvalidRequest("'channel' is rgb, a or rgba")
    buf = io.BytesIO()
    if preview is None:
        image.save(buf, format="PNG")
        return buf.getvalue(), "image/png"
    name, _, quality = preview.partition(";")
    if name not in PREVIEW_FORMATS:
        raise InvalidRequest("'preview' is webp;QUALITY or jpeg;QUALITY")
    pil_format, media = PREVIEW_FORMATS[name]
    level = whole_number(quality)
    level = level if level is not None and 1 <= level <= 100 else 90
    if pil_format == "JPEG":
        image = image.convert("RGB")
    image.save(buf, format=pil_format, quality=level)
    return buf.getvalue(), media


async def _form(request: Request, limit: int) -> Any:
    """The multipart form, read whole within `limit` bytes (so a file never spools past it)."""
    declared_length(request, limit + FORM_SLACK, "the upload")
    body = await read_body(request, limit + FORM_SLACK, "the upload")
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return await Request(request.scope, replay).form(max_files=2, max_fields=16)


async def _store(s: Services, data: bytes) -> Asset:
    asset = await run_in_threadpool(s.assets.save, data)
    await run_in_threadpool(s.runs.record_asset, asset_row(asset))
    return asset


def _file(form: Any) -> UploadFile:
    image = form.get("image")
    if not isinstance(image, UploadFile):
        raise InvalidRequest("the form needs an 'image' file")
    return image


def _kind(form: Any) -> None:
    kind = form.get("type") or "input"
    if kind != "input":
        raise InvalidRequest(f"uploads go to 'input' here, not {kind!r}")


async def upload_image(request: Request, s: Services) -> dict[str, Any]:
    form = await _form(request, s.assets.max_bytes)
    _kind(form)
    data = await _file(form).read()
    asset = await _store(s, data)
    if asset.content_type not in SUFFIXES:
        raise UnsupportedMedia(
            f"an image upload must be PNG, JPEG or WebP, not {asset.content_type}"
        )
    return {"name": asset_name(asset), "subfolder": "", "type": "input"}


async def upload_mask(request: Request, s: Services) -> dict[str, Any]:
    """A painted mask: its alpha put into the original image's, saved as a new PNG input."""
    form = await _form(request, s.assets.max_bytes)
    _kind(form)
    raw_ref = form.get("original_ref")
    try:
        ref = cast(dict[str, Any], json.loads(raw_ref)) if isinstance(raw_ref, str) else None
    except ValueError:
        ref = None
    if not isinstance(ref, dict) or not isinstance(ref.get("filename"), str):
        raise InvalidRequest("'original_ref' must be JSON {filename, subfolder, type}")
    name, kind = annotated(str(ref["filename"]))
    checked_name(name, str(ref.get("subfolder") or ""))
    original = await run_in_threadpool(file_path, s, name, kind or str(ref.get("type") or "input"))
    mask = await _file(form).read()
    data = await run_in_threadpool(masked, original, mask, s.assets.max_bytes)
    asset = await _store(s, data)
    return {"name": asset_name(asset), "subfolder": "", "type": "input"}


def masked(original: Path, mask: bytes, limit: int) -> bytes:
    if len(mask) > limit:
        raise InvalidRequest(f"the mask is larger than the {human_size(limit)} limit")
    with Image.open(original) as opened:
        image = opened.convert("RGBA")
    with Image.open(io.BytesIO(mask)) as painted:
        alpha = painted.convert("RGBA").getchannel("A").resize(image.size)
    image.putalpha(alpha)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()
