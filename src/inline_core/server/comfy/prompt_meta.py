"""What a run made from a ComfyUI prompt keeps of it: the prompt, its `extra_data` (the UI
workflow among it), `number`, `client_id` and the output node, in the graph's `meta.comfy`.

Kept in the graph, so it is stored with the run (history and queue survive a restart, and any
server of a fleet answers for any prompt) and carried in every take the run writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from inline_core.importer.prompt_nodes import prompt_nodes

META_KEY = "comfy"
# What ComfyUI strips from extra_data before it keeps a prompt anywhere.
SECRET_KEYS = ("auth_token_comfy_org", "api_key_comfy_org")


@dataclass(frozen=True)
class PromptMeta:
    prompt: dict[str, Any]
    extra_data: dict[str, Any]
    number: int
    client_id: str | None
    output: str  # the prompt's output node (SaveImage, SaveVideo, ...)
    output_type: str
    warnings: list[str] = field(default_factory=list[str])

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "extraData": self.extra_data,
            "number": self.number,
            "clientId": self.client_id,
            "output": self.output,
            "outputType": self.output_type,
            "warnings": list(self.warnings),
        }

    def class_type(self, node_id: str | None) -> str | None:
        node = self.prompt.get(node_id) if node_id is not None else None
        if not isinstance(node, Mapping):
            return None
        value = cast(Mapping[str, object], node).get("class_type")
        return value if isinstance(value, str) else None

    def queue_item(self, prompt_id: str) -> list[Any]:
        """ComfyUI's `[number, prompt_id, prompt, extra_data, outputs_to_execute]`."""
        return [self.number, prompt_id, self.prompt, self.extra_data, [self.output]]


def kept_extra_data(
    extra: Mapping[str, Any], client_id: str | None, created_ms: int
) -> dict[str, Any]:
    out = {k: v for k, v in extra.items() if k not in SECRET_KEYS}
    if client_id is not None:
        out["client_id"] = client_id
    out.setdefault("create_time", created_ms)
    return out


def read_meta(graph: Mapping[str, Any]) -> PromptMeta | None:
    """The prompt a run's stored graph came from (None: not a ComfyUI prompt's run)."""
    meta = graph.get("meta")
    if not isinstance(meta, Mapping):
        return None
    raw = cast(Mapping[str, Any], meta).get(META_KEY)
    if not isinstance(raw, Mapping):
        return None
    comfy = cast(Mapping[str, Any], raw)
    prompt, extra = comfy.get("prompt"), comfy.get("extraData")
    number, output = comfy.get("number"), comfy.get("output")
    if not isinstance(prompt, dict) or not isinstance(extra, dict) or not isinstance(output, str):
        return None
    client_id = comfy.get("clientId")
    warnings = comfy.get("warnings")
    return PromptMeta(
        prompt=cast(dict[str, Any], prompt),
        extra_data=cast(dict[str, Any], extra),
        number=number if isinstance(number, int) else 0,
        client_id=client_id if isinstance(client_id, str) else None,
        output=output,
        output_type=str(comfy.get("outputType") or ""),
        warnings=[str(w) for w in cast(list[object], warnings)]
        if isinstance(warnings, list)
        else [],
    )


def node_map(graph: Mapping[str, Any], meta: PromptMeta) -> dict[str, str]:
    """Our node id -> the prompt node it was made from, for the run's graph."""
    nodes = graph.get("nodes")
    ours: list[str] = []
    if isinstance(nodes, list):
        for node in cast(list[object], nodes):
            if isinstance(node, Mapping):
                node_id = cast(Mapping[str, object], node).get("id")
                if isinstance(node_id, str):
                    ours.append(node_id)
    return prompt_nodes(ours, meta.prompt.keys())
