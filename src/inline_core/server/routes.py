"""The `/v1` HTTP routes. Each one reads the request, asks a service, and shapes the answer with
`serialize`; errors are raised as `InlineError`s and become envelopes in `http_errors`."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any, cast

import anyio
from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from inline_core import __version__
from inline_core.errors import InvalidRequest, NoPreview, NotFound, UnsupportedMedia
from inline_core.graph.schema import SCHEMA_VERSION_MAX, SCHEMA_VERSION_MIN
from inline_core.importer import import_request
from inline_core.media import mime_for_suffix
from inline_core.runtime.preview import PREVIEW_METHODS
from inline_core.runtime.step_cache import cache_option_schema
from inline_core.server import serialize
from inline_core.server.assets import asset_row
from inline_core.server.bootstrap import Services
from inline_core.server.byte_ranges import parse_range
from inline_core.server.http_io import (
    MB,
    clipped_names,
    declared_length,
    etag_matches,
    json_response,
    list_limit,
    media_type,
    quoted,
    read_json_object,
)
from inline_core.server.interactions import MAX_INTERACTION_BYTES
from inline_core.server.previews import MEDIA_TYPES, no_preview_reason
from inline_core.server.schemas import (
    Asset,
    Descriptor,
    Health,
    Imported,
    Interaction,
    Models,
    Packs,
    Run,
    RunList,
    Submitted,
    Take,
    error_responses,
)
from inline_core_sdk.version import PROTOCOL_VERSION

router = APIRouter(prefix="/v1")

RUN_FIELDS = frozenset({"graph", "target", "clientRunId", "options"})
RUN_BODY_SHAPE = "{graph, target, clientRunId?, options?}"
# What POST /v1/import/comfy answers besides graph and target: accepted (and ignored) so an import
# result can be posted as it came back.
IMPORT_REPORT_FIELDS = frozenset(
    {"skipped", "warnings", "family", "changesPicture", "unmatchedModels"}
)
CHUNK = 256 * 1024
# A whole take up to this size is read in one call off the loop and sent at once: streamed, its
# open, reads and close were each a hop to a worker thread (a 3 MB PNG: 15 hops, half the time of
# a cached resubmission's fetch on a loaded CPU). Larger takes and ranges stream in CHUNKs.
WHOLE_READ_MAX = 16 * 1024 * 1024
FORM_TYPES = frozenset({"text/plain", "application/x-www-form-urlencoded", "multipart/form-data"})


# The routes read their bodies themselves (bounded, streamed); these describe them in OpenAPI.
RUN_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["graph", "target"],
                    "properties": {
                        "graph": {
                            "type": "object",
                            "required": ["nodes"],
                            "properties": {
                                "schemaVersion": {"type": "integer"},
                                "nodes": {"type": "array", "items": {"type": "object"}},
                            },
                        },
                        "target": {"type": "string"},
                        "clientRunId": {"type": "string"},
                        "options": {
                            "type": "object",
                            "properties": {
                                "preview": {"type": "string", "enum": list(PREVIEW_METHODS)},
                                "cache": cache_option_schema(),
                            },
                            "additionalProperties": False,
                        },
                    },
                }
            }
        },
    }
}
ASSET_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
    }
}


def services(request: Request) -> Services:
    return cast(Services, request.app.state.services)


# ---- health and models -------------------------------------------------------------------------


@router.get("/health", response_model=Health)
async def health(request: Request) -> Response:
    s = services(request)
    body = serialize.health_json(
        version=__version__,
        schema_min=SCHEMA_VERSION_MIN,
        schema_max=SCHEMA_VERSION_MAX,
        registry_version=s.registry_version(),
        device=s.device.to_json(),
        runs=s.manager.stats(),
        store=s.runs.stats(),
        sampler=s.sampler.stats() if s.sampler is not None else None,
        models=s.models_json(),
        server_id=s.manager.server_id,
        leases=s.manager.leases.holding(),
        lease_timeout_s=s.config.lease_timeout_s,
        servers=s.manager.leases.servers_alive(),
        step_cache=None if s.runtime is None else s.runtime.step_cache_totals.to_json(),
        adapters=None if s.runtime is None else s.runtime.adapter_totals.to_json(),
        leasing=s.manager.leases.leasing_json(),
    )
    return json_response(body)


@router.get(
    "/models",
    response_model=Models,
    responses={304: {"description": "not modified: the registry version is the If-None-Match"}},
)
async def models(request: Request) -> Response:
    s = services(request)
    version = s.registry_version()
    headers = {"ETag": quoted(version), "Cache-Control": "no-cache"}
    if etag_matches(request, version):
        return Response(status_code=304, headers=headers)
    body = serialize.models_json(
        version,
        s.registry.descriptors(),
        s.catalog,
        s.catalog.to_json(),
        s.families.models_missing,
        s.families.picker_options,
    )
    return json_response(body, headers=headers)


@router.get("/models/{node_type:path}", response_model=Descriptor, responses=error_responses(404))
async def model(request: Request, node_type: str) -> Response:
    s = services(request)
    if node_type not in s.registry:
        raise NotFound(f"no node type {node_type!r}")
    descriptor = s.registry.descriptor(node_type)
    body = serialize.descriptor_json(
        descriptor, s.catalog, s.families.models_missing, s.families.picker_options
    )
    return json_response(body)


@router.get("/packs", response_model=Packs)
async def packs(request: Request) -> Response:
    """The installed node packs: versions, status, node types and last error."""
    host = services(request).packs
    slots = await run_in_threadpool(host.snapshot)
    return json_response(serialize.packs_json(host.sdk_version, PROTOCOL_VERSION, slots))


# ---- runs --------------------------------------------------------------------------------------


@router.post(
    "/runs",
    status_code=201,
    response_model=Submitted,
    openapi_extra=RUN_BODY,
    responses={
        200: {"model": Submitted, "description": "the same run, for a repeated clientRunId"},
        **error_responses(409, 413, 415, 422, 507),
    },
)
async def submit_run(request: Request) -> Response:
    s = services(request)
    body = await read_json_object(request, s.config.max_body_mb * MB)
    if "graph" not in body:
        raise InvalidRequest(f"the body must be {RUN_BODY_SHAPE}: 'graph' is missing")
    if "target" not in body:
        raise InvalidRequest(f"the body must be {RUN_BODY_SHAPE}: 'target' is missing")
    unknown = sorted(set(body) - RUN_FIELDS - IMPORT_REPORT_FIELDS)
    if unknown:
        # Refused rather than ignored: a misspelt "clientRunID" would silently lose idempotency.
        raise InvalidRequest(
            f"unknown fields {clipped_names(unknown)}; the body is {RUN_BODY_SHAPE}"
        )
    record, created = await s.manager.submit_async(
        body["graph"], body["target"], body.get("clientRunId"), body.get("options")
    )
    headers = {"Location": f"/v1/runs/{record.id}"}
    return json_response(serialize.submitted_json(record), 201 if created else 200, headers)


@router.get("/runs", response_model=RunList, responses=error_responses(422))
async def list_runs(request: Request) -> Response:
    runs = services(request).manager.list_runs(list_limit(request))
    return json_response({"runs": [serialize.run_list_item(r) for r in runs]})


@router.get("/runs/{run_id}", response_model=Run, responses=error_responses(404))
async def get_run(request: Request, run_id: str) -> Response:
    manager = services(request).manager
    record, takes = manager.get(run_id)
    body = serialize.run_json(record, takes)
    waiting = manager.waiting_for(record)
    if waiting is not None:
        body["waitingFor"] = waiting
    return json_response(body)


@router.get(
    "/runs/{run_id}/preview",
    response_class=Response,
    responses={
        200: {"description": "the newest step preview", "content": {"image/jpeg": {}}},
        **error_responses(404),
    },
)
async def run_preview(request: Request, run_id: str) -> Response:
    """The run's newest step preview, as the image it is (its step in the headers)."""
    s = services(request)
    preview = s.manager.previews.latest(run_id)
    if preview is None:
        record, _takes = s.manager.get(run_id)  # a 404 not_found for an unknown run
        why = no_preview_reason(record, s.manager.server_id, s.config.preview_method)
        raise NoPreview(f"run {run_id!r} has no step preview on this server: {why}")
    headers = {
        "Cache-Control": "no-store",
        "X-Preview-Node": preview.node_id,
        "X-Preview-Step": str(preview.step),
        "X-Preview-Step-Count": str(preview.step_count),
    }
    image = preview.image
    return Response(image.data, media_type=MEDIA_TYPES[image.format], headers=headers)


@router.delete("/runs/{run_id}", response_model=Submitted, responses=error_responses(404, 409))
def cancel_run(request: Request, run_id: str) -> Response:
    # A plain def: it may wait (briefly) for a running run to reach its next step boundary.
    record = services(request).manager.cancel(run_id)
    return json_response(serialize.submitted_json(record))


INTERACTION_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "prompt": {"type": "string"},
                        "negative_prompt": {"type": "string"},
                        "guidance": {"type": "number"},
                    },
                }
            }
        },
    }
}


@router.post(
    "/runs/{run_id}/interactions",
    status_code=201,
    response_model=Interaction,
    openapi_extra=INTERACTION_BODY,
    responses=error_responses(404, 409, 413, 415, 422),
)
async def post_interaction(request: Request, run_id: str) -> Response:
    body = await read_json_object(request, MAX_INTERACTION_BYTES)
    # Off the event loop: it waits for the interaction's durable write, while the render
    # cannot pass the boundary it was given.
    interactions = services(request).manager.interactions
    interaction = await run_in_threadpool(interactions.interact, run_id, body)
    return json_response(interaction, 201)


# ---- takes and assets --------------------------------------------------------------------------


@router.get("/takes/{take_id}", response_model=Take, responses=error_responses(404))
async def get_take(request: Request, take_id: str) -> Response:
    take = services(request).runs.get_take(take_id)
    if take is None:
        raise NotFound(f"no take {take_id!r}")
    return json_response(serialize.take_json(take))


async def _file_chunks(path: str, first: int, length: int) -> AsyncIterator[bytes]:
    async with await anyio.open_file(path, "rb") as f:
        await f.seek(first)
        left = length
        while left > 0:
            chunk = await f.read(min(CHUNK, left))
            if not chunk:
                break
            left -= len(chunk)
            yield chunk


@router.get(
    "/takes/{take_id}/bytes",
    response_class=Response,
    responses={
        200: {"description": "the take's file", "content": {"*/*": {}}},
        206: {"description": "the range asked for (Range)", "content": {"*/*": {}}},
        304: {"description": "not modified: its hash is the If-None-Match"},
        **error_responses(404, 416),
    },
)
async def take_bytes(request: Request, take_id: str) -> Response:
    s = services(request)
    take = s.runs.get_take(take_id)
    if take is None:
        raise NotFound(f"no take {take_id!r}")
    path = s.media.take_path(take_id)
    headers = {
        "ETag": quoted(take.hash),
        "Accept-Ranges": "bytes",
        # A take never changes once written.
        "Cache-Control": "public, max-age=31536000, immutable",
    }
    if etag_matches(request, take.hash):
        return Response(status_code=304, headers=headers)
    size = os.stat(path).st_size
    media_type = mime_for_suffix(path.suffix)
    span = parse_range(request.headers.get("range"), size)
    if span is None and size <= WHOLE_READ_MAX:
        data = await run_in_threadpool(path.read_bytes)
        return Response(data, 200, headers, media_type)
    if span is None:
        headers["Content-Length"] = str(size)
        return StreamingResponse(_file_chunks(str(path), 0, size), 200, headers, media_type)
    first, last = span
    headers["Content-Range"] = f"bytes {first}-{last}/{size}"
    headers["Content-Length"] = str(last - first + 1)
    chunks = _file_chunks(str(path), first, last - first + 1)
    return StreamingResponse(chunks, 206, headers, media_type)


@router.post(
    "/assets",
    status_code=201,
    response_model=Asset,
    openapi_extra=ASSET_BODY,
    responses=error_responses(413, 415, 507),
)
async def upload_asset(request: Request) -> Response:
    s = services(request)
    declared_length(request, s.assets.max_bytes, "the upload")
    if media_type(request) in FORM_TYPES:
        # What a browser may send cross-origin without a preflight; media is sent raw.
        raise UnsupportedMedia(
            "send the file's raw bytes with its media type (e.g. image/png), not a form or text"
        )
    raw_length = request.headers.get("content-length", "")
    # Refused (507) before any byte is read if the declared size would cross the free-space floor.
    upload = s.assets.begin(int(raw_length) if raw_length.isdigit() else None)
    try:
        async for chunk in request.stream():
            upload.write(chunk)  # refuses (413) the moment the limit is crossed
        asset = await run_in_threadpool(upload.finish)  # fsync off the event loop
    except BaseException:
        upload.abort()
        raise
    await run_in_threadpool(s.runs.record_asset, asset_row(asset))
    return json_response(serialize.asset_json(asset), 201)


# ---- ComfyUI import ----------------------------------------------------------------------------


@router.post("/import/comfy", response_model=Imported, responses=error_responses(413, 415, 422))
async def import_comfy_workflow(request: Request) -> Response:
    """A ComfyUI workflow (API or UI format, or `{workflow, assets}`) as `{graph, target,
    skipped, warnings}`: a graph to post to `/v1/runs`, and what was left out or changed."""
    s = services(request)
    body = await read_json_object(request, s.config.max_body_mb * MB)
    result = await run_in_threadpool(
        import_request, body, s.catalog, registry=s.registry, facts=s.families
    )
    return json_response(result.to_json())
