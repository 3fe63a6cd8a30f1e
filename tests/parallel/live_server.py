"""`python -m inline_core.server` as a child process on loopback, for the worker-group tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from inline_core.parallel.launch import is_running

SRC = Path(__file__).resolve().parents[2] / "src"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LiveServer:
    data_dir: Path
    models_dir: Path
    env: dict[str, str] = field(default_factory=dict[str, str])
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir.parent / "server.log"

    def launch(self) -> subprocess.Popen[bytes]:
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
                "PYTHONPATH": os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]),
            }
        )
        env.update(self.env)
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "inline_core.server"], env=env, stdout=log, stderr=log
            )
        return self.proc

    def start(self, timeout: float = 60.0) -> None:
        """Launch and wait for /v1/health (a liveness bound, not a timing assertion)."""
        proc = self.launch()
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"server exited with {proc.returncode}: {self.log()}")
            try:
                if httpx.get(self.base + "/v1/health", timeout=1.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"the server did not come up: {self.log()}")
            time.sleep(0.05)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""

    def group_pids(self) -> list[int]:
        """The torchrun launcher and ranks running below the server."""
        assert self.proc is not None
        found: list[int] = []
        for child in psutil.Process(self.proc.pid).children(recursive=True):
            try:
                cmd = " ".join(child.cmdline())
            except psutil.Error:
                continue
            if is_running(child) and ("torch.distributed.run" in cmd or "parallel.worker" in cmd):
                found.append(child.pid)
        return found

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

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
