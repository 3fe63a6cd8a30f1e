"""Two servers on one PostgreSQL store: a prompt posted to one is answered for by the other (its
socket's messages, `/history`, `/view`, `/api/jobs`), as every prompt is a run in the store."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import cast

from comfy_support import Json, http_json, queue_prompt, view, zimage_prompt
from websockets.sync.client import connect

from tests.postgres_cluster import PostgresCluster
from tests.server.server_support import LiveServer


def test_any_server_answers_for_any_prompt(
    kit_models: Path, tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    url = postgres_cluster.new_database()
    servers = [
        LiveServer(
            data_dir=tmp_path / "shared",
            models_dir=kit_models,
            env={"INLINE_SERVER_ID": f"s{i}"},
            database_url=url,
            name=f"s{i}",
        )
        for i in range(2)
    ]
    try:
        for server in servers:
            server.start()
        posted_to, asked = servers
        client_id = uuid.uuid4().hex
        prompt_id = queue_prompt(posted_to.base, zimage_prompt(seed=17, steps=8), client_id)
        with connect(f"{asked.ws_base}/ws?clientId={client_id}", open_timeout=30) as ws:
            while True:  # its messages, wherever it runs; or an empty queue if it ended already
                message = cast(Json, json.loads(ws.recv(timeout=120)))
                data = message["data"]
                if message["type"] == "executing" and data["node"] is None:
                    assert data["prompt_id"] == prompt_id
                    break
                # Stored before POST /prompt answered, the run counts until it has ended.
                if message["type"] == "status":
                    if data["status"]["exec_info"]["queue_remaining"] == 0:
                        break
        history = http_json(asked.base, f"/history/{prompt_id}")[prompt_id]
        assert history["status"]["status_str"] == "success"
        (item,) = history["outputs"]["9"]["images"]
        data, media = view(asked.base, item)
        assert media == "image/png" and data[:4] == b"\x89PNG"
        jobs = http_json(asked.base, "/api/jobs?status=completed")["jobs"]
        assert prompt_id in [j["id"] for j in jobs]
    finally:
        for server in servers:
            server.close()
