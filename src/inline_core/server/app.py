"""`create_app(config)`: the FastAPI application, composed from the server's parts.

Middleware, outermost first: CORS (so even errors carry CORS headers), the internal-error guard
(500 envelope, never a traceback), the token gate (or, without a token, the origin gate). Routes:
the `/v1` API, its websocket, ComfyUI's API (`comfy/`), and a frontend behind them: a build given
with `--front-end-root`, else ComfyUI's frontend where the `ui` extra is installed.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.middleware.cors import CORSMiddleware

from inline_core import __version__
from inline_core.config import Config
from inline_core.server import download_routes, download_socket, media_routes, routes, websocket
from inline_core.server.access import OriginGate, TokenGate
from inline_core.server.bootstrap import Services, build_services
from inline_core.server.comfy.frontend import find_frontend, mount_templates
from inline_core.server.comfy.routes import install
from inline_core.server.frontend import mount_frontend, serve_files
from inline_core.server.http_errors import InternalErrors, install_error_handlers

log = logging.getLogger(__name__)

SHUTDOWN_TIMEOUT_S = 3.0


def create_app(config: Config, services: Services | None = None) -> FastAPI:
    """The app. `services` defaults to `build_services(config)`; they start with the app's
    lifespan and stop (running runs queued again) when it ends."""
    built = services if services is not None else build_services(config)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncGenerator[None]:
        built.start()
        log.info(
            "inline-core %s serving at %s (bound to %s); data in %s",
            __version__,
            config.url,
            config.host,
            config.data_dir,
        )
        try:
            yield
        finally:
            await comfy.hub.close()
            await run_in_threadpool(built.close, SHUTDOWN_TIMEOUT_S)

    app = FastAPI(
        title="Inline Core",
        version=__version__,
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
    )
    app.state.services = built
    install_error_handlers(app)
    app.include_router(download_routes.router)  # first: its requirements path is under /models/
    app.include_router(routes.router)
    app.include_router(media_routes.router)
    app.include_router(websocket.router)
    app.include_router(download_socket.router)
    comfy_frontend = find_frontend()
    comfy = install(app, built, None if comfy_frontend is None else comfy_frontend.version)
    app.include_router(websocket.fallback)
    mount_templates(app)
    if config.frontend_root is not None:
        mount_frontend(app, config.frontend_root)
    elif comfy_frontend is not None:
        serve_files(app, comfy_frontend.root)

    if config.api_token:
        app.add_middleware(TokenGate, token=config.api_token)
    else:
        app.add_middleware(OriginGate, allowed=config.cors_origins)
    app.add_middleware(InternalErrors)
    if config.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(config.cors_origins),
            allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type", "If-None-Match", "Range"],
            expose_headers=["ETag", "Retry-After", "Content-Range", "Location"],
        )
    return app
