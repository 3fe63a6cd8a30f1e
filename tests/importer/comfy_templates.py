"""Every official ComfyUI workflow template (the `comfyui-workflow-templates-json` package, a dev
dependency), and what importing one may come to."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from typing import Any

from inline_core.errors import InlineError
from inline_core.importer import ImportResult

FOREIGN = re.compile(r"^this workflow is built for (.+?) \(")
NO_IMAGE = "nothing in the workflow makes an image"
# A sampler or schedule we do not run (a custom node pack's, say): refused by name, never swapped.
NOT_OFFERED = re.compile(r"the (sampler|scheduler) '([^']+)' is not offered here; the closest")
# The package's index files: lists of templates, not workflows.
NOT_WORKFLOWS = re.compile(r"^(index|fuse_options)")


def templates() -> Iterator[tuple[str, Any]]:
    folder = resources.files("comfyui_workflow_templates_json") / "templates"
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json") and not NOT_WORKFLOWS.match(entry.name):
            yield entry.name, json.loads(entry.read_text(encoding="utf-8"))


@dataclass(frozen=True)
class Outcome:
    kind: str  # "mapped", "other family", "node it cannot run", "no image", "sampler not run"
    family: str | None = None  # the family it was mapped onto or refused for
    result: ImportResult | None = None


def outcome_of(run: Any) -> Outcome:
    """What importing one template came to; anything else fails the test."""
    try:
        result: ImportResult = run()
    except InlineError as exc:
        if exc.code == "unsupported_model_family":
            match = FOREIGN.match(exc.message)
            assert match is not None or exc.message.startswith("cannot tell"), exc.message
            return Outcome("other family", match.group(1) if match else None)
        if exc.code == "unsupported_node":
            return Outcome("node it cannot run")
        assert exc.code == "invalid_request", exc.message
        if NOT_OFFERED.search(exc.message):
            return Outcome("sampler not run")
        assert NO_IMAGE in exc.message, exc.message
        return Outcome("no image")
    assert result.family.family is not None, "mapped without a family"
    return Outcome("mapped", result.family.family, result)
