"""Which request paths are ComfyUI's API (each served bare and under `/api`, as ComfyUI does): the
access gates guard them as they guard `/v1`, and the frontend's files never shadow them."""

from __future__ import annotations

API_ROOTS = frozenset(
    {
        "prompt", "ws", "history", "queue", "interrupt", "free", "view", "view_metadata",
        "upload", "object_info", "models", "embeddings", "extensions", "system_stats",
        "features", "users", "settings", "userdata", "v2", "i18n", "jobs", "experiment",
        "global_subgraphs", "workflow_templates", "node_replacements", "internal", "api",
    }
)  # fmt: skip


def is_comfy_api(path: str) -> bool:
    """`/prompt`, `/api/...` and the like (a path with or without its leading slash)."""
    first = path.lstrip("/").split("/", 1)[0]
    return first in API_ROOTS
