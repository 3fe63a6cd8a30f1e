"""A take says what its file holds, read from its bytes when it is written and kept with it in
the run store: an image take its content type, width and height, on a real server and after it
restarts (a video take's frames, fps and duration: tests/families/wan/test_wan_server.py)."""

from __future__ import annotations

from pathlib import Path

import httpx
from server_support import post_run, running_server, slow_graph, wait_finished


def test_an_image_take_reports_its_content_type_and_size(tmp_path: Path) -> None:
    with running_server(tmp_path) as live:
        response = post_run(live, slow_graph(steps=1, delay=0.0), "s")
        assert response.status_code == 201, response.text
        state = wait_finished(live, str(response.json()["runId"]))
        assert state["status"] == "done", state
        [take] = state["takes"]
        assert (take["contentType"], take["width"], take["height"]) == ("image/png", 8, 8)
        assert "frames" not in take and "durationS" not in take  # a video's facts only
        live.stop()
        live.start()  # read back from the run store, not from the server's memory
        stored = httpx.get(f"{live.base}/v1/takes/{take['id']}", timeout=30).json()
        assert stored == take
