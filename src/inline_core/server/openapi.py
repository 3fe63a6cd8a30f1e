"""The API's own description: `/openapi.json` with one error schema, and `/docs` (Swagger UI)
served from files in the `fastapi-offline` package, so it works with no network.

Every `/v1` operation documents its errors as the one envelope (`schemas.ErrorEnvelope`), the
statuses a route names and `4XX`/`5XX` for the rest; FastAPI's own validation-error schema is
replaced by it, since `http_errors` answers those with the envelope too. ComfyUI's routes keep
their own (they speak ComfyUI's error shape).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi_offline import FastAPIOffline

from inline_core.server.schemas import ErrorEnvelope

DOCS_URL = "/docs"
DOCS_ASSETS = "/docs-assets"  # Swagger UI's script and style, from the package
REF = "#/components/schemas/{model}"
ENVELOPE_REF = {"$ref": REF.format(model=ErrorEnvelope.__name__)}
FASTAPI_ERRORS = ("HTTPValidationError", "ValidationError")


def described_app(**kwargs: Any) -> FastAPI:
    """A FastAPI app whose `/docs` needs no network and whose description has one error
    schema."""
    app = FastAPIOffline(docs_url=DOCS_URL, redoc_url=None, static_url=DOCS_ASSETS, **kwargs)
    app.openapi = _describer(app)
    return app


def _describer(app: FastAPI) -> Callable[[], dict[str, Any]]:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
            app.openapi_schema = with_error_envelope(schema)
        return app.openapi_schema

    return openapi


def with_error_envelope(schema: dict[str, Any]) -> dict[str, Any]:
    """Every `/v1` operation's errors as the envelope (see the module's docstring)."""
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    envelope = ErrorEnvelope.model_json_schema(ref_template=REF)
    components.update(envelope.pop("$defs", {}))
    components[ErrorEnvelope.__name__] = envelope
    for path, operations in cast(dict[str, dict[str, Any]], schema.get("paths", {})).items():
        if not path.startswith("/v1/"):
            continue
        for operation in operations.values():
            responses: dict[str, Any] = operation.setdefault("responses", {})
            for status, response in responses.items():
                if status[0] in "45":
                    response["content"] = {"application/json": {"schema": ENVELOPE_REF}}
                    response.setdefault("description", "an error")
            for status, what in (("4XX", "a client error"), ("5XX", "a server error")):
                responses.setdefault(
                    status,
                    {
                        "description": what,
                        "content": {"application/json": {"schema": ENVELOPE_REF}},
                    },
                )
    paths = json.dumps(schema.get("paths", {}))
    for name in FASTAPI_ERRORS:  # unless ComfyUI's routes still name them
        if json.dumps(REF.format(model=name)) not in paths:
            components.pop(name, None)
    return schema
