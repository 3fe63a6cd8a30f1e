"""The model download routes: what a node needs (`/v1/models/{type}/requirements`) and the
downloads themselves (`/v1/downloads`). Included before `routes.router`, whose
`/models/{type}` would otherwise take the requirements path (node types hold slashes)."""

from __future__ import annotations

from typing import Any, cast

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from inline_core.contract.requirements import node_requirements
from inline_core.downloads.manager import DownloadManager
from inline_core.errors import InvalidRequest, NotFound
from inline_core.server.bootstrap import Services
from inline_core.server.http_io import (
    MB,
    clipped_names,
    json_response,
    list_limit,
    read_json_object,
)
from inline_core.server.schemas import (
    Download,
    DownloadList,
    DownloadStarted,
    Requirements,
    error_responses,
)
from inline_core.server.serialize_downloads import requirements_json

router = APIRouter(prefix="/v1")

DOWNLOAD_FIELDS = frozenset({"repo", "files", "revision", "category", "folder"})
SHAPE = "{repo, files, category, revision?, folder?}"
DOWNLOAD_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["repo", "files", "category"],
                    "properties": {
                        "repo": {"type": "string"},
                        "files": {"type": "array", "items": {"type": "string"}},
                        "category": {"type": "string"},
                        "revision": {"type": "string"},
                        "folder": {"type": "string"},
                    },
                }
            }
        },
    }
}


def _services(request: Request) -> Services:
    return cast(Services, request.app.state.services)


def _downloads(request: Request) -> DownloadManager:
    return _services(request).downloads


@router.get(
    "/models/{node_type:path}/requirements",
    response_model=Requirements,
    responses=error_responses(404),
)
async def requirements(request: Request, node_type: str) -> Response:
    """Each piece the node needs: present or not (and which file), its size, and the hub
    sources the family knows for it, each with the body that downloads it."""
    s = _services(request)
    if node_type not in s.registry:
        raise NotFound(f"no node type {node_type!r}")
    family = s.families.serving(node_type)
    if family is None:  # a shared or torch-free node: nothing of its own to download
        return json_response({"nodeType": node_type, "family": None, "requirements": []})
    pieces = await run_in_threadpool(node_requirements, family, node_type)
    body = await run_in_threadpool(
        requirements_json, node_type, family.name, pieces, s.downloads, s.catalog.root
    )
    return json_response(body)


@router.post(
    "/downloads",
    status_code=201,
    response_model=DownloadStarted,
    openapi_extra=DOWNLOAD_BODY,
    responses=error_responses(403, 404, 409, 422, 507),
)
async def submit_download(request: Request) -> Response:
    s = _services(request)
    body = await read_json_object(request, s.config.max_body_mb * MB)
    unknown = sorted(set(body) - DOWNLOAD_FIELDS)
    if unknown:
        raise InvalidRequest(f"unknown fields {clipped_names(unknown)}; the body is {SHAPE}")
    repo = _text(body, "repo", required=True)
    category = _text(body, "category", required=True)
    revision = _text(body, "revision")
    folder = _text(body, "folder")
    files = body.get("files")
    if not isinstance(files, list) or not all(isinstance(f, str) for f in cast(list[Any], files)):
        raise InvalidRequest(f"'files' must be a list of paths in the repo; the body is {SHAPE}")
    state = await run_in_threadpool(
        s.downloads.submit,
        str(repo),
        cast(list[str], files),
        str(category),
        revision=revision,
        folder=folder,
    )
    headers = {"Location": f"/v1/downloads/{state['downloadId']}"}
    return json_response(
        {"downloadId": state["downloadId"], "status": state["status"]}, 201, headers
    )


@router.get("/downloads", response_model=DownloadList, responses=error_responses(422))
async def list_downloads(request: Request) -> Response:
    return json_response({"downloads": _downloads(request).list(list_limit(request))})


@router.get("/downloads/{download_id}", response_model=Download, responses=error_responses(404))
async def get_download(request: Request, download_id: str) -> Response:
    return json_response(_downloads(request).get(download_id))


@router.delete(
    "/downloads/{download_id}", response_model=Download, responses=error_responses(404, 409)
)
def cancel_download(request: Request, download_id: str) -> Response:
    # A plain def: it waits (briefly) for a running download to stop at its next chunk.
    return json_response(_downloads(request).cancel(download_id))


def _text(body: dict[str, Any], name: str, *, required: bool = False) -> str | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value:
        need = "is missing" if value is None else "must be a non-empty string"
        raise InvalidRequest(f"'{name}' {need}; the body is {SHAPE}")
    return value
