"""ComfyUI's HTTP routes and `/ws`, each served bare and under `/api` as ComfyUI serves them.

Every route reads our services: prompts are runs (`submit.py`, `ledger.py`), outputs are takes
and inputs are assets (`files.py`), user files live in the data folder (`userdata.py`).
"""

from __future__ import annotations

import json
import platform
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, cast

from fastapi import APIRouter, FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.websockets import WebSocket, WebSocketDisconnect

from inline_core import __version__
from inline_core.errors import Conflict, InlineError, NotFound
from inline_core.server.bootstrap import Services
from inline_core.server.comfy import files, views
from inline_core.server.comfy.errors import ComfyError, comfy_error_response
from inline_core.server.comfy.hub import ComfyHub
from inline_core.server.comfy.ledger import PromptLedger
from inline_core.server.comfy.object_info import Choices, object_info
from inline_core.server.comfy.recipe_defs import served_defs
from inline_core.server.comfy.submit import Numbers, accept_prompt
from inline_core.server.comfy.userdata import UserFiles
from inline_core.server.http_io import MB, read_body, read_json_object, whole_number
from inline_core.server.run_state import RunStatus

Handler = Callable[[Request], Awaitable[Response]]
MODEL_FOLDERS = (
    ("checkpoints", "checkpoints"),
    ("diffusion_models", "diffusion_models"),
    ("text_encoders", "text_encoders"),
    ("vae", "vae"),
    ("loras", "loras"),
    ("controlnet", "controlnet"),
    ("clip_vision", "clip_vision"),
    ("upscale_models", "upscale_models"),
    ("embeddings", "embeddings"),
)
FOLDERS = dict(MODEL_FOLDERS)
JOB_LIMIT = 200


class ComfyApi:
    """What the routes share: the services, the prompt ledger, the socket hub, user files."""

    def __init__(self, services: Services, frontend_version: str | None) -> None:
        self.services = services
        folder = services.config.data_dir / "comfy"
        self.ledger = PromptLedger(services.manager, folder)
        self.hub = ComfyHub(services.manager, self.ledger)
        self.users = UserFiles(folder / "user")
        self.numbers = Numbers()
        self.frontend_version = frontend_version

    def choices(self) -> Choices:
        s = self.services
        return Choices(s.catalog, s.registry, lambda: files.input_names(s), served_defs(s.families))

    def features(self) -> dict[str, Any]:
        return {
            "supports_preview_metadata": True,
            "max_upload_size": self.services.assets.max_bytes,
            "assets": False,
            "node_replacements": False,
        }


def api(request: Request) -> ComfyApi:
    return cast(ComfyApi, request.app.state.comfy)


def ok(body: Any = None, status: int = 200) -> Response:
    return JSONResponse({} if body is None else body, status_code=status)


def flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "").lower() in ("true", "1")


# ---- prompts -------------------------------------------------------------------------------------


async def post_prompt(request: Request) -> Response:
    a = api(request)
    s = a.services
    try:
        body = await read_json_object(request, s.config.max_body_mb * MB)
    except InlineError as exc:
        raise ComfyError("invalid_prompt", exc.message, exc.code) from exc
    accepted = await accept_prompt(s, body, a.choices(), a.numbers)
    a.hub.follow(accepted.record, accepted.meta)
    await a.hub.broadcast_status()
    return ok(
        {
            "prompt_id": accepted.record.id,
            "number": accepted.meta.number,
            "node_errors": {},
            "warnings": accepted.meta.warnings,
        }
    )


async def get_prompt(request: Request) -> Response:
    remaining = await run_in_threadpool(api(request).ledger.queue_remaining)
    return ok({"exec_info": {"queue_remaining": remaining}})


async def history(request: Request) -> Response:
    ledger = api(request).ledger
    runs = await run_in_threadpool(ledger.history)
    offset = _whole(request.query_params.get("offset"), 0)
    most = _whole(request.query_params.get("max_items"), len(runs))
    chosen = runs[offset : offset + most]
    body = {p.record.id: views.history_item(p.meta, p.record, p.takes) for p in chosen}
    return ok(body)


async def history_one(request: Request) -> Response:
    found = await run_in_threadpool(api(request).ledger.get, request.path_params["prompt_id"])
    if found is None or not found.record.status.finished:
        return ok({})
    return ok({found.record.id: views.history_item(found.meta, found.record, found.takes)})


async def post_history(request: Request) -> Response:
    a = api(request)
    body = await read_json_object(request, MB)
    if body.get("clear"):
        await run_in_threadpool(a.ledger.hidden.clear, time.time())
    deleted = body.get("delete")
    if isinstance(deleted, list):
        ids = [str(i) for i in cast(list[object], deleted)]
        await run_in_threadpool(a.ledger.hidden.delete, ids)
    return ok()


async def queue(request: Request) -> Response:
    ledger = api(request).ledger
    running = await run_in_threadpool(ledger.unfinished, RunStatus.RUNNING)
    pending = await run_in_threadpool(ledger.unfinished, RunStatus.QUEUED)
    return ok(
        {
            "queue_running": [p.meta.queue_item(p.record.id) for p in running],
            "queue_pending": [p.meta.queue_item(p.record.id) for p in pending],
        }
    )


async def post_queue(request: Request) -> Response:
    a = api(request)
    body = await read_json_object(request, MB)
    pending = await run_in_threadpool(a.ledger.unfinished, RunStatus.QUEUED)
    chosen: list[str] = []
    if body.get("clear"):
        chosen = [p.record.id for p in pending]
    deleted = body.get("delete")
    if isinstance(deleted, list):
        wanted = {str(i) for i in cast(list[object], deleted)}
        chosen += [p.record.id for p in pending if p.record.id in wanted]
    for run_id in chosen:
        await run_in_threadpool(_cancel, a, run_id)
    if chosen:
        await a.hub.broadcast_status()
    return ok()


def _cancel(a: ComfyApi, run_id: str) -> bool:
    try:
        a.services.manager.cancel(run_id)
    except (Conflict, NotFound):
        return False  # finished (or gone) meanwhile
    return True


async def interrupt(request: Request) -> Response:
    """Cancel the running prompt named (`{"prompt_id"}`), or every running prompt."""
    a = api(request)
    raw = await read_body(request, MB)
    body: object = json.loads(raw) if raw.strip() else {}
    wanted = cast(dict[str, Any], body).get("prompt_id") if isinstance(body, dict) else None
    running = await run_in_threadpool(a.ledger.unfinished, RunStatus.RUNNING)
    for prompt in running:
        if wanted is None or prompt.record.id == wanted:
            await run_in_threadpool(_cancel, a, prompt.record.id)
    return ok()


async def free(request: Request) -> Response:
    """Drop the loaded models (ComfyUI's `unload_models`/`free_memory`); refused (409) while a
    render holds them."""
    s = api(request).services
    body = await read_json_object(request, MB)
    if not (body.get("unload_models") or body.get("free_memory")):
        return ok()
    runtime = s.runtime
    if runtime is None:
        return ok()
    busy = runtime.renders_in_progress()
    if busy:
        raise ComfyError(
            "models_in_use",
            f"{len(busy)} render(s) in progress hold the loaded models; free them when idle",
            "",
            status=409,
        )
    runtime.residency.clear()
    s.manager.trimmer.went_idle()
    return ok()


# ---- jobs ----------------------------------------------------------------------------------------


async def jobs(request: Request) -> Response:
    ledger = api(request).ledger
    query = request.query_params
    wanted = set((query.get("status") or ",".join(views.JOB_STATUSES)).split(","))
    runs = await run_in_threadpool(ledger.recent)
    listed = [
        views.job(p.meta, p.record, p.takes)
        for p in runs
        if not (p.record.status.finished and ledger.hidden.hides(p.record))
    ]
    listed = [j for j in listed if j["status"] in wanted]
    workflow = query.get("workflow_id")
    if workflow:
        listed = [j for j in listed if j.get("workflow_id") == workflow]
    descending = query.get("sort_order", "desc") != "asc"
    if query.get("sort_by") == "execution_duration":
        listed.sort(key=_duration, reverse=descending)
    else:
        listed.sort(key=lambda j: j.get("create_time") or 0, reverse=descending)
    offset = _whole(query.get("offset"), 0)
    limit = min(_whole(query.get("limit"), JOB_LIMIT), JOB_LIMIT)
    page = listed[offset : offset + limit]
    pagination = {
        "offset": offset,
        "limit": limit,
        "total": len(listed),
        "has_more": offset + len(page) < len(listed),
    }
    return ok({"jobs": page, "pagination": pagination})


def _duration(job: dict[str, Any]) -> int:
    start, end = job.get("execution_start_time"), job.get("execution_end_time")
    return int(end - start) if isinstance(start, int) and isinstance(end, int) else 0


async def job(request: Request) -> Response:
    found = await run_in_threadpool(api(request).ledger.get, request.path_params["job_id"])
    if found is None:
        return JSONResponse({"error": "Job not found"}, status_code=404)
    return ok(views.job(found.meta, found.record, found.takes, detail=True))


async def cancel_job(request: Request) -> Response:
    a = api(request)
    found = await run_in_threadpool(a.ledger.get, request.path_params["job_id"])
    done = found is not None and await run_in_threadpool(_cancel, a, found.record.id)
    return ok({"cancelled": done})


async def cancel_jobs(request: Request) -> Response:
    a = api(request)
    body = await read_json_object(request, MB)
    ids = body.get("job_ids")
    done = False
    for run_id in cast(list[object], ids) if isinstance(ids, list) else []:
        found = await run_in_threadpool(a.ledger.get, str(run_id))
        if found is not None:
            done = await run_in_threadpool(_cancel, a, found.record.id) or done
    return ok({"cancelled": done})


# ---- files ---------------------------------------------------------------------------------------


async def view(request: Request) -> Response:
    return await files.view(request, api(request).services)


async def upload_image(request: Request) -> Response:
    return ok(await files.upload_image(request, api(request).services))


async def upload_mask(request: Request) -> Response:
    return ok(await files.upload_mask(request, api(request).services))


# ---- nodes and models ----------------------------------------------------------------------------


async def get_object_info(request: Request) -> Response:
    a = api(request)
    node = request.path_params.get("node_class")
    return ok(await run_in_threadpool(object_info, a.choices(), node))


async def models(_request: Request) -> Response:
    return ok([name for name, _category in MODEL_FOLDERS])


async def model_folder(request: Request) -> Response:
    folder = request.path_params["folder"]
    if folder not in FOLDERS:
        raise NotFound(f"no model folder {folder!r}")
    return ok(api(request).services.catalog.options(FOLDERS[folder]))


async def experiment_models(_request: Request) -> Response:
    return ok([{"name": name, "folders": [name]} for name, _category in MODEL_FOLDERS])


async def experiment_model_folder(request: Request) -> Response:
    folder = request.path_params["folder"]
    if folder not in FOLDERS:
        raise NotFound(f"no model folder {folder!r}")
    entries = api(request).services.catalog.options(FOLDERS[folder])
    return ok([{"name": n, "pathIndex": 0} for n in entries])


async def folder_paths(request: Request) -> Response:
    """ComfyUI's `/internal/folder_paths`: where each model folder is (the missing-models
    dialog names them)."""
    root = api(request).services.catalog.root
    return ok({name: [str(root / category)] for name, category in MODEL_FOLDERS})


async def embeddings(request: Request) -> Response:
    names = api(request).services.catalog.options("embeddings")
    return ok([n.rsplit(".", 1)[0] for n in names])


# ---- the system ----------------------------------------------------------------------------------


async def system_stats(request: Request) -> Response:
    a = api(request)
    device = a.services.device.to_json()
    ram_total, ram_free = _memory()
    vram = int(device.get("vramBudgetMb") or 0) * MB
    return ok(
        {
            "system": {
                "os": sys.platform,
                "ram_total": ram_total,
                "ram_free": ram_free,
                "comfyui_version": f"inline-core {__version__}",
                "required_frontend_version": a.frontend_version or "",
                "installed_templates_version": "",
                "required_templates_version": "",
                "python_version": sys.version,
                "pytorch_version": "",
                "embedded_python": False,
                "deploy_environment": "inline-core",
                # What the frontend reads: this server has no cloud API nodes to offer.
                "argv": ["inline-core", "--disable-api-nodes"],
            },
            "devices": [
                {
                    "name": str(device.get("name") or device.get("kind") or platform.machine()),
                    "type": str(device.get("kind") or "cpu"),
                    "index": 0,
                    "vram_total": vram,
                    "vram_free": vram,
                    "torch_vram_total": vram,
                    "torch_vram_free": vram,
                }
            ],
        }
    )


def _memory() -> tuple[int, int]:
    values: dict[str, int] = {}
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                name, _, rest = line.partition(":")
                values[name] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        return 0, 0
    return values.get("MemTotal", 0), values.get("MemAvailable", 0)


async def features(request: Request) -> Response:
    return ok(api(request).features())


async def empty_list(_request: Request) -> Response:
    return ok([])


async def empty_object(_request: Request) -> Response:
    return ok({})


# ---- users, settings, user files -----------------------------------------------------------------


async def users(_request: Request) -> Response:
    return ok({"storage": "server", "migrated": True})


async def settings(request: Request) -> Response:
    return ok(await run_in_threadpool(api(request).users.settings))


async def post_settings(request: Request) -> Response:
    body = await read_json_object(request, MB)
    await run_in_threadpool(api(request).users.merge_settings, body)
    return ok()


async def setting(request: Request) -> Response:
    values = await run_in_threadpool(api(request).users.settings)
    return ok(values.get(request.path_params["setting_id"]))


async def post_setting(request: Request) -> Response:
    raw = await read_body(request, MB)
    value = json.loads(raw) if raw.strip() else None
    name = request.path_params["setting_id"]
    await run_in_threadpool(api(request).users.merge_settings, {name: value})
    return ok()


async def userdata(request: Request) -> Response:
    query = request.query_params
    found = await run_in_threadpool(
        api(request).users.listing,
        query.get("dir", ""),
        recurse=flag(request, "recurse"),
        full=flag(request, "full_info"),
        split=flag(request, "split"),
    )
    return ok(found)


async def userdata_v2(request: Request) -> Response:
    found = await run_in_threadpool(
        api(request).users.listing_v2, request.query_params.get("path", "")
    )
    return ok(found)


async def get_userdata_file(request: Request) -> Response:
    path = await run_in_threadpool(api(request).users.read, request.path_params["file"])
    return FileResponse(path, headers={"Cache-Control": "no-cache"})


async def post_userdata_file(request: Request) -> Response:
    a = api(request)
    name = request.path_params["file"]
    data = await read_body(request, a.services.config.max_body_mb * MB)
    overwrite = request.query_params.get("overwrite", "true").lower() != "false"
    await run_in_threadpool(a.users.write, name, data, overwrite=overwrite)
    if flag(request, "full_info"):
        return ok(await run_in_threadpool(a.users.info, name))
    return ok(name)


async def delete_userdata_file(request: Request) -> Response:
    await run_in_threadpool(api(request).users.delete, request.path_params["file"])
    return Response(status_code=204)


async def move_userdata_file(request: Request) -> Response:
    a = api(request)
    source, dest = request.path_params["file"], request.path_params["dest"]
    overwrite = request.query_params.get("overwrite", "true").lower() != "false"
    await run_in_threadpool(a.users.move, source, dest, overwrite=overwrite)
    if flag(request, "full_info"):
        return ok(await run_in_threadpool(a.users.info, dest))
    return ok(dest)


# ---- the websocket -------------------------------------------------------------------------------


async def socket(websocket: WebSocket) -> None:
    a = cast(ComfyApi, websocket.app.state.comfy)
    sid = websocket.query_params.get("clientId") or uuid.uuid4().hex
    slot = f"comfy:{sid}"
    gate = a.services.sockets
    try:
        gate.acquire(slot)
    except InlineError as exc:
        from inline_core.server.websocket import deny_socket

        await deny_socket(websocket, exc)
        return
    try:
        await websocket.accept()
        client = a.hub.connect(sid)
        try:
            await a.hub.greet(client)
            await _serve(websocket, a.hub, client)
        finally:
            a.hub.disconnect(client)
    finally:
        gate.release(slot)


async def _serve(websocket: WebSocket, hub: ComfyHub, client: Any) -> None:
    import asyncio

    first = True

    async def read() -> None:
        nonlocal first
        while True:
            text = await websocket.receive_text()
            if not first:
                continue
            first = False
            try:
                parsed = json.loads(text)
            except ValueError:
                continue
            message = cast(dict[str, Any], parsed) if isinstance(parsed, dict) else {}
            if message.get("type") == "feature_flags":
                data = message.get("data")
                hub.feature_flags(
                    client, cast(dict[str, Any], data) if isinstance(data, dict) else {}
                )
                client.put(json.dumps({"type": "feature_flags", "data": api_features(websocket)}))

    reader = asyncio.create_task(read())
    try:
        while True:
            getting = asyncio.create_task(client.outbox.get())
            await asyncio.wait({reader, getting}, return_when=asyncio.FIRST_COMPLETED)
            if reader.done():
                getting.cancel()
                return
            item = getting.result()
            if item == b"":
                await websocket.close(code=1000)
                return
            if isinstance(item, bytes):
                await websocket.send_bytes(item)
            else:
                await websocket.send_text(item)
    except (WebSocketDisconnect, RuntimeError, OSError):
        return
    finally:
        reader.cancel()


def api_features(websocket: WebSocket) -> dict[str, Any]:
    return cast(ComfyApi, websocket.app.state.comfy).features()


def _whole(raw: str | None, default: int) -> int:
    number = None if raw is None else whole_number(raw)
    return default if number is None else number


# ---- the table -----------------------------------------------------------------------------------

ROUTES: list[tuple[str, Handler, list[str]]] = [
    ("/prompt", post_prompt, ["POST"]),
    ("/prompt", get_prompt, ["GET"]),
    ("/history", history, ["GET"]),
    ("/history", post_history, ["POST"]),
    ("/history/{prompt_id}", history_one, ["GET"]),
    ("/queue", queue, ["GET"]),
    ("/queue", post_queue, ["POST"]),
    ("/interrupt", interrupt, ["POST"]),
    ("/free", free, ["POST"]),
    ("/jobs", jobs, ["GET"]),
    ("/jobs/cancel", cancel_jobs, ["POST"]),
    ("/jobs/{job_id}", job, ["GET"]),
    ("/jobs/{job_id}/cancel", cancel_job, ["POST"]),
    ("/view", view, ["GET"]),
    ("/upload/image", upload_image, ["POST"]),
    ("/upload/mask", upload_mask, ["POST"]),
    ("/object_info", get_object_info, ["GET"]),
    ("/object_info/{node_class}", get_object_info, ["GET"]),
    ("/models", models, ["GET"]),
    ("/models/{folder}", model_folder, ["GET"]),
    ("/experiment/models", experiment_models, ["GET"]),
    ("/experiment/models/{folder}", experiment_model_folder, ["GET"]),
    ("/embeddings", embeddings, ["GET"]),
    ("/extensions", empty_list, ["GET"]),
    ("/system_stats", system_stats, ["GET"]),
    ("/features", features, ["GET"]),
    ("/i18n", empty_object, ["GET"]),
    ("/global_subgraphs", empty_object, ["GET"]),
    ("/workflow_templates", empty_object, ["GET"]),
    ("/node_replacements", empty_object, ["GET"]),
    ("/users", users, ["GET"]),
    ("/settings", settings, ["GET"]),
    ("/settings", post_settings, ["POST"]),
    ("/settings/{setting_id}", setting, ["GET"]),
    ("/settings/{setting_id}", post_setting, ["POST"]),
    ("/userdata", userdata, ["GET"]),
    ("/v2/userdata", userdata_v2, ["GET"]),
    # A file's path arrives decoded (`workflows%2Fa.json` as `workflows/a.json`).
    ("/userdata/{file:path}/move/{dest:path}", move_userdata_file, ["POST"]),
    ("/userdata/{file:path}", get_userdata_file, ["GET"]),
    ("/userdata/{file:path}", post_userdata_file, ["POST"]),
    ("/userdata/{file:path}", delete_userdata_file, ["DELETE"]),
]


def comfy_router() -> APIRouter:
    """Every route twice: bare (older API clients) and under `/api` (the frontend)."""
    router = APIRouter(include_in_schema=False)
    for prefix in ("", "/api"):
        for path, handler, methods in ROUTES:
            if path.startswith("/jobs") and prefix == "":
                continue  # ComfyUI registers its jobs routes with the prefix in the path
            router.add_api_route(prefix + path, handler, methods=methods)
        router.add_api_websocket_route(prefix + "/ws", socket)
    router.add_api_route("/internal/folder_paths", folder_paths, methods=["GET"])  # no /api copy
    return router


def install(app: FastAPI, services: Services, frontend_version: str | None) -> ComfyApi:
    comfy = ComfyApi(services, frontend_version)
    app.state.comfy = comfy
    app.add_exception_handler(ComfyError, comfy_error_response)
    app.include_router(comfy_router())
    return comfy
