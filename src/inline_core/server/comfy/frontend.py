"""Where ComfyUI's frontend and its workflow templates are installed (the `ui` extra): the
frontend's static folder is served at `/`, the templates' at `/templates/`. Nothing here reaches
the network: both come from installed wheels."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import FileResponse, Response

from inline_core.errors import NotFound
from inline_core.server.assets import inside

FRONTEND = "comfyui_frontend_package"
TEMPLATES = "comfyui_workflow_templates_json"


@dataclass(frozen=True)
class FrontendFiles:
    root: Path
    version: str


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def find_frontend() -> FrontendFiles | None:
    """The installed frontend's static folder and version (None: the `ui` extra is missing)."""
    folder = _package_dir(FRONTEND)
    if folder is None or not (folder / "static" / "index.html").is_file():
        return None
    try:
        version = metadata.version(FRONTEND.replace("_", "-"))
    except metadata.PackageNotFoundError:
        version = ""
    return FrontendFiles(folder / "static", version)


def mount_templates(app: FastAPI) -> bool:
    """Serve the installed workflow templates at `/templates/` (index.json and each workflow)."""
    folder = _package_dir(TEMPLATES)
    if folder is None or not (folder / "templates").is_dir():
        return False
    base = (folder / "templates").resolve()

    async def template(_request: Request, path: str) -> Response:
        candidate = base / path
        if path and candidate.is_file() and inside(candidate, base):
            return FileResponse(candidate)
        raise NotFound(f"no template file {path!r}")

    app.add_api_route("/templates/{path:path}", template, methods=["GET"], include_in_schema=False)
    return True
