"""One pack worker process, seen from the server: start it, call it, watch it, stop it.

The worker is a fresh interpreter from the pack's own environment (never a fork of the server, so
it holds none of the server's memory). It inherits only its end of a socket pair and its arena
(`arena.py`, shared memory that holds nothing but its own images): no other file descriptor, a
scrubbed environment without the server's token or paths, and its scratch folder as working
directory, home and temp dir.

While a call is out, the calling thread watches the worker every `POLL_S`: the reply, its
resident memory against the pack's limit, the call's time limit, the run's cancel token, and
whether the process is still alive. Whatever goes wrong ends in `PackNodeFailed` naming the pack
and the node, and the worker is gone: the next call starts a new one.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from inline_core.errors import Cancelled
from inline_core.heap_settings import LARGE_BLOCK_MALLOC
from inline_core.packs.arena import MadeArena, make_arena
from inline_core.packs.errors import PackNodeFailed
from inline_core.packs.loaded import LoadedPack
from inline_core.runtime.cancel import CancelToken
from inline_core.sizes import human_size
from inline_core_sdk.arena import Arena
from inline_core_sdk.protocol import ProtocolError, read_frame, send_frame
from inline_core_sdk.version import PROTOCOL_VERSION

MB = 1024 * 1024
POLL_S = 0.05
CHILDREN_EVERY_S = 1.0
START_TIMEOUT_S = 120.0
# A node that checks for cancel answers within the SDK listener's 0.1 s and its own next check;
# one that does not is ended after this, whatever its time limit has left.
CANCEL_GRACE_S = 2.0
STOP_GRACE_S = 2.0
LOG_TAIL_CHARS = 600
FATAL_LINES = 5  # of a crash report: what went wrong and where
# What a worker may inherit: nothing secret, nothing that points at the server.
PASSED_VARIABLES = ("LANG", "LC_ALL", "TZ", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# Its own environment's commands first (a `python` it runs is its own), then the system's.
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
PASSED_PREFIXES = ("OPENBLAS_", "MALLOC_")
# The server's large-block settings (heap_settings), passed in the environment: the worker's
# memory limit still counts what its heap keeps. A MALLOC_* variable set for the server wins.
WORKER_MALLOC = {name: str(value) for name, value in LARGE_BLOCK_MALLOC.items()}

Progress = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class Limits:
    timeout_s: float
    memory_mb: int


def worker_env(scratch: Path, python: Path, base: dict[str, str]) -> dict[str, str]:
    env = {
        k: v for k, v in base.items() if k in PASSED_VARIABLES or k.startswith(PASSED_PREFIXES)
    }
    env.update({"HOME": str(scratch), "TMPDIR": str(scratch), "PYTHONUNBUFFERED": "1"})
    for name, value in WORKER_MALLOC.items():
        env.setdefault(name, value)
    env["PATH"] = f"{python.parent}:{SYSTEM_PATH}"
    return env


class _Resident:
    """The worker's resident memory with its children's. Listing children scans every process
    on the machine (milliseconds), so the list is refreshed only every `CHILDREN_EVERY_S`; one is
    kept per worker (making a `psutil.Process` reads /proc: 0.15 ms a call)."""

    def __init__(self, pid: int) -> None:
        self.proc = psutil.Process(pid)
        self.children: list[psutil.Process] = []
        self.listed_at = time.monotonic()

    def bytes(self) -> int:
        now = time.monotonic()
        try:
            if now - self.listed_at > CHILDREN_EVERY_S:
                self.children, self.listed_at = self.proc.children(recursive=True), now
            total = self.proc.memory_info().rss
        except psutil.Error:
            return 0
        for child in self.children:
            try:
                total += child.memory_info().rss
            except psutil.Error:
                continue  # it ended
        return total


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"crashed ({signal.Signals(-code).name})"
        except ValueError:
            return f"crashed (signal {-code})"
    return f"exited with status {code}"


class PackProcess:
    def __init__(self, pack: LoadedPack, scratch: Path, log_path: Path) -> None:
        self.pack = pack
        self.scratch = scratch
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._resident: _Resident | None = None
        self._arena: MadeArena | None = None
        self._log_start = 0
        self._next_id = 0
        self.started_s = 0.0  # how long the last start took

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def arena(self) -> Arena | None:
        """The arena the worker's images go through, if it has one."""
        return self._arena.arena if self._arena is not None else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _fail(self, node: str, what: str) -> PackNodeFailed:
        tail = self.log_tail()
        said = f" Its log ends: {tail}" if tail else ""
        return PackNodeFailed(
            f"pack {self.pack.name!r} ({self.pack.version}) node {node!r} {what}; the pack's "
            f"worker restarts on its next use.{said}"
        )

    def log_tail(self) -> str:
        try:
            with self.log_path.open("rb") as f:
                f.seek(self._log_start)
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
        fatal = next((i for i, line in enumerate(lines) if line.startswith("Fatal Python")), None)
        if fatal is not None:  # faulthandler: the error, then the innermost frames first
            return " | ".join(lines[fatal : fatal + FATAL_LINES])[:LOG_TAIL_CHARS]
        return " | ".join(lines)[-LOG_TAIL_CHARS:]

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        started = time.monotonic()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        command = [str(self.pack.python), "-I", "-m", "inline_core_sdk", "serve"]
        nodes = json.dumps(dict(self.pack.manifest.nodes))
        command += ["--fd", str(theirs.fileno()), "--nodes", nodes]
        passed = [theirs.fileno()]
        self._arena = make_arena()
        if self._arena is not None and self._arena.fd is not None:
            command += ["--arena-fd", str(self._arena.fd)]
            passed.append(self._arena.fd)
        with self.log_path.open("ab") as log:
            self._log_start = log.tell()
            try:
                self._proc = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    cwd=self.scratch,
                    env=worker_env(self.scratch, self.pack.python, dict(os.environ)),
                    pass_fds=passed,
                    start_new_session=True,  # a signal meant for the server is not the worker's
                )
            except OSError as exc:
                ours.close()
                self._close_arena()
                raise self._fail("(start)", f"could not start: {exc}") from exc
            finally:
                theirs.close()
                if self._arena is not None:
                    self._arena.handed_over()
        self._sock = ours
        self._resident = None
        hello = self._await_hello(timeout_s)
        if hello.get("protocol") != PROTOCOL_VERSION:
            self.kill()
            raise self._fail(
                "(start)",
                f"speaks protocol {hello.get('protocol')!r}; this server speaks {PROTOCOL_VERSION}",
            )
        self.started_s = time.monotonic() - started

    def _await_hello(self, timeout_s: float) -> dict[str, Any]:
        assert self._sock is not None and self._proc is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self._sock], [], [], POLL_S)
            if ready:
                try:
                    message = read_frame(self._sock)
                except ProtocolError:
                    break
                if message["type"] == "hello":
                    return message
            elif self._proc.poll() is not None:
                break
        code = self._proc.poll()
        self.kill()
        what = f"{_exit_text(code)} while starting" if code is not None else (
            f"did not start within {timeout_s:g} s"
        )
        raise self._fail("(start)", what)

    def call(
        self,
        node: str,
        params: dict[str, Any],
        inputs: dict[str, Any],
        out_dir: Path,
        limits: Limits,
        cancel: CancelToken,
        on_progress: Progress,
    ) -> dict[str, Any]:
        """Run one node call; its outputs' wire form. Raises `PackNodeFailed` or `Cancelled`."""
        assert self._sock is not None and self._proc is not None
        self._next_id += 1
        call_id = self._next_id
        message = {"type": "call", "id": call_id, "node": node, "params": params,
                   "inputs": inputs, "out": str(out_dir)}
        try:
            send_frame(self._sock, message)
        except (OSError, ProtocolError) as exc:
            self.kill()
            raise self._fail(node, f"could not be reached ({exc})") from exc
        if self._resident is None:
            self._resident = _Resident(self._proc.pid)
        watched = self._resident
        deadline = time.monotonic() + limits.timeout_s
        cancel_deadline: float | None = None
        next_check = time.monotonic() + POLL_S
        while True:
            ready, _, _ = select.select([self._sock], [], [], POLL_S)
            if ready:
                reply = self._read(node)
                if reply.get("id") == call_id:
                    if reply["type"] == "progress":
                        on_progress(reply)
                    else:
                        return self._outcome(node, reply, cancel)
            now = time.monotonic()
            if now < next_check:
                continue  # a chatty node is still watched, at the same pace as a quiet one
            next_check = now + POLL_S
            if self._proc.poll() is not None:
                raise self._fail(node, _exit_text(self._proc.returncode))
            held = watched.bytes()
            if held > limits.memory_mb * MB:
                self.kill()
                raise self._fail(
                    node,
                    f"grew past its memory limit of {limits.memory_mb} MB "
                    f"(it held {human_size(held)})",
                )
            if cancel_deadline is None and cancel.cancelled:
                self._send_cancel(call_id)
                cancel_deadline = now + CANCEL_GRACE_S
            if cancel_deadline is not None and now > cancel_deadline:
                self.kill()  # it ignored the cancel: the only way to stop it is to end it
                raise Cancelled(cancel.reason)
            if now > deadline and cancel_deadline is None:  # a cancelled call ends cancelled
                self.kill()
                raise self._fail(node, f"hung past its time limit of {limits.timeout_s:g} s")

    def _outcome(self, node: str, reply: dict[str, Any], cancel: CancelToken) -> dict[str, Any]:
        """A call's last frame: its outputs, or the error it stands for."""
        kind = reply["type"]
        if kind == "result":
            outputs: dict[str, Any] = reply.get("outputs", {})
            return outputs
        if kind == "cancelled":
            raise Cancelled(cancel.reason)
        if kind == "error":
            raise PackNodeFailed(
                f"pack {self.pack.name!r} ({self.pack.version}) node {node!r} raised "
                f"{reply.get('message', 'an error')}"
            )
        self.kill()
        raise self._fail(node, f"answered with an unknown frame {kind!r}")

    def _read(self, node: str) -> dict[str, Any]:
        assert self._sock is not None and self._proc is not None
        try:
            return read_frame(self._sock)
        except ProtocolError as exc:
            try:
                code = self._proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.kill()
                raise self._fail(node, f"broke the protocol ({exc})") from exc
            raise self._fail(node, _exit_text(code)) from exc

    def _send_cancel(self, call_id: int) -> None:
        assert self._sock is not None
        try:
            send_frame(self._sock, {"type": "cancel", "id": call_id})
        except (OSError, ProtocolError):
            return  # the death shows on the next poll

    def stop(self) -> None:
        """Ask the worker to exit; end it if it does not."""
        if self._sock is not None and self.alive:
            try:
                send_frame(self._sock, {"type": "shutdown"})
            except (OSError, ProtocolError):
                pass
        if self._proc is not None:
            try:
                self._proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)  # its children too
            except OSError:
                self._proc.kill()
            self._proc.wait()
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._close_arena()

    def _close_arena(self) -> None:
        if self._arena is not None:
            self._arena.close()
            self._arena = None
