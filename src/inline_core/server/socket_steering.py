"""What a client sends on an events socket, read and answered apart from the events the socket
sends, so a client that sends fast cannot hold back its own events.

A reader task takes each message as it arrives and never stops reading while the client is there
(a client blocked sending, as a synchronous client is while its send waits, could otherwise not
read either); the socket's send loop takes one answer at a time between its events, in the
order the messages came (an interaction waits for its durable write off the event loop). Two
bounds keep a flood cheap:

- at most `MAX_WAITING` of a socket's messages wait to be stored; a message past that is answered
  in its turn with a 429 (`busy`) and never reaches the store;
- at most `MAX_HELD` messages are held unanswered; the messages past that are dropped unread, and
  one 429 in their turn says how many.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from inline_core.errors import Busy, InlineError
from inline_core.server.events import WireEvent

MAX_WAITING = 4
MAX_HELD = 64

# The client's next message; None once it left.
Receive = Callable[[], Awaitable[str | bytes | None]]


class Steer(Protocol):
    """How a socket answers its client's messages."""

    async def answer(self, message: str | bytes, /) -> WireEvent:
        """The answer to one message (it may wait, off the event loop, for a durable write)."""
        ...

    def refuse(self, error: InlineError, /) -> WireEvent:
        """The answer to messages refused without being looked at."""
        ...


@dataclass(frozen=True)
class _Message:
    text: str | bytes
    refused: WireEvent | None  # answered without being stored: over `MAX_WAITING`


@dataclass
class _Dropped:
    count: int = 0  # messages in a row past `MAX_HELD`: one answer says how many


class SocketSteering:
    """One socket's client messages: read by `read` (run it as a task: it ends when the client
    leaves), answered in order by `next_answer`. With no `steer` they are read and dropped."""

    def __init__(self, steer: Steer | None) -> None:
        self._steer = steer
        self._held: deque[_Message | _Dropped] = deque()
        self._messages = 0  # `_Message`s held
        self._waiting = 0  # of them, those that wait to be stored
        self._ready = asyncio.Event()

    async def read(self, receive: Receive) -> None:
        """Take the client's messages until it leaves."""
        while (message := await receive()) is not None:
            if self._steer is not None:
                self._hold(self._steer, message)
                self._ready.set()

    def _hold(self, steer: Steer, message: str | bytes) -> None:
        if self._messages >= MAX_HELD:
            last = self._held[-1]
            if not isinstance(last, _Dropped):
                last = _Dropped()
                self._held.append(last)
            last.count += 1
            return
        refused = None
        if self._waiting >= MAX_WAITING:
            refused = steer.refuse(
                Busy(
                    f"{MAX_WAITING} interactions sent on this socket wait to be stored: "
                    "send the next once one is answered (interaction_queued or "
                    "interaction_refused)"
                )
            )
        else:
            self._waiting += 1
        self._held.append(_Message(message, refused))
        self._messages += 1

    async def next_answer(self) -> WireEvent:
        """The answer to the oldest message not yet answered, once there is one."""
        while not self._held:
            self._ready.clear()
            await self._ready.wait()
        steer = self._steer
        assert steer is not None  # only a socket that steers holds messages
        held = self._held.popleft()
        if isinstance(held, _Dropped):
            return steer.refuse(
                Busy(
                    f"{held.count} messages dropped unanswered: over {MAX_HELD} were sent on "
                    "this socket before their answers went out; read the answers before "
                    "sending more"
                )
            )
        self._messages -= 1
        if held.refused is not None:
            return held.refused
        try:
            return await steer.answer(held.text)
        finally:
            self._waiting -= 1
