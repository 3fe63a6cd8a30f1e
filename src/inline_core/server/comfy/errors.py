"""Errors in ComfyUI's shape: `{"error": {type, message, details, extra_info}, "node_errors":
{id: {errors: [...], dependent_outputs, class_type}}}`, so a ComfyUI client (the frontend
highlights the nodes) reads them as it reads ComfyUI's own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from inline_core.errors import InlineError


@dataclass(frozen=True)
class InputError:
    """One problem with one input of one node (`value_bigger_than_max`, ...)."""

    type: str
    message: str
    details: str
    input_name: str | None = None
    extra: dict[str, Any] = field(default_factory=dict[str, Any])

    def to_json(self) -> dict[str, Any]:
        extra: dict[str, Any] = dict(self.extra)
        if self.input_name is not None:
            extra.setdefault("input_name", self.input_name)
        return {
            "type": self.type,
            "message": self.message,
            "details": self.details,
            "extra_info": extra,
        }


@dataclass
class NodeErrors:
    class_type: str
    errors: list[InputError] = field(default_factory=list[InputError])
    dependent_outputs: list[str] = field(default_factory=list[str])

    def to_json(self) -> dict[str, Any]:
        return {
            "errors": [e.to_json() for e in self.errors],
            "dependent_outputs": list(self.dependent_outputs),
            "class_type": self.class_type,
        }


class ComfyError(Exception):
    """A refusal answered in ComfyUI's shape (400 unless said otherwise)."""

    def __init__(
        self,
        type_: str,
        message: str,
        details: str = "",
        *,
        extra_info: dict[str, Any] | None = None,
        node_errors: dict[str, NodeErrors] | None = None,
        status: int = 400,
    ) -> None:
        super().__init__(message)
        self.type = type_
        self.message = message
        self.details = details
        self.extra_info = extra_info or {}
        self.node_errors = node_errors or {}
        self.status = status

    def to_json(self) -> dict[str, Any]:
        return {
            "error": {
                "type": self.type,
                "message": self.message,
                "details": self.details,
                "extra_info": self.extra_info,
            },
            "node_errors": {k: v.to_json() for k, v in self.node_errors.items()},
        }


async def comfy_error_response(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ComfyError)
    return JSONResponse(exc.to_json(), status_code=exc.status)


class BadPath(InlineError):
    """A file name that tries to leave its folder: 400, as ComfyUI answers it."""

    code = "bad_path"
    status = 400
