"""ComfyUI's official LTX-2 templates through `POST /v1/import/comfy`: their checkpoint's name
(`ltx-2-19b-dev-fp8.safetensors`) reads as LTX-2's, which this server serves, so the import is
refused naming LTX-2 and its own node (its templates run on SamplerCustomAdvanced, ComfyUI's
single-file checkpoint and a two-stage latent upscale, none of which maps onto
`lightricks/ltx-2` yet), never as built for LTX-Video, a family this server lacks; LTX-Video
0.9's own template still reads as LTX-Video's. Nothing is queued either way."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.families.import_harness import template


@pytest.mark.parametrize(
    "name", ["video_ltx2_t2v.json", "video_ltx2_i2v.json", "video_ltx2_t2v_distilled.json"]
)
def test_an_official_ltx2_template_is_refused_as_ltx2_s_naming_its_node(
    client: TestClient, name: str
) -> None:
    response = client.post("/v1/import/comfy", json={"workflow": template(name)})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "unsupported_model_family"
    message = error["message"]
    assert message.startswith("this workflow is built for LTX-2 (CheckpointLoaderSimple")
    assert "'ltx-2-19b-" in message and "LTX-2's node" in message
    assert "LTX-Video" not in message
    assert client.get("/v1/runs").json()["runs"] == []


def test_ltx_video_s_template_is_still_ltx_video_s(client: TestClient) -> None:
    response = client.post(
        "/v1/import/comfy", json={"workflow": template("ltxv_text_to_video.json")}
    )
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert message.startswith("this workflow is built for LTX-Video")
    assert "Inline Core has no LTX-Video family yet" in message
