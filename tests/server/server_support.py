"""Helpers for the server tests: graphs, polling, and a real server process on loopback."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
from fastapi.testclient import TestClient
from websockets.exceptions import ConnectionClosedOK
from websockets.sync.client import connect

from inline_core.config import Config
from inline_core.server.app import create_app

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"
PLUGIN = "server_nodes:register"
FINISHED = ("done", "error", "cancelled")
T = TypeVar("T")


@contextmanager
def cpu_client(models: Path, data: Path) -> Generator[TestClient]:
    """The app over `models`, in process (ASGI), on the CPU in float32, its data in `data`."""
    config = Config(models_dir=models, data_dir=data, profile="cpu", dtype="float32")
    with TestClient(create_app(config)) as client:
        yield client


def text_graph(text: str = "hello") -> dict[str, Any]:
    node = {"id": "t", "type": "input/text", "params": {"text": text}}
    return {"schemaVersion": 1, "nodes": [node]}


def prompt_graph(
    node_type: str,
    node: str,
    params: dict[str, Any],
    text: str,
    images: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """`p` (the prompt `text`) -> `node`: a node of `node_type` with `params`; each of `images`
    (port -> asset id) an `input/image` node of the port's name wired to that port."""
    target: dict[str, Any] = {
        "id": node,
        "type": node_type,
        "params": params,
        "inputs": {"prompt": {"from": "p", "output": "text"}},
    }
    nodes: list[dict[str, Any]] = [{"id": "p", "type": "input/text", "params": {"text": text}}]
    for port, asset in (images or {}).items():
        nodes.append(
            {"id": port, "type": "input/image", "params": {"asset": {"ref": "asset", "id": asset}}}
        )
        target["inputs"][port] = {"from": port, "output": "image"}
    return {"schemaVersion": 1, "nodes": [*nodes, target]}


def slow_graph(
    steps: int = 5,
    delay: float = 0.01,
    seed: int = -1,
    node_type: str = "test/slow",
    **params: Any,
) -> dict[str, Any]:
    """`p` (a prompt) -> `s`: a `test/slow` node (or one of its kin, with their `params`)."""
    return {
        "schemaVersion": 1,
        "nodes": [
            {"id": "p", "type": "input/text", "params": {"text": "a prompt"}},
            {
                "id": "s",
                "type": node_type,
                "params": {"steps": steps, "delay": delay, "seed": seed, **params},
                "inputs": {"text": {"from": "p", "output": "text"}},
            },
        ],
    }


def boom_graph() -> dict[str, Any]:
    return {"schemaVersion": 1, "nodes": [{"id": "b", "type": "test/boom"}]}


def wait_until(
    probe: Callable[[], T | None], what: str, timeout: float = 30.0, interval: float = 0.02
) -> T:
    """Poll `probe` until it returns something other than None or False (a liveness bound, not a
    timing assertion: the timeout is far above what any healthy run needs). False means "not yet"
    as None does, so a plain bool predicate waits instead of ending the wait at once."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


PORT_TAKEN = "the port is in use"  # the server's words when its port was taken meanwhile
PORT_RACE_RETRIES = 3


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_until_it_exits(
    command: Sequence[str], env: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run a server command that must exit by itself (a refusal), its output captured, on a
    free port unless `env` names one (`INLINE_PORT`); run again on another port when a process
    took the free one before the server bound it, as `LiveServer.wait_ready` does."""
    said = ""
    for _attempt in range(PORT_RACE_RETRIES):
        port = {} if "INLINE_PORT" in env else {"INLINE_PORT": str(free_port())}
        done = subprocess.run(
            list(command), env={**env, **port}, capture_output=True, text=True, timeout=timeout
        )
        if not port or not (done.returncode == 2 and PORT_TAKEN in done.stderr):
            return done
        said = done.stderr
    raise AssertionError(f"no free port held for {' '.join(command)}: {said}")


@dataclass
class LiveServer:
    """`python -m inline_core.server` as a child process on 127.0.0.1."""

    data_dir: Path
    models_dir: Path
    env: dict[str, str] = field(default_factory=dict[str, str])
    database_url: str | None = None  # None: the SQLite store in the data dir
    name: str = "server"  # its logs are <name>-<start>.log beside the data dir
    cwd: Path | None = None  # its working directory (None: the test's)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_base(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def store_config(self) -> Config:
        """Where its run store is (for reading it directly, as another process would)."""
        return Config(data_dir=self.data_dir, database_url=self.database_url)

    def launch(self) -> subprocess.Popen[bytes]:
        """Spawn the server on a free port (not waiting for it); see `start`."""
        self.port = free_port()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update(
            {
                "INLINE_DATA_DIR": str(self.data_dir),
                "INLINE_MODELS_DIR": str(self.models_dir),
                "INLINE_PORT": str(self.port),
                "INLINE_HOST": "127.0.0.1",
                "INLINE_PROFILE": "cpu",
                "INLINE_PLUGINS": PLUGIN,
                "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE), env.get("PYTHONPATH", "")]),
            }
        )
        if self.database_url is not None:
            env["INLINE_DATABASE_URL"] = self.database_url
        env.update(self.env)
        self.starts += 1
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "inline_core.server"],
                env=env,
                stdout=log,
                stderr=log,
                cwd=self.cwd,
            )
        return self.proc

    def start(self, timeout: float = 60.0) -> None:
        """Launch and wait for /v1/health (a liveness bound, not a timing assertion)."""
        self.launch()
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait for the launched server to answer /v1/health. `free_port` only finds a port
        that was free: another process on the machine may take it before the server binds it,
        and then the server is launched again on another one (a few times at most)."""
        for attempt in range(PORT_RACE_RETRIES):
            if attempt:
                self.launch()
            outcome = wait_until(
                self._settled, "the server to answer /v1/health", timeout=timeout, interval=0.05
            )
            if outcome == "ready":
                return
        raise AssertionError(f"no free port held for the server: {self.log()}")

    def _settled(self) -> str | None:
        """ "ready" once it answers /v1/health, "port taken" once it exited for want of its
        port, None while neither; any other exit fails the test with its log."""
        proc = self.proc
        assert proc is not None
        if proc.poll() is not None:
            if proc.returncode == 2 and PORT_TAKEN in self.log():
                return "port taken"
            raise AssertionError(f"server exited with {proc.returncode}: {self.log()}")
        try:
            answered = httpx.get(self.base + "/v1/health", timeout=1.0).status_code
        except httpx.HTTPError:
            return None
        return "ready" if answered == 200 else None

    @property
    def log_path(self) -> Path:
        return self.data_dir.parent / f"{self.name}-{self.starts}.log"

    def log(self, tail: int = 4000) -> str:
        path = self.log_path
        return path.read_text(errors="replace")[-tail:] if path.exists() else ""

    def logs(self) -> str:
        """Everything it logged, over all its starts."""
        paths = sorted(self.data_dir.parent.glob(f"{self.name}-*.log"))
        return "".join(p.read_text(errors="replace") for p in paths)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int:
        """Signal the server and wait for it to exit; returns its exit status."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"server did not exit after signal {sig}: {self.log()}") from None

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=20)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=20)


def post_run(live: LiveServer, graph: dict[str, Any], target: str, **extra: Any) -> httpx.Response:
    body = {"graph": graph, "target": target, **extra}
    return httpx.post(live.base + "/v1/runs", json=body, timeout=30)


def run_state(live: LiveServer, run_id: str) -> dict[str, Any]:
    response = httpx.get(f"{live.base}/v1/runs/{run_id}", timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def wait_finished(live: LiveServer, run_id: str, timeout: float = 60.0) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        state = run_state(live, run_id)
        return state if state["status"] in FINISHED else None

    return wait_until(probe, f"run {run_id} to finish", timeout=timeout, interval=0.05)


def read_events(live: LiveServer, run_id: str, timeout: float = 60.0) -> list[dict[str, Any]]:
    """Every message of the run's event socket, until the server closes it."""
    messages: list[dict[str, Any]] = []
    with connect(f"{live.ws_base}/v1/runs/{run_id}/events", open_timeout=30) as ws:
        try:
            while True:
                messages.append(json.loads(ws.recv(timeout=timeout)))
        except ConnectionClosedOK:
            pass
    return messages


@contextmanager
def running_fleet(
    root: Path,
    database_url: str,
    count: int,
    env: dict[str, str] | None = None,
    models: Path | None = None,
) -> Generator[list[LiveServer]]:
    """`count` started servers sharing one PostgreSQL store and one data dir (takes, assets),
    named s0, s1, ..., each with its own models folder (empty), or all with `models`; killed
    on exit."""
    servers = [
        LiveServer(
            data_dir=root / "shared",
            models_dir=models or root / f"models-s{i}",
            env={"INLINE_SERVER_ID": f"s{i}", **(env or {})},
            database_url=database_url,
            name=f"s{i}",
        )
        for i in range(count)
    ]
    try:
        for server in servers:  # started together: each start is mostly imports
            server.launch()
        for server in servers:
            server.wait_ready()
        yield servers
    finally:
        for server in servers:
            server.close()


@contextmanager
def running_server(
    root: Path, env: dict[str, str] | None = None, database_url: str | None = None
) -> Generator[LiveServer]:
    """A started `LiveServer` with its data and models under `root`, killed on exit."""
    live = LiveServer(
        data_dir=root / "data", models_dir=root / "models", env=env or {}, database_url=database_url
    )
    live.start()
    try:
        yield live
    finally:
        live.close()
