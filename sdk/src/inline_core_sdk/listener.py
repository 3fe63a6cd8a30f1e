"""The frames that reach a worker while a call runs: a `cancel` for it, or the server gone.

A call runs on the thread that read its frame, so starting it wakes no other thread: on a busy
machine every thread hand-off waits for a core, and one cost as much as the rest of a 1024 px
call's transport. This listener reads the socket only while a call runs; between calls the
serving thread reads it, and the two never read at once: the listener reads only a frame already
waiting, holding the lock that ends a call.

It keeps out of short calls too. It looks in on a timer (`QUIET_S`), never woken by a call's start
or end, and listens only to a call it finds still running; after `IDLE_S` without calls it sleeps
until the next call starts. A cancel reaches a call within `QUIET_S`.
"""

from __future__ import annotations

import os
import select
import socket
import threading
import time
from collections.abc import Generator
from contextlib import contextmanager
from dataclasses import dataclass, field

from inline_core_sdk.protocol import ProtocolError, read_frame

QUIET_S = 0.1
IDLE_S = 1.0
LISTEN_S = 0.05  # how often a listener watching a call looks whether the call is over


@dataclass(frozen=True)
class _Running:
    call_id: int
    cancel: threading.Event
    started: float = field(default_factory=time.monotonic)


class CallListener:
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._state = threading.Condition()
        self._call: _Running | None = None
        self._ended = time.monotonic()  # when the last call ended
        self._asleep = False  # idle past IDLE_S: the next call wakes it
        self.shutdown = False  # asked while a call ran: the worker leaves after it
        self._thread = threading.Thread(target=self._listen, name="call-listener", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @contextmanager
    def during(self, call_id: int, cancel: threading.Event) -> Generator[None]:
        """Listen for the call's cancel while the block runs."""
        with self._state:
            self._call = _Running(call_id, cancel)
            if self._asleep:
                self._state.notify()
        try:
            yield
        finally:
            with self._state:  # waits out a read in progress: the socket is the caller's again
                self._call = None
                self._ended = time.monotonic()

    def _listen(self) -> None:
        while True:
            with self._state:
                running, now = self._call, time.monotonic()
                if running is None:
                    if now - self._ended > IDLE_S:
                        self._asleep = True
                        self._state.wait()  # until the next call starts
                        self._asleep = False
                    else:
                        self._state.wait(QUIET_S)
                    continue
                age = now - running.started
                if age < QUIET_S:
                    self._state.wait(QUIET_S - age)  # a call that ends first never wakes it
                    continue
            self._watch(running)

    def _watch(self, running: _Running) -> None:
        ready, _, _ = select.select([self._sock], [], [], LISTEN_S)
        if not ready:
            return
        with self._state:
            if self._call is not running or not select.select([self._sock], [], [], 0)[0]:
                return  # the call ended: what arrived is the serving thread's to read
            try:
                message = read_frame(self._sock)
            except ProtocolError:
                os._exit(0)  # the server went away mid-call: nobody is left to answer
            if message["type"] == "shutdown":
                self.shutdown = True
                running.cancel.set()
            elif message["type"] == "cancel" and message.get("id") == running.call_id:
                running.cancel.set()
