"""A rank's lifeline: heartbeats to the server, and exit as soon as the server or launcher is gone.

Runs on its own thread, so a rank busy in a long forward still beats; a rank that is stopped or
wedged stops beating, which is how the server tells a hung rank from a slow one. If the server
process dies (or its socket closes) or the torchrun launcher dies, the rank exits at once with
`os._exit`: nothing it holds is worth an orderly shutdown, and an orphan would hold the device.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time

import psutil

from inline_core.parallel.ipc import SOCKET_ENV, Channel
from inline_core.parallel.protocol import Heartbeat
from inline_core.parallel.settings import ServerIdentity

EXIT_ORPHANED = 75
DEAD_SERVER_WAIT_S = 0.5


def server_alive(server: ServerIdentity) -> bool:
    """Whether the server still runs (a dead one not yet reaped by its parent does not)."""
    try:
        proc = psutil.Process(server.pid)
        return server.matches(proc.pid) and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def orphaned_exit(reason: str) -> None:
    print(f"[inline worker {os.getpid()}] exiting: {reason}", file=sys.stderr, flush=True)
    _remove_dead_server_files()
    os._exit(EXIT_ORPHANED)


def _remove_dead_server_files() -> None:
    """A server killed outright could not remove its group's private folder (socket and log):
    the ranks that outlive it do (whichever gets there first)."""
    socket_path = os.environ.get(SOCKET_ENV)
    try:
        server = ServerIdentity.from_env()
    except (KeyError, ValueError):
        return
    if not socket_path:
        return
    # A connection that closed because the server was killed can be seen a moment before the
    # server is seen gone; a live server that closed it removes the folder itself.
    deadline = time.monotonic() + DEAD_SERVER_WAIT_S
    while server_alive(server):
        if time.monotonic() > deadline:
            return
        time.sleep(0.02)
    folder = os.path.dirname(socket_path)
    if os.path.basename(folder).startswith("inline-group-"):  # only what IpcServer made
        shutil.rmtree(folder, ignore_errors=True)


class Lifeline:
    def __init__(
        self, channel: Channel, rank: int, server: ServerIdentity, interval_s: float
    ) -> None:
        self._channel = channel
        self._rank = rank
        self._server = server
        self._interval = interval_s
        self._parent = os.getppid()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="inline-lifeline", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    def _run(self) -> None:
        while True:
            if not server_alive(self._server):
                orphaned_exit(f"server process {self._server.pid} is gone")
            if os.getppid() != self._parent:
                orphaned_exit(f"launcher process {self._parent} is gone")
            try:
                self._channel.send(Heartbeat(self._rank))
            except (OSError, ValueError):
                if self._stop.is_set():
                    return
                orphaned_exit("the server closed the connection")
            if self._stop.wait(self._interval):
                return
