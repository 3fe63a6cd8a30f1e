"""Serving a local frontend build (`--front-end-root`) at `/`, behind the API routes.

Files are served from the root; any other path that is not the API gets `index.html`, so a
single-page app's client-side routes work. A request can never read outside the root.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response

from inline_core.errors import NotFound
from inline_core.server.assets import inside
from inline_core.server.comfy.paths import is_comfy_api

ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def mount_frontend(app: FastAPI, root: Path) -> None:
    base = root.resolve()
    index = base / "index.html"

    async def serve(request: Request, path: str = "") -> Response:
        if path == "v1" or path.startswith("v1/") or is_comfy_api(path):
            raise NotFound("no such route")  # unknown API paths stay API errors
        if request.method not in ("GET", "HEAD"):
            raise HTTPException(405, headers={"Allow": "GET, HEAD"})
        candidate = base / path
        if path and candidate.is_file() and inside(candidate, base):
            return FileResponse(candidate)
        if index.is_file():
            return FileResponse(index, headers={"Cache-Control": "no-cache"})
        raise NotFound(f"the frontend root {base} has no index.html")

    # Registered last, so every API route matches first. Every method is routed here so that an
    # unknown API path is a 404, not a 405 from this catch-all.
    for route in ("/", "/{path:path}"):
        app.add_api_route(route, serve, methods=ALL_METHODS, include_in_schema=False)
