"""ComfyUI's routes in process: each route's shape, refusals in ComfyUI's error shape, a render's
messages in ComfyUI's order, interrupt, uploads and `/view`, user files, and no path escapes."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any, cast

import pytest
from comfy_support import MODEL, Json, until_done, zimage_prompt
from fastapi.testclient import TestClient
from PIL import Image

from inline_core.importer.prompt_nodes import COMFY_NODE_TYPES
from inline_core.server.bootstrap import Services
from inline_core.server.comfy.node_defs import NODE_DEFS
from inline_core.server.comfy.recipe_defs import served_defs


def services_of(client: TestClient) -> Services:
    return cast(Services, cast(Any, client.app).state.services)


def png(size: int = 32, color: tuple[int, int, int] = (200, 40, 40)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (size, size), color).save(buf, format="PNG")
    return buf.getvalue()


def refused(client: TestClient, body: Json, path: str = "/prompt") -> Json:
    response = client.post(path, json=body)
    assert response.status_code == 400, response.text
    answer = cast(Json, response.json())
    assert set(answer) == {"error", "node_errors"}
    assert set(answer["error"]) == {"type", "message", "details", "extra_info"}
    return answer


# ---- object_info --------------------------------------------------------------------------------


def test_object_info_describes_exactly_the_types_the_importer_runs(client: TestClient) -> None:
    assert set(NODE_DEFS) == set(COMFY_NODE_TYPES)
    info = cast(Json, client.get("/object_info").json())
    # The importer's classes, and those the installed families' recipes add (no other).
    served = served_defs(services_of(client).families)
    assert set(COMFY_NODE_TYPES) <= set(info) and set(info) == set(served)
    assert client.get("/api/object_info").json() == info
    ksampler = info["KSampler"]
    keys = ("input", "input_order", "output", "output_is_list", "output_name", "name")
    keys += ("display_name", "description", "python_module", "category", "output_node")
    for key in keys:
        assert key in ksampler
    required = ksampler["input"]["required"]
    sample = cast(Json, client.get("/v1/models/sample").json())
    params = {p["name"]: p for p in sample["params"]}
    assert required["sampler_name"][0] == params["sampler"]["options"]
    assert required["scheduler"][0] == params["scheduler"]["options"]
    assert required["seed"][1]["control_after_generate"] is True
    assert ksampler["input_order"]["required"][:3] == ["model", "seed", "steps"]
    unet = info["UNETLoader"]["input"]["required"]["unet_name"][0]
    assert MODEL in unet
    assert info["SaveImage"]["output_node"] is True
    assert info["LoadImage"]["input"]["required"]["image"][1]["image_upload"] is True
    one = client.get("/object_info/KSampler").json()
    assert one == {"KSampler": ksampler}
    assert client.get("/object_info/NoSuchNode").json() == {}


def test_object_info_lists_a_model_dropped_in(client: TestClient, kit_models: Path) -> None:
    dropped = kit_models / "loras" / "dropped_in_now.safetensors"
    dropped.parent.mkdir(exist_ok=True)
    dropped.write_bytes(b"not read by the listing")
    services_of(
        client
    ).catalog.rescan()  # the catalog looks again within a second; the test need not wait
    try:
        lora = client.get("/object_info/LoraLoaderModelOnly").json()
        assert (
            "dropped_in_now.safetensors"
            in lora["LoraLoaderModelOnly"]["input"]["required"]["lora_name"][0]
        )
        assert "dropped_in_now.safetensors" in client.get("/models/loras").json()
    finally:
        dropped.unlink()


# ---- refusals in ComfyUI's shape ----------------------------------------------------------------


def test_no_prompt(client: TestClient) -> None:
    assert refused(client, {"prompt": {}})["error"]["type"] == "no_prompt"
    assert refused(client, {}, "/api/prompt")["error"]["type"] == "no_prompt"


def test_a_node_type_not_run_here_is_missing_node_type(client: TestClient) -> None:
    prompt = zimage_prompt()
    prompt["20"] = {"class_type": "UpscaleModelLoader", "inputs": {"model_name": "x.pth"}}
    answer = refused(client, {"prompt": prompt})
    assert answer["error"]["type"] == "missing_node_type"
    assert answer["error"]["extra_info"]["node_id"] == "20"
    assert answer["node_errors"] == {}
    del prompt["20"]["class_type"]  # what the frontend sends for a class object_info lacks
    assert refused(client, {"prompt": prompt})["error"]["type"] == "missing_node_type"


def test_a_prompt_without_an_output(client: TestClient) -> None:
    prompt = zimage_prompt()
    del prompt["9"]
    assert refused(client, {"prompt": prompt})["error"]["type"] == "prompt_no_outputs"


@pytest.mark.parametrize(
    ("node", "name", "value", "error"),
    [
        ("3", "steps", 20000, "value_bigger_than_max"),
        ("13", "width", 8, "value_smaller_than_min"),
        ("3", "sampler_name", "no_such_sampler", "value_not_in_list"),
        ("16", "unet_name", "not_here.safetensors", "value_not_in_list"),
        ("3", "cfg", "eight", "invalid_input_type"),
        ("3", "positive", ["17", 0], "return_type_mismatch"),
        ("3", "latent_image", ["404", 0], "bad_linked_input"),
    ],
)
def test_a_bad_input_names_its_node(
    client: TestClient, node: str, name: str, value: Any, error: str
) -> None:
    prompt = zimage_prompt()
    prompt[node]["inputs"][name] = value
    answer = refused(client, {"prompt": prompt})
    assert answer["error"]["type"] == "prompt_outputs_failed_validation"
    entry = answer["node_errors"][node]
    assert entry["class_type"] == prompt[node]["class_type"]
    assert entry["dependent_outputs"] == ["9"]
    (problem,) = entry["errors"]
    assert problem["type"] == error
    assert problem["extra_info"]["input_name"] == name


def test_a_missing_required_input(client: TestClient) -> None:
    prompt = zimage_prompt()
    del prompt["3"]["inputs"]["model"]
    answer = refused(client, {"prompt": prompt})
    assert answer["node_errors"]["3"]["errors"][0]["type"] == "required_input_missing"


def test_a_client_prompt_id_must_be_a_canonical_uuid(client: TestClient) -> None:
    answer = refused(client, {"prompt": zimage_prompt(), "prompt_id": "not-a-uuid"})
    assert answer["error"]["type"] == "invalid_prompt_id"


def test_two_outputs_are_refused_unless_one_is_chosen(client: TestClient) -> None:
    prompt = zimage_prompt()
    prompt["10"] = {"class_type": "PreviewImage", "inputs": {"images": ["8", 0]}}
    answer = refused(client, {"prompt": prompt})
    assert "one output" in answer["error"]["message"]
    chosen = client.post("/prompt", json={"prompt": prompt, "partial_execution_targets": ["10"]})
    assert chosen.status_code == 200, chosen.text
    client.post("/queue", json={"clear": True})


# ---- a render -----------------------------------------------------------------------------------


def test_a_prompt_renders_with_comfyuis_messages(client: TestClient) -> None:
    with client.websocket_connect("/ws?clientId=render-1") as ws:
        first = ws.receive_json()
        assert first["type"] == "status" and first["data"]["sid"] == "render-1"
        posted = {"prompt": zimage_prompt(seed=31), "client_id": "render-1"}
        answer = client.post("/prompt", json=posted)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert set(body) >= {"prompt_id", "number", "node_errors"}
        prompt_id = body["prompt_id"]
        got = until_done(ws, prompt_id)
    types = got.types()
    assert types.index("execution_start") < types.index("execution_cached")
    assert types.index("execution_cached") < types.index("executed")
    assert types.index("executed") < types.index("execution_success")
    # After the end: the queue's status, then `executing` with node null, last.
    assert types[-2:] == ["status", "executing"]
    executing = [d["node"] for d in got.of("executing")]
    cached = {n for d in got.of("execution_cached") for n in d["nodes"]}  # an earlier test's
    assert {"16", "18", "6", "13", "3", "17", "8", "9"} <= set(executing[:-1]) | cached
    steps = [d for d in got.of("progress") if d["node"] == "3"]
    values = [d["value"] for d in steps]  # progress is coalesced: a fast step may be skipped
    assert values == sorted(set(values)) and values[-1] == 2 and steps[-1]["max"] == 2
    assert all(d["prompt_id"] == prompt_id for d in got.of("progress"))
    finished = [
        d for d in got.of("progress_state") if d["nodes"].get("3", {}).get("state") == "finished"
    ]
    assert finished
    (executed,) = got.of("executed")
    assert executed["node"] == "9"
    (image,) = executed["output"]["images"]
    assert image["type"] == "output" and image["subfolder"] == ""
    assert not got.frames  # no previews unless the prompt asks
    viewed = client.get("/view", params=image)
    assert viewed.status_code == 200 and viewed.headers["content-type"] == "image/png"
    assert Image.open(io.BytesIO(viewed.content)).size == (64, 64)
    webp = client.get("/api/view", params={**image, "preview": "webp;80"})
    assert webp.headers["content-type"] == "image/webp"
    history = client.get(f"/history/{prompt_id}").json()[prompt_id]
    assert history["status"]["status_str"] == "success" and history["status"]["completed"]
    assert history["outputs"] == {"9": {"images": [image]}}
    number, pid, prompt, extra, outputs = history["prompt"]
    assert pid == prompt_id and number == body["number"] and outputs == ["9"]
    assert prompt["3"]["class_type"] == "KSampler" and extra["client_id"] == "render-1"
    assert prompt_id in client.get("/history", params={"max_items": 50}).json()
    job = client.get(f"/api/jobs/{prompt_id}").json()
    assert job["status"] == "completed" and job["outputs"] == history["outputs"]
    assert job["preview_output"]["nodeId"] == "9"
    listed = client.get("/api/jobs", params={"status": "completed"}).json()
    assert prompt_id in [j["id"] for j in listed["jobs"]]
    assert set(listed["pagination"]) == {"offset", "limit", "total", "has_more"}
    run = client.get(f"/v1/runs/{prompt_id}").json()  # an ordinary run
    assert run["status"] == "done" and run["graph"]["meta"]["comfy"]["output"] == "9"


def test_previews_come_as_binary_frames_when_asked(client: TestClient) -> None:
    with client.websocket_connect("/ws?clientId=previews") as ws:
        ws.receive_json()
        ws.send_text(
            json.dumps({"type": "feature_flags", "data": {"supports_preview_metadata": True}})
        )
        assert ws.receive_json()["type"] == "feature_flags"
        body = {
            "prompt": zimage_prompt(seed=11, steps=4),
            "client_id": "previews",
            "extra_data": {"preview_method": "latent2rgb"},
        }
        prompt_id = client.post("/prompt", json=body).json()["prompt_id"]
        got = until_done(ws, prompt_id)
    assert got.frames
    kind, length = (
        int.from_bytes(got.frames[0][:4], "big"),
        int.from_bytes(got.frames[0][4:8], "big"),
    )
    assert kind == 4
    meta = json.loads(got.frames[0][8 : 8 + length])
    assert meta["prompt_id"] == prompt_id and meta["node_id"] == "3"
    assert meta["image_type"] in ("image/jpeg", "image/png")


def test_interrupt_cancels_the_running_prompt(client: TestClient) -> None:
    with client.websocket_connect("/ws?clientId=stopper") as ws:
        ws.receive_json()
        body = {"prompt": zimage_prompt(seed=5, steps=400, size=128), "client_id": "stopper"}
        prompt_id = client.post("/prompt", json=body).json()["prompt_id"]
        while True:  # it runs: its first sampler step is out
            msg = ws.receive_json()
            if msg["type"] == "progress":
                break
        assert client.get("/queue").json()["queue_running"][0][1] == prompt_id
        assert client.post("/interrupt", json={"prompt_id": prompt_id}).status_code == 200
        got = until_done(ws, prompt_id)
    (interrupted,) = got.of("execution_interrupted")
    assert interrupted["prompt_id"] == prompt_id and interrupted["node_id"] is not None
    history = client.get(f"/history/{prompt_id}").json()[prompt_id]
    assert history["status"]["status_str"] == "error"
    assert "execution_interrupted" in [m[0] for m in history["status"]["messages"]]
    assert client.get(f"/api/jobs/{prompt_id}").json()["status"] == "cancelled"


def test_queue_lists_pending_prompts_and_clears_them(client: TestClient) -> None:
    slow = {"prompt": zimage_prompt(seed=21, steps=400, size=128)}
    ids = [client.post("/prompt", json=slow).json()["prompt_id"] for _ in range(4)]
    queue = client.get("/api/queue").json()
    listed = [item[1] for item in queue["queue_running"] + queue["queue_pending"]]
    assert set(ids) <= set(listed)
    assert client.get("/prompt").json()["exec_info"]["queue_remaining"] >= 2
    assert client.post("/queue", json={"clear": True}).status_code == 200
    assert client.post("/interrupt", json={}).status_code == 200
    for prompt_id in ids:
        state = client.get(f"/v1/runs/{prompt_id}?wait=1").json()
        assert state["status"] in ("cancelled", "running", "done")


# ---- uploads and files --------------------------------------------------------------------------


def test_upload_then_view_then_mask(client: TestClient) -> None:
    files = {"image": ("cat.png", png(), "image/png")}
    answer = client.post("/upload/image", files=files, data={"type": "input"})
    assert answer.status_code == 200, answer.text
    item = answer.json()
    assert item["type"] == "input" and item["name"].startswith("sha256-")
    viewed = client.get("/view", params={"filename": item["name"], "type": "input"})
    assert viewed.status_code == 200 and viewed.content == png()
    assert viewed.headers["content-type"] == "image/png"
    picker = client.get("/object_info/LoadImage").json()["LoadImage"]["input"]["required"]
    assert item["name"] in picker["image"][0]
    mask = Image.new("RGBA", (32, 32), (0, 0, 0, 0))
    buf = io.BytesIO()
    mask.save(buf, format="PNG")
    ref = json.dumps({"filename": item["name"], "subfolder": "", "type": "input"})
    masked = client.post(
        "/api/upload/mask",
        files={"image": ("mask.png", buf.getvalue(), "image/png")},
        data={"original_ref": ref, "type": "input"},
    )
    assert masked.status_code == 200, masked.text
    out = client.get("/view", params={"filename": masked.json()["name"], "type": "input"})
    assert Image.open(io.BytesIO(out.content)).getchannel("A").getextrema() == (0, 0)


def test_uploads_are_checked_as_assets_are(client: TestClient) -> None:
    services = services_of(client)
    text = client.post("/upload/image", files={"image": ("a.png", b"not an image", "image/png")})
    assert text.status_code == 415
    limit = services.assets.max_bytes
    big = client.post(
        "/upload/image", files={"image": ("big.png", b"\0" * (limit + 200_000), "image/png")}
    )
    assert big.status_code == 413


@pytest.mark.parametrize(
    "params",
    [
        {"filename": "../runs.db", "type": "output"},
        {"filename": "/etc/passwd", "type": "output"},
        {"filename": "x.png", "subfolder": "../..", "type": "output"},
        {"filename": "..\\runs.db", "type": "input"},
    ],
)
def test_view_cannot_leave_its_folders(client: TestClient, params: dict[str, str]) -> None:
    assert client.get("/view", params=params).status_code == 400


def test_view_takes_names_only_by_id(client: TestClient) -> None:
    for params in (
        {"filename": "runs.db", "type": "output"},
        {"filename": "tk_0.png", "type": "output"},
        {"filename": "sha256-00.png", "type": "input"},
        {"filename": "tk_0.png", "type": "temp"},
    ):
        assert client.get("/view", params=params).status_code == 404


# ---- user files and settings --------------------------------------------------------------------


def test_user_files_round_trip(client: TestClient) -> None:
    workflow = json.dumps({"nodes": [], "links": []}).encode()
    saved = client.post("/api/userdata/workflows%2Fmine.json?overwrite=false", content=workflow)
    assert saved.status_code == 200 and saved.json() == "workflows/mine.json"
    again = client.post("/api/userdata/workflows%2Fmine.json?overwrite=false", content=workflow)
    assert again.status_code == 409
    listed = client.get(
        "/api/userdata", params={"dir": "workflows", "recurse": "true", "full_info": "true"}
    )
    assert [f["path"] for f in listed.json()] == ["mine.json"]
    assert client.get("/api/userdata/workflows%2Fmine.json").content == workflow
    moved = client.post("/api/userdata/workflows%2Fmine.json/move/workflows%2Fours.json")
    assert moved.status_code == 200
    v2 = client.get("/api/v2/userdata", params={"path": "workflows"}).json()
    assert [(e["name"], e["type"]) for e in v2] == [("ours.json", "file")]
    assert client.delete("/api/userdata/workflows%2Fours.json").status_code == 204
    assert client.get("/api/userdata", params={"dir": "nowhere"}).status_code == 404


@pytest.mark.parametrize("name", ["..%2Fsecret.json", "workflows%2F..%2F..%2Fx", "%2Fetc%2Fpasswd"])
def test_user_files_cannot_leave_their_folder(client: TestClient, name: str) -> None:
    assert client.post(f"/api/userdata/{name}", content=b"{}").status_code in (400, 403, 404)
    assert client.get(f"/api/userdata/{name}").status_code in (400, 403, 404)
    assert client.get("/api/userdata", params={"dir": "../.."}).status_code == 400


def test_settings_open_straight_onto_the_graph(client: TestClient) -> None:
    settings = client.get("/api/settings").json()
    assert settings["Comfy.TutorialCompleted"] is True
    assert client.post("/api/settings", json={"Comfy.Locale": "en"}).status_code == 200
    assert client.post("/api/settings/Comfy.Foo", json=3).status_code == 200
    assert client.get("/api/settings/Comfy.Foo").json() == 3
    assert client.get("/api/settings").json()["Comfy.Locale"] == "en"


def test_the_boot_routes_answer(client: TestClient) -> None:
    assert client.get("/api/users").json() == {"storage": "server", "migrated": True}
    stats = client.get("/api/system_stats").json()
    assert isinstance(stats["system"]["argv"], list) and stats["devices"]
    assert client.get("/api/features").json()["supports_preview_metadata"] is True
    assert client.get("/api/extensions").json() == []
    assert client.get("/api/embeddings").json() == []
    assert "diffusion_models" in client.get("/api/models").json()
    assert MODEL in client.get("/api/models/diffusion_models").json()
    assert client.get("/api/models/nowhere").status_code == 404
    assert client.get("/api/i18n").json() == {}
    assert client.get("/api/experiment/models").json()
    assert client.post("/api/free", json={"unload_models": True}).status_code in (200, 409)
    index = client.get("/")
    assert index.status_code == 200 and "<html" in index.text.lower()
    assert client.get("/templates/index.json").status_code == 200


def test_query_numbers_that_are_not_plain_digits_read_as_their_default(client: TestClient) -> None:
    """`str.isdigit` passes a superscript two `int` refuses, and `int` refuses a number past
    4300 digits: each was a 500; a number the routes cannot read is their default instead."""
    for bad in ("²", "9" * 5000):
        assert client.get("/history", params={"max_items": bad}).status_code == 200
        assert client.get("/api/jobs", params={"offset": bad}).status_code == 200
    files = {"image": ("cat.png", png(), "image/png")}
    name = client.post("/upload/image", files=files, data={"type": "input"}).json()["name"]
    viewed = client.get("/view", params={"filename": name, "type": "input", "preview": "webp;²"})
    assert viewed.status_code == 200 and viewed.headers["content-type"] == "image/webp"
