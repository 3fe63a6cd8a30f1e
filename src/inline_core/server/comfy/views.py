"""ComfyUI's views of our runs: history items, queue entries and jobs (`/history`, `/queue`,
`/api/jobs`), as ComfyUI's `execution.py` and `comfy_execution/jobs.py` shape them."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

from inline_core.media import MediaKind
from inline_core.server.comfy.prompt_meta import PromptMeta, node_map
from inline_core.server.run_state import RunRecord, RunStatus
from inline_core.takes import Take

OUTPUT = "output"
PENDING, IN_PROGRESS = "pending", "in_progress"
COMPLETED, FAILED, CANCELLED = "completed", "failed", "cancelled"
JOB_STATUSES = (PENDING, IN_PROGRESS, COMPLETED, FAILED, CANCELLED)


def ms(epoch_s: float | None) -> int | None:
    return None if epoch_s is None else int(epoch_s * 1000)


def file_item(take: Take) -> dict[str, Any]:
    """How ComfyUI names an output file: `/view` takes it back by this name."""
    return {"filename": Path(take.path).name, "subfolder": "", "type": OUTPUT}


def node_output(takes: Iterable[Take]) -> dict[str, Any]:
    """An output node's `ui` dict: its images (a video is an animated one, as SaveVideo's)."""
    listed = list(takes)
    out: dict[str, Any] = {"images": [file_item(t) for t in listed]}
    if any(t.kind == MediaKind.VIDEO for t in listed):
        out["animated"] = [True]
    return out


def outputs(meta: PromptMeta, record: RunRecord, takes: Iterable[Take]) -> dict[str, Any]:
    mine = [t for t in takes if t.node_id == record.target]
    return {meta.output: node_output(mine)} if mine else {}


def job_status(status: RunStatus) -> str:
    return {
        RunStatus.QUEUED: PENDING,
        RunStatus.RUNNING: IN_PROGRESS,
        RunStatus.DONE: COMPLETED,
        RunStatus.ERROR: FAILED,
        RunStatus.CANCELLED: CANCELLED,
    }[status]


def end_message(meta: PromptMeta, record: RunRecord) -> tuple[str, dict[str, Any]]:
    """The message that ended the prompt: execution_success, _error or _interrupted."""
    stamp = ms(record.finished_at)
    if record.status == RunStatus.DONE:
        return "execution_success", {"prompt_id": record.id, "timestamp": stamp}
    error = record.error or {}
    node = error.get("nodeId")
    prompt_node = _prompt_node(meta, record, node if isinstance(node, str) else None)
    common: dict[str, Any] = {
        "prompt_id": record.id,
        "node_id": prompt_node,
        "node_type": meta.class_type(prompt_node),
        "executed": [],
        "timestamp": stamp,
    }
    if record.status == RunStatus.CANCELLED:
        return "execution_interrupted", common
    return "execution_error", {
        **common,
        "exception_message": str(error.get("message", "the run failed")),
        "exception_type": str(error.get("code", "internal")),
        "traceback": [],
        "current_inputs": {},
        "current_outputs": {},
    }


def _prompt_node(meta: PromptMeta, record: RunRecord, our_id: str | None) -> str | None:
    if our_id is None:
        return None
    return node_map(record.graph, meta).get(our_id)


def history_item(meta: PromptMeta, record: RunRecord, takes: Iterable[Take]) -> dict[str, Any]:
    """A finished prompt as `/history` answers it."""
    end, body = end_message(meta, record)
    start = {"prompt_id": record.id, "timestamp": ms(record.started_at or record.created_at)}
    messages: list[list[Any]] = [
        ["execution_start", start],
        ["execution_cached", {"nodes": [], **start}],
        [end, body],
    ]
    done = record.status == RunStatus.DONE
    return {
        "prompt": meta.queue_item(record.id),
        "outputs": outputs(meta, record, takes),
        "status": {
            "status_str": "success" if done else "error",
            "completed": done,
            "messages": messages,
        },
        "meta": {
            meta.output: {
                "node_id": meta.output,
                "display_node": meta.output,
                "parent_node": None,
                "real_node_id": meta.output,
            }
        },
    }


def _workflow_id(meta: PromptMeta) -> str | None:
    """The UI workflow's id (in extra_pnginfo), which the frontend's job list groups by."""
    info: object = meta.extra_data.get("extra_pnginfo")
    workflow: object = (
        cast(dict[str, Any], info).get("workflow") if isinstance(info, dict) else None
    )
    found: object = cast(dict[str, Any], workflow).get("id") if isinstance(workflow, dict) else None
    return found if isinstance(found, str) else None


def job(
    meta: PromptMeta, record: RunRecord, takes: Iterable[Take], *, detail: bool = False
) -> dict[str, Any]:
    """One prompt as `/api/jobs` lists it (`detail`: as `/api/jobs/{id}` answers)."""
    workflow_id = _workflow_id(meta)
    out: dict[str, Any] = {
        "id": record.id,
        "status": job_status(record.status),
        "priority": meta.number,
        "create_time": ms(record.created_at),
        "outputs_count": 0,
        "previewable_outputs_count": 0,
    }
    if workflow_id is not None:
        out["workflow_id"] = workflow_id
    history = history_item(meta, record, takes) if record.status.finished else None
    if history is not None:
        out["execution_start_time"] = ms(record.started_at or record.created_at)
        out["execution_end_time"] = ms(record.finished_at)
        end, body = end_message(meta, record)
        if end == "execution_error":
            out["execution_error"] = body
        items = history["outputs"].get(meta.output, {}).get("images", [])
        out["outputs_count"] = out["previewable_outputs_count"] = len(items)
        if items:
            media = "video" if history["outputs"][meta.output].get("animated") else "images"
            out["preview_output"] = {**items[0], "nodeId": meta.output, "mediaType": media}
    elif record.started_at is not None:
        out["execution_start_time"] = ms(record.started_at)
    if detail:
        if history is not None:
            out["outputs"] = history["outputs"]
            out["execution_status"] = history["status"]
        out["workflow"] = {"prompt": meta.prompt, "extra_data": meta.extra_data}
    return out
