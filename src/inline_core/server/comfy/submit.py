"""`POST /prompt`: a ComfyUI API-format prompt, checked as ComfyUI checks it, imported into a graph
and submitted as an ordinary durable run; `prompt_id` is the run's id.

What the importer would render otherwise than ComfyUI (a node left out that changes the picture,
a model file it would have to guess) is refused here, naming the node, rather than rendered: a
ComfyUI client has nowhere to show a warning. The importer's remaining notes are kept with the
run (`meta.comfy.warnings`) and answered beside `node_errors`.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from inline_core.errors import InlineError
from inline_core.importer import ImportResult, import_comfy
from inline_core.importer.prompt_nodes import prompt_node_of, upstream
from inline_core.server.bootstrap import Services
from inline_core.server.comfy.errors import ComfyError, InputError, NodeErrors
from inline_core.server.comfy.object_info import Choices
from inline_core.server.comfy.prompt_meta import META_KEY, PromptMeta, kept_extra_data
from inline_core.server.comfy.validate import check_prompt, outputs_of, read_prompt
from inline_core.server.run_state import RunRecord

ASSET_NAME = re.compile(r"(sha256-[0-9a-f]{64})(\.[A-Za-z0-9]{1,8})?")
# ComfyUI's preview methods onto ours ("auto": the cheap linear one, always available).
PREVIEWS = {"none": "none", "auto": "latent2rgb", "latent2rgb": "latent2rgb", "taesd": "taesd"}
CLIENT_PROMPT_ID = "comfy:"


class Numbers:
    """ComfyUI's `number`: increasing, across restarts too (it starts from the clock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0

    def next(self) -> int:
        with self._lock:
            self._last = max(self._last + 1, int(time.time() * 1000))
            return self._last


@dataclass(frozen=True)
class Accepted:
    record: RunRecord
    meta: PromptMeta
    created: bool


def image_assets(prompt: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Uploaded images named as `/upload/image` names them (`sha256-<hex>.png`): their asset ids."""
    found: dict[str, str] = {}
    for node in prompt.values():
        for value in cast(Mapping[str, Any], node["inputs"]).values():
            if isinstance(value, str):
                bare = value.rsplit(" [", 1)[0] if value.endswith("]") else value
                match = ASSET_NAME.fullmatch(bare)
                if match is not None:
                    found[value] = match.group(1)
    return found


def parse_body(body: Mapping[str, Any]) -> tuple[str | None, dict[str, Any], int | None, bool]:
    client_id = body.get("client_id")
    if client_id is not None and (not isinstance(client_id, str) or len(client_id) > 200):
        raise ComfyError("invalid_prompt", "client_id must be a string", "client_id")
    extra = body.get("extra_data", {})
    if not isinstance(extra, Mapping):
        raise ComfyError("invalid_prompt", "extra_data must be an object", "extra_data")
    number = body.get("number")
    if number is not None and (isinstance(number, bool) or not isinstance(number, int | float)):
        raise ComfyError("invalid_prompt", "number must be a number", "number")
    given = int(number) if number is not None else None
    return client_id or None, dict(cast(Mapping[str, Any], extra)), given, bool(body.get("front"))


def client_prompt_id(body: Mapping[str, Any]) -> str | None:
    raw = body.get("prompt_id")
    if raw is None:
        return None
    try:
        valid = isinstance(raw, str) and str(uuid.UUID(raw)) == raw
    except ValueError:
        valid = False
    if not valid:
        raise ComfyError(
            "invalid_prompt_id",
            "prompt_id must be a UUID in canonical lowercase hyphenated form",
            str(raw)[:100],
        )
    return cast(str, raw)


def run_options(extra: Mapping[str, Any]) -> dict[str, Any]:
    method = extra.get("preview_method")
    if method is None or method == "default":
        return {"preview": "none"}
    if method not in PREVIEWS:
        raise ComfyError(
            "invalid_prompt",
            f"preview_method {method!r} is not one of {', '.join(PREVIEWS)}",
            "extra_data.preview_method",
        )
    return {"preview": PREVIEWS[str(method)]}


def imported(s: Services, prompt: dict[str, dict[str, Any]], output: str) -> ImportResult:
    """The output's part of the prompt as a graph; the importer's refusals in ComfyUI's shape."""
    part = {k: prompt[k] for k in upstream(prompt, output)}
    try:
        result = import_comfy(
            part,
            s.catalog,
            assets=image_assets(part),
            registry=s.registry,
            facts=s.families,
        )
    except InlineError as exc:
        raise ComfyError("invalid_prompt", exc.message, exc.code) from exc
    failed: dict[str, NodeErrors] = {}
    for change in result.changes:
        failed.setdefault(change.node_id, NodeErrors(change.class_type)).errors.append(
            InputError("custom_validation_failed", change.reason, "Inline Core cannot apply it")
        )
    for missing in result.unmatched:
        node = prompt_node_of(str(missing["nodeId"]), prompt.keys()) or str(missing["nodeId"])
        failed.setdefault(node, NodeErrors(prompt[node]["class_type"])).errors.append(
            InputError(
                "value_not_in_list",
                "Value not in list",
                f"{missing['file']!r} is not in {missing['category']}/",
            )
        )
    if failed:
        for entry in failed.values():
            entry.dependent_outputs.append(output)
        raise ComfyError(
            "prompt_outputs_failed_validation",
            "Prompt outputs failed validation",
            "; ".join(e.message for v in failed.values() for e in v.errors),
            node_errors=failed,
        )
    return result


def submit_error(exc: InlineError, prompt: dict[str, dict[str, Any]], output: str) -> ComfyError:
    """A graph refused at submit, with the prompt node it names."""
    node = None if exc.node_id is None else prompt_node_of(exc.node_id, prompt.keys())
    if node is None or exc.status >= 500 or exc.status == 429:
        return ComfyError(
            exc.code, exc.message, "", status=exc.status if exc.status >= 429 else 400
        )
    errors = NodeErrors(
        prompt[node]["class_type"],
        [InputError("custom_validation_failed", exc.message, exc.code)],
        [output],
    )
    return ComfyError(
        "prompt_outputs_failed_validation",
        "Prompt outputs failed validation",
        exc.message,
        node_errors={node: errors},
    )


async def accept_prompt(
    s: Services, body: Mapping[str, Any], choices: Choices, numbers: Numbers
) -> Accepted:
    from starlette.concurrency import run_in_threadpool

    client_id, extra, number, front = parse_body(body)
    given_id = client_prompt_id(body)
    options = run_options(extra)
    prompt = read_prompt(body.get("prompt"), choices.defs)
    outputs = outputs_of(prompt, body.get("partial_execution_targets"))
    await run_in_threadpool(check_prompt, prompt, outputs, choices)
    if len(outputs) > 1:
        shown = ", ".join(f"{prompt[o]['class_type']} {o}" for o in outputs)
        raise ComfyError(
            "invalid_prompt",
            f"this prompt has {len(outputs)} outputs ({shown}); Inline Core renders one output "
            "per prompt: queue them one at a time (partial_execution_targets) or bypass the others",
            "",
        )
    output = outputs[0]
    result = await run_in_threadpool(imported, s, prompt, output)
    if number is None:
        number = numbers.next()
    if front:
        number = -abs(number)  # as ComfyUI writes it; runs still start in the order they came
    created_ms = int(time.time() * 1000)
    meta = PromptMeta(
        prompt=prompt,
        extra_data=kept_extra_data(extra, client_id, created_ms),
        number=number,
        client_id=client_id,
        output=output,
        output_type=prompt[output]["class_type"],
        warnings=list(result.warnings),
    )
    graph = result.graph.to_json()
    graph["meta"] = {META_KEY: meta.to_json()}
    run_id = None if given_id is None else CLIENT_PROMPT_ID + given_id
    try:
        record, created = await s.manager.submit_async(graph, result.target, run_id, options)
    except InlineError as exc:
        raise submit_error(exc, prompt, output) from exc
    return Accepted(record, meta, created)
