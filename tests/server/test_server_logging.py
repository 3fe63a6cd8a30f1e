"""What a server says, through a real one: its URL at start, every run that fails with its run id
(a node's own bug with its traceback), a cancelled run, and one line per request only when asked
(`--access-log`). And the command's help: `inline-core --help` lists its subcommands."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_support import (
    HERE,
    SRC,
    LiveServer,
    boom_graph,
    post_run,
    running_server,
    slow_graph,
    wait_finished,
    wait_until,
)

from inline_core.cli import TOOL_SUMMARIES, TOOLS

ROOT = HERE.parents[1]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with running_server(tmp_path_factory.mktemp("logging")) as server:
        yield server


def test_the_start_up_log_says_where_to_point_a_browser(live: LiveServer) -> None:
    assert f"serving at http://127.0.0.1:{live.port}/ (bound to 127.0.0.1)" in live.logs()


def test_a_failed_run_is_logged_with_its_run_id_and_the_bug_traceback(live: LiveServer) -> None:
    response = post_run(live, boom_graph(), "b")
    assert response.status_code == 201, response.text
    run_id = response.json()["runId"]
    state = wait_finished(live, run_id)
    assert state["status"] == "error", state
    log = live.logs()
    line = f"run {run_id} failed at node 'b' (run_failed): {state['error']['message']}"
    assert line in log, log
    assert "Traceback" in log.split(line, 1)[1]  # a node's own bug: where it happened


def test_a_cancelled_run_is_logged_with_its_run_id(live: LiveServer) -> None:
    response = post_run(live, slow_graph(steps=2000, delay=0.01), "s")
    run_id = response.json()["runId"]
    wait_until(
        lambda: httpx.get(f"{live.base}/v1/runs/{run_id}").json()["status"] == "running" or None,
        "the run to start",
    )
    assert httpx.delete(f"{live.base}/v1/runs/{run_id}").status_code == 200
    assert wait_finished(live, run_id)["status"] == "cancelled"
    wait_until(
        lambda: f"run {run_id} stopped: cancelled by the client" in live.logs() or None,
        "the cancel in the log",
    )


def test_requests_are_logged_only_with_the_access_log_flag(
    live: LiveServer, tmp_path: Path
) -> None:
    assert httpx.get(live.base + "/v1/health").status_code == 200
    assert not re.search(r'"GET /v1/health HTTP/1\.1" 200', live.logs())  # off by default
    with running_server(tmp_path, {"INLINE_ACCESS_LOG": "1"}) as logged:
        assert httpx.get(logged.base + "/v1/health").status_code == 200
        wait_until(
            lambda: re.search(r'"GET /v1/health HTTP/1\.1" 200', logged.logs()),
            "the request's line in the access log",
        )


def test_the_command_help_lists_its_subcommands() -> None:
    assert set(TOOL_SUMMARIES) == set(TOOLS)  # every subcommand is described
    done = subprocess.run(
        [sys.executable, "-m", "inline_core.cli", "--help"],
        env={**os.environ, "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for name in ("kit", "download", "import-comfy", "packs", "move-store"):
        assert re.search(rf"^  inline-core {name} +\S", done.stdout, re.M), done.stdout
    assert "--access-log" in done.stdout


def test_the_launcher_names_its_default_extras_and_installs_show_progress() -> None:
    webui = (ROOT / "webui.sh").read_text()
    default = re.search(r'^extras="server,([^"]+)"$', webui, re.M)
    assert default is not None
    header = webui.split("set -euo pipefail", 1)[0]
    assert f'default "{default[1]}"' in header, header
    assert f"(default:\n                   {default[1]})" in webui  # its --help says the same
    bootstrap = (ROOT / "scripts" / "bootstrap-venv.sh").read_text()
    # torch and the extras are gigabytes: pip's progress is shown, not hidden by --quiet.
    for spec in ('"$torch_spec"', '".[$extras]"'):
        [line] = [line for line in bootstrap.splitlines() if "pip install" in line and spec in line]
        assert "--quiet" not in line and "--progress-bar on" in line, line
