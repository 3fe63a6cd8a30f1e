"""The `/v1` answers as OpenAPI schemas (pydantic models used for the description only: the
routes shape their JSON in `serialize`, and a test checks each answer against its model).

Field names are the wire's (camelCase). Shapes that carry a client's or a node's own data (a
graph, a descriptor's params, a take's params) stay open objects.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

RunStatusName = Literal["queued", "running", "done", "error", "cancelled"]
NodeStatusName = Literal["queued", "running", "cached", "done", "error", "cancelled"]


class Schema(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorBody(Schema):
    code: str = Field(description="e.g. invalid_request, invalid_graph, not_found, conflict")
    message: str = Field(description="what went wrong and, where it can, how to fix it")
    nodeId: str | None = Field(None, description="the node the error is about")


class ErrorEnvelope(Schema):
    """Every 4xx and 5xx answer of `/v1`."""

    error: ErrorBody


class SchemaVersions(Schema):
    min: int
    max: int


class Health(Schema):
    ok: bool
    apiVersion: str
    version: str
    schemaVersions: SchemaVersions
    registryVersion: str
    device: dict[str, Any]
    runs: dict[str, int]
    store: dict[str, Any]
    serverId: str
    leases: list[str]
    leaseTimeoutS: float
    servers: list[dict[str, Any]]
    sampler: dict[str, Any] | None = None
    models: dict[str, Any] | None = None
    stepCache: dict[str, int] | None = None
    adapters: dict[str, Any] | None = None


class Descriptor(Schema):
    """A node: its ports and params (model pickers with the catalog's files as options)."""

    type: str
    title: str
    category: str
    icon: str
    source: str
    outputKind: str | None
    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    params: list[dict[str, Any]]
    available: bool
    unavailableReason: str | None = None
    modelsMissing: bool | None = None


class Models(Schema):
    registryVersion: str
    models: list[Descriptor]
    catalog: dict[str, Any]


class Submitted(Schema):
    """A run as `POST /v1/runs` and `DELETE /v1/runs/{id}` answer it."""

    runId: str
    status: RunStatusName


class Interaction(Schema):
    """An interaction as `POST /v1/runs/{id}/interactions` answers it: stored, and given the chunk
    boundary it takes effect at; the fields it changes."""

    id: str
    chunk: int
    prompt: str | None = None
    negative_prompt: str | None = None
    guidance: float | None = None


class NodeState(Schema):
    state: NodeStatusName
    fraction: float
    phase: str | None = None
    step: int | None = None
    stepCount: int | None = None
    etaMs: int | None = None


class Take(Schema):
    """An immutable output file, with what it holds (read from its bytes)."""

    id: str
    runId: str
    nodeId: str
    kind: Literal["image", "video", "audio"]
    uri: str
    hash: str = Field(description='"sha256-<hex>" of the file\'s bytes')
    contentType: str
    width: int | None
    height: int | None
    params: dict[str, Any]
    createdAt: str | None
    frames: int | None = Field(None, description="a video's frame count")
    fps: float | None = Field(None, description="a video's frame rate")
    durationS: float | None = Field(
        None, description="a video's length in seconds, or an audio take's"
    )
    sampleRate: int | None = Field(
        None, description="its sound's samples a second (a video's soundtrack, an audio take)"
    )
    channels: int | None = Field(None, description="its sound's channels")


class Run(Schema):
    runId: str
    clientRunId: str | None
    status: RunStatusName
    target: str
    fraction: float = Field(description="the run's progress, its nodes weighed by their work")
    nodes: dict[str, NodeState]
    takes: list[Take]
    error: ErrorBody | None
    attempts: int
    server: str | None
    createdAt: str | None
    startedAt: str | None
    finishedAt: str | None
    graph: dict[str, Any]


class RunListItem(Schema):
    runId: str
    status: RunStatusName
    target: str
    fraction: float
    queuePosition: int | None
    server: str | None
    createdAt: str | None


class RunList(Schema):
    runs: list[RunListItem]


class Asset(Schema):
    id: str
    kind: Literal["image", "video", "audio"]
    bytes: int
    contentType: str


class Imported(Schema):
    """A ComfyUI workflow as a graph to post to `/v1/runs`, and what changed on the way."""

    graph: dict[str, Any]
    target: str
    family: dict[str, Any] | None
    changesPicture: list[dict[str, Any]]
    unmatchedModels: list[dict[str, Any]]
    skipped: list[dict[str, Any]]
    warnings: list[str]


class Packs(Schema):
    sdk: str
    protocol: int
    packs: list[dict[str, Any]]


class Requirements(Schema):
    """What a node needs, piece by piece, and where each can be downloaded from."""

    nodeType: str
    family: str | None
    ready: bool | None = None
    requirements: list[dict[str, Any]]


class DownloadStarted(Schema):
    downloadId: str
    status: str


class Download(Schema):
    downloadId: str
    status: Literal["queued", "running", "done", "error", "cancelled"]
    repo: str
    files: list[dict[str, Any]]
    bytesDone: int | None = None
    bytesTotal: int | None = None
    rate: float | None = None
    etaS: float | None = None
    error: ErrorBody | None = None


class DownloadList(Schema):
    downloads: list[Download]


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The error answers a route documents, each the one envelope."""
    return {status: {"model": ErrorEnvelope} for status in statuses}
