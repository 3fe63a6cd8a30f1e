"""Serving a frontend at `/`, behind the API routes: a local build (`--front-end-root`), whose
other paths get `index.html` so a single-page app's client-side routes work, or a static site
(ComfyUI's frontend, `serve_files`). A request can never read outside the root.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.types import Receive, Scope, Send

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


def serve_files(app: FastAPI, root: Path) -> None:
    """Serve a static site (ComfyUI's frontend) where no route matches: `/` is its `index.html`,
    any other path one of its files or a 404 envelope. As the router's default, not a route, so
    every route matches first (one added later too) and a path that a route serves under other
    methods stays a 405."""
    base = root.resolve()
    index = base / "index.html"

    async def default(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            raise NotFound("no such route")
        path = str(scope["path"]).lstrip("/")
        if scope["method"] not in ("GET", "HEAD") or is_comfy_api(path) or path.startswith("v1"):
            raise NotFound("no such route")
        candidate = base / path if path else index
        if not candidate.is_file() or not inside(candidate, base):
            raise NotFound("no such route")
        headers = {"Cache-Control": "no-cache"} if candidate == index else None
        await FileResponse(candidate, headers=headers)(scope, receive, send)

    app.router.default = default
