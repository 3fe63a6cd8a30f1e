"""Every JSON shape of the `/v1` contract (camelCase on the wire), in one place.

Times are ISO 8601 in UTC with milliseconds (`2025-01-31T12:00:00.000Z`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from inline_core.graph.descriptor import NodeDescriptor
from inline_core.graph.runner import CatalogView
from inline_core.media import MediaKind
from inline_core.packs.host import PackSlot
from inline_core.server.events import WireEvent
from inline_core.server.run_state import NodeState, NodeStatus, RunRecord, RunStatus
from inline_core.server.stores.records import Asset, RunSummary, ServerSeen
from inline_core.takes import Take

API_VERSION = "v1"


def timestamp(epoch_s: float | None) -> str | None:
    if epoch_s is None:
        return None
    moment = datetime.fromtimestamp(epoch_s, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def error_body(code: str, message: str, node_id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if node_id is not None:
        body["nodeId"] = node_id
    return body


def error_envelope(code: str, message: str, node_id: str | None = None) -> dict[str, Any]:
    return {"error": error_body(code, message, node_id)}


def take_json(take: Take) -> dict[str, Any]:
    """A take, with what its file holds: its content type and size; a video's frame count,
    rate and length (null where its file does not say)."""
    facts = take.facts
    out: dict[str, Any] = {
        "id": take.id,
        "runId": take.run_id,
        "nodeId": take.node_id,
        "kind": take.kind.value,
        "uri": take.uri,
        "hash": take.hash,
        "contentType": facts.content_type,
        "width": facts.width,
        "height": facts.height,
        "params": take.params,
        "createdAt": timestamp(take.created_at),
    }
    if take.kind == MediaKind.VIDEO:
        duration = facts.duration_s
        out["frames"] = facts.frames
        out["fps"] = facts.fps
        out["durationS"] = None if duration is None else round(duration, 4)
    if facts.sample_rate is not None:  # a video's soundtrack, or an audio take
        out["sampleRate"] = facts.sample_rate
        out["channels"] = facts.channels
        if take.kind == MediaKind.AUDIO:
            out["durationS"] = None if facts.audio_s is None else round(facts.audio_s, 4)
    return out


def nodes_json(nodes: Mapping[str, NodeState], status: RunStatus | None = None) -> dict[str, Any]:
    """Each node's state; in a cancelled run, the nodes it never finished show `cancelled`."""
    if status == RunStatus.CANCELLED:
        unfinished = (NodeStatus.QUEUED, NodeStatus.RUNNING)
        nodes = {
            node_id: replace(state, state=NodeStatus.CANCELLED, eta_ms=None)
            if state.state in unfinished
            else state
            for node_id, state in nodes.items()
        }
    return {node_id: state.to_json() for node_id, state in nodes.items()}


def run_json(run: RunRecord, takes: Iterable[Take]) -> dict[str, Any]:
    return {
        "runId": run.id,
        "clientRunId": run.client_run_id,
        "status": run.status.value,
        "target": run.target,
        "fraction": round(run.fraction, 4),
        "nodes": nodes_json(run.nodes, run.status),
        "takes": [take_json(t) for t in takes],
        "error": run.error,
        "attempts": run.attempts,
        "server": run.holder,
        "createdAt": timestamp(run.created_at),
        "startedAt": timestamp(run.started_at),
        "finishedAt": timestamp(run.finished_at),
        "graph": run.graph,
    }


def submitted_json(run: RunRecord) -> dict[str, Any]:
    """The answer to `POST /v1/runs` and `DELETE /v1/runs/{id}`."""
    return {"runId": run.id, "status": run.status.value}


def run_list_item(run: RunSummary) -> dict[str, Any]:
    """`queuePosition`: 1 for the next run to start, 0 while running, null once finished;
    `server`: the server running it."""
    position = 0 if run.status == RunStatus.RUNNING else run.queue_position
    return {
        "runId": run.id,
        "status": run.status.value,
        "target": run.target,
        "fraction": round(run.fraction, 4),
        "queuePosition": None if run.status.finished else position,
        "server": run.holder,
        "createdAt": timestamp(run.created_at),
    }


def descriptor_json(
    descriptor: NodeDescriptor,
    catalog: CatalogView,
    models_missing: Callable[[str], str | None] | None = None,
    picker_options: Callable[[str, str], list[str] | None] | None = None,
) -> dict[str, Any]:
    """A descriptor with each model picker's options filled in from the catalog (as its family
    offers them: `picker_options`), and not available while the models it renders with are
    missing (`models_missing`: why)."""
    out = descriptor.to_json()
    missing = None if models_missing is None else models_missing(descriptor.type)
    if missing is not None and out["available"]:
        out.update(available=False, unavailableReason=missing, modelsMissing=True)
    pickers = {p.name: p.options_from for p in descriptor.params if p.options_from is not None}
    if pickers:
        for param in out["params"]:
            category = pickers.get(param["name"])
            if category is not None:
                offered = (
                    None if picker_options is None else picker_options(descriptor.type, category)
                )
                param["options"] = catalog.options(category) if offered is None else offered
    return out


def models_json(
    registry_version: str,
    descriptors: Iterable[NodeDescriptor],
    catalog: CatalogView,
    catalog_listing: Mapping[str, Any],
    models_missing: Callable[[str], str | None] | None = None,
    picker_options: Callable[[str, str], list[str] | None] | None = None,
) -> dict[str, Any]:
    return {
        "registryVersion": registry_version,
        "models": [
            descriptor_json(d, catalog, models_missing, picker_options) for d in descriptors
        ],
        "catalog": catalog_listing,
    }


def asset_json(asset: Asset) -> dict[str, Any]:
    return {
        "id": asset.id,
        "kind": asset.kind.value,
        "bytes": asset.size,
        "contentType": asset.content_type,
    }


def health_json(
    *,
    version: str,
    schema_min: int,
    schema_max: int,
    registry_version: str,
    device: Mapping[str, Any],
    runs: Mapping[str, int],
    store: Mapping[str, Any],
    sampler: Mapping[str, Any] | None,
    server_id: str,
    leases: list[str],
    lease_timeout_s: float,
    servers: list[ServerSeen],
    models: Mapping[str, Any] | None = None,
    step_cache: Mapping[str, int] | None = None,
    adapters: Mapping[str, Any] | None = None,
    leasing: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ok": True,
        "apiVersion": API_VERSION,
        "version": version,
        "schemaVersions": {"min": schema_min, "max": schema_max},
        "registryVersion": registry_version,
        "device": dict(device),
        "runs": dict(runs),
        "store": dict(store),
        "serverId": server_id,
        "leases": leases,
        "leaseTimeoutS": lease_timeout_s,
        "servers": [server_seen_json(s) for s in servers],
    }
    if sampler is not None:
        out["sampler"] = dict(sampler)
    if models is not None:
        out["models"] = dict(models)
    if step_cache is not None:  # cached renders since start, and what their caches skipped
        out["stepCache"] = dict(step_cache)
    if adapters is not None:  # how forwards applied their LoRAs: fused or per row, and why
        out["adapters"] = dict(adapters)
    if leasing is not None:  # how this server's lease renewals went
        out["leasing"] = dict(leasing)
    return out


def server_seen_json(server: ServerSeen) -> dict[str, Any]:
    return {
        "serverId": server.id,
        "startedAt": timestamp(server.started_at),
        "lastSeenS": round(server.heartbeat_age_s, 2),
        "leases": server.leases,
    }


# ---- websocket events ---------------------------------------------------------------------------


def snapshot_event(run: RunRecord, takes: Iterable[Take]) -> WireEvent:
    return WireEvent(
        "snapshot", {"type": "snapshot", "runId": run.id, "state": run_json(run, takes)}
    )


def run_started_event(run_id: str, attempt: int, server_id: str) -> WireEvent:
    body = {"type": "run_started", "runId": run_id, "attempt": attempt, "server": server_id}
    return WireEvent("run_started", body)


def progress_event(run_id: str, node_id: str, node: NodeState, run_fraction: float) -> WireEvent:
    body: dict[str, Any] = {
        "type": "progress",
        "runId": run_id,
        "nodeId": node_id,
        "state": node.state.value,
        "phase": node.phase,
        "fraction": round(node.fraction, 4),
        "step": node.step,
        "stepCount": node.step_count,
        "etaMs": node.eta_ms,
        "runFraction": round(run_fraction, 4),
    }
    if node.waiting_for is not None:
        body["waitingFor"] = node.waiting_for
    return WireEvent("progress", body, node_id=node_id)


def chunk_event(
    run_id: str, node_id: str, first: int, count: int, total: int, fps: float
) -> WireEvent:
    """Frames `first` .. `first + count - 1` of a video node's `total` are decoded (a streaming
    decode's chunk, played at `fps`; the take follows in `node_done`)."""
    body: dict[str, Any] = {
        "type": "chunk",
        "runId": run_id,
        "nodeId": node_id,
        "firstFrame": first,
        "frames": count,
        "totalFrames": total,
        "fps": fps,
    }
    return WireEvent("chunk", body, node_id=node_id)


def chunk_started_event(
    run_id: str,
    node_id: str,
    media: Mapping[str, int],
    interactions: Sequence[Mapping[str, Any]],
) -> WireEvent:
    """A chunked render starts a chunk: which of the video's frames it adds (`firstFrame`,
    `frames`), its latent frames, and the interactions that took effect at it."""
    body: dict[str, Any] = {
        "type": "chunk_started",
        "runId": run_id,
        "nodeId": node_id,
        **media,
        "interactions": [dict(i) for i in interactions],
    }
    return WireEvent("chunk_started", body, node_id=node_id)


def interaction_queued_event(run_id: str, interaction: Mapping[str, Any]) -> WireEvent:
    """The answer to an interaction sent on the run's socket: stored, with the chunk it takes
    effect at (what `POST /v1/runs/{id}/interactions` answers)."""
    body: dict[str, Any] = {"type": "interaction_queued", "runId": run_id, **interaction}
    return WireEvent("interaction_queued", body)


def interaction_refused_event(run_id: str, status: int, code: str, message: str) -> WireEvent:
    """The answer to a socket message that queued nothing: the status and error envelope the
    same interaction would get over HTTP. The socket stays open."""
    body: dict[str, Any] = {
        "type": "interaction_refused",
        "runId": run_id,
        "status": status,
        **error_envelope(code, message),
    }
    return WireEvent("interaction_refused", body)


def node_done_event(
    run_id: str, node_id: str, cached: bool, takes: Iterable[Take], run_fraction: float
) -> WireEvent:
    body: dict[str, Any] = {
        "type": "node_done",
        "runId": run_id,
        "nodeId": node_id,
        "cached": cached,
        "takes": [take_json(t) for t in takes],
        "runFraction": round(run_fraction, 4),
    }
    return WireEvent("node_done", body, node_id=node_id)


def terminal_event(run: RunRecord, takes: Iterable[Take]) -> WireEvent:
    """The one event that ends a run's stream: run_done, error or cancelled."""
    if run.status == RunStatus.DONE:
        body: dict[str, Any] = {
            "type": "run_done",
            "runId": run.id,
            "status": run.status.value,
            "takes": [take_json(t) for t in takes],
        }
        return WireEvent("run_done", body)
    if run.status == RunStatus.ERROR:
        error = run.error or error_body("internal", "the run failed")
        body = {"type": "error", "runId": run.id, "status": run.status.value, "error": error}
        if "nodeId" in error:
            body["nodeId"] = error["nodeId"]
        return WireEvent("error", body)
    if run.status == RunStatus.CANCELLED:
        body = {"type": "cancelled", "runId": run.id, "status": run.status.value}
        return WireEvent("cancelled", body)
    raise ValueError(f"run {run.id} is {run.status.value}, not finished")


def pack_json(slot: PackSlot) -> dict[str, Any]:
    """One pack in `GET /v1/packs`: its version, status, node types and last error."""
    loaded = slot.loaded
    out: dict[str, Any] = {
        "name": slot.name,
        "version": slot.installed.version,
        "status": slot.status,
        "nodeTypes": sorted(n.descriptor.type for n in loaded.nodes.values()) if loaded else [],
        "lastError": slot.refused or slot.last_error,
        "installedAt": timestamp(slot.installed.installed_at),
        "calls": slot.calls,
        "failures": slot.failures,
        "workerStarts": slot.starts,
        "lastStartMs": round(slot.last_start_s * 1000) if slot.last_start_s else None,
    }
    if loaded is not None:
        out["sdkRange"] = str(loaded.manifest.sdk)
        manifest = loaded.manifest
        out["limits"] = {"timeoutS": manifest.timeout_s, "memoryMb": manifest.memory_mb}
    return out


def packs_json(sdk: str, protocol: int, slots: Iterable[PackSlot]) -> dict[str, Any]:
    return {"sdk": sdk, "protocol": protocol, "packs": [pack_json(s) for s in slots]}
